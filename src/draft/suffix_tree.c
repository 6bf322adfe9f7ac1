/* suffix_tree.c - the depth-limited, count-bounded suffix tree (see .h). */
#include "suffix_tree.h"

#include "../util/util.h"

#include <stdlib.h>
#include <string.h>

static uint64_t edge_key(int32_t parent, int32_t token) {
    return ((uint64_t)(uint32_t)parent << 32) | (uint32_t)token;
}

bool specd_suffix_tree_init(specd_suffix_tree *t, int32_t max_nodes, int32_t max_depth) {
    memset(t, 0, sizeof *t);
    t->max_nodes = max_nodes < 256 ? 256 : max_nodes; /* room to prune down to half */
    t->max_depth = max_depth < 1 ? 1 : max_depth > SPECD_SUFFIX_MAX_DEPTH ? SPECD_SUFFIX_MAX_DEPTH : max_depth;
    t->cap_nodes = 1024;
    t->nodes = specd_alloc_array((size_t)t->cap_nodes, sizeof *t->nodes);
    if (!t->nodes) return false;
    t->nodes[0] = (specd_suffix_node){-1, 0, -1, -1, -1, 0};
    t->n_nodes = 1;
    return true;
}

void specd_suffix_tree_free(specd_suffix_tree *t) {
    free(t->nodes);
    specd_u64_map_free(&t->edges);
    memset(t, 0, sizeof *t);
}

int32_t specd_suffix_child(const specd_suffix_tree *t, int32_t node, int32_t token) {
    const int32_t *child = specd_u64_map_find(&t->edges, edge_key(node, token));
    return child ? *child : -1;
}

static int32_t add_child(specd_suffix_tree *t, int32_t parent, int32_t token) {
    if (t->n_nodes == t->cap_nodes) {
        int32_t cap = t->cap_nodes * 2;
        specd_suffix_node *grown = specd_grow_array(t->nodes, (size_t)cap, sizeof *grown);
        if (!grown) return -1;
        t->nodes = grown;
        t->cap_nodes = cap;
    }
    int32_t id = t->n_nodes;
    int32_t *slot = specd_u64_map_insert(&t->edges, edge_key(parent, token), id, NULL);
    if (!slot) return -1;
    specd_suffix_node *p = &t->nodes[parent];
    t->nodes[id] = (specd_suffix_node){token, 0, parent, -1, p->first_child, p->depth + 1};
    p->first_child = id;
    t->n_nodes++;
    return id;
}

/* Halves every count and removes the nodes at zero, renumbering the rest (parents stay before
 * children, so one pass in order does it). Returns false when out of memory. */
static bool prune(specd_suffix_tree *t) {
    int32_t *renumber = specd_alloc_array((size_t)t->n_nodes, sizeof *renumber);
    if (!renumber) return false;
    int32_t kept = 1;
    renumber[0] = 0;
    specd_u64_map_clear(&t->edges);
    t->nodes[0].first_child = -1;
    for (int32_t i = 1; i < t->n_nodes; i++) {
        specd_suffix_node n = t->nodes[i];
        n.count /= 2;
        int32_t parent = renumber[n.parent];
        renumber[i] = -1;
        if (n.count == 0 || parent < 0) continue;
        n.parent = parent;
        n.first_child = -1;
        n.next_sibling = t->nodes[parent].first_child;
        t->nodes[parent].first_child = kept;
        t->nodes[kept] = n;
        if (!specd_u64_map_insert(&t->edges, edge_key(parent, n.token), kept, NULL)) {
            free(renumber);
            return false;
        }
        renumber[i] = kept++;
    }
    free(renumber);
    t->n_nodes = kept;
    t->epoch++;
    return true;
}

void specd_suffix_cursor_reset(specd_suffix_cursor *c) {
    c->n_active = 0;
}

/* After pruning: the nodes of the suffixes of recent[] that still exist. */
static void find_suffixes_again(const specd_suffix_tree *t, specd_suffix_cursor *c, const int32_t *recent,
                                int32_t n_recent) {
    c->n_active = 0;
    int32_t longest = n_recent < t->max_depth ? n_recent : t->max_depth;
    for (int32_t len = 1; len <= longest; len++) {
        int32_t node = 0;
        for (int32_t i = n_recent - len; i < n_recent && node >= 0; i++) node = specd_suffix_child(t, node, recent[i]);
        if (node < 0) break; /* a longer suffix cannot exist when this one does not */
        c->active[c->n_active++] = node;
    }
    c->epoch = t->epoch;
}

bool specd_suffix_append(specd_suffix_tree *t, specd_suffix_cursor *c, const int32_t *recent, int32_t n_recent,
                         int32_t token) {
    /* Room for up to max_depth new nodes first, so the ids taken below stay valid. */
    if (t->n_nodes + t->max_depth >= t->max_nodes) {
        while (t->n_nodes + t->max_depth >= t->max_nodes / 2)
            if (!prune(t)) return false;
    }
    if (c->epoch != t->epoch) find_suffixes_again(t, c, recent, n_recent);
    int32_t next[SPECD_SUFFIX_MAX_DEPTH + 1], n_next = 0;
    /* The empty suffix (root) and every active one, shortest first, gain `token`. */
    for (int32_t i = -1; i < c->n_active; i++) {
        int32_t parent = i < 0 ? 0 : c->active[i];
        if (t->nodes[parent].depth >= t->max_depth) continue;
        int32_t child = specd_suffix_child(t, parent, token);
        if (child < 0) child = add_child(t, parent, token);
        if (child < 0) return false;
        t->nodes[child].count++;
        next[n_next++] = child;
    }
    memcpy(c->active, next, (size_t)n_next * sizeof *next);
    c->n_active = n_next;
    return true;
}
