/* grammar_prune.c - see grammar_prune.h. */
#include "grammar_prune.h"

/* The state after node i, when its parent's state allows its token; NULL otherwise (index[i] = 0)
 * or when out of memory (*oom). */
static specd_grammar_state *node_state(specd_grammar *g, const specd_token_tree *tree, int32_t i, bool *oom) {
    int32_t parent = tree->nodes[i].parent;
    if (!g->index[parent]) return NULL; /* below a refused node */
    specd_grammar_state *from = parent == 0 ? g->state : g->node[parent];
    if (!specd_grammar_allows(g, from, tree->nodes[i].token)) return NULL;
    specd_grammar_state *s = specd_grammar_state_fork(from);
    if (!s) {
        *oom = true;
        return NULL;
    }
    if (!specd_grammar_state_accept(s, tree->nodes[i].token)) { /* a lazy grammar's trigger that does not parse */
        specd_grammar_state_free(s);
        return NULL;
    }
    return s;
}

bool specd_grammar_prune(specd_grammar *g, specd_token_tree *tree) {
    specd_grammar_forget_nodes(g);
    int32_t n = tree->n_nodes;
    if (!specd_grammar_reserve_nodes(g, n)) return false;
    bool oom = false;
    g->node[0] = NULL;
    g->index[0] = 1;
    for (int32_t i = 1; i < n; i++) {
        g->node[i] = oom ? NULL : node_state(g, tree, i, &oom);
        g->index[i] = g->node[i] != NULL;
    }
    g->n_node = n;
    if (oom) {
        specd_grammar_forget_nodes(g);
        return false;
    }
    specd_tree_keep(tree, g->index);
    /* Same compaction for the states: kept ones move down to their new index. */
    for (int32_t i = 1; i < n; i++)
        if (g->index[i] > 0) g->node[g->index[i]] = g->node[i];
    g->n_node = tree->n_nodes;
    return true;
}
