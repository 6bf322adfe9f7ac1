/* coupled.c - see coupled.h. */
#include "coupled.h"

#include <math.h>

/* splitmix64's finaliser: a well-mixed 64-bit value from any input. */
static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* G(seed, index, token): -log(-log u), u uniform in (0, 1) from 53 bits of the keyed hash. */
static double gumbel(uint64_t seed, int64_t index, specd_token token) {
    uint64_t h = mix64(mix64(mix64(seed) ^ (uint64_t)index) ^ (uint64_t)(uint32_t)token);
    double u = ((double)(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    return -log(-log(u));
}

specd_token specd_coupled_draw(const specd_dist *dist, uint64_t seed, int64_t index) {
    specd_token best = -1;
    double best_key = -INFINITY;
    for (int32_t i = 0; i < dist->n; i++) {
        if (!(dist->probs[i] > 0.0f)) continue;
        double key = log((double)dist->probs[i]) + gumbel(seed, index, dist->ids[i]);
        if (key > best_key) best_key = key, best = dist->ids[i];
    }
    return best;
}

int32_t specd_coupled_top_k(const specd_dist *dist, uint64_t seed, int64_t index, int32_t k, specd_token *out,
                            float *probs) {
    double keys[64];
    if (k > (int32_t)(sizeof keys / sizeof *keys)) k = (int32_t)(sizeof keys / sizeof *keys);
    int32_t n = 0;
    for (int32_t i = 0; i < dist->n; i++) {
        if (!(dist->probs[i] > 0.0f)) continue;
        double key = log((double)dist->probs[i]) + gumbel(seed, index, dist->ids[i]);
        /* insertion below the keys at least as high: ties keep the earlier token, as the draw does */
        int32_t at = n < k ? n : k;
        while (at > 0 && key > keys[at - 1]) at--;
        if (at >= k) continue;
        int32_t last = n < k ? n : k - 1;
        for (int32_t j = last; j > at; j--) keys[j] = keys[j - 1], out[j] = out[j - 1], probs[j] = probs[j - 1];
        keys[at] = key, out[at] = dist->ids[i], probs[at] = dist->probs[i];
        if (n < k) n++;
    }
    return n;
}
