/* suffix.c - drafting a token tree from the suffix tree (see suffix.h).
 *
 * Every history token is appended to the shared suffix tree once (the cursor keeps the active
 * suffixes), so matching costs nothing extra: the cursor's deepest active node with children is
 * the longest earlier-seen suffix of the history. From it the draft tree grows best first:
 *   prob(child) = prob(parent) * count(child) / sum of count(siblings)
 * taking the most probable frontier candidate while it is above MIN_PROB, the tree stays within
 * max_branches leaves, and the size within min(max_len, SPEC_FACTOR * match length). */
#include "suffix.h"

#include "../util/util.h"

#include <math.h>
#include <stdlib.h>

#define SPEC_FACTOR 2.0f
#define MIN_PROB 0.1f
#define TOP_CHILDREN 3
#define FRONTIER_MAX 256

typedef struct suffix_drafter {
    specd_suffix_tree *tree;
    specd_suffix_cursor cursor;
    int32_t n_inserted;
    int32_t max_branches;
} suffix_drafter;

typedef struct candidate {
    int32_t node;        /* suffix tree node */
    int32_t tree_parent; /* draft tree node it would hang under */
    float prob;          /* estimated probability that the whole path is right */
    float local;         /* its share among its siblings: the confidence reported */
} candidate;

static bool insert_history(suffix_drafter *s, const specd_token *h, int32_t n) {
    if (n < s->n_inserted) { /* not an extension: a new text */
        specd_suffix_cursor_reset(&s->cursor);
        s->n_inserted = 0;
    }
    for (int32_t i = s->n_inserted; i < n; i++) {
        int32_t from = i > SPECD_SUFFIX_MAX_DEPTH ? i - SPECD_SUFFIX_MAX_DEPTH : 0;
        if (!specd_suffix_append(s->tree, &s->cursor, h + from, i - from, h[i])) return false;
    }
    s->n_inserted = n;
    return true;
}

static specd_status sx_prepare(void *self, const specd_token *tokens, int32_t n, char **error) {
    suffix_drafter *s = self;
    specd_suffix_cursor_reset(&s->cursor);
    s->cursor.epoch = s->tree->epoch;
    s->n_inserted = 0;
    if (insert_history(s, tokens, n)) return SPECD_OK;
    specd_set_error(error, "out of memory in the suffix drafter");
    return SPECD_ERR_NO_MEMORY;
}

/* The deepest active suffix that something followed before, or -1. */
static int32_t longest_match(const suffix_drafter *s) {
    for (int32_t i = s->cursor.n_active - 1; i >= 0; i--)
        if (s->tree->nodes[s->cursor.active[i]].first_child >= 0) return s->cursor.active[i];
    return -1;
}

/* Adds the TOP_CHILDREN most frequent children of `node` to the frontier. */
static void push_children(const specd_suffix_tree *t, int32_t node, int32_t tree_parent, float prob,
                          candidate *frontier, int32_t *n_frontier) {
    int32_t top[TOP_CHILDREN], n_top = 0, sum = 0; /* top: most frequent first */
    for (int32_t c = t->nodes[node].first_child; c >= 0; c = t->nodes[c].next_sibling) {
        sum += t->nodes[c].count;
        if (n_top == TOP_CHILDREN && t->nodes[c].count <= t->nodes[top[n_top - 1]].count) continue;
        int32_t j = n_top < TOP_CHILDREN ? n_top++ : n_top - 1;
        for (; j > 0 && t->nodes[top[j - 1]].count < t->nodes[c].count; j--) top[j] = top[j - 1];
        top[j] = c;
    }
    for (int32_t i = 0; i < n_top && *n_frontier < FRONTIER_MAX; i++) {
        float local = (float)t->nodes[top[i]].count / (float)sum;
        frontier[(*n_frontier)++] = (candidate){top[i], tree_parent, prob * local, local};
    }
}

