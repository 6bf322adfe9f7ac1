/* engine_helpers.h - what the end-to-end engine tests share: opening an engine on the tiny models,
 * generating from text, and comparing outputs token by token. Header-only; include after
 * <cmocka.h>. */
#ifndef SPECD_TEST_ENGINE_HELPERS_H
#define SPECD_TEST_ENGINE_HELPERS_H

#include "specd.h"

#include <stdbool.h>
#include <stdio.h>

/* The test's one argument is MODELS_DIR (tests/CMakeLists.txt): the paths of the tiny target and
 * draft in it go to target and draft (each `size` bytes). False, with the usage on stderr, when
 * the argument is missing. */
static inline bool tiny_model_paths(int argc, char **argv, char *target, char *draft, size_t size) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODELS_DIR\n", argv[0]);
        return false;
    }
    snprintf(target, size, "%s/target.gguf", argv[1]);
    snprintf(draft, size, "%s/draft.gguf", argv[1]);
    return true;
}

static inline specd_engine_params test_engine_params(const char *target, const char *draft, int32_t n_ctx) {
    specd_engine_params p = specd_engine_default_params();
    p.target_path = target;
    p.draft_path = draft;
    p.n_ctx = n_ctx;
    p.n_threads = 1; /* ggml threads spin at barriers: on a busy CI machine two would crawl */
    return p;
}

static inline specd_engine *open_engine_with(const specd_engine_params *p) {
    specd_engine *e = NULL;
    char *err = NULL;
    if (specd_engine_new(p, &e, &err) != SPECD_OK) fail_msg("engine: %s", err);
    return e;
}

static inline specd_engine *open_engine(const char *target, const char *draft, int32_t n_ctx) {
    specd_engine_params p = test_engine_params(target, draft, n_ctx);
    return open_engine_with(&p);
}

/* The group fixture most engine tests share: `engine` opened on the tiny pair (n_ctx cells) before
 * the group's tests and freed after them: cmocka's group setup and teardown, named so. */
#define SPECD_TEST_ENGINE_FIXTURE_CTX(engine, target, draft, n_ctx)                                        \
    static int setup(void **state) {                                                                     \
        (void)state;                                                                                     \
        (engine) = open_engine((target), (draft), (n_ctx));                                              \
        return 0;                                                                                        \
    }                                                                                                    \
    static int teardown(void **state) {                                                                  \
        (void)state;                                                                                     \
        specd_engine_free(engine);                                                                       \
        return 0;                                                                                        \
    }

/* The same with 256 cells, what most of them open. */
#define SPECD_TEST_ENGINE_FIXTURE(engine, target, draft) SPECD_TEST_ENGINE_FIXTURE_CTX(engine, target, draft, 256)

/* Greedy generation as the lossless tests compare it: 48 tokens past any end of generation,
 * temperature 0, seed 1, drafter `type` drafting up to draft_max; not adaptive, it drafts
 * draft_max tokens every step (draft_min = draft_max). */
static inline specd_generation_params greedy_params(specd_spec_type type, int32_t draft_max, bool adaptive) {
    specd_generation_params g = specd_generation_default_params();
    g.n_predict = 48;
    g.ignore_eos = true;
    g.sampling.temperature = 0.0f;
    g.sampling.seed = 1;
    g.speculative.type = type;
    g.speculative.draft_max = draft_max;
    g.speculative.adaptive = adaptive;
    if (!adaptive) g.speculative.draft_min = draft_max;
    return g;
}

/* Sampling at `temperature` with no truncation (top_k 0, top_p 1, min_p 0): the distribution the
 * chi-square tests compute exactly. */
static inline specd_sampling_params plain_sampling(float temperature) {
    specd_sampling_params sp = specd_generation_default_params().sampling;
    sp.temperature = temperature;
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    return sp;
}

static inline specd_result generate_text(specd_engine *e, const char *text, const specd_generation_params *g) {
    specd_token *prompt = NULL;
    int32_t n = 0;
    char *err = NULL;
    assert_int_equal(specd_tokenize(e, text, true, &prompt, &n, &err), SPECD_OK);
    specd_result r;
    if (specd_generate(e, prompt, n, g, &r, &err) != SPECD_OK) fail_msg("generate: %s", err);
    specd_free(prompt);
    return r;
}

/* A prompt P + G + P (at most cap tokens into out; returns the count), where G is the greedy
 * continuation of `text` under `g` (its n_predict tokens): prompt lookup then drafts G after it,
 * which the target at temperature 1 accepts often but not always. */
static inline int32_t repeating_prompt(specd_engine *e, const char *text, const specd_generation_params *g,
                                       specd_token *out, int32_t cap) {
    specd_token *p = NULL;
    int32_t n = 0;
    assert_int_equal(specd_tokenize(e, text, true, &p, &n, NULL), SPECD_OK);
    specd_result r;
    assert_int_equal(specd_generate(e, p, n, g, &r, NULL), SPECD_OK);
    int32_t len = 0;
    assert_true(2 * n + r.n_tokens <= cap);
    for (int32_t i = 0; i < n; i++) out[len++] = p[i];
    for (int32_t i = 0; i < r.n_tokens; i++) out[len++] = r.tokens[i];
    for (int32_t i = 1; i < n; i++) out[len++] = p[i]; /* P again, without BOS */
    specd_result_clear(&r);
    specd_free(p);
    return len;
}

static inline void assert_same_tokens(const specd_result *a, const specd_result *b, const char *what) {
    if (a->n_tokens != b->n_tokens) fail_msg("%s: %d tokens vs %d", what, a->n_tokens, b->n_tokens);
    for (int32_t i = 0; i < a->n_tokens; i++)
        if (a->tokens[i] != b->tokens[i])
            fail_msg("%s: token %d differs (%d vs %d)", what, i, a->tokens[i], b->tokens[i]);
}

#endif
