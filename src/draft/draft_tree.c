/* draft_tree.c - draft trees from the draft model (see draft_tree.h). */
#include "draft_tree.h"

#include "../sample/coupled.h"
#include "../sample/softmax.h"
#include "../sample/top_k.h"
#include "../util/util.h"
#include "../verify/sibling_draws.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_B SPECD_TREE_MAX_BRANCHES
/* A draft pass over k open branches, before it is measured: one draft token's cost, plus 15% per
 * extra branch (the same prior slope as a target pass: draft_length.c). */
#define PASS_PRIOR_SLOPE 0.15
#define PASS_EMA 0.1

struct specd_draft_tree {
    int32_t n_vocab;
    specd_dist q, q_i;
    specd_sibling_draws draws;
    specd_token ranked[MAX_B];  /* greedy or seeded: the draft's best tokens at a node, best first */
    float ranked_p[MAX_B];
    double pass_ms[MAX_B + 1];  /* measured draft pass by open branches (0 = not yet) */
    /* per node of the tree being drafted (grown with it) */
    double *value;              /* estimated chance the node is accepted (path product) */
    double *path_p;             /* the draft's probability of the path to the node */
    int32_t cap;
};

specd_draft_tree *specd_draft_tree_new(int32_t n_vocab) {
    specd_draft_tree *t = calloc(1, sizeof *t);
    if (t) t->n_vocab = n_vocab;
    return t;
}

void specd_draft_tree_free(specd_draft_tree *t) {
    if (!t) return;
    specd_dist_free(&t->q);
    specd_dist_free(&t->q_i);
    specd_sibling_draws_free(&t->draws);
    free(t->value);
    free(t->path_p);
    free(t);
}

bool specd_draft_tree_wanted(const specd_draft_request *req) {
    return req->tree_branches > 1 && !req->grammar && (!req->tree_auto || req->plan);
}

/* ---- one drafting step's state ---------------------------------------------------------------- */

typedef struct open_node {
    int32_t node;
    int32_t seq;       /* draft branch holding its path (0: the view's own sequence) */
    int32_t batch_idx; /* its logits in the last draft pass */
} open_node;

typedef struct tree_step {
    specd_draft_tree *t;
    specd_engine *e;
    const specd_draft_request *req;
    specd_token_tree *tree;
    int32_t branches;  /* most leaves */
    int32_t n_leaves;
    int32_t max_nodes; /* most draft tokens */
    open_node open[MAX_B], next[MAX_B];
    int32_t n_open, n_next;
    int32_t seq0_node; /* deepest node decoded in sequence 0 */
    bool main_ends;    /* the main branch's newest token did not pay: it stays, nothing after it */
} tree_step;

static bool reserve_nodes(specd_draft_tree *t, int32_t n) {
    if (n <= t->cap) return true;
    int32_t cap = n < 64 ? 64 : 2 * n;
    double *v = specd_grow_array(t->value, (size_t)cap, sizeof *v);
    if (!v) return false;
    t->value = v;
    double *p = specd_grow_array(t->path_p, (size_t)cap, sizeof *p);
    if (!p) return false;
    t->path_p = p;
    t->cap = cap;
    return true;
}

static double acceptance(const tree_step *s, float confidence) {
    return s->req->plan ? specd_draft_plan_acceptance(s->req->plan, confidence) : confidence;
}

/* Only auto asks for costs, and auto needs the plan; without one, in units of one token. */
static double verify_cost(const tree_step *s, int32_t n_tokens) {
    return s->req->plan ? specd_draft_plan_pass_ms(s->req->plan, n_tokens) : n_tokens;
}

/* A draft pass over k open branches. */
static double pass_cost(const tree_step *s, int32_t k) {
    if (k <= 0) return 0.0;
    if (s->t->pass_ms[k] > 0.0) return s->t->pass_ms[k];
    double one = s->t->pass_ms[1] > 0.0 ? s->t->pass_ms[1]
                 : s->req->costs        ? specd_costs_draft_token(s->req->costs)
                                        : 0.1 * verify_cost(s, 1);
    return one * (1.0 + PASS_PRIOR_SLOPE * (k - 1));
}

/* Would value v, for extra_ms of draft passes and n_more target tokens, pay at the engine's rate
 * (draft_length.h)? */
