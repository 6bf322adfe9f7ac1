/* probs.h - the top-n probability lists of specd_generation_params.n_probs: from the target's raw
 * logits (the default), or from the request's processed distribution (post_sampling_probs). */
#ifndef SPECD_PROBS_H
#define SPECD_PROBS_H

#include "../sample/dist.h"
#include "../sample/sampler.h"
#include "specd.h"

/* The n most probable tokens of softmax(logits) (temperature 1) over the whole vocabulary, into
 * out[0..n), by probability descending (lower id first on ties). n <= n_vocab; `heap` holds n
 * tokens. Cost: one pass over the vocabulary with a heap of n, no sort of the vocabulary. */
void specd_top_probs_logits(const float *logits, int32_t n_vocab, int32_t n, specd_token_prob *out,
                            specd_token *heap);

/* The n most probable tokens of `dist` with a non-zero probability, in the same order; entries
 * past them are {-1, 0}. `scratch` holds dist->n entries. */
void specd_top_probs_dist(const specd_dist *dist, int32_t n, specd_token_prob *out, specd_token_prob *scratch);

/* One generation's lists: those of the step being emitted, and the scratch to compute them. */
typedef struct specd_probs {
    int32_t n;              /* entries per token; 0 = off */
    bool post_sampling;
    specd_token_prob *step; /* n entries per token of the current step */
    specd_token *heap;      /* n tokens */
    specd_token_prob *pairs; /* n_vocab entries, for post_sampling */
    specd_dist dist;
} specd_probs;

/* n_probs <= 0 leaves it off (nothing allocated); `max_step` is the most tokens one step emits.
 * False when out of memory. */
bool specd_probs_init(specd_probs *p, int32_t n_probs, bool post_sampling, int32_t n_vocab, int32_t max_step);
void specd_probs_free(specd_probs *p);

/* The list of the step's token j, from the target's logits at its position (and, with
 * post_sampling, the request's sampler over `history` under `filter`, the grammar at that position,
 * or NULL). False when out of memory. */
bool specd_probs_fill(specd_probs *p, int32_t j, const float *logits, int32_t n_vocab, specd_sampler *sampler,
                      const specd_token *history, int32_t n_history, const specd_token_filter *filter);

#endif
