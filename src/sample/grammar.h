/* grammar.h - a request's GBNF grammar as the token filter of the sampler (sample/sampler.h): at
 * the end of the emitted output, at every node of a draft tree (the states after each node, which
 * verify/grammar_prune.c computes when it prunes the tree), and at every depth of a draft model's
 * chain. The grammar engine itself (parse states, llama.cpp's) is engine/grammar_engine.h's. */
#ifndef SPECD_GRAMMAR_H
#define SPECD_GRAMMAR_H

#include "../engine/grammar_engine.h"
#include "../sample/sampler.h"

typedef struct specd_grammar {
    specd_grammar_engine *engine;
    specd_grammar_state *state;  /* after every emitted token: the state at a tree's root */
    specd_grammar_state **node;  /* node[i], i >= 1: after the path root..i of the pruned tree */
    int32_t n_node;              /* entries of node[] in use (the tree's node count) */
    int32_t cap_node;
    int32_t *index;              /* scratch for pruning: old node index -> new */
} specd_grammar;

/* Parses `text` (GBNF, start symbol "root") for the engine's vocabulary. On failure returns
 * SPECD_ERR_INVALID_ARGUMENT with *error naming the grammar; g is then empty (free is still fine). */
specd_status specd_grammar_init(specd_grammar *g, const specd_engine *engine, const char *text, char **error);
/* As specd_grammar_init, lazy with `triggers` (NULL: not lazy; grammar_engine.h). */
specd_status specd_grammar_init_lazy(specd_grammar *g, const specd_engine *engine, const char *text,
                                     const specd_grammar_triggers *triggers, char **error);
void specd_grammar_free(specd_grammar *g);

/* The filter at `state` (g->state, a node's, or a drafter's fork). */
specd_token_filter specd_grammar_filter(specd_grammar *g, specd_grammar_state *state);
/* The filter after tree node `node` of the tree last pruned (0: the root, g->state). */
specd_token_filter specd_grammar_node_filter(specd_grammar *g, int32_t node);

bool specd_grammar_allows(specd_grammar *g, specd_grammar_state *state, specd_token token);
/* Advances `state` by `token` when the grammar allows it there; returns whether it did. */
bool specd_grammar_advance(specd_grammar *g, specd_grammar_state *state, specd_token token);

/* Room for the states of n tree nodes (the pruning's); false when out of memory. */
bool specd_grammar_reserve_nodes(specd_grammar *g, int32_t n);
/* Frees the states of the tree last pruned. */
void specd_grammar_forget_nodes(specd_grammar *g);

#endif
