/* test_model_free.c - model-free drafters and drafter chains end to end on the tiny generated
 * models: greedy output equals target-only output (with drafts both accepted and rejected),
 * per-drafter statistics add up, sampling stays exact with deterministic drafts (q one-hot), and
 * what the drafters keep across requests stays bounded.
 *
 *   test_model_free MODELS_DIR */
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

static char target_path[1024], draft_path[1024];
static specd_engine *engine; /* target + draft */

/* The second half repeats the first, so a continuation that copies earlier text is likely. */
static const char *prompts[] = {
    "the little girl saw a big red ball the little girl saw a big red ball the little girl",
    "one day the dog ran to the park with his mom and one day the dog ran to the",
    "she was happy",
};

static const specd_spec_type model_free_types[] = {SPECD_SPEC_NGRAM_SIMPLE, SPECD_SPEC_NGRAM_MAP,
                                                   SPECD_SPEC_NGRAM_CACHE,  SPECD_SPEC_SUFFIX,
                                                   SPECD_SPEC_NGRAM_MOD,    SPECD_SPEC_NGRAM_MAP_K4V};
#define N_MODEL_FREE ((int)(sizeof model_free_types / sizeof *model_free_types))

SPECD_TEST_ENGINE_FIXTURE_CTX(engine, target_path, draft_path, 512)

/* greedy_params with a list of drafters, 64 tokens, and draft_min left at its default even when
 * not adaptive (greedy_params(..., true) leaves it). */
static specd_generation_params greedy_list(const specd_spec_type *types, int32_t n_types, int32_t draft_max,
                                           bool adaptive) {
    specd_spec_type type = n_types == 0 ? SPECD_SPEC_NONE : specd_generation_default_params().speculative.type;
    specd_generation_params g = greedy_params(type, draft_max, true);
    g.n_predict = 64;
    g.speculative.adaptive = adaptive;
    g.speculative.n_types = n_types;
    for (int32_t i = 0; i < n_types; i++) g.speculative.types[i] = types[i];
    return g;
}

/* The per-drafter statistics add up to the totals. */
static void assert_drafter_stats_add_up(const specd_stats *s) {
    int32_t drafted = 0, accepted = 0;
    for (int32_t i = 0; i < s->n_drafters; i++) {
        drafted += s->drafters[i].n_drafted;
        accepted += s->drafters[i].n_accepted;
        assert_true(s->drafters[i].n_chosen <= s->drafters[i].n_calls);
    }
    assert_int_equal(drafted, s->n_drafted);
    assert_int_equal(accepted, s->n_accepted);
}

typedef struct outcome {
    int64_t drafted, accepted;
} outcome;

/* Every prompt, fixed and adaptive length: speculative output equals target-only output. */
static outcome check_lossless(const specd_spec_type *types, int32_t n_types) {
    outcome o = {0, 0};
    for (size_t p = 0; p < sizeof prompts / sizeof *prompts; p++) {
        specd_generation_params base = greedy_list(NULL, 0, 0, false);
        specd_result want = generate_text(engine, prompts[p], &base);
        for (int adaptive = 0; adaptive <= 1; adaptive++) {
            specd_generation_params g = greedy_list(types, n_types, 6, adaptive);
            specd_result got = generate_text(engine, prompts[p], &g);
            char what[128];
            snprintf(what, sizeof what, "%s%s, prompt %zu, %s", specd_spec_type_name(types[0]),
                     n_types > 1 ? ",..." : "", p, adaptive ? "adaptive" : "fixed");
            assert_same_tokens(&got, &want, what);
            assert_int_equal(got.stats.n_drafters, n_types);
            assert_drafter_stats_add_up(&got.stats);
            o.drafted += got.stats.n_drafted;
            o.accepted += got.stats.n_accepted;
            specd_result_clear(&got);
        }
        specd_result_clear(&want);
    }
    return o;
}

static void test_greedy_model_free_equals_target_alone(void **state) {
    (void)state;
    for (int i = 0; i < N_MODEL_FREE; i++) {
        outcome o = check_lossless(&model_free_types[i], 1);
        print_message("%s: %lld drafted, %lld accepted\n", specd_spec_type_name(model_free_types[i]),
                      (long long)o.drafted, (long long)o.accepted);
        /* Both verification outcomes happened, so the comparison covered rejections too (ngram-mod's
         * 24-token keys are never wrong on these texts: its rejections are the next test's). */
        bool long_keys = model_free_types[i] == SPECD_SPEC_NGRAM_MOD;
        assert_true(o.accepted > 0 && (o.accepted < o.drafted || (long_keys && o.accepted == o.drafted)));
    }
}

