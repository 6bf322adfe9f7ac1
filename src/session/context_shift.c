/* context_shift.c - see context_shift.h. The rule is llama-server's (tools/server, pre_decode):
 *   n_keep  = the request's n_keep (+1 for a BOS the model adds; -1 = the whole prompt),
 *             at most n_ctx - 4
 *   n_left  = cached tokens - n_keep,  n_discard = n_left / 2 (at least 1 kept after n_keep)
 *   cache:  remove [n_keep, n_keep + n_discard), move what follows back by n_discard.
 * Our cache holds n_history - 1 tokens when the history fills the context (the root is decoded
 * with the next step's drafts), exactly as the server's does when it shifts. */
#include "context_shift.h"

#include "../util/util.h"

#include <string.h>

/* The server never keeps more than this much less than the context. */
#define KEEP_MARGIN 4

bool specd_context_shift_on(const specd_generation_params *params) {
    return params->context_shift && params->n_predict >= 0;
}

specd_status specd_context_shift_validate(const specd_engine *e, const specd_generation_params *params,
                                          char **error) {
    if (!params->context_shift) return SPECD_OK;
    const specd_model_slot *target = specd_engine_target(e);
    if (specd_context_shift_on(params) && !specd_slot_can_shift(target)) {
        specd_set_error(error, "context_shift: the %s cannot shift positions (its recurrent state cannot "
                        "drop the oldest tokens): turn context_shift off, or raise the context size (-c)",
                        specd_slot_desc(target));
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    return SPECD_OK;
}

int32_t specd_context_room(const specd_engine *e, int32_t n_history) {
    /* A step emits up to its draft plus one token: the history ends the step at n_ctx at most. */
    return specd_engine_n_ctx(e) - n_history - 1;
}

/* Tokens a shift keeps at the start of the history. */
static int32_t tokens_kept(const specd_engine *e, const specd_generation_params *params,
                           const specd_token *history, int32_t n_prompt) {
    int32_t keep = params->n_keep;
    if (keep < 0) keep = n_prompt;
    else if (specd_token_is_added_bos(e, history[0])) keep++;
    int32_t n_ctx = specd_engine_n_ctx(e);
    if (keep > n_ctx - KEEP_MARGIN) keep = n_ctx - KEEP_MARGIN;
    return keep > 0 ? keep : 0;
}

static bool stop_at_context_end(specd_result *result) {
    result->stop_reason = SPECD_STOP_CONTEXT;
    return false;
}

bool specd_context_make_room(specd_engine *e, const specd_generation_params *params, specd_token *history,
                             int32_t *n_history, const specd_drafter *drafter, specd_result *result,
                             specd_status *st, char **error) {
    *st = SPECD_OK;
    if (!specd_context_shift_on(params)) return stop_at_context_end(result);
    int32_t n_cached = *n_history - 1; /* the root is not in the cache */
    int32_t keep = tokens_kept(e, params, history, result->stats.n_prompt);
    int32_t n_left = n_cached - keep;
    int32_t discard = n_left / 2;
    if (discard > n_left - 1) discard = n_left - 1;
    if (discard < 1) return stop_at_context_end(result); /* nothing to free: stopping beats looping */
    specd_slot_shift(specd_engine_target(e), keep, discard);
    memmove(history + keep, history + keep + discard, (size_t)(*n_history - keep - discard) * sizeof *history);
    *n_history -= discard;
    if (drafter->ops) *st = specd_drafter_shift(drafter, keep, discard, history, *n_history - 1, error);
    specd_stats *s = &result->stats;
    s->n_context_shifts++;
    s->n_context_discarded += discard;
    s->n_context_kept = keep;
    return *st == SPECD_OK;
}
