/* mirostat.h - llama.cpp's mirostat samplers (Basu et al. 2021): they steer the surprise
 * (-log2 p of the drawn token) towards a target tau by truncating the distribution, learning a
 * threshold mu from each drawn token. v1 estimates a top-k from a Zipf fit of the 100 most
 * probable tokens; v2 keeps the tokens whose surprise is at most mu.
 *
 * Because mu follows the tokens actually drawn, a drafter could not know the distribution the
 * target will sample from: mirostat runs without speculation (see specd.h). */
#ifndef SPECD_MIROSTAT_H
#define SPECD_MIROSTAT_H

#include "dist.h"
#include "specd.h"

typedef struct specd_mirostat {
    int32_t version;  /* 0: off, 1, 2 */
    float tau, eta;
    float mu;         /* starts at 2 tau */
    int32_t n_vocab;
    float *probs;     /* scratch: softmax of the sorted candidates */
    specd_dist last;  /* the distribution last handed out: the surprise of the drawn token */
} specd_mirostat;

/* version 0 allocates nothing. False when out of memory. */
bool specd_mirostat_init(specd_mirostat *m, int32_t version, float tau, float eta, int32_t n_vocab);
void specd_mirostat_free(specd_mirostat *m);

/* The truncated distribution for `logits` (bias and penalties already applied) at temperature
 * `temp` > 0; `sorted` lists all n_vocab tokens by logit, descending. Tokens with probability 0
 * are left out. False when out of memory. */
bool specd_mirostat_dist(specd_mirostat *m, const float *logits, const specd_token *sorted, float temp,
                         specd_dist *out);

/* Learns from the token drawn from the last distribution: mu -= eta (surprise - tau). */
void specd_mirostat_observe(specd_mirostat *m, specd_token token);

#endif