/* A prompt W x V W (W: 30 word tokens, x and V others): after the second W, ngram-mod's 24-gram
 * and ngram-map-k4v's key both recall x, which the target does not continue with: their drafts are
 * rejected, and the output is still the target's. */
static void test_recalled_continuations_can_be_wrong(void **state) {
    (void)state;
    specd_token prompt[80];
    int32_t n = 0;
    prompt[n++] = 1; /* BOS */
    for (int i = 0; i < 30; i++) prompt[n++] = 331 + (i * 7) % 60;
    prompt[n++] = 300;
    for (int i = 0; i < 5; i++) prompt[n++] = 400 + i;
    for (int i = 0; i < 30; i++) prompt[n++] = prompt[1 + i];
    specd_spec_type types[] = {SPECD_SPEC_NGRAM_MOD, SPECD_SPEC_NGRAM_MAP_K4V};
    specd_generation_params base = greedy_list(NULL, 0, 0, false);
    specd_result want;
    assert_int_equal(specd_generate(engine, prompt, n, &base, &want, NULL), SPECD_OK);
    assert_int_not_equal(want.tokens[0], 300); /* the target does not repeat x */
    for (int t = 0; t < 2; t++) {
        specd_generation_params g = greedy_list(&types[t], 1, 6, false);
        g.speculative.ngram_min_hits = 1;
        specd_result got;
        assert_int_equal(specd_generate(engine, prompt, n, &g, &got, NULL), SPECD_OK);
        assert_same_tokens(&got, &want, specd_spec_type_name(types[t]));
        print_message("%s: %d drafted, %d accepted\n", specd_spec_type_name(types[t]), got.stats.n_drafted,
                      got.stats.n_accepted);
        assert_true(got.stats.n_drafted > got.stats.n_accepted);
        specd_result_clear(&got);
    }
    specd_result_clear(&want);
}

static void test_greedy_chains_equal_target_alone(void **state) {
    (void)state;
    specd_spec_type with_model[] = {SPECD_SPEC_NGRAM_SIMPLE, SPECD_SPEC_DRAFT};
    outcome o = check_lossless(with_model, 2);
    print_message("ngram-simple,draft: %lld drafted, %lld accepted\n", (long long)o.drafted, (long long)o.accepted);
    assert_true(o.accepted > 0 && o.accepted < o.drafted);
    outcome all = check_lossless(model_free_types, N_MODEL_FREE);
    assert_true(all.accepted > 0);
}

/* Suffix drafts as trees (several branches verified in one pass, the accepted one kept in the
 * KV cache as sequence 0): still the target's greedy output, and trees were really drafted. The
 * crafted prompt ends with a 3-gram that occurred six times before, followed by two different
 * continuations equally often, so the suffix tree offers two branches at once. */
static int32_t suffix_tree_steps(const specd_token *prompt, int32_t n, int32_t branches) {
    specd_spec_type suffix = SPECD_SPEC_SUFFIX;
    specd_generation_params base = greedy_list(NULL, 0, 0, false);
    base.n_predict = 24;
    specd_result want, got;
    assert_int_equal(specd_generate(engine, prompt, n, &base, &want, NULL), SPECD_OK);
    specd_generation_params g = greedy_list(&suffix, 1, 6, false);
    g.n_predict = 24;
    g.speculative.suffix_branches = branches;
    assert_int_equal(specd_generate(engine, prompt, n, &g, &got, NULL), SPECD_OK);
    char what[64];
    snprintf(what, sizeof what, "suffix with %d branches", branches);
    assert_same_tokens(&got, &want, what);
    int32_t trees = got.stats.n_tree_steps;
    specd_result_clear(&got);
    specd_result_clear(&want);
    return trees;
}

