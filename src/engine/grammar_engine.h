/* grammar_engine.h - GBNF grammars through llama.cpp's grammar engine, as opaque parse states: a
 * state is where a grammar stands after some tokens (llama.cpp's grammar sampler); it is forked to
 * follow two paths, advanced by a token it allows, and asked which candidate tokens it refuses.
 * The token filters over draft trees that the sampler and the drafters use are sample/grammar.h's.
 *
 * What the grammar engine costs the calling thread, CPU time, is counted for
 * specd_grammar_thread_ms (grammar_clock.h). Each state belongs to one thread at a time. */
#ifndef SPECD_GRAMMAR_ENGINE_H
#define SPECD_GRAMMAR_ENGINE_H

#include "grammar_clock.h"
#include "specd.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct specd_grammar_state specd_grammar_state;
/* A grammar's vocabulary side: the candidate buffer its checks fill, and its end token. */
typedef struct specd_grammar_engine specd_grammar_engine;

/* Parses `text` (GBNF, start symbol "root") for the engine's vocabulary: *out, and in *root the
 * state before any token. On failure SPECD_ERR_INVALID_ARGUMENT (or NO_MEMORY) with *error naming
 * what llama.cpp refused, and nothing to free. */
specd_status specd_grammar_engine_new(const specd_engine *engine, const char *text, specd_grammar_engine **out,
                                      specd_grammar_state **root, char **error);

/* What makes a lazy grammar start constraining (llama.cpp's, as llama-server applies a tool-call
 * grammar the model may or may not use): regex patterns matched against the output from its
 * start, and tokens. */
typedef struct specd_grammar_triggers {
    const char *const *patterns;
    int32_t n_patterns;
    const specd_token *tokens;
    int32_t n_tokens;
} specd_grammar_triggers;

/* As specd_grammar_engine_new; with `triggers` (not NULL) lazy: the output is free until a
 * trigger, then the grammar reads from it on. A pattern that is not a valid regex is an error. */
specd_status specd_grammar_engine_new_lazy(const specd_engine *engine, const char *text,
                                           const specd_grammar_triggers *triggers, specd_grammar_engine **out,
                                           specd_grammar_state **root, char **error);
void specd_grammar_engine_free(specd_grammar_engine *g);

int32_t specd_grammar_engine_n_vocab(const specd_grammar_engine *g);
/* The token produced when the grammar allows nothing: an end-of-generation token (EOS, else EOT,
 * else any), so that generation ends. */
specd_token specd_grammar_engine_none_valid(const specd_grammar_engine *g);

/* Sets logits[ids[i]] to -INFINITY for each candidate the state refuses. */
void specd_grammar_engine_mask(specd_grammar_engine *g, specd_grammar_state *state, const specd_token *ids, int32_t n,
                               float *logits);
bool specd_grammar_engine_allows(specd_grammar_engine *g, specd_grammar_state *state, specd_token token);

/* Advances the state by a token it allows (llama.cpp aborts on a token the grammar refuses).
 * False when llama.cpp threw (a lazy grammar whose trigger text does not parse): the state is
 * then spent. */
bool specd_grammar_state_accept(specd_grammar_state *state, specd_token token);
/* A copy to advance separately (every parse stack copied); NULL when out of memory. */
specd_grammar_state *specd_grammar_state_fork(const specd_grammar_state *state);
void specd_grammar_state_free(specd_grammar_state *state);

#endif
