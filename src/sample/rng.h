/* rng.h - the generator behind every random choice of a generation (xoshiro256**, seeded with
 * splitmix64), so a seed reproduces a run exactly on every platform. */
#ifndef SPECD_RNG_H
#define SPECD_RNG_H

#include <stdint.h>

typedef struct specd_rng {
    uint64_t s[4];
} specd_rng;

void specd_rng_seed(specd_rng *rng, uint64_t seed);
uint64_t specd_rng_next(specd_rng *rng);
/* Uniform double in [0, 1) with 53 random bits. */
double specd_rng_uniform(specd_rng *rng);

#endif
