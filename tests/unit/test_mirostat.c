/* test_mirostat.c - mirostat v1 and v2 on the tiny models: a request with mirostat runs on the
 * target alone whatever speculation it asks for; its tokens equal those of a reference mirostat
 * written here (llama.cpp's algorithm over a plain llama_decode, drawing with the same generator);
 * the same seed gives the same output; v2 steers the surprise towards tau; bad settings are
 * refused naming the field.
 *
 *   test_mirostat MODELS_DIR   (target.gguf, draft.gguf) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "engine/engine_internal.h"
#include "engine_helpers.h"
#include "llama.h"
#include "sample/rng.h"
#include "specd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char target_path[1024], draft_path[1024];
static specd_engine *engine; /* target + draft */

static const char *prompt_text = "one day the dog ran to the park with his mom";

SPECD_TEST_ENGINE_FIXTURE(engine, target_path, draft_path)

/* Mirostat while asking for speculation with the draft model: the engine must turn it off. */
static specd_generation_params mirostat_params(int32_t version, float tau, float temperature, uint64_t seed) {
    specd_generation_params g = specd_generation_default_params();
    g.n_predict = 40;
    g.ignore_eos = true;
    g.sampling.temperature = temperature;
    g.sampling.seed = seed;
    g.sampling.mirostat = version;
    g.sampling.mirostat_tau = tau;
    g.sampling.mirostat_eta = 0.1f;
    g.speculative.type = SPECD_SPEC_NONE; /* the reference draws token by token (test_llama_samplers: with drafts) */
    return g;
}

/* ---- a reference mirostat: llama.cpp's algorithm, written out on plain arrays ---------------- */

typedef struct cand {
    specd_token id;
    float logit, p;
} cand;

static int by_logit_desc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id - y->id;
}

typedef struct reference {
    int32_t version, n_vocab;
    float tau, eta, mu, temperature;
    cand *c;
    specd_rng rng;
} reference;

/* Softmax over the sorted candidates, then the version's truncation; returns how many are kept
 * (renormalized in c[].p). Tokens of probability 0 (forbidden) are never candidates. */
static int32_t reference_truncate(reference *r) {
    int32_t n = r->n_vocab;
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += r->c[i].p = expf((r->c[i].logit - r->c[0].logit) / r->temperature);
    for (int32_t i = 0; i < n; i++) r->c[i].p = (float)(r->c[i].p / sum);
    while (n > 1 && r->c[n - 1].p == 0.0f) n--;
    int32_t k = 0;
    if (r->version == 2) {
        while (k < n && -log2f(r->c[k].p) <= r->mu) k++;
    } else { /* Zipf exponent from the top 100, then k = (e 2^mu / (1 - N^-e))^(1/s) */
        float num = 0.0f, den = 0.0f;
        for (int32_t i = 0; i < 99 && i < n - 1; i++) {
            float t = logf((float)(i + 2) / (float)(i + 1));
            num += t * logf(r->c[i].p / r->c[i + 1].p);
            den += t * t;
        }
        float s = num / den, e = s - 1.0f;
        float kf = powf(e * powf(2.0f, r->mu) / (1.0f - powf((float)r->n_vocab, -e)), 1.0f / s);
        k = !(kf >= 1.0f) ? 1 : kf >= (float)n ? n : (int32_t)kf;
    }
    if (k < 1) k = 1;
    double kept = 0.0;
    for (int32_t i = 0; i < k; i++) kept += r->c[i].p;
    for (int32_t i = 0; i < k; i++) r->c[i].p = (float)(r->c[i].p / kept);
    return k;
}

static specd_token reference_step(reference *r, const float *logits, const struct llama_vocab *vocab) {
    for (int32_t t = 0; t < r->n_vocab; t++)
        r->c[t] = (cand){t, llama_vocab_is_eog(vocab, t) ? -INFINITY : logits[t], 0.0f}; /* ignore_eos */
    qsort(r->c, (size_t)r->n_vocab, sizeof *r->c, by_logit_desc);
    int32_t k = reference_truncate(r);
    double u = specd_rng_uniform(&r->rng), acc = 0.0, total = 0.0;
    for (int32_t i = 0; i < k; i++) total += r->c[i].p;
    int32_t pick = k - 1;
    for (int32_t i = 0; i < k; i++) {
        acc += r->c[i].p;
        if (u * total < acc) {
            pick = i;
            break;
        }
    }
    r->mu -= r->eta * (-log2f(r->c[pick].p) - r->tau);
    return r->c[pick].id;
}

