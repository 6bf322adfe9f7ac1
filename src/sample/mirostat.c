/* mirostat.c - mirostat v1 and v2 (see mirostat.h), with llama.cpp's formulas so the same
 * settings truncate alike; the draw itself uses the generation's generator. */
#include "mirostat.h"
#include "softmax.h"

#include "../util/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* v1 fits Zipf's exponent on this many of the most probable tokens, as llama.cpp's m = 100. */
#define MIROSTAT_M 100

bool specd_mirostat_init(specd_mirostat *m, int32_t version, float tau, float eta, int32_t n_vocab) {
    memset(m, 0, sizeof *m);
    m->version = version;
    m->tau = tau;
    m->eta = eta;
    m->mu = 2.0f * tau;
    m->n_vocab = n_vocab;
    if (version == 0) return true;
    m->probs = specd_alloc_array((size_t)n_vocab, sizeof *m->probs);
    return m->probs != NULL;
}

void specd_mirostat_free(specd_mirostat *m) {
    free(m->probs);
    memset(m, 0, sizeof *m);
}

/* Softmax of the sorted logits at `temp` into m->probs; returns how many are non-zero (a
 * prefix, as they are sorted). */
static int32_t sorted_softmax(specd_mirostat *m, const float *logits, const specd_token *sorted, float temp) {
    specd_softmax_ids(logits, sorted, m->n_vocab, temp, m->probs);
    int32_t nonzero = 0;
    for (int32_t i = 0; i < m->n_vocab; i++)
        if (m->probs[i] > 0.0f) nonzero = i + 1;
    return nonzero;
}

/* v1: k from Zipf's exponent s estimated on the top tokens, k = (e 2^mu / (1 - N^-e))^(1/s)
 * with e = s - 1. A degenerate fit (one candidate, s = 1) keeps the top token. The fit skips
 * tokens of probability 0 (forbidden by bias): llama.cpp would take log(p / 0) there and collapse
 * to k = 1, which only differs for vocabularies so small that such tokens reach the top 100. */
static int32_t mirostat_v1_k(const specd_mirostat *m, int32_t n) {
    float sum_ti_bi = 0.0f, sum_ti_sq = 0.0f;
    for (int32_t i = 0; i < MIROSTAT_M - 1 && i < n - 1; i++) {
        float t_i = logf((float)(i + 2) / (float)(i + 1));
        float b_i = logf(m->probs[i] / m->probs[i + 1]);
        sum_ti_bi += t_i * b_i;
        sum_ti_sq += t_i * t_i;
    }
    if (sum_ti_sq == 0.0f) return 1;
    float s_hat = sum_ti_bi / sum_ti_sq, epsilon_hat = s_hat - 1.0f;
    float k = powf((epsilon_hat * powf(2.0f, m->mu)) / (1.0f - powf((float)m->n_vocab, -epsilon_hat)), 1.0f / s_hat);
    if (!(k >= 1.0f)) return 1; /* also NaN */
    return k >= (float)n ? n : (int32_t)k;
}

/* v2: the tokens whose surprise is at most mu (at least the top one). */
static int32_t mirostat_v2_k(const specd_mirostat *m, int32_t n) {
    int32_t k = 0;
    while (k < n && -log2f(m->probs[k]) <= m->mu) k++;
    return k > 0 ? k : 1;
}

bool specd_mirostat_dist(specd_mirostat *m, const float *logits, const specd_token *sorted, float temp,
                         specd_dist *out) {
    if (logits[sorted[0]] == -INFINITY) /* every token forbidden by bias: no distribution to truncate */
        return specd_dist_set_one_hot(out, sorted[0]);
    int32_t n = sorted_softmax(m, logits, sorted, temp);
    int32_t k = m->version == 1 ? mirostat_v1_k(m, n) : mirostat_v2_k(m, n);
    if (!specd_dist_reserve(out, k)) return false;
    double kept = 0.0;
    for (int32_t i = 0; i < k; i++) kept += m->probs[i];
    for (int32_t i = 0; i < k; i++) {
        out->ids[i] = sorted[i];
        out->probs[i] = (float)(m->probs[i] / kept);
    }
    out->n = k;
    return true;
}

float specd_mirostat_next_mu(const specd_mirostat *m, float mu, float p) {
    if (m->version == 0 || p <= 0.0f) return mu; /* not drawn from it (greedy): nothing to learn */
    return mu - m->eta * (-log2f(p) - m->tau);
}
