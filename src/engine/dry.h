/* dry.h - the DRY repetition penalty ("Don't Repeat Yourself", koboldcpp's, as llama.cpp has it),
 * through llama.cpp's own sampler (so in the engine, the one layer that sees llama.cpp): it needs the vocabulary to turn the sequence breakers (strings)
 * into the token sequences that end a repeat. The penalty at a position depends only on the
 * history before it, so the sampler computes it afresh for each drafted position. */
#ifndef SPECD_DRY_H
#define SPECD_DRY_H

#include "specd.h"

#include <stdbool.h>

typedef struct specd_dry specd_dry;

/* For the engine's target vocabulary: NULL when DRY is off for these params (dry_multiplier 0 or
 * dry_penalty_last_n 0), or on failure (*failed, *error set: out of memory). dry_penalty_last_n -1
 * looks back over the engine's context. (engine_internal.h has it for a bare llama.cpp vocabulary.) */
specd_dry *specd_dry_new(const specd_engine *e, const specd_sampling_params *p, bool *failed, char **error);
void specd_dry_free(specd_dry *d);

/* Lowers logits[0..n_vocab) of the tokens that would extend a repeat of the end of `history`. */
void specd_dry_apply(specd_dry *d, const specd_token *history, int32_t n_history, float *logits);

#endif
