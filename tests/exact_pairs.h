/* exact_pairs.h - the target's exact distribution of the first two generated tokens, computed
 * from its logits with the request's transforms: what the exact-sampling tests compare against.
 * Header-only, for the test programs. */
#ifndef SPECD_TEST_EXACT_PAIRS_H
#define SPECD_TEST_EXACT_PAIRS_H

#include "llama.h"
#include "sample/sampler.h"

#include <stdlib.h>
#include <string.h>

typedef struct exact_pairs {
    int32_t n_vocab;
    double *prob; /* prob[a * n_vocab + b] = p(a) p(b | a); free with free() */
} exact_pairs;

/* p(a) p(b | a) for every pair, from the model at `model_path` (one thread: tests run side by
 * side). `prompt` has at most 254 tokens. Returns prob == NULL on failure. */
static inline exact_pairs exact_first_two(const char *model_path, const specd_token *prompt, int32_t n,
                                          const specd_sampling_params *sp) {
    exact_pairs ex = {0, NULL};
    struct llama_model *m = llama_model_load_from_file(model_path, llama_model_default_params());
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = cp.n_threads_batch = 1;
    struct llama_context *ctx = m ? llama_init_from_model(m, cp) : NULL;
    specd_sampler s;
    int32_t nv = m ? llama_vocab_n_tokens(llama_model_get_vocab(m)) : 0;
    specd_token hist[256];
    if (!ctx || n > 254 || !specd_sampler_init(&s, sp, nv, NULL, 0, NULL)) goto done;
    ex.n_vocab = nv;
    ex.prob = calloc((size_t)nv * nv, sizeof(double));
    specd_dist p1 = {0}, p2 = {0};
    memcpy(hist, prompt, (size_t)n * sizeof *prompt);
    bool ok = ex.prob && llama_decode(ctx, llama_batch_get_one(hist, n)) == 0 &&
              specd_sampler_dist(&s, llama_get_logits_ith(ctx, -1), hist, n, &p1);
    for (int32_t i = 0; ok && i < p1.n; i++) {
        llama_memory_seq_rm(llama_get_memory(ctx), 0, n, -1);
        hist[n] = p1.ids[i];
        ok = llama_decode(ctx, llama_batch_get_one(hist + n, 1)) == 0 &&
             specd_sampler_dist(&s, llama_get_logits_ith(ctx, -1), hist, n + 1, &p2);
        for (int32_t j = 0; ok && j < p2.n; j++) ex.prob[(size_t)p1.ids[i] * nv + p2.ids[j]] = (double)p1.probs[i] * p2.probs[j];
    }
    if (!ok) {
        free(ex.prob);
        ex.prob = NULL;
    }
    specd_dist_free(&p1);
    specd_dist_free(&p2);
    specd_sampler_free(&s);
done:
    if (ctx) llama_free(ctx);
    if (m) llama_model_free(m);
    return ex;
}

#endif
