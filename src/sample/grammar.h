/* grammar.h - a request's GBNF grammar, through llama.cpp's grammar engine, as the token filter of
 * the sampler (sample/sampler.h): at the end of the emitted output, at every node of a draft tree,
 * and at every depth of a draft model's chain.
 *
 * The grammar constrains the generated text only: prompt tokens are never fed to it, as in
 * llama.cpp. A grammar state is a llama_sampler from llama_sampler_init_grammar; states are forked
 * with llama_sampler_clone and advanced with llama_sampler_accept, and only ever by tokens the
 * grammar allows (llama.cpp aborts on an end-of-generation token the grammar does not allow). */
#ifndef SPECD_GRAMMAR_H
#define SPECD_GRAMMAR_H

#include "../sample/sampler.h"
#include "../verify/token_tree.h"
#include "llama.h"

typedef struct specd_grammar {
    const struct llama_vocab *vocab;
    int32_t n_vocab;
    struct llama_sampler *state;  /* after every emitted token: the state at a tree's root */
    struct llama_sampler **node;  /* node[i], i >= 1: after the path root..i of the pruned tree */
    int32_t n_node;               /* entries of node[] in use (the tree's node count) */
    int32_t cap_node;
    int32_t *index;               /* scratch for pruning: old node index -> new */
    llama_token_data *scratch;    /* candidates for llama_sampler_apply, n_vocab of them */
    specd_token none_valid;       /* produced when the grammar allows nothing: an end-of-generation token */
} specd_grammar;

/* Parses `text` (GBNF, start symbol "root") for `vocab`. On failure returns
 * SPECD_ERR_INVALID_ARGUMENT with *error naming the grammar; g is then empty (free is still fine). */
specd_status specd_grammar_init(specd_grammar *g, const struct llama_vocab *vocab, const char *text,
                                char **error);
void specd_grammar_free(specd_grammar *g);

/* The filter at `state` (g->state, a node's, or a drafter's fork). */
specd_token_filter specd_grammar_filter(specd_grammar *g, struct llama_sampler *state);
/* The filter after tree node `node` of the tree last pruned (0: the root, g->state). */
specd_token_filter specd_grammar_node_filter(specd_grammar *g, int32_t node);

bool specd_grammar_allows(specd_grammar *g, struct llama_sampler *state, specd_token token);
/* Advances `state` by `token` when the grammar allows it there; returns whether it did. */
bool specd_grammar_advance(specd_grammar *g, struct llama_sampler *state, specd_token token);
/* A copy of `state` to advance separately (free with llama_sampler_free); NULL when out of memory. */
struct llama_sampler *specd_grammar_fork(const struct llama_sampler *state);

/* Drops the draft nodes whose token the grammar refuses after their path (and everything below
 * them), and keeps the state after each remaining node for specd_grammar_node_filter. A drafter
 * that ignores the grammar (n-gram, suffix) then never makes the target verify a token it could
 * not produce. Returns false when out of memory. */
bool specd_grammar_prune(specd_grammar *g, specd_token_tree *tree);

#endif