static bool pays(const tree_step *s, double v, double extra_ms, int32_t n_more) {
    double more = verify_cost(s, s->tree->n_nodes + n_more) - verify_cost(s, s->tree->n_nodes) + extra_ms;
    return s->req->plan ? specd_draft_plan_net(s->req->plan, v, more) > 0.0 : v > 0.0;
}

/* Adds a child; `share` is the chance that verification tries it at all (1 for a first child,
 * what its earlier siblings leave for a sibling), for its estimated chance of acceptance. */
static int32_t add_node(tree_step *s, int32_t parent, specd_token token, const specd_dist *q, float confidence,
                        double share, char **error) {
    int32_t child = reserve_nodes(s->t, s->tree->n_nodes + 1) ? specd_tree_add(s->tree, parent, token, q, confidence)
                                                               : -1;
    if (child < 0) {
        specd_set_error(error, "out of memory while drafting a tree");
        return -1;
    }
    s->t->path_p[child] = s->t->path_p[parent] * confidence;
    s->t->value[child] = s->t->value[parent] * share * acceptance(s, confidence);
    return child;
}

/* ---- the children of one open node ---------------------------------------------------------- */

/* Greedy: the draft's best tokens after the request's transforms, best first, with their
 * probabilities; the first is the argmax the chain drafter would take. Returns how many. */
static int32_t rank_greedy(tree_step *s, const float *logits, int32_t n_history) {
    specd_sampler *sm = s->req->sampler;
    specd_token best = specd_sampler_argmax(sm, logits, s->req->history, n_history);
    int32_t k = s->branches < sm->n_vocab ? s->branches : sm->n_vocab;
    specd_token heap[MAX_B];
    specd_top_k_heap(sm->logits, sm->n_vocab, k, heap);
    for (int32_t i = k - 1; i >= 0; i--) s->t->ranked[i] = specd_top_k_pop(heap, i + 1, sm->logits);
    s->t->ranked[0] = best; /* the same token unless ties are broken otherwise: the argmax wins */
    float max;
    double sum = specd_softmax_denominator(sm->logits, sm->n_vocab, &max);
    for (int32_t i = 0; i < k; i++) s->t->ranked_p[i] = (float)(exp((double)sm->logits[s->t->ranked[i]] - max) / sum);
    return k;
}

/* Seeded reproducible (req->coupled): the draft's tokens with the highest keys under the request's
 * keyed noise at this output index (sample/coupled.h), best first; the first is the coupled draw
 * the chain drafter would take. Their confidence is q's probability of each. Returns how many, or
 * -1 when out of memory. */
static int32_t rank_coupled(tree_step *s, const float *logits, int32_t n_history) {
    const specd_draft_request *req = s->req;
    if (!specd_sampler_dist(req->sampler, logits, req->history, n_history, &s->t->q)) return -1;
    int64_t index = req->coupled_index + (n_history - req->n_history); /* as draft_model.c's chain */
    return specd_coupled_top_k(&s->t->q, req->coupled_seed, index, s->branches, s->t->ranked, s->t->ranked_p);
}

/* The draft's probability of the next sibling, as known before it is drawn: ranked (greedy or
 * seeded), that of the next-ranked token; sampling, its expectation sum over what is left of
 * q(x)^2 / mass left. */
static double next_sibling_confidence(const tree_step *s, bool ranked, int32_t i, int32_t n_ranked) {
    if (ranked) return i < n_ranked ? s->t->ranked_p[i] : 0.0;
    const specd_sibling_draws *d = &s->t->draws;
    if (!specd_sibling_draws_left(d)) return 0.0;
    double sum = 0.0;
    for (int32_t j = 0; j < d->rest.n; j++) sum += (double)d->rest.probs[j] * d->rest.probs[j];
    return d->mass_left * sum;
}

/* One more sibling under `parent`, decided before it is drawn. */
static bool want_sibling(const tree_step *s, int32_t parent, double confidence, double tried) {
    if (s->n_leaves >= s->branches || specd_tree_n_drafted(s->tree) >= s->max_nodes || confidence <= 0.0) return false;
    if (s->t->path_p[parent] * confidence < s->req->tree_p_split) return false;
    if (!s->req->tree_auto) return true;
    double left = 1.0 - tried; /* the earlier siblings were all rejected */
    return pays(s, s->t->value[parent] * left * acceptance(s, (float)confidence), 0.0, 1);
}

