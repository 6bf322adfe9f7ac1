/* test_llama_samplers.c - llama-server's other samplers (DRY, XTC, top-n-sigma, dynatemp,
 * min_keep) and mirostat: each distribution equals llama.cpp's own samplers', and speculation
 * stays exact with each (chi-square of the first two sampled tokens against the target's exact
 * distribution, on the tiny models). Every chi-square check has its negative control: the same
 * samples against the distribution without the sampler's effect (for DRY and mirostat: without
 * its per-position state) are rejected, so the check can tell.
 *
 *   test_llama_samplers MODELS_DIR */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "chi_square.h"
#include "engine_helpers.h"
#include "exact_pairs.h"
#include "llama.h"
#include "sample/sampler.h"
#include "specd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NV 64

static char target_path[1024], draft_path[1024];
static specd_engine *engine;

SPECD_TEST_ENGINE_FIXTURE(engine, target_path, draft_path)

/* ---- the distributions are llama.cpp's -------------------------------------------------------- */

static void random_logits(float *logits, uint64_t seed) {
    specd_rng rng;
    specd_rng_seed(&rng, seed);
    for (int i = 0; i < NV; i++) logits[i] = (float)(6.0 * specd_rng_uniform(&rng) - 3.0);
}

/* llama.cpp's chain in its default order over `logits`, as dense probabilities. */
static void llama_chain_dense(const specd_sampling_params *p, const float *logits, double xtc_probability,
                              double *want) {
    struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    size_t keep = (size_t)p->min_keep;
    llama_sampler_chain_add(chain, llama_sampler_init_top_n_sigma(p->top_n_sigma));
    llama_sampler_chain_add(chain, llama_sampler_init_top_k(p->top_k));
    llama_sampler_chain_add(chain, llama_sampler_init_typical(p->typical_p, keep));
    llama_sampler_chain_add(chain, llama_sampler_init_top_p(p->top_p, keep));
    llama_sampler_chain_add(chain, llama_sampler_init_min_p(p->min_p, keep));
    llama_sampler_chain_add(chain, llama_sampler_init_xtc((float)xtc_probability, p->xtc_threshold, keep, 1));
    llama_sampler_chain_add(chain, llama_sampler_init_temp_ext(p->temperature, p->dynatemp_range, p->dynatemp_exponent));
    llama_token_data data[NV];
    for (int i = 0; i < NV; i++) data[i] = (llama_token_data){i, logits[i], 0.0f};
    llama_token_data_array arr = {data, NV, -1, false};
    llama_sampler_apply(chain, &arr);
    llama_sampler_free(chain);
    double z = 0, max = -INFINITY;
    for (int t = 0; t < NV; t++) want[t] = 0.0;
    for (size_t i = 0; i < arr.size; i++) max = fmax(max, arr.data[i].logit);
    for (size_t i = 0; i < arr.size; i++) z += arr.data[i].logit == -INFINITY ? 0.0 : exp(arr.data[i].logit - max);
    for (size_t i = 0; i < arr.size; i++)
        if (arr.data[i].logit != -INFINITY) want[arr.data[i].id] = exp(arr.data[i].logit - max) / z;
}

static void assert_dense_equal(const double *got, const double *want, const char *what) {
    for (int t = 0; t < NV; t++)
        if (fabs(got[t] - want[t]) > 2e-5) fail_msg("%s: token %d got %g, llama.cpp %g", what, t, got[t], want[t]);
}

static void our_dense(const specd_sampling_params *p, const float *logits, double *got) {
    specd_sampler s;
    assert_true(specd_sampler_init(&s, p, NV, NULL, 0, NULL));
    specd_dist d = {0};
    assert_true(specd_sampler_dist(&s, logits, NULL, 0, &d));
    for (int t = 0; t < NV; t++) got[t] = 0.0;
    for (int i = 0; i < d.n; i++) got[d.ids[i]] = d.probs[i];
    specd_dist_free(&d);
    specd_sampler_free(&s);
}

