/* rng.c - xoshiro256** (Blackman and Vigna), seeded through splitmix64. */
#include "rng.h"

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void specd_rng_seed(specd_rng *rng, uint64_t seed) {
    uint64_t state = seed;
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&state);
}

uint64_t specd_rng_next(specd_rng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double specd_rng_uniform(specd_rng *rng) {
    return (double)(specd_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
}
