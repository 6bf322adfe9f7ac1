/* test_probs.c - specd_generation_params.n_probs on the tiny models: every emitted token, drafted
 * ones included, gets the target's own top-n probabilities, equal to a softmax computed here from
 * a plain llama_decode of prompt + output; the same with speculation on or off; streamed through
 * on_tokens; and post_sampling_probs gives the distribution the token was drawn from.
 *
 *   test_probs MODELS_DIR   (target.gguf, draft.gguf) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "engine/engine_internal.h"
#include "engine_helpers.h"
#include "llama.h"
#include "specd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_PROBS 5
/* The target's logits may differ a little between a pass over a draft tree and a pass over one
 * token or the whole sequence (llama.cpp's kernels depend on the batch shape; with the engine's
 * attention settings, flash attention off and an f32 V cache, the tiny models' probabilities
 * agree to about 1e-6, with flash attention to about 3e-5). What this guards against (the wrong position, 1.0 for drafted tokens, a
 * temperature or bias applied) moves them by far more. */
#define TOLERANCE 1e-4

static char target_path[1024], draft_path[1024];
static specd_engine *engine; /* target + draft */

static const char *prompts[] = {
    "the little girl saw a big red ball",
    "one day the dog ran to the park with his mom",
};

SPECD_TEST_ENGINE_FIXTURE(engine, target_path, draft_path)

static specd_generation_params probs_params(specd_spec_type type, float temperature, uint64_t seed) {
    specd_generation_params g = specd_generation_default_params();
    g.n_predict = 40;
    g.ignore_eos = true;
    g.sampling.temperature = temperature;
    g.sampling.seed = seed;
    g.speculative.type = type;
    g.speculative.draft_max = type == SPECD_SPEC_NONE ? 0 : 4;
    g.speculative.draft_min = g.speculative.draft_max;
    g.speculative.adaptive = false;
    g.n_probs = N_PROBS;
    return g;
}

static const specd_token_prob *list_of(const specd_result *r, int32_t i) { return r->probs + (size_t)i * r->n_probs; }

/* Sorted by probability, descending; sums to at most 1; no padding in raw lists. */
static void assert_well_formed(const specd_result *r) {
    assert_non_null(r->probs);
    assert_int_equal(r->n_probs, N_PROBS);
    for (int32_t i = 0; i < r->n_tokens; i++) {
        const specd_token_prob *l = list_of(r, i);
        double sum = 0.0;
        for (int32_t k = 0; k < r->n_probs; k++) {
            assert_true(l[k].token >= 0 && l[k].token < specd_engine_n_vocab(engine));
            assert_true(l[k].prob > 0.0f && l[k].prob <= 1.0f);
            if (k > 0) assert_true(l[k].prob <= l[k - 1].prob);
            sum += l[k].prob;
        }
        assert_true(sum <= 1.0 + TOLERANCE);
    }
}

static double max_diff; /* largest difference seen, for the log */

static void assert_same_probs(const specd_result *a, const specd_result *b, const char *what) {
    assert_int_equal(a->n_probs, b->n_probs);
    for (int32_t i = 0; i < a->n_tokens; i++) {
        for (int32_t k = 0; k < a->n_probs; k++) {
            const specd_token_prob *x = &list_of(a, i)[k], *y = &list_of(b, i)[k];
            if (fabs((double)x->prob - y->prob) > max_diff) max_diff = fabs((double)x->prob - y->prob);
            if (x->token != y->token || fabs((double)x->prob - y->prob) > TOLERANCE)
                fail_msg("%s: token %d, entry %d: {%d, %.7f} vs {%d, %.7f}", what, i, k, x->token, (double)x->prob,
                         y->token, (double)y->prob);
        }
    }
}

/* ---- an independent reference: llama_decode of prompt + output, softmax computed here -------- */

typedef struct ranked {
    specd_token token;
    double prob;
} ranked;

static int by_prob_desc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->prob != y->prob) return x->prob < y->prob ? 1 : -1;
    return x->token - y->token;
}

/* Checks every list of `r` (generated from `prompt`) against the full softmax of a target-only
 * decode; returns how many emitted tokens were in their own top N_PROBS. */
