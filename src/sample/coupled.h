/* coupled.h - draws that depend only on (seed, output index, distribution): the Gumbel-max trick
 * with noise keyed by the seed, the index of the token in the request's output and the token id.
 * The token drawn at index i is argmax over x with p(x) > 0 of log p(x) + G(seed, i, x), G a
 * standard Gumbel variable: an exact draw from p (the Gumbel-max theorem), independent between
 * indexes, and the same whatever else happened before it. A seeded request verified this way
 * (the greedy walk down the draft tree with this draw in place of the argmax) gives the same text
 * with any drafts, draft lengths, trees or other slots in the pass; a draft model that proposes
 * its own coupled draw from q (same noise) agrees with it often when q is close to p. */
#ifndef SPECD_SAMPLE_COUPLED_H
#define SPECD_SAMPLE_COUPLED_H

#include "dist.h"

#include <stdint.h>

/* The coupled draw from `dist` at output index `index` under `seed`; -1 for an empty dist. */
specd_token specd_coupled_draw(const specd_dist *dist, uint64_t seed, int64_t index);

/* The k tokens of `dist` with the highest keys log p(x) + G(seed, index, x), highest first, into
 * out (and their probabilities into probs); returns how many (fewer when dist has fewer tokens of
 * p > 0). out[0] is specd_coupled_draw's token. A seeded draft tree's children: the target's
 * coupled draw, under the same noise, is often the draft's best key and otherwise often one of the
 * next ones (Gumbel-top-k); verification compares tokens only, so any choice of them is exact. */
int32_t specd_coupled_top_k(const specd_dist *dist, uint64_t seed, int64_t index, int32_t k, specd_token *out,
                            float *probs);

#endif