/* Draws the next child (first or sibling); returns its index or -1 (error set). Ranked children
 * keep no q: the greedy walk verifies them (verify.h). */
static int32_t draw_child(tree_step *s, int32_t parent, bool ranked, int32_t i, double share, char **error) {
    specd_token token;
    if (ranked) return add_node(s, parent, s->t->ranked[i], NULL, s->t->ranked_p[i], share, error);
    if (!specd_sibling_draw(&s->t->draws, s->req->rng, &token, &s->t->q_i)) {
        specd_set_error(error, "out of memory while drafting a tree");
        return -1;
    }
    return add_node(s, parent, token, &s->t->q_i, specd_dist_prob(&s->t->q, token), share, error);
}

/* Greedy or seeded main branch: the chain drafter's test for keeping a drawn token (p_min, and the
 * length controller's worth_adding), so that a tree that does not branch is the very chain. Such
 * drafts are not random draws: leaving one out is exact. (A sampled token always stays:
 * sibling_draws.h.) */
static bool main_child_pays(const tree_step *s, int32_t node, float confidence) {
    const specd_draft_request *req = s->req;
    int32_t depth = s->tree->nodes[node].depth;
    if (depth < req->min_len) return true;
    if (confidence < req->p_min) return false;
    return !req->plan || specd_draft_plan_worth_adding(req->plan, depth, confidence);
}

/* The children of an open node: the first always (opening it decided that; greedy, the main
 * branch's unless main_child_pays says no), siblings while want_sibling says so. The first child
 * of sequence 0's node is the main branch. */
static specd_status expand(tree_step *s, const open_node *o, char **error) {
    const specd_draft_request *req = s->req;
    int32_t n_history = req->n_history - 1 + specd_tree_path(s->tree, o->node, req->history + req->n_history - 1);
    const float *logits = specd_slot_logits(specd_engine_draft(s->e), o->batch_idx);
    bool greedy = specd_sampler_is_greedy(req->sampler), ranked = greedy || req->coupled;
    int32_t n_ranked = 0;
    if (greedy) n_ranked = rank_greedy(s, logits, n_history);
    else if (req->coupled) n_ranked = rank_coupled(s, logits, n_history);
    else if (!specd_sampler_dist(req->sampler, logits, req->history, n_history, &s->t->q) ||
             !specd_sibling_draws_begin(&s->t->draws, &s->t->q))
        n_ranked = -1;
    if (n_ranked < 0) {
        specd_set_error(error, "out of memory while drafting a tree");
        return SPECD_ERR_NO_MEMORY;
    }
    if (ranked && n_ranked == 0) return SPECD_OK; /* nothing the draft allows here: the branch ends */
    if (ranked && o->seq == 0 && !main_child_pays(s, o->node, s->t->ranked_p[0])) return SPECD_OK;
    double tried = 0.0;
    for (int32_t i = 0;; i++) {
        int32_t child = draw_child(s, o->node, ranked, i, 1.0 - tried, error);
        if (child < 0) return SPECD_ERR_NO_MEMORY;
        if (i > 0) s->n_leaves++;
        else if (o->seq == 0) {
            float confidence = s->tree->nodes[child].confidence;
            /* As the chain drafter: a sampled token that does not pay stays, and ends the branch. */
            s->main_ends = !ranked && !main_child_pays(s, o->node, confidence);
            if (req->plan) specd_draft_plan_add(req->plan, s->tree->nodes[child].depth - 1, confidence);
        }
        /* Chance one of the children so far is accepted: 1 - prod (1 - a_j). */
        tried += (1.0 - tried) * acceptance(s, s->tree->nodes[child].confidence);
        if (!want_sibling(s, o->node, next_sibling_confidence(s, ranked, i + 1, n_ranked), tried)) break;
    }
    return SPECD_OK;
}

/* ---- which children to open next ------------------------------------------------------------ */

