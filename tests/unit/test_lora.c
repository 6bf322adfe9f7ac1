/* test_lora.c - LoRA adapters (src/engine/lora.c) on the tiny models, with the adapter
 * make_tiny_model writes: greedy output with it equals llama.cpp's own with it (a plain llama.cpp
 * loop that applies the adapter through its C API), at scale 1 and 0.5, with speculation (the draft
 * without the adapter) and without; a request's own scales; sessions with different scales side
 * by side equal their runs alone. The control: the adapter changes the text.
 *
 *   test_lora MODELS_DIR */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "engine_helpers.h"
#include "llama.h"
#include "specd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_PREDICT 32

static char target_path[1024], draft_path[1024], lora_path[1024];
static const char *prompt_text = "the little girl saw a big red ball";

/* Greedy tokens of llama.cpp alone: the adapter at `scale` on a plain context, one token a pass. */
static void llama_reference(const specd_token *prompt, int32_t n, float scale, specd_token *out) {
    struct llama_model *m = llama_model_load_from_file(target_path, llama_model_default_params());
    assert_non_null(m);
    struct llama_adapter_lora *adapter = llama_adapter_lora_init(m, lora_path);
    assert_non_null(adapter);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = cp.n_threads_batch = 1;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    assert_non_null(ctx);
    if (scale != 0.0f) assert_int_equal(llama_set_adapters_lora(ctx, &adapter, 1, &scale), 0);
    const struct llama_vocab *vocab = llama_model_get_vocab(m);
    int32_t nv = llama_vocab_n_tokens(vocab);
    specd_token next;
    assert_int_equal(llama_decode(ctx, llama_batch_get_one((specd_token *)prompt, n)), 0);
    for (int32_t i = 0; i < N_PREDICT; i++) {
        const float *logits = llama_get_logits_ith(ctx, -1);
        next = -1; /* the request ignores the end of text: never an end-of-generation token */
        for (int32_t t = 0; t < nv; t++)
            if (!llama_vocab_is_eog(vocab, t) && (next < 0 || logits[t] > logits[next])) next = t;
        out[i] = next;
        assert_int_equal(llama_decode(ctx, llama_batch_get_one(&next, 1)), 0);
    }
    llama_free(ctx);
    llama_model_free(m); /* frees the adapter with it */
}

static specd_engine *engine_with_lora(float scale, bool without_apply, int32_t n_parallel) {
    specd_lora_adapter lora = {lora_path, scale};
    specd_engine_params p = test_engine_params(target_path, draft_path, 256 * n_parallel);
    p.lora = &lora;
    p.n_lora = 1;
    p.lora_init_without_apply = without_apply;
    p.n_parallel = n_parallel;
    return open_engine_with(&p); /* the adapter list is read while loading only */
}

static specd_generation_params greedy(bool speculate) {
    specd_generation_params g = specd_generation_default_params();
    g.n_predict = N_PREDICT;
    g.ignore_eos = true;
    g.sampling.temperature = 0.0f;
    g.speculative.type = speculate ? SPECD_SPEC_DRAFT : SPECD_SPEC_NONE;
    g.speculative.draft_max = g.speculative.draft_min = 3;
    g.speculative.adaptive = false;
    return g;
}

static void assert_tokens(const specd_result *r, const specd_token *want, const char *what) {
    assert_int_equal(r->n_tokens, N_PREDICT);
    for (int32_t i = 0; i < N_PREDICT; i++)
        if (r->tokens[i] != want[i]) fail_msg("%s: token %d is %d, llama.cpp's %d", what, i, r->tokens[i], want[i]);
}

/* With the adapter at scale 1 and 0.5: llama.cpp's greedy tokens, speculating or not; the adapter
 * changes them (the control), and its path and scale are reported. */
static void test_greedy_with_adapter_equals_llama_cpp(void **state) {
    (void)state;
    const float scales[] = {1.0f, 0.5f};
    specd_token plain[N_PREDICT];
    for (int k = 0; k < 2; k++) {
        specd_engine *e = engine_with_lora(scales[k], false, 1);
        assert_int_equal(specd_engine_n_lora(e), 1);
        const char *path = NULL;
        float scale = 0.0f;
        assert_true(specd_engine_lora(e, 0, &path, &scale));
        assert_string_equal(path, lora_path);
        assert_true(scale == scales[k]);
        specd_token *prompt = NULL;
        int32_t n = 0;
        assert_int_equal(specd_tokenize(e, prompt_text, true, &prompt, &n, NULL), SPECD_OK);
        specd_token want[N_PREDICT];
        llama_reference(prompt, n, scales[k], want);
        if (k == 0) llama_reference(prompt, n, 0.0f, plain);
        for (int spec = 0; spec <= 1; spec++) {
            specd_generation_params g = greedy(spec);
            specd_result r = generate_text(e, prompt_text, &g);
            char what[64];
            snprintf(what, sizeof what, "scale %.1f, %s", (double)scales[k], spec ? "speculating" : "alone");
            assert_tokens(&r, want, what);
            if (spec) assert_true(r.stats.n_accepted > 0 && r.stats.n_accepted < r.stats.n_drafted);
            specd_result_clear(&r);
        }
        if (k == 0) assert_true(memcmp(want, plain, sizeof want) != 0); /* the adapter matters */
        specd_free(prompt);
        specd_engine_free(e);
    }
}

