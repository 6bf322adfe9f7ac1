/* probs.c - top-n probability lists (see probs.h). */
#include "probs.h"

#include "../sample/softmax.h"
#include "../sample/top_k.h"

#include "../util/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void specd_top_probs_logits(const float *logits, int32_t n_vocab, int32_t n, specd_token_prob *out,
                            specd_token *heap) {
    float max;
    double sum = specd_softmax_denominator(logits, n_vocab, &max);
    specd_top_k_heap(logits, n_vocab, n, heap);
    /* Popping the weakest first fills the list from its end. */
    for (int32_t k = n; k > 0; k--) {
        specd_token t = specd_top_k_pop(heap, k, logits);
        out[k - 1] = (specd_token_prob){t, (float)(exp((double)logits[t] - max) / sum)};
    }
}

static int compare_prob_desc(const void *a, const void *b) {
    const specd_token_prob *x = a, *y = b;
    if (x->prob != y->prob) return x->prob < y->prob ? 1 : -1;
    return (x->token > y->token) - (x->token < y->token);
}

void specd_top_probs_dist(const specd_dist *dist, int32_t n, specd_token_prob *out, specd_token_prob *scratch) {
    int32_t nonzero = 0;
    for (int32_t i = 0; i < dist->n; i++)
        if (dist->probs[i] > 0.0f) scratch[nonzero++] = (specd_token_prob){dist->ids[i], dist->probs[i]};
    qsort(scratch, (size_t)nonzero, sizeof *scratch, compare_prob_desc);
    int32_t kept = nonzero < n ? nonzero : n;
    memcpy(out, scratch, (size_t)kept * sizeof *out);
    for (int32_t i = kept; i < n; i++) out[i] = (specd_token_prob){-1, 0.0f};
}

bool specd_probs_init(specd_probs *p, int32_t n_probs, bool post_sampling, int32_t n_vocab, int32_t max_step) {
    memset(p, 0, sizeof *p);
    if (n_probs <= 0) return true;
    p->n = n_probs < n_vocab ? n_probs : n_vocab;
    p->post_sampling = post_sampling;
    p->step = specd_alloc_array((size_t)p->n * (size_t)max_step, sizeof *p->step);
    p->heap = specd_alloc_array((size_t)p->n, sizeof *p->heap);
    p->pairs = post_sampling ? specd_alloc_array((size_t)n_vocab, sizeof *p->pairs) : NULL;
    return p->step && p->heap && (!post_sampling || p->pairs);
}

void specd_probs_free(specd_probs *p) {
    free(p->step);
    free(p->heap);
    free(p->pairs);
    specd_dist_free(&p->dist);
    memset(p, 0, sizeof *p);
}

bool specd_probs_fill(specd_probs *p, int32_t j, const float *logits, int32_t n_vocab, specd_sampler *sampler,
                      const specd_token *history, int32_t n_history, const specd_token_filter *filter) {
    specd_token_prob *out = p->step + (size_t)j * (size_t)p->n;
    if (!p->post_sampling) {
        specd_top_probs_logits(logits, n_vocab, p->n, out, p->heap);
        return true;
    }
    if (!specd_sampler_dist_filtered(sampler, logits, history, n_history, filter, &p->dist)) return false;
    specd_top_probs_dist(&p->dist, p->n, out, p->pairs);
    return true;
}
