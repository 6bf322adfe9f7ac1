/* grammar.c - a request's grammar as a token filter (see grammar.h), over the grammar engine's
 * parse states (engine/grammar_engine.h). */
#include "grammar.h"

#include "../util/util.h"

#include <stdlib.h>
#include <string.h>

specd_status specd_grammar_init(specd_grammar *g, const specd_engine *engine, const char *text, char **error) {
    return specd_grammar_init_lazy(g, engine, text, NULL, error);
}

specd_status specd_grammar_init_lazy(specd_grammar *g, const specd_engine *engine, const char *text,
                                     const specd_grammar_triggers *triggers, char **error) {
    memset(g, 0, sizeof *g);
    return specd_grammar_engine_new_lazy(engine, text, triggers, &g->engine, &g->state, error);
}

void specd_grammar_forget_nodes(specd_grammar *g) {
    for (int32_t i = 1; i < g->n_node; i++) specd_grammar_state_free(g->node[i]);
    g->n_node = 0;
}

void specd_grammar_free(specd_grammar *g) {
    specd_grammar_forget_nodes(g);
    specd_grammar_state_free(g->state);
    specd_grammar_engine_free(g->engine);
    free(g->node);
    free(g->index);
    memset(g, 0, sizeof *g);
}

/* specd_token_filter.mask: the grammar engine sets refused candidates to -INFINITY. */
static void grammar_mask(void *ctx, void *state, const specd_token *ids, int32_t n, float *logits) {
    specd_grammar *g = ctx;
    specd_grammar_engine_mask(g->engine, state, ids, n, logits);
}

specd_token_filter specd_grammar_filter(specd_grammar *g, specd_grammar_state *state) {
    return (specd_token_filter){grammar_mask, g, state, specd_grammar_engine_none_valid(g->engine)};
}

specd_token_filter specd_grammar_node_filter(specd_grammar *g, int32_t node) {
    return specd_grammar_filter(g, node == 0 ? g->state : g->node[node]);
}

bool specd_grammar_allows(specd_grammar *g, specd_grammar_state *state, specd_token token) {
    return specd_grammar_engine_allows(g->engine, state, token);
}

bool specd_grammar_advance(specd_grammar *g, specd_grammar_state *state, specd_token token) {
    return specd_grammar_allows(g, state, token) && specd_grammar_state_accept(state, token);
}

bool specd_grammar_reserve_nodes(specd_grammar *g, int32_t n) {
    if (g->cap_node >= n) return true;
    specd_grammar_state **node = specd_grow_array(g->node, (size_t)n, sizeof *node);
    if (!node) return false;
    g->node = node;
    int32_t *index = specd_grow_array(g->index, (size_t)n, sizeof *index);
    if (!index) return false;
    g->index = index;
    g->cap_node = n;
    return true;
}