/* top-n-sigma, min_keep, dynatemp and XTC (taken always: probability 1) as llama.cpp computes them,
 * and XTC at another probability as the mixture of llama.cpp's two outcomes. */
static void test_transforms_equal_llama_cpp_samplers(void **state) {
    (void)state;
    uint64_t seed = 900;
    for (int sigma = 0; sigma < 2; sigma++)
        for (int keep = 0; keep < 2; keep++)
            for (int dyn = 0; dyn < 2; dyn++)
                for (int xtc = 0; xtc < 3; xtc++) {
                    specd_sampling_params p = specd_generation_default_params().sampling;
                    p.top_k = 0;
                    p.top_p = 0.9f;
                    p.min_p = 0.1f;
                    p.temperature = 0.9f;
                    p.top_n_sigma = sigma ? 1.5f : -1.0f;
                    p.min_keep = keep ? 12 : 0;
                    p.dynatemp_range = dyn ? 0.6f : 0.0f;
                    p.dynatemp_exponent = 1.5f;
                    p.xtc_probability = xtc == 0 ? 0.0f : xtc == 1 ? 1.0f : 0.3f;
                    p.xtc_threshold = 0.05f;
                    float logits[NV];
                    random_logits(logits, seed++);
                    double got[NV], want[NV], taken[NV];
                    our_dense(&p, logits, got);
                    llama_chain_dense(&p, logits, xtc == 0 ? 0.0 : 1.0, want);
                    if (xtc == 2) { /* the mixture: (1 - P) without XTC + P with it */
                        llama_chain_dense(&p, logits, 1.0, taken);
                        llama_chain_dense(&p, logits, 0.0, want);
                        for (int t = 0; t < NV; t++) want[t] = (1.0 - p.xtc_probability) * want[t] + p.xtc_probability * taken[t];
                    }
                    char what[128];
                    snprintf(what, sizeof what, "top_n_sigma %g min_keep %d dynatemp %g xtc %g", (double)p.top_n_sigma,
                             p.min_keep, (double)p.dynatemp_range, (double)p.xtc_probability);
                    assert_dense_equal(got, want, what);
                }
}

/* DRY: the same logits as llama.cpp's DRY sampler shown the same history, for every position of a
 * history that repeats itself (the penalty grows along a repeat). */
static void test_dry_equals_llama_cpp_dry(void **state) {
    (void)state;
    specd_sampling_params p = specd_generation_default_params().sampling;
    p.dry_multiplier = 0.8f;
    p.dry_allowed_length = 1;
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *m = llama_model_load_from_file(target_path, mp);
    assert_non_null(m);
    const struct llama_vocab *vocab = llama_model_get_vocab(m);
    int32_t nv = llama_vocab_n_tokens(vocab);
    specd_token history[40];
    for (int i = 0; i < 40; i++) history[i] = (specd_token)(340 + i % 7); /* period 7 */
    float *logits = calloc((size_t)nv, sizeof *logits);
    llama_token_data *cand = calloc((size_t)nv, sizeof *cand);
    const char *breakers[] = {"\n", ":", "\"", "*"};
    int penalized = 0;
    for (int n = 1; n <= 40; n++) {
        struct llama_sampler *dry = llama_sampler_init_dry(vocab, p.dry_multiplier, p.dry_base, p.dry_allowed_length,
                                                           p.dry_penalty_last_n, breakers, 4);
        for (int i = 0; i < n; i++) llama_sampler_accept(dry, history[i]);
        for (int t = 0; t < nv; t++) cand[t] = (llama_token_data){t, 0.01f * (float)(t % 13), 0.0f};
        llama_token_data_array arr = {cand, (size_t)nv, -1, false};
        llama_sampler_apply(dry, &arr);
        llama_sampler_free(dry);
        specd_sampler s;
        assert_true(specd_sampler_init(&s, &p, nv, NULL, 0, NULL));
        bool failed = false;
        s.dry = specd_dry_new_vocab(vocab, &s.params, 256, nv, &failed, NULL);
        assert_false(failed);
        for (int t = 0; t < nv; t++) logits[t] = 0.01f * (float)(t % 13);
        specd_dry_apply(s.dry, history, n, logits);
        for (int t = 0; t < nv; t++) {
            if (logits[t] != cand[t].logit)
                fail_msg("history of %d: token %d's logit %g, llama.cpp's DRY %g", n, t, (double)logits[t],
                         (double)cand[t].logit);
            penalized += logits[t] < 0.01f * (float)(t % 13);
        }
        specd_sampler_free(&s);
    }
    assert_true(penalized > 20);
    free(logits);
    free(cand);
    llama_model_free(m);
}