static int32_t most_probable(const candidate *frontier, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (frontier[i].prob > frontier[best].prob) best = i;
    return best;
}

static specd_status grow_draft(suffix_drafter *s, int32_t match, const specd_draft_request *req,
                               specd_token_tree *tree) {
    const specd_suffix_tree *t = s->tree;
    int32_t budget = (int32_t)ceilf(SPEC_FACTOR * (float)t->nodes[match].depth);
    if (budget > req->max_len) budget = req->max_len;
    if (budget > FRONTIER_MAX) budget = FRONTIER_MAX;
    candidate frontier[FRONTIER_MAX];
    bool has_child[FRONTIER_MAX + 1] = {false}; /* by draft tree node */
    int32_t n_frontier = 0, leaves = 1;
    push_children(t, match, 0, 1.0f, frontier, &n_frontier);
    while (specd_tree_n_drafted(tree) < budget && n_frontier > 0) {
        int32_t i = most_probable(frontier, n_frontier);
        candidate c = frontier[i];
        frontier[i] = frontier[--n_frontier];
        if (c.prob < MIN_PROB) break; /* the best left is too unlikely: so is the rest */
        /* A second child under a node starts a new branch; a first child just grows one. */
        bool new_branch = has_child[c.tree_parent];
        if (tree->nodes[c.tree_parent].depth + 1 > req->max_len) continue;
        if (new_branch && leaves == s->max_branches) continue;
        int32_t added = specd_tree_add(tree, c.tree_parent, t->nodes[c.node].token, NULL, c.local);
        if (added < 0) return SPECD_ERR_NO_MEMORY;
        has_child[c.tree_parent] = true;
        leaves += new_branch;
        push_children(t, c.node, added, c.prob, frontier, &n_frontier);
    }
    return SPECD_OK;
}

static specd_status sx_draft(void *self, const specd_draft_request *req, specd_token_tree *tree, char **error) {
    suffix_drafter *s = self;
    if (!insert_history(s, req->history, req->n_history)) goto oom;
    int32_t match = longest_match(s);
    if (match < 0 || req->max_len < 1) return SPECD_OK;
    if (grow_draft(s, match, req, tree) == SPECD_OK) return SPECD_OK;
oom:
    specd_set_error(error, "out of memory in the suffix drafter");
    return SPECD_ERR_NO_MEMORY;
}

/* The tree and the cursor describe the text as it was produced, which a shift does not change:
 * only the count of inserted tokens moves with the history, so nothing is inserted twice. */
static specd_status sx_shift(void *self, int32_t n_keep, int32_t n_discard, const specd_token *tokens, int32_t n,
                             char **error) {
    (void)tokens, (void)n, (void)error;
    suffix_drafter *s = self;
    s->n_inserted = specd_shifted_count(s->n_inserted, n_keep, n_discard);
    return SPECD_OK;
}

static void sx_destroy(void *self) { free(self); }

static const specd_drafter_ops suffix_ops = {
    .name = "suffix",
    .prepare = sx_prepare,
    .draft = sx_draft,
    .destroy = sx_destroy,
    .shift = sx_shift,
};

specd_status specd_suffix_new(specd_suffix_tree *tree, int32_t max_branches, specd_drafter *out, char **error) {
    if (max_branches < 1 || max_branches > SPECD_TREE_MAX_BRANCHES) {
        specd_set_error(error, "the suffix drafter takes 1 to %d branches (got %d)", SPECD_TREE_MAX_BRANCHES,
                        max_branches);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    suffix_drafter *s = calloc(1, sizeof *s);
    if (!s) {
        specd_set_error(error, "out of memory for the suffix drafter");
        return SPECD_ERR_NO_MEMORY;
    }
    s->tree = tree;
    s->max_branches = max_branches;
    s->cursor.epoch = tree->epoch;
    out->ops = &suffix_ops;
    out->self = s;
    return SPECD_OK;
}
