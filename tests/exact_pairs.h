/* exact_pairs.h - the target's exact distribution of the first two generated tokens, computed
 * from its logits with the request's transforms: what the exact-sampling tests compare against.
 * Header-only, for the test programs; include after <cmocka.h> (assert_first_two_follow asserts). */
#ifndef SPECD_TEST_EXACT_PAIRS_H
#define SPECD_TEST_EXACT_PAIRS_H

#include "chi_square.h"
#include "engine/engine_internal.h"
#include "llama.h"
#include "sample/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct exact_pairs {
    int32_t n_vocab;
    double *prob; /* prob[a * n_vocab + b] = p(a) p(b | a); free with free() */
    specd_token eos; /* the model's end-of-sequence token */
} exact_pairs;

/* llama.cpp's grammar sampling written out, independently of the engine's filter code: llama's
 * grammar sampler marks every token of the vocabulary; c = the transforms over all tokens, g = the
 * transforms over allowed ones; dense[t] = c(t) [t allowed] + m g(t), m = c's refused mass.
 * Without a grammar state, dense = c. */
static inline bool exact_dist_dense(specd_sampler *s, const float *logits, const specd_token *hist, int32_t n,
                                    struct llama_sampler *grammar, double *dense) {
    int32_t nv = s->n_vocab;
    specd_dist c = {0}, g = {0};
    float *masked = calloc((size_t)nv, sizeof *masked);
    llama_token_data *cand = calloc((size_t)nv, sizeof *cand);
    bool ok = masked && cand && specd_sampler_dist(s, logits, hist, n, &c);
    for (int32_t t = 0; ok && t < nv; t++) {
        cand[t] = (llama_token_data){t, logits[t], 0.0f};
        dense[t] = 0.0;
    }
    if (ok && grammar) {
        llama_token_data_array arr = {cand, (size_t)nv, -1, false};
        llama_sampler_apply(grammar, &arr);
        for (int32_t t = 0; t < nv; t++) masked[t] = cand[t].logit == -INFINITY ? -INFINITY : logits[t];
        ok = specd_sampler_dist(s, masked, hist, n, &g);
    }
    double refused = 0.0;
    for (int32_t i = 0; ok && i < c.n; i++) {
        if (grammar && masked[c.ids[i]] == -INFINITY) refused += c.probs[i];
        else dense[c.ids[i]] += c.probs[i];
    }
    for (int32_t i = 0; ok && grammar && i < g.n; i++) dense[g.ids[i]] += refused * g.probs[i];
    specd_dist_free(&c);
    specd_dist_free(&g);
    free(masked);
    free(cand);
    return ok;
}

/* p(a) p(b | a) for every pair, from the model at `model_path` (one thread: tests run side by
 * side), under `grammar` (GBNF, or NULL). `prompt` has at most 254 tokens. Returns prob == NULL
 * on failure. */
static inline exact_pairs exact_first_two_grammar(const char *model_path, const specd_token *prompt, int32_t n,
                                                  const specd_sampling_params *sp, const char *grammar) {
    exact_pairs ex = {0, NULL, -1};
    struct llama_model *m = llama_model_load_from_file(model_path, llama_model_default_params());
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = cp.n_threads_batch = 1;
    struct llama_context *ctx = m ? llama_init_from_model(m, cp) : NULL;
    const struct llama_vocab *vocab = m ? llama_model_get_vocab(m) : NULL;
    struct llama_sampler *g1 = grammar && vocab ? llama_sampler_init_grammar(vocab, grammar, "root") : NULL;
    specd_sampler s;
    int32_t nv = m ? llama_vocab_n_tokens(vocab) : 0;
    specd_token hist[256];
    if (!ctx || n > 254 || (grammar && !g1) || !specd_sampler_init(&s, sp, nv, NULL, 0, NULL)) goto done;
    bool dry_failed = false; /* DRY needs the vocabulary */
    s.dry = specd_dry_new_vocab(vocab, &s.params, (int32_t)cp.n_ctx, nv, &dry_failed, NULL);
    if (dry_failed) {
        specd_sampler_free(&s);
        goto done;
    }
    float mu0 = specd_sampler_mu(&s); /* mirostat: the second token's mu follows the first's surprise */
    ex.n_vocab = nv;
    ex.eos = llama_vocab_eos(vocab);
    ex.prob = calloc((size_t)nv * nv, sizeof(double));
    double *p1 = calloc((size_t)nv, sizeof *p1), *p2 = calloc((size_t)nv, sizeof *p2);
    memcpy(hist, prompt, (size_t)n * sizeof *prompt);
    bool ok = ex.prob && p1 && p2 && llama_decode(ctx, llama_batch_get_one(hist, n)) == 0 &&
              exact_dist_dense(&s, llama_get_logits_ith(ctx, -1), hist, n, g1, p1);
    for (specd_token a = 0; ok && a < nv; a++) {
        if (p1[a] == 0.0) continue;
        /* A recurrent model cannot drop its last token: it decodes the prompt again instead. */
        bool dropped = llama_memory_seq_rm(llama_get_memory(ctx), 0, n, -1);
        if (!dropped) llama_memory_clear(llama_get_memory(ctx), true);
        hist[n] = a;
        struct llama_sampler *g2 = g1 ? llama_sampler_clone(g1) : NULL;
        if (g2) llama_sampler_accept(g2, a);
        if (specd_sampler_uses_mirostat(&s)) specd_sampler_set_mu(&s, specd_mirostat_next_mu(&s.mirostat, mu0, (float)p1[a]));
        ok = llama_decode(ctx, dropped ? llama_batch_get_one(hist + n, 1) : llama_batch_get_one(hist, n + 1)) == 0 &&
             exact_dist_dense(&s, llama_get_logits_ith(ctx, -1), hist, n + 1, g2, p2);
        if (g2) llama_sampler_free(g2);
        for (specd_token b = 0; ok && b < nv; b++) ex.prob[(size_t)a * nv + b] = p1[a] * p2[b];
    }
    if (!ok) {
        free(ex.prob);
        ex.prob = NULL;
    }
    free(p1);
    free(p2);
    specd_sampler_free(&s);
done:
    if (g1) llama_sampler_free(g1);
    if (ctx) llama_free(ctx);
    if (m) llama_model_free(m);
    return ex;
}