/* ---- speculation stays exact ------------------------------------------------------------------ */

/* The prompt of the checks; for DRY one that repeats itself: P + G + P, G the target's greedy
 * continuation of P, so that the target's favourite next token would extend a long repeat (DRY
 * penalizes it), and the one after it depends on it. */
static int32_t check_prompt(bool repeats, specd_token *out, int32_t cap) {
    const char *text = "she was happy";
    if (repeats) {
        specd_generation_params g = specd_generation_default_params();
        g.sampling.temperature = 0.0f;
        g.n_predict = 6;
        g.ignore_eos = true;
        g.speculative.type = SPECD_SPEC_NONE;
        return repeating_prompt(engine, text, &g, out, cap);
    }
    specd_token *tokens = NULL;
    int32_t n = 0;
    assert_int_equal(specd_tokenize(engine, text, true, &tokens, &n, NULL), SPECD_OK);
    assert_true(n <= cap);
    memcpy(out, tokens, (size_t)n * sizeof *tokens);
    specd_free(tokens);
    return n;
}

typedef void (*weaken_fn)(specd_sampling_params *sp);

/* Samples the first two tokens with draft-model speculation (fixed chains of 3) under `sp`; their
 * counts must follow the target's exact distribution under `sp`, and must not follow it under
 * `weakened` (the negative control: the sampler's effect, or its per-position state, taken away). */
static void check_exact(specd_sampling_params sp, weaken_fn weaken, bool coupled, int n_samples, const char *label) {
    sp.reproducible = coupled;
    specd_token prompt[64];
    int32_t n = check_prompt(sp.dry_multiplier > 0.0f, prompt, 64);
    exact_pairs ex = exact_first_two(target_path, prompt, n, &sp);
    specd_sampling_params weak = sp;
    weaken(&weak);
    exact_pairs wrong = exact_first_two(target_path, prompt, n, &weak);
    assert_non_null(ex.prob);
    assert_non_null(wrong.prob);
    specd_generation_params g = specd_generation_default_params();
    g.sampling = sp;
    g.ignore_eos = true;
    g.speculative.type = SPECD_SPEC_DRAFT;
    g.speculative.draft_max = g.speculative.draft_min = 3;
    g.speculative.adaptive = false;
    int64_t drafted = 0, accepted = 0;
    int64_t *counts = sampled_first_two_counts(engine, prompt, n, g, ex.n_vocab, ex.eos, n_samples, &drafted, &accepted);
    int cells = ex.n_vocab * ex.n_vocab;
    chi_square_result right = chi_square_test(ex.prob, counts, cells, n_samples);
    chi_square_result control = chi_square_test(wrong.prob, counts, cells, n_samples);
    print_message("%s (%s): z %.2f (df %d), negative control z %.1f, acceptance %.3f\n", label,
                  coupled ? "coupled draws" : "rejection sampling", right.z, right.df, control.z,
                  (double)accepted / (double)drafted);
    assert_true(accepted > 0 && accepted < drafted);
    assert_true(right.df >= 10);
    assert_true(right.z < CHI_SQUARE_MAX_Z);
    assert_true(control.z > CHI_SQUARE_MAX_Z); /* the control fails the test the real one passes */
    free(counts);
    free(ex.prob);
    free(wrong.prob);
}

