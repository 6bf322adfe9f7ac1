/* context_shift.h - going on past a full context by dropping old tokens, as llama.cpp's server
 * does (specd_generation_params.context_shift): when to shift, how much, and keeping the target's
 * KV cache, the drafter (and with it the draft model's cache) and the history in step. */
#ifndef SPECD_CONTEXT_SHIFT_H
#define SPECD_CONTEXT_SHIFT_H

#include "../draft/drafter.h"
#include "../engine/engine.h"

/* Whether this generation shifts the context when it is full: context_shift with a finite
 * n_predict (an unlimited generation stops at the context end, so it always ends). */
bool specd_context_shift_on(const specd_generation_params *params);

/* Refuses, before anything runs, a shift the engine cannot do or an n_keep out of range. */
specd_status specd_context_shift_validate(const specd_engine *e, const specd_generation_params *params,
                                          char **error);

/* Positions past the root a step may draft into with n_history tokens of history: up to where the
 * history reaches n_ctx with the step's extra token, as the target alone ends there. Without
 * shifting it stops there (one more draft let a step whose drafts were all accepted emit a token
 * past it: 59 tokens where the target alone gave 58); with shifting the shift comes there, and the
 * target alone produces the tokens after it from the shifted context, which a draft crossing it
 * could not verify exactly. */
int32_t specd_context_room(const specd_engine *e, int32_t n_history);

/* Called when the history fills the context (the root, history[n_history - 1], is not cached).
 * With shifting on, drops n_discard = (n_history - 1 - n_keep) / 2 tokens after the first n_keep
 * from the target's cache, the drafter's state and `history` (stats count it), and returns true.
 * Returns false, with result->stop_reason = SPECD_STOP_CONTEXT, when generation must stop: no
 * shifting, or a shift would free nothing. *st is set to an error when the drafter failed. */
bool specd_context_make_room(specd_engine *e, const specd_generation_params *params, specd_token *history,
                             int32_t *n_history, const specd_drafter *drafter, specd_result *result,
                             specd_status *st, char **error);

#endif