static inline exact_pairs exact_first_two(const char *model_path, const specd_token *prompt, int32_t n,
                                          const specd_sampling_params *sp) {
    return exact_first_two_grammar(model_path, prompt, n, sp, NULL);
}

/* The pairs as ignore_eos samples them: `token` (the end of sequence) forbidden at both positions,
 * p(a) and p(b | a) each renormalized over the rest (a -INFINITY bias does exactly that). */
static inline void exact_pairs_forbid(exact_pairs *ex, specd_token token) {
    int32_t nv = ex->n_vocab;
    double first_total = 0.0;
    for (specd_token a = 0; a < nv; a++) {
        double *row = ex->prob + (size_t)a * nv, p_a = 0.0;
        for (specd_token b = 0; b < nv; b++) p_a += row[b];
        double rest = p_a - row[token]; /* p(a) (1 - p(token | a)) */
        for (specd_token b = 0; b < nv; b++)
            row[b] = a == token || b == token || rest <= 0.0 ? 0.0 : p_a * row[b] / rest;
        first_total += a == token ? 0.0 : p_a;
    }
    for (size_t i = 0; i < (size_t)nv * nv; i++) ex->prob[i] /= first_total;
}

/* Generates the first two tokens n_samples times with `g` (seeds 1, 2, ...) and counts each pair
 * (n_vocab x n_vocab counts, calloc'd: free them), with the drafts verified and accepted. Without
 * ignore_eos a generation may end after one token; its second token then counts as `eos`. With
 * g.sampling.reproducible, each sample's explicit seed makes it a coupled draw (the Gumbel-max
 * path); without, rejection sampling. */
static inline int64_t *sampled_first_two_counts(specd_engine *e, const specd_token *prompt, int32_t n,
                                        specd_generation_params g, int32_t n_vocab, specd_token eos,
                                        int n_samples, int64_t *drafted, int64_t *accepted) {
    int64_t *counts = calloc((size_t)n_vocab * n_vocab, sizeof *counts);
    assert_non_null(counts);
    *drafted = *accepted = 0;
    g.n_predict = 2;
    for (int i = 0; i < n_samples; i++) {
        g.sampling.seed = (uint64_t)i + 1;
        specd_result r;
        assert_int_equal(specd_generate(e, prompt, n, &g, &r, NULL), SPECD_OK);
        bool ended = !g.ignore_eos && r.stop_reason == SPECD_STOP_EOG;
        assert_int_equal(r.n_tokens, ended ? 1 : 2);
        counts[(size_t)r.tokens[0] * n_vocab + (ended ? eos : r.tokens[1])]++;
        *drafted += r.stats.n_drafted;
        *accepted += r.stats.n_accepted;
        specd_result_clear(&r);
    }
    return counts;
}

/* The exact-sampling check: the counts of sampled_first_two_counts follow ex->prob (chi-square), and
 * drafts were both accepted and rejected, so both verification outcomes were exercised. Callers say
 * which verification (coupled or rejection sampling) they test. */
static inline void assert_first_two_follow(specd_engine *e, const specd_token *prompt, int32_t n,
                                           specd_generation_params g, const exact_pairs *ex, int n_samples,
                                           const char *label) {
    int64_t drafted = 0, accepted = 0;
    int64_t *counts = sampled_first_two_counts(e, prompt, n, g, ex->n_vocab, ex->eos, n_samples, &drafted, &accepted);
    chi_square_result c = chi_square_test(ex->prob, counts, ex->n_vocab * ex->n_vocab, n_samples);
    print_message("%s: chi2 %.1f df %d z %.2f, acceptance %.3f\n", label, c.statistic, c.df, c.z,
                  (double)accepted / (double)drafted);
    assert_true(accepted > 0 && accepted < drafted);
    assert_true(c.df >= 10);
    assert_true(c.z < CHI_SQUARE_MAX_Z);
    free(counts);
}

/* The same check for speculation with fixed chains of `draft_len` drafts from the draft model
 * (adaptive lengths off, so the draws do not depend on timings): `text` is tokenized with `e`'s
 * vocabulary, and `target_path` gives the exact distribution under `sp`. */
static inline void assert_fixed_drafts_are_exact(specd_engine *e, const char *target_path, const char *text,
                                                 specd_sampling_params sp, int32_t draft_len, int n_samples,
                                                 const char *label) {
    specd_token *prompt = NULL;
    int32_t n = 0;
    assert_int_equal(specd_tokenize(e, text, true, &prompt, &n, NULL), SPECD_OK);
    exact_pairs ex = exact_first_two(target_path, prompt, n, &sp);
    assert_non_null(ex.prob);
    specd_generation_params g = specd_generation_default_params();
    g.sampling = sp; /* sp.reproducible picks the coupled draws or rejection sampling */
    g.ignore_eos = true;
    g.speculative.type = SPECD_SPEC_DRAFT;
    g.speculative.draft_max = draft_len;
    g.speculative.draft_min = draft_len;
    g.speculative.adaptive = false;
    assert_first_two_follow(e, prompt, n, g, &ex, n_samples, label);
    free(ex.prob);
    specd_free(prompt);
}

#endif