static int check_against_reference(const specd_token *prompt, int32_t n_prompt, const specd_result *r) {
    struct llama_model *m = llama_model_load_from_file(target_path, llama_model_default_params());
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = cp.n_ubatch = 256;
    cp.n_threads = cp.n_threads_batch = 1;
    specd_engine_params defaults = specd_engine_default_params(); /* the engine's attention settings */
    specd_apply_attention_settings(&defaults, &cp);
    struct llama_context *ctx = llama_init_from_model(m, cp);
    assert_non_null(ctx);
    int32_t n = n_prompt + r->n_tokens - 1; /* the last token's logits are not needed */
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int32_t i = 0; i < n; i++) {
        b.token[i] = i < n_prompt ? prompt[i] : r->tokens[i - n_prompt];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = i >= n_prompt - 1;
    }
    b.n_tokens = n;
    assert_int_equal(llama_decode(ctx, b), 0);
    int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m));
    ranked *all = calloc((size_t)n_vocab, sizeof *all);
    int in_top = 0;
    for (int32_t i = 0; i < r->n_tokens; i++) {
        const float *logits = llama_get_logits_ith(ctx, n_prompt - 1 + i);
        double max = -INFINITY, sum = 0.0;
        for (int32_t t = 0; t < n_vocab; t++) max = logits[t] > max ? logits[t] : max;
        for (int32_t t = 0; t < n_vocab; t++) sum += exp(logits[t] - max);
        for (int32_t t = 0; t < n_vocab; t++) all[t] = (ranked){t, exp(logits[t] - max) / sum};
        qsort(all, (size_t)n_vocab, sizeof *all, by_prob_desc);
        const specd_token_prob *l = list_of(r, i);
        for (int32_t k = 0; k < r->n_probs; k++) {
            if (fabs(l[k].prob - all[k].prob) > max_diff) max_diff = fabs(l[k].prob - all[k].prob);
            if (l[k].token != all[k].token || fabs(l[k].prob - all[k].prob) > TOLERANCE)
                fail_msg("token %d entry %d: specd {%d, %.7f}, reference {%d, %.7f}", i, k, l[k].token,
                         (double)l[k].prob, all[k].token, all[k].prob);
            in_top += l[k].token == r->tokens[i];
        }
    }
    free(all);
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(m);
    return in_top;
}

static specd_token *tokenize(const char *text, int32_t *n) {
    specd_token *t = NULL;
    assert_int_equal(specd_tokenize(engine, text, true, &t, n, NULL), SPECD_OK);
    return t;
}

/* ---- tests ------------------------------------------------------------------------------------ */

static void test_greedy_probs_are_the_same_with_speculation(void **state) {
    (void)state;
    int64_t accepted = 0;
    max_diff = 0.0;
    for (size_t p = 0; p < sizeof prompts / sizeof *prompts; p++) {
        specd_generation_params none = probs_params(SPECD_SPEC_NONE, 0.0f, 1);
        specd_generation_params spec = probs_params(SPECD_SPEC_DRAFT, 0.0f, 1);
        specd_result want = generate_text(engine, prompts[p], &none);
        specd_result got = generate_text(engine, prompts[p], &spec);
        assert_same_tokens(&got, &want, "greedy");
        assert_well_formed(&got);
        assert_same_probs(&got, &want, "speculative vs target alone");
        /* Greedy without penalties picks the raw argmax: every token heads its own list. */
        for (int32_t i = 0; i < got.n_tokens; i++) assert_int_equal(list_of(&got, i)[0].token, got.tokens[i]);
        accepted += got.stats.n_accepted;
        specd_result_clear(&want);
        specd_result_clear(&got);
    }
    assert_true(accepted > 0); /* drafted tokens were among those checked */
    print_message("largest difference: %.2g\n", max_diff);
}

static void test_probs_equal_an_independent_softmax(void **state) {
    (void)state;
    int32_t n_prompt = 0;
    specd_token *prompt = tokenize(prompts[1], &n_prompt);
    const float temperatures[] = {0.0f, 1.0f};
    for (int i = 0; i < 2; i++) {
        specd_generation_params g = probs_params(SPECD_SPEC_DRAFT, temperatures[i], 7);
        max_diff = 0.0;
        if (i == 1) g.sampling.top_k = 8; /* transforms do not change the reported probabilities */
        specd_result r;
        assert_int_equal(specd_generate(engine, prompt, n_prompt, &g, &r, NULL), SPECD_OK);
        assert_true(r.stats.n_accepted > 0 && r.stats.n_accepted < r.stats.n_drafted);
        assert_well_formed(&r);
        int in_top = check_against_reference(prompt, n_prompt, &r);
        print_message("temperature %.0f: %d of %d tokens in their top %d, %d drafted tokens accepted, "
                      "largest difference %.2g\n", (double)temperatures[i], in_top, r.n_tokens, N_PROBS,
                      r.stats.n_accepted, max_diff);
        assert_true(in_top > 0);
        specd_result_clear(&r);
    }
    specd_free(prompt);
}

