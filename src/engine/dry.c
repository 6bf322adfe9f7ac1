/* dry.c - DRY through llama.cpp's sampler (dry.h). llama.cpp's sampler keeps the tokens it was
 * shown; for each position it is reset and shown the history up to there, so one object serves
 * the target's position and every drafted one. */
#include "dry.h"

#include "engine_internal.h"
#include "../util/util.h"

#include <stdlib.h>
#include <string.h>

/* llama.cpp's default sequence breakers (common/common.h). */
static const char *const default_breakers[] = {"\n", ":", "\"", "*"};

struct specd_dry {
    struct llama_sampler *sampler;
    int32_t window;           /* tokens of history it looks at */
    int32_t n_vocab;
    llama_token_data *cand;   /* scratch: every token with its logit */
};

specd_dry *specd_dry_new_vocab(const struct llama_vocab *vocab, const specd_sampling_params *p, int32_t n_ctx,
                         int32_t n_vocab, bool *failed, char **error) {
    *failed = false;
    if (p->dry_multiplier == 0.0f || p->dry_penalty_last_n == 0) return NULL;
    specd_dry *d = calloc(1, sizeof *d);
    const char *const *breakers = p->dry_sequence_breakers ? p->dry_sequence_breakers : default_breakers;
    size_t n_breakers = p->dry_sequence_breakers ? (size_t)p->n_dry_sequence_breakers
                                                 : sizeof default_breakers / sizeof *default_breakers;
    if (d) {
        d->window = p->dry_penalty_last_n < 0 ? n_ctx : p->dry_penalty_last_n;
        d->n_vocab = n_vocab;
        d->cand = specd_alloc_array((size_t)n_vocab, sizeof *d->cand);
        d->sampler = llama_sampler_init_dry(vocab, p->dry_multiplier, p->dry_base, p->dry_allowed_length, d->window,
                                            (const char **)breakers, n_breakers);
    }
    if (!d || !d->cand || !d->sampler) {
        specd_dry_free(d);
        specd_set_error(error, "out of memory for the DRY sampler");
        *failed = true;
        return NULL;
    }
    return d;
}

specd_dry *specd_dry_new(const specd_engine *e, const specd_sampling_params *p, bool *failed, char **error) {
    return specd_dry_new_vocab(e->vocab, p, e->n_ctx, e->n_vocab, failed, error);
}

void specd_dry_free(specd_dry *d) {
    if (!d) return;
    if (d->sampler) llama_sampler_free(d->sampler);
    free(d->cand);
    free(d);
}

void specd_dry_apply(specd_dry *d, const specd_token *history, int32_t n_history, float *logits) {
    llama_sampler_reset(d->sampler);
    int32_t from = n_history > d->window ? n_history - d->window : 0;
    for (int32_t i = from; i < n_history; i++) llama_sampler_accept(d->sampler, history[i]);
    for (int32_t t = 0; t < d->n_vocab; t++) d->cand[t] = (llama_token_data){t, logits[t], 0.0f};
    llama_token_data_array arr = {d->cand, (size_t)d->n_vocab, -1, false};
    llama_sampler_apply(d->sampler, &arr);
    for (size_t i = 0; i < arr.size; i++) logits[arr.data[i].id] = arr.data[i].logit;
}
