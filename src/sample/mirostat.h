/* mirostat.h - llama.cpp's mirostat samplers (Basu et al. 2021): they steer the surprise
 * (-log2 p of the drawn token) towards a target tau by truncating the distribution, learning a
 * threshold mu from each drawn token. v1 estimates a top-k from a Zipf fit of the 100 most
 * probable tokens; v2 keeps the tokens whose surprise is at most mu.
 *
 * mu follows the tokens drawn: a drafted position's distribution uses the mu after the drafts
 * before it (specd_mirostat_next_mu along the path), so verification stays exact. */
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
} specd_mirostat;

/* version 0 allocates nothing. False when out of memory. */
bool specd_mirostat_init(specd_mirostat *m, int32_t version, float tau, float eta, int32_t n_vocab);
void specd_mirostat_free(specd_mirostat *m);

/* The truncated distribution for `logits` (bias and penalties already applied) at temperature
 * `temp` > 0; `sorted` lists all n_vocab tokens by logit, descending. Tokens with probability 0
 * are left out. False when out of memory. */
bool specd_mirostat_dist(specd_mirostat *m, const float *logits, const specd_token *sorted, float temp,
                         specd_dist *out);

/* mu after a token drawn with probability p from the distribution made with mu:
 * mu - eta (surprise - tau), surprise = -log2 p; p = 0 (not drawn from it): mu. */
float specd_mirostat_next_mu(const specd_mirostat *m, float mu, float p);

#endif
