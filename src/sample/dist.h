/* dist.h - a probability distribution over the vocabulary, kept sparse: only tokens with
 * non-zero probability, in no particular order unless `sorted`. This is what verification compares:
 * p (the target's) and q (the draft's), each after the request's sampling transforms. */
#ifndef SPECD_DIST_H
#define SPECD_DIST_H

#include "specd.h"
#include "rng.h"

#include <stdbool.h>

typedef struct specd_dist {
    int32_t n;          /* tokens with non-zero probability */
    int32_t cap;
    specd_token *ids;
    float *probs;       /* sum to 1 */
} specd_dist;

bool specd_dist_reserve(specd_dist *dist, int32_t cap);
void specd_dist_free(specd_dist *dist);
bool specd_dist_copy(specd_dist *dst, const specd_dist *src);
/* One-hot distribution on `token`. */
bool specd_dist_set_one_hot(specd_dist *dist, specd_token token);

/* Probability of `token` (0 when absent). Linear in the support size. */
float specd_dist_prob(const specd_dist *dist, specd_token token);
/* The most probable token (lowest id on ties, so the choice is deterministic). */
specd_token specd_dist_argmax(const specd_dist *dist);
/* Draws a token with probability probs[i] using one uniform number. */
specd_token specd_dist_sample(const specd_dist *dist, specd_rng *rng);

#endif