static void test_greedy_suffix_trees_equal_target_alone(void **state) {
    (void)state;
    const specd_token prompt[] = {1,   300, 301, 302, 310, 311, 50, 300, 301, 302, 320, 321, 51,
                                  300, 301, 302, 310, 311, 52, 300, 301, 302, 320, 321, 53,
                                  300, 301, 302, 310, 311, 54, 300, 301, 302, 320, 321, 55, 300, 301, 302};
    int32_t n = (int32_t)(sizeof prompt / sizeof *prompt);
    /* Trees first: afterwards the engine's suffix memory holds this text, and its long match has
     * one continuation only. */
    int32_t trees = suffix_tree_steps(prompt, n, 4), chains = suffix_tree_steps(prompt, n, 1);
    print_message("suffix: %d tree steps with 1 branch allowed, %d with 4\n", chains, trees);
    assert_int_equal(chains, 0);
    assert_true(trees > 0);
    /* and the text prompts, with the engine's suffix memory of everything before */
    specd_spec_type suffix = SPECD_SPEC_SUFFIX;
    for (size_t p = 0; p < sizeof prompts / sizeof *prompts; p++) {
        specd_generation_params base = greedy_list(NULL, 0, 0, false);
        specd_result want = generate_text(engine, prompts[p], &base);
        specd_generation_params g = greedy_list(&suffix, 1, 6, false);
        g.speculative.suffix_branches = 4;
        specd_result got = generate_text(engine, prompts[p], &g);
        assert_same_tokens(&got, &want, "suffix trees on a text prompt");
        specd_result_clear(&got);
        specd_result_clear(&want);
    }
}

static void test_suffix_branches_out_of_range_is_refused(void **state) {
    (void)state;
    specd_spec_type suffix = SPECD_SPEC_SUFFIX;
    specd_generation_params g = greedy_list(&suffix, 1, 6, false);
    g.speculative.suffix_branches = 9;
    specd_token t = 1;
    specd_result r;
    char *err = NULL;
    assert_int_equal(specd_generate(engine, &t, 1, &g, &r, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(err);
    assert_non_null(strstr(err, "speculative.suffix_branches must be from 1 to 8 (got 9)"));
    specd_free(err);
}

/* ---- exact sampling with deterministic drafts ----------------------------------------------- */

static void test_sampling_with_prompt_lookup_is_exact(void **state) {
    (void)state;
    specd_token prompt[128];
    specd_generation_params lead = greedy_list(NULL, 0, 0, false); /* G: 6 greedy tokens */
    lead.n_predict = 6;
    int32_t n = repeating_prompt(engine, prompts[2], &lead, prompt, 128);
    specd_sampling_params sp = plain_sampling(1.0f);
    exact_pairs ex = exact_first_two(target_path, prompt, n, &sp);
    assert_non_null(ex.prob);
    specd_spec_type types[] = {SPECD_SPEC_NGRAM_SIMPLE};
    specd_generation_params g = greedy_list(types, 1, 3, false);
    g.sampling = sp;
    g.sampling.reproducible = false; /* rejection sampling */
    g.speculative.draft_min = 3;
    assert_first_two_follow(engine, prompt, n, g, &ex, 10000, "ngram-simple sampling");
    free(ex.prob);
}

static void test_bad_lists_are_refused(void **state) {
    (void)state;
    specd_token prompt[] = {1, 300, 301};
    specd_result r;
    char *err = NULL;
    specd_spec_type twice[] = {SPECD_SPEC_NGRAM_SIMPLE, SPECD_SPEC_NGRAM_SIMPLE};
    specd_generation_params g = greedy_list(twice, 2, 4, true);
    assert_int_equal(specd_generate(engine, prompt, 3, &g, &r, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "listed twice"));
    specd_free(err);
    specd_spec_type unknown[] = {(specd_spec_type)42};
    g = greedy_list(unknown, 1, 4, true);
    assert_int_equal(specd_generate(engine, prompt, 3, &g, &r, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "speculative.types entry 0 is 42, not a drafter"));
    specd_free(err);
    specd_engine *no_draft = open_engine(target_path, NULL, 64);
    specd_spec_type with_model[] = {SPECD_SPEC_NGRAM_SIMPLE, SPECD_SPEC_DRAFT};
    g = greedy_list(with_model, 2, 4, true);
    assert_int_equal(specd_generate(no_draft, prompt, 3, &g, &r, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "needs a draft model"));
    specd_free(err);
    /* model-free drafters need no draft model */
    specd_spec_type alone[] = {SPECD_SPEC_NGRAM_SIMPLE};
    g = greedy_list(alone, 1, 4, true);
    assert_int_equal(specd_generate(no_draft, prompt, 3, &g, &r, &err), SPECD_OK);
    specd_result_clear(&r);
    specd_engine_free(no_draft);
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target_path, draft_path, sizeof target_path)) return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_model_free_equals_target_alone),
        cmocka_unit_test(test_recalled_continuations_can_be_wrong),
        cmocka_unit_test(test_greedy_chains_equal_target_alone),
        cmocka_unit_test(test_greedy_suffix_trees_equal_target_alone),
        cmocka_unit_test(test_suffix_branches_out_of_range_is_refused),
        cmocka_unit_test(test_sampling_with_prompt_lookup_is_exact),
        cmocka_unit_test(test_bad_lists_are_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