typedef struct streamed {
    const specd_result *result; /* the result being filled */
    specd_token_prob lists[64 * N_PROBS];
    int32_t n;
    bool mismatch;
} streamed;

static bool collect_probs(const specd_token *tokens, int32_t n, void *user_data) {
    streamed *s = user_data;
    const specd_result *r = s->result;
    if (r->tokens + r->n_tokens - n != tokens) s->mismatch = true; /* the step's tokens end the result */
    for (int32_t i = 0; i < n && s->n < 64; i++, s->n++)
        memcpy(s->lists + (size_t)s->n * N_PROBS, list_of(r, r->n_tokens - n + i), N_PROBS * sizeof *s->lists);
    return true;
}

static void test_callback_sees_each_steps_probs(void **state) {
    (void)state;
    static streamed s;
    memset(&s, 0, sizeof s);
    specd_result r;
    s.result = &r;
    specd_generation_params g = probs_params(SPECD_SPEC_DRAFT, 1.0f, 3);
    g.on_tokens = collect_probs;
    g.user_data = &s;
    int32_t n_prompt = 0;
    specd_token *prompt = tokenize(prompts[0], &n_prompt);
    assert_int_equal(specd_generate(engine, prompt, n_prompt, &g, &r, NULL), SPECD_OK);
    assert_false(s.mismatch);
    assert_int_equal(s.n, r.n_tokens);
    assert_memory_equal(s.lists, r.probs, (size_t)r.n_tokens * N_PROBS * sizeof *r.probs);
    specd_result_clear(&r);
    assert_null(r.probs);
    specd_free(prompt);
}

static void test_post_sampling_probs_are_the_drawn_distribution(void **state) {
    (void)state;
    specd_generation_params g = probs_params(SPECD_SPEC_DRAFT, 0.0f, 5);
    g.post_sampling_probs = true;
    specd_result r = generate_text(engine, prompts[0], &g);
    for (int32_t i = 0; i < r.n_tokens; i++) { /* greedy: certainty, then padding */
        assert_int_equal(list_of(&r, i)[0].token, r.tokens[i]);
        assert_true(list_of(&r, i)[0].prob == 1.0f);
        assert_int_equal(list_of(&r, i)[1].token, -1);
    }
    specd_result_clear(&r);
    g.sampling.temperature = 1.5f;
    g.sampling.top_k = 3;
    g.sampling.min_p = 0.0f;
    r = generate_text(engine, prompts[0], &g);
    assert_true(r.stats.n_accepted > 0);
    for (int32_t i = 0; i < r.n_tokens; i++) {
        const specd_token_prob *l = list_of(&r, i);
        double sum = 0.0;
        bool found = false;
        for (int32_t k = 0; k < N_PROBS; k++) {
            if (k >= 3) assert_int_equal(l[k].token, -1); /* top-k 3: three candidates at most */
            sum += l[k].prob;
            found |= l[k].token == r.tokens[i];
        }
        assert_true(found); /* the whole support is listed, so the drawn token is in it */
        assert_true(fabs(sum - 1.0) < 1e-4);
    }
    specd_result_clear(&r);
}

static void test_n_probs_off_large_and_invalid(void **state) {
    (void)state;
    specd_generation_params g = probs_params(SPECD_SPEC_DRAFT, 0.0f, 1);
    g.n_probs = 0;
    specd_result r = generate_text(engine, prompts[0], &g);
    assert_null(r.probs);
    assert_int_equal(r.n_probs, 0);
    specd_result_clear(&r);
    g.n_probs = 1000000; /* capped at the vocabulary: the whole distribution */
    g.n_predict = 3;
    r = generate_text(engine, prompts[0], &g);
    assert_int_equal(r.n_probs, specd_engine_n_vocab(engine));
    double sum = 0.0;
    for (int32_t k = 0; k < r.n_probs; k++) sum += list_of(&r, 2)[k].prob;
    assert_true(fabs(sum - 1.0) < 1e-4);
    specd_result_clear(&r);
    g.n_probs = -1;
    specd_token ok[] = {1, 300, 301};
    char *err = NULL;
    assert_int_equal(specd_generate(engine, ok, 3, &g, &r, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "n_probs must be from 0 to"));
    specd_free(err);
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target_path, draft_path, sizeof target_path)) return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_probs_are_the_same_with_speculation),
        cmocka_unit_test(test_probs_equal_an_independent_softmax),
        cmocka_unit_test(test_callback_sees_each_steps_probs),
        cmocka_unit_test(test_post_sampling_probs_are_the_drawn_distribution),
        cmocka_unit_test(test_n_probs_off_large_and_invalid),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
