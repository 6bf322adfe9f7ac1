/* dist.c - sparse distributions: storage, lookup, argmax and sampling. */
#include "dist.h"

#include "../util/util.h"

#include <stdlib.h>
#include <string.h>

bool specd_dist_reserve(specd_dist *dist, int32_t cap) {
    if (dist->cap >= cap) return true;
    specd_token *ids = specd_grow_array(dist->ids, (size_t)cap, sizeof *ids);
    if (!ids) return false;
    dist->ids = ids;
    float *probs = specd_grow_array(dist->probs, (size_t)cap, sizeof *probs);
    if (!probs) return false;
    dist->probs = probs;
    dist->cap = cap;
    return true;
}

void specd_dist_free(specd_dist *dist) {
    free(dist->ids);
    free(dist->probs);
    memset(dist, 0, sizeof *dist);
}

bool specd_dist_copy(specd_dist *dst, const specd_dist *src) {
    if (!specd_dist_reserve(dst, src->n > 0 ? src->n : 1)) return false;
    memcpy(dst->ids, src->ids, (size_t)src->n * sizeof *src->ids);
    memcpy(dst->probs, src->probs, (size_t)src->n * sizeof *src->probs);
    dst->n = src->n;
    return true;
}

bool specd_dist_set_one_hot(specd_dist *dist, specd_token token) {
    if (!specd_dist_reserve(dist, 1)) return false;
    dist->ids[0] = token;
    dist->probs[0] = 1.0f;
    dist->n = 1;
    return true;
}

float specd_dist_prob(const specd_dist *dist, specd_token token) {
    for (int32_t i = 0; i < dist->n; i++)
        if (dist->ids[i] == token) return dist->probs[i];
    return 0.0f;
}

specd_token specd_dist_argmax(const specd_dist *dist) {
    int32_t best = 0;
    for (int32_t i = 1; i < dist->n; i++) {
        if (dist->probs[i] > dist->probs[best] ||
            (dist->probs[i] == dist->probs[best] && dist->ids[i] < dist->ids[best]))
            best = i;
    }
    return dist->n > 0 ? dist->ids[best] : -1;
}

specd_token specd_dist_sample(const specd_dist *dist, specd_rng *rng) {
    double total = 0.0;
    for (int32_t i = 0; i < dist->n; i++) total += dist->probs[i];
    double u = specd_rng_uniform(rng) * total;
    double acc = 0.0;
    for (int32_t i = 0; i < dist->n; i++) {
        acc += dist->probs[i];
        if (u < acc) return dist->ids[i];
    }
    /* Rounding left u at the very top: the last token with mass is the right answer. */
    for (int32_t i = dist->n - 1; i >= 0; i--)
        if (dist->probs[i] > 0.0f) return dist->ids[i];
    return -1;
}
