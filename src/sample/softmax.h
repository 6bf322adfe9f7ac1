/* softmax.h - softmax over logits, shared by the sampler, mirostat, the draft model's confidence
 * and the n_probs lists. Both subtract the largest logit first, so exp never overflows. */
#ifndef SPECD_SOFTMAX_H
#define SPECD_SOFTMAX_H

#include "specd.h"

/* probs[i] = softmax of logits[ids[i]] / temp over the n listed tokens (they sum to 1). */
void specd_softmax_ids(const float *logits, const specd_token *ids, int32_t n, float temp, float *probs);

/* The softmax of a whole logit vector at temperature 1 is exp(logits[t] - *max) / the result:
 * sets *max to the largest logit and returns the sum of exp(logits[t] - *max) over all n. */
double specd_softmax_denominator(const float *logits, int32_t n, float *max);

#endif