static int compare_value_desc(const void *a, const void *b, const double *value) {
    double x = value[*(const int32_t *)a], y = value[*(const int32_t *)b];
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Sorts node indices by value, best first (insertion sort: at most a few dozen). */
static void sort_by_value(int32_t *nodes, int32_t n, const double *value) {
    for (int32_t i = 1; i < n; i++)
        for (int32_t j = i; j > 0 && compare_value_desc(&nodes[j - 1], &nodes[j], value) > 0; j--) {
            int32_t tmp = nodes[j];
            nodes[j] = nodes[j - 1];
            nodes[j - 1] = tmp;
        }
}

/* Open the main branch's newest node? As the chain drafter: its length controller, min_len, p_min. */
static bool open_main(tree_step *s, int32_t node) {
    const specd_draft_request *req = s->req;
    int32_t depth = s->tree->nodes[node].depth;
    if (depth >= req->max_len || specd_tree_n_drafted(s->tree) >= s->max_nodes) return false;
    if (depth < req->min_len) return true;
    if (s->main_ends) return false;
    if (s->tree->nodes[node].confidence < req->p_min) return false;
    return !req->plan || specd_draft_plan_worth_continuing(req->plan, depth);
}

/* Open a side node too, with n_open already opened this depth (main_open: one of them is the main
 * branch; when it is not, sequence 0 still holds it, and counts against the branches)? */
static bool open_side(tree_step *s, int32_t node, int32_t n_open, bool main_open) {
    const specd_draft_request *req = s->req;
    int32_t depth = s->tree->nodes[node].depth;
    if (depth >= req->max_len || n_open + !main_open >= s->branches) return false;
    if (specd_tree_n_drafted(s->tree) + n_open >= s->max_nodes) return false;
    if (s->t->path_p[node] < req->tree_p_split || s->tree->nodes[node].confidence < req->p_min) return false;
    if (!req->tree_auto) return true;
    /* Its first child, expected to be accepted as often as the node itself was likely. */
    double v = s->t->value[node] * acceptance(s, s->tree->nodes[node].confidence);
    return pays(s, v, pass_cost(s, n_open + 1) - pass_cost(s, n_open), 1);
}

static int32_t seq_of(const tree_step *s, int32_t node) {
    for (int32_t i = 0; i < s->n_open; i++)
        if (s->open[i].node == node) return s->open[i].seq;
    return -1;
}

/* Chooses the nodes to open among the children made this depth (nodes [first, n_nodes)) and gives
 * each a sequence: a parent's own to its best opened child, a free one (a copy of the parent's) to
 * the others. Sequence 0 never goes to the free pool: it is the cache the next step syncs. */
static void choose_next(tree_step *s, int32_t first) {
    int32_t cand[SPECD_TREE_MAX_BRANCHES * SPECD_TREE_MAX_BRANCHES], n_cand = 0, main_child = -1;
    int32_t main_parent = s->seq0_node;
    for (int32_t c = first; c < s->tree->n_nodes; c++) {
        if (main_child < 0 && s->tree->nodes[c].parent == main_parent && seq_of(s, main_parent) == 0) main_child = c;
        else if (n_cand < (int32_t)(sizeof cand / sizeof *cand)) cand[n_cand++] = c;
    }
    sort_by_value(cand, n_cand, s->t->value);
    s->n_next = 0;
    if (main_child >= 0 && open_main(s, main_child)) {
        s->next[s->n_next++] = (open_node){main_child, 0, 0};
        if (s->req->plan) specd_draft_plan_add_draft_decode(s->req->plan);
    }
    bool main_open = s->n_next == 1;
    for (int32_t i = 0; i < n_cand && open_side(s, cand[i], s->n_next, main_open); i++)
        s->next[s->n_next++] = (open_node){cand[i], -1, 0};
    bool used[MAX_B] = {false};
    used[0] = true;
    for (int32_t i = 0; i < s->n_next; i++) { /* a parent's sequence to its first opened child */
        int32_t ps = seq_of(s, s->tree->nodes[s->next[i].node].parent);
        bool taken = false;
        for (int32_t j = 0; j < i; j++) taken |= s->next[j].seq == ps;
        if (s->next[i].seq < 0 && !taken && ps > 0) s->next[i].seq = ps;
        if (s->next[i].seq >= 0) used[s->next[i].seq] = true;
    }
    for (int32_t i = 0; i < s->n_next; i++) {
        if (s->next[i].seq >= 0) continue;
        int32_t free_seq = 1;
        while (used[free_seq]) free_seq++;
        used[free_seq] = true;
        s->next[i].seq = free_seq;
        specd_slot_copy_branch(specd_engine_draft(s->e), seq_of(s, s->tree->nodes[s->next[i].node].parent), free_seq);
    }
}

/* One draft pass over the opened nodes. */
static specd_status decode_next(tree_step *s, char **error) {
    specd_branch_token tokens[MAX_B];
    for (int32_t i = 0; i < s->n_next; i++) {
        const specd_tree_node *node = &s->tree->nodes[s->next[i].node];
        tokens[i] = (specd_branch_token){node->token, s->req->n_history - 1 + node->depth, s->next[i].seq};
        s->next[i].batch_idx = i;
    }
    double t0 = specd_now_ms();
    specd_status st = specd_slot_decode_branches(s->e, specd_engine_draft(s->e), tokens, s->n_next, error);
    double ms = specd_now_ms() - t0;
    if (st != SPECD_OK) return st;
    double *avg = &s->t->pass_ms[s->n_next];
    *avg = *avg > 0.0 ? (1.0 - PASS_EMA) * *avg + PASS_EMA * ms : ms;
    if (s->n_next == 1 && s->req->costs) specd_costs_record_draft(s->req->costs, 1, ms);
    for (int32_t i = 0; i < s->n_next; i++)
        if (s->next[i].seq == 0) s->seq0_node = s->next[i].node;
    memcpy(s->open, s->next, (size_t)s->n_next * sizeof *s->open);
    s->n_open = s->n_next;
    return SPECD_OK;
}

/* Leaves only the main branch in the draft's cache: the history and the drafts decoded on it. */
static void clean_up(tree_step *s, bool failed) {
    specd_model_slot *slot = specd_engine_draft(s->e);
    int32_t n_branches = specd_slot_n_seq_max(slot) < MAX_B ? specd_slot_n_seq_max(slot) : MAX_B;
    specd_token *path = s->req->history + s->req->n_history - 1; /* the root, then the drafts (scratch) */
    int32_t n_path = failed ? 1 : specd_tree_path(s->tree, s->seq0_node, path);
    specd_slot_keep_branch(slot, 0, n_branches, s->req->n_history - 1, path, n_path);
}

specd_status specd_draft_tree_run(specd_draft_tree *t, specd_engine *e, const specd_draft_request *req,
                                  specd_token_tree *tree, char **error) {
    tree_step s = {.t = t, .e = e, .req = req, .tree = tree, .n_leaves = 1};
    s.branches = req->tree_branches < MAX_B ? req->tree_branches : MAX_B;
    specd_model_slot *draft = specd_engine_draft(e), *target = specd_engine_target(e);
    if (s.branches > specd_slot_n_seq_max(draft)) s.branches = specd_slot_n_seq_max(draft);
    /* A recurrent or hybrid model keeps one state per sequence and verifies or drafts chains only
     * (kv.c, state.c): with one, the tree is its main branch, the chain a chain drafter makes. */
    if (s.branches > specd_slot_n_seq_max(target)) s.branches = specd_slot_n_seq_max(target);
    if (!specd_slot_can_drop_tail(target) || !specd_slot_can_drop_tail(draft)) s.branches = 1;
    int32_t batch_cap = specd_engine_batch_cap(e);
    s.max_nodes = req->tree_max_nodes < batch_cap - 1 ? req->tree_max_nodes : batch_cap - 1;
    if (!reserve_nodes(t, 1)) {
        specd_set_error(error, "out of memory while drafting a tree");
        return SPECD_ERR_NO_MEMORY;
    }
    t->value[0] = t->path_p[0] = 1.0;
    if (req->min_len < 1 && req->plan && !specd_draft_plan_worth_continuing(req->plan, 0)) return SPECD_OK;
    if (req->plan) specd_draft_plan_add_draft_decode(req->plan);
    int32_t idx = 0;
    specd_status st = specd_slot_sync(e, draft, req->history, req->n_history, true, &idx, NULL, error);
    if (st != SPECD_OK) return st;
    s.open[0] = (open_node){0, 0, idx};
    s.n_open = 1;
    while (st == SPECD_OK && s.n_open > 0) {
        int32_t first = tree->n_nodes;
        for (int32_t i = 0; i < s.n_open && st == SPECD_OK; i++) st = expand(&s, &s.open[i], error);
        if (st != SPECD_OK) break;
        choose_next(&s, first);
        if (s.n_next == 0) break;
        st = decode_next(&s, error);
    }
    clean_up(&s, st != SPECD_OK);
    return st;
}