static void no_dry(specd_sampling_params *sp) { sp->dry_multiplier = 0.0f; }
static void no_xtc(specd_sampling_params *sp) { sp->xtc_probability = 0.0f; }
static void xtc_always(specd_sampling_params *sp) { sp->xtc_probability = 1.0f; }
static void no_top_n_sigma(specd_sampling_params *sp) { sp->top_n_sigma = -1.0f; }
static void no_dynatemp(specd_sampling_params *sp) { sp->dynatemp_range = 0.0f; }
static void no_min_keep(specd_sampling_params *sp) { sp->min_keep = 0; }
/* mirostat with mu that never moves: what verifying every position with the step's first mu gives */
static void frozen_mu(specd_sampling_params *sp) { sp->mirostat_eta = 0.0f; }

/* DRY: the penalty at the second token depends on the first (a drafted one): computed there. */
static void test_dry_is_exact_under_speculation(void **state) {
    (void)state;
    specd_sampling_params sp = plain_sampling(1.0f);
    sp.dry_multiplier = 2.0f;
    sp.dry_allowed_length = 1;
    check_exact(sp, no_dry, false, 8000, "DRY");
}

/* XTC: its coin is part of the distribution, for rejection sampling and the seeded coupled draws;
 * the controls: XTC never, and XTC always. */
static void test_xtc_is_exact_under_speculation(void **state) {
    (void)state;
    specd_sampling_params sp = plain_sampling(1.0f);
    sp.xtc_probability = 0.5f;
    sp.xtc_threshold = 0.05f;
    check_exact(sp, no_xtc, false, 8000, "XTC");
    check_exact(sp, xtc_always, true, 8000, "XTC");
}

static void test_top_n_sigma_dynatemp_min_keep_are_exact_under_speculation(void **state) {
    (void)state;
    specd_sampling_params sp = plain_sampling(1.5f);
    sp.top_n_sigma = 1.0f;
    check_exact(sp, no_top_n_sigma, false, 8000, "top-n-sigma");
    sp = plain_sampling(1.0f);
    sp.dynatemp_range = 0.9f;
    sp.dynatemp_exponent = 0.5f;
    check_exact(sp, no_dynatemp, false, 8000, "dynatemp");
    sp = plain_sampling(1.0f);
    sp.top_p = 0.3f;
    sp.min_keep = 6;
    check_exact(sp, no_min_keep, false, 8000, "top-p 0.3 with min_keep 6");
}

/* Mirostat v1 and v2 with speculation: each drafted position verified with its own mu. */
static void test_mirostat_is_exact_under_speculation(void **state) {
    (void)state;
    for (int v = 1; v <= 2; v++) {
        specd_sampling_params sp = plain_sampling(1.0f);
        sp.mirostat = v;
        sp.mirostat_tau = v == 1 ? 4.0f : 3.5f;
        sp.mirostat_eta = 1.0f; /* a large step, so the second position's mu differs clearly */
        char label[32];
        snprintf(label, sizeof label, "mirostat v%d", v);
        check_exact(sp, frozen_mu, false, 8000, label);
    }
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target_path, draft_path, sizeof target_path)) return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transforms_equal_llama_cpp_samplers),
        cmocka_unit_test(test_dry_equals_llama_cpp_dry),
        cmocka_unit_test(test_dry_is_exact_under_speculation),
        cmocka_unit_test(test_xtc_is_exact_under_speculation),
        cmocka_unit_test(test_top_n_sigma_dynatemp_min_keep_are_exact_under_speculation),
        cmocka_unit_test(test_mirostat_is_exact_under_speculation),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