/* A request's own scales (llama-server's per-request `lora`): 0 gives the model without the
 * adapter, 1 the adapter's text, on an engine that loaded it at scale 0; the prompt cache made
 * with other scales is not reused. */
static void test_request_scales(void **state) {
    (void)state;
    specd_engine *e = engine_with_lora(1.0f, true, 1);
    float scale = -1.0f;
    assert_true(specd_engine_lora(e, 0, NULL, &scale) && scale == 0.0f); /* --lora-init-without-apply */
    specd_token *prompt = NULL;
    int32_t n = 0;
    assert_int_equal(specd_tokenize(e, prompt_text, true, &prompt, &n, NULL), SPECD_OK);
    specd_token with[N_PREDICT], without[N_PREDICT];
    llama_reference(prompt, n, 1.0f, with);
    llama_reference(prompt, n, 0.0f, without);
    for (int round = 0; round < 2; round++) {
        specd_generation_params g = greedy(true);
        specd_result r = generate_text(e, prompt_text, &g);
        assert_tokens(&r, without, "engine default (scale 0)");
        specd_result_clear(&r);
        float one = 1.0f;
        g.lora_scales = &one;
        g.n_lora_scales = 1;
        r = generate_text(e, prompt_text, &g);
        assert_tokens(&r, with, "request scale 1");
        assert_int_equal(r.stats.n_prompt_cached, 0); /* the cache was made without the adapter */
        specd_result_clear(&r);
    }
    specd_generation_params bad = greedy(false);
    float two[2] = {1.0f, 1.0f};
    bad.lora_scales = two;
    bad.n_lora_scales = 2;
    specd_result r;
    char *err = NULL;
    assert_int_equal(specd_generate(e, prompt, n, &bad, &r, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "lora_scales: 2 given, the engine has 1"));
    specd_free(err);
    specd_free(prompt);
    specd_engine_free(e);
}

/* Two sessions in two slots with different scales, stepped together: they never share a pass, and
 * each gives its text alone. */
static void test_slots_with_different_scales_equal_their_runs_alone(void **state) {
    (void)state;
    specd_engine *e = engine_with_lora(1.0f, false, 2);
    specd_token *prompt = NULL;
    int32_t n = 0;
    assert_int_equal(specd_tokenize(e, prompt_text, true, &prompt, &n, NULL), SPECD_OK);
    specd_token want[2][N_PREDICT];
    llama_reference(prompt, n, 1.0f, want[0]);
    llama_reference(prompt, n, 0.0f, want[1]);
    float zero = 0.0f;
    specd_generation_params g[2] = {greedy(true), greedy(true)};
    g[1].lora_scales = &zero;
    g[1].n_lora_scales = 1;
    specd_session *s[2];
    for (int i = 0; i < 2; i++) {
        char *err = NULL;
        if (specd_session_new_in_slot(e, i, prompt, n, &g[i], &s[i], &err) != SPECD_OK) fail_msg("%s", err);
    }
    for (int steps = 0; !specd_session_done(s[0]) || !specd_session_done(s[1]); steps++) {
        assert_true(steps < 1000);
        specd_session *live[2];
        int32_t m = 0;
        for (int i = 0; i < 2; i++)
            if (!specd_session_done(s[i])) live[m++] = s[i];
        char *errs[2] = {0};
        assert_int_equal(specd_sessions_draft(live, m, NULL, errs), SPECD_OK);
        assert_int_equal(specd_sessions_verify(live, m, NULL, NULL, errs), SPECD_OK);
        for (int32_t i = 0; i < m; i++) assert_int_equal(specd_session_accept(live[i], NULL, NULL), SPECD_OK);
    }
    for (int i = 0; i < 2; i++) {
        specd_result r;
        specd_session_take_result(s[i], &r);
        assert_tokens(&r, want[i], i ? "slot 1, scale 0" : "slot 0, scale 1");
        specd_result_clear(&r);
        specd_session_free(s[i]);
    }
    specd_free(prompt);
    specd_engine_free(e);
}

/* A file that is no adapter (the model itself) is refused naming it; --lora-draft without a draft
 * model too. */
static void test_bad_adapters_are_refused(void **state) {
    (void)state;
    specd_lora_adapter lora = {target_path, 1.0f};
    specd_engine_params p = test_engine_params(target_path, NULL, 256);
    p.lora = &lora;
    p.n_lora = 1;
    specd_engine *e = NULL;
    char *err = NULL;
    assert_int_equal(specd_engine_new(&p, &e, &err), SPECD_ERR_MODEL_LOAD);
    assert_non_null(strstr(err, "cannot load the LoRA adapter"));
    assert_non_null(strstr(err, target_path));
    specd_free(err);
    p.n_lora = 0;
    lora.path = lora_path;
    p.lora_draft = &lora;
    p.n_lora_draft = 1;
    assert_int_equal(specd_engine_new(&p, &e, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "--lora-draft"));
    specd_free(err);
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target_path, draft_path, sizeof target_path)) return 2;
    snprintf(lora_path, sizeof lora_path, "%s/lora.gguf", argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_with_adapter_equals_llama_cpp),
        cmocka_unit_test(test_request_scales),
        cmocka_unit_test(test_slots_with_different_scales_equal_their_runs_alone),
        cmocka_unit_test(test_bad_adapters_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