/* n tokens from the target alone with the reference sampler. The prompt goes in as the engine
 * feeds it (all but the last token, then one token per pass) so the logits are the same. */
static specd_token *reference_generate(const specd_token *prompt, int32_t n_prompt, const specd_generation_params *g,
                                       int32_t n) {
    struct llama_model *m = llama_model_load_from_file(target_path, llama_model_default_params());
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = cp.n_threads_batch = 1;
    specd_engine_params defaults = specd_engine_default_params(); /* the engine's attention settings */
    specd_apply_attention_settings(&defaults, &cp);
    struct llama_context *ctx = llama_init_from_model(m, cp);
    assert_non_null(ctx);
    const struct llama_vocab *vocab = llama_model_get_vocab(m);
    reference r = {g->sampling.mirostat, llama_vocab_n_tokens(vocab), g->sampling.mirostat_tau, g->sampling.mirostat_eta,
                   2.0f * g->sampling.mirostat_tau, g->sampling.temperature, NULL, {{0}}};
    r.c = calloc((size_t)r.n_vocab, sizeof *r.c);
    specd_rng_seed(&r.rng, g->sampling.seed);
    specd_token *out = calloc((size_t)n, sizeof *out), next = prompt[n_prompt - 1];
    assert_int_equal(llama_decode(ctx, llama_batch_get_one((specd_token *)prompt, n_prompt - 1)), 0);
    for (int32_t i = 0; i < n; i++) {
        assert_int_equal(llama_decode(ctx, llama_batch_get_one(&next, 1)), 0);
        next = out[i] = reference_step(&r, llama_get_logits_ith(ctx, -1), vocab);
    }
    free(r.c);
    llama_free(ctx);
    llama_model_free(m);
    return out;
}

/* ---- tests ------------------------------------------------------------------------------------ */

static void test_mirostat_equals_reference_without_speculation(void **state) {
    (void)state;
    int32_t n_prompt = 0;
    specd_token *prompt = NULL;
    assert_int_equal(specd_tokenize(engine, prompt_text, true, &prompt, &n_prompt, NULL), SPECD_OK);
    const struct { int32_t version; float tau, temperature; } cases[] = {{1, 5.0f, 0.8f}, {1, 3.0f, 1.0f},
                                                                         {2, 5.0f, 0.8f}, {2, 3.0f, 1.0f}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        specd_generation_params g = mirostat_params(cases[c].version, cases[c].tau, cases[c].temperature, 11 + c);
        g.sampling.reproducible = false; /* draws from the generation's generator, as the reference's */
        specd_result r;
        char *err = NULL;
        if (specd_generate(engine, prompt, n_prompt, &g, &r, &err) != SPECD_OK) fail_msg("generate: %s", err);
        assert_int_equal(r.n_tokens, 40);
        specd_token *want = reference_generate(prompt, n_prompt, &g, r.n_tokens);
        for (int32_t i = 0; i < r.n_tokens; i++)
            if (r.tokens[i] != want[i])
                fail_msg("mirostat v%d tau %.0f: token %d is %d, the reference drew %d", cases[c].version,
                         (double)cases[c].tau, i, r.tokens[i], want[i]);
        free(want);
        specd_result_clear(&r);
    }
    specd_free(prompt);
}

static void test_same_seed_same_output(void **state) {
    (void)state;
    for (int32_t version = 1; version <= 2; version++) {
        specd_generation_params g = mirostat_params(version, 5.0f, 1.0f, 42);
        specd_result a = generate_text(engine, prompt_text, &g);
        specd_result b = generate_text(engine, prompt_text, &g);
        assert_same_tokens(&a, &b, "same seed");
        int differing = 0;
        for (uint64_t seed = 1; seed <= 4; seed++) {
            g.sampling.seed = seed;
            specd_result c = generate_text(engine, prompt_text, &g);
            differing += c.n_tokens != a.n_tokens || memcmp(c.tokens, a.tokens, (size_t)a.n_tokens * sizeof *a.tokens);
            specd_result_clear(&c);
        }
        assert_true(differing > 0); /* it does sample */
        specd_result_clear(&a);
        specd_result_clear(&b);
    }
}

