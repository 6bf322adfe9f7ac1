/* sibling_draws.c - drawing a node's children without replacement (see sibling_draws.h). */
#include "sibling_draws.h"

#include <string.h>

float specd_dist_remove(specd_dist *dist, specd_token token) {
    int32_t at = -1;
    for (int32_t i = 0; i < dist->n && at < 0; i++)
        if (dist->ids[i] == token) at = i;
    if (at < 0) return 0.0f;
    float removed = dist->probs[at];
    dist->n--;
    dist->ids[at] = dist->ids[dist->n];
    dist->probs[at] = dist->probs[dist->n];
    double total = 0.0;
    for (int32_t i = 0; i < dist->n; i++) total += dist->probs[i];
    if (total > 0.0)
        for (int32_t i = 0; i < dist->n; i++) dist->probs[i] = (float)(dist->probs[i] / total);
    else dist->n = 0; /* only zero-probability tokens were left: nothing can be drawn */
    return removed;
}

bool specd_sibling_draws_begin(specd_sibling_draws *d, const specd_dist *q) {
    d->mass_left = 1.0;
    return specd_dist_copy(&d->rest, q);
}

bool specd_sibling_draws_left(const specd_sibling_draws *d) { return d->rest.n > 0 && d->mass_left > 0.0; }

bool specd_sibling_draw(specd_sibling_draws *d, specd_rng *rng, specd_token *token, specd_dist *q_i) {
    if (!specd_sibling_draws_left(d) || !specd_dist_copy(q_i, &d->rest)) return false;
    *token = specd_dist_sample(&d->rest, rng);
    float share = specd_dist_remove(&d->rest, *token); /* of what was left */
    d->mass_left *= 1.0 - share;
    return true;
}

void specd_sibling_draws_free(specd_sibling_draws *d) {
    specd_dist_free(&d->rest);
    memset(d, 0, sizeof *d);
}