static void test_v2_with_tau_zero_is_greedy(void **state) {
    (void)state;
    /* mu = 2 tau = 0 keeps only the most probable token, and a certain draw leaves mu at 0. */
    specd_generation_params g = mirostat_params(2, 0.0f, 1.0f, 9);
    specd_generation_params greedy = mirostat_params(0, 5.0f, 0.0f, 9);
    greedy.speculative.type = SPECD_SPEC_NONE;
    specd_result want = generate_text(engine, prompt_text, &greedy);
    specd_result got = generate_text(engine, prompt_text, &g);
    assert_same_tokens(&got, &want, "v2 tau 0 vs greedy");
    specd_result_clear(&want);
    specd_result_clear(&got);
}

/* Mean surprise (-log2 p, p from the drawn-from distribution) of a mirostat v2 run. */
static double mean_surprise(float tau, uint64_t seed) {
    specd_generation_params g = mirostat_params(2, tau, 1.0f, seed);
    g.n_predict = 200;
    g.n_probs = specd_engine_n_vocab(engine);
    g.post_sampling_probs = true;
    specd_result r = generate_text(engine, "she", &g);
    double sum = 0.0;
    for (int32_t i = 0; i < r.n_tokens; i++) {
        const specd_token_prob *l = r.probs + (size_t)i * r.n_probs;
        int32_t k = 0;
        while (k < r.n_probs && l[k].token != r.tokens[i]) k++;
        assert_true(k < r.n_probs); /* the drawn token is in the distribution it was drawn from */
        sum += -log2(l[k].prob);
    }
    int32_t n = r.n_tokens;
    specd_result_clear(&r);
    return sum / n;
}

static void test_v2_steers_surprise_to_tau(void **state) {
    (void)state;
    /* Both below the tiny model's own mean surprise (about 3 bits at temperature 1): mirostat can
     * only cut the distribution, never make it more surprising. */
    double low = mean_surprise(1.0f, 1), high = mean_surprise(2.0f, 1);
    print_message("mirostat v2 mean surprise: %.2f bits for tau 1, %.2f bits for tau 2\n", low, high);
    assert_true(fabs(low - 1.0) < 0.3);
    assert_true(fabs(high - 2.0) < 0.3);
}

static void test_greedy_mirostat_keeps_speculation(void **state) {
    (void)state;
    /* temperature 0 is greedy whatever mirostat says (as in llama.cpp): drafts are verified exactly */
    specd_generation_params g = mirostat_params(2, 5.0f, 0.0f, 1);
    g.speculative.type = SPECD_SPEC_DRAFT;
    specd_result r = generate_text(engine, prompt_text, &g);
    assert_true(r.stats.n_drafted > 0);
    specd_result_clear(&r);
}

static void expect_refused(const specd_generation_params *g, const char *needle) {
    specd_token ok[] = {1, 300, 301};
    specd_result r;
    char *err = NULL;
    assert_int_equal(specd_generate(engine, ok, 3, g, &r, &err), SPECD_ERR_INVALID_ARGUMENT);
    if (!err || !strstr(err, needle)) fail_msg("error '%s' does not mention '%s'", err ? err : "", needle);
    specd_free(err);
}

static void test_bad_mirostat_settings_are_refused(void **state) {
    (void)state;
    specd_generation_params g = mirostat_params(3, 5.0f, 1.0f, 1);
    expect_refused(&g, "mirostat must be 0 (off), 1 or 2 (got 3)");
    g = mirostat_params(1, -1.0f, 1.0f, 1);
    expect_refused(&g, "mirostat_tau must be a finite number >= 0");
    g = mirostat_params(2, 5.0f, 1.0f, 1);
    g.sampling.mirostat_eta = NAN;
    expect_refused(&g, "mirostat_eta must be a finite number >= 0");
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target_path, draft_path, sizeof target_path)) return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mirostat_equals_reference_without_speculation),
        cmocka_unit_test(test_same_seed_same_output),
        cmocka_unit_test(test_v2_with_tau_zero_is_greedy),
        cmocka_unit_test(test_v2_steers_surprise_to_tau),
        cmocka_unit_test(test_greedy_mirostat_keeps_speculation),
        cmocka_unit_test(test_bad_mirostat_settings_are_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
