/* test_vocab_bridge.c - drafts from a draft model of another vocabulary, through text
 * (draft/vocab_bridge.h, draft/draft_bridged.c): the engine takes the pair and says so; greedy
 * output equals the target's alone with drafts accepted, past context shifts too; sampling at temperature 1 is exact
 * (chi-square); the boundaries (a token the other side splits, an incomplete UTF-8 character on
 * either side) convert as they should; and stories260K drafted for by aidreams260K (another
 * vocabulary of the same size) stays lossless on held-out prompts with drafts accepted.
 *
 *   test_vocab_bridge MODELS_DIR [SHARED_MODELS_DIR]
 * MODELS_DIR: the tiny models (target.gguf, split-vocab.gguf: the target's weights with a few word
 * pieces swapped); SHARED_MODELS_DIR: ../shared/models (the stories test skips, saying so,
 * without it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "chi_square.h"
#include "draft/vocab_bridge.h"
#include "engine_helpers.h"
#include "exact_pairs.h"
#include "specd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char target_path[1024], draft_path[1024], split_path[1024], stories_path[1024], aidreams_path[1024];
static specd_engine *engine; /* target + split-vocab */

SPECD_TEST_ENGINE_FIXTURE(engine, target_path, split_path)

/* Greedy generations with fixed chains of 3 (adaptive lengths off: the drafts do not depend on
 * timings), or none. */
static specd_generation_params greedy(bool drafts, int32_t n_predict) {
    specd_generation_params g = specd_generation_default_params();
    g.sampling.temperature = 0.0f;
    g.n_predict = n_predict;
    g.ignore_eos = true;
    g.speculative.type = drafts ? SPECD_SPEC_DRAFT : SPECD_SPEC_NONE;
    g.speculative.draft_max = g.speculative.draft_min = 3;
    g.speculative.adaptive = false;
    return g;
}

static void test_the_pair_is_taken_and_said(void **state) {
    (void)state;
    assert_true(specd_engine_draft_vocab_differs(engine));
    assert_int_equal(specd_vocab_n_tokens(engine, SPECD_VOCAB_DRAFT), specd_vocab_n_tokens(engine, SPECD_VOCAB_TARGET));
    specd_engine *same = open_engine(target_path, draft_path, 256); /* the same vocabulary */
    assert_false(specd_engine_draft_vocab_differs(same));
    specd_engine_free(same);
}

/* Prompts of the tiny vocabulary's words, and the words the split vocabulary cuts ("little",
 * "happy"). */
static const char *tiny_prompts[] = {
    "the little girl was happy",  "once upon a time there was a little dog",
    "she saw a big red ball",     "he went home with his mom",
    "the happy cat ran to the park", "they said it was a very good day",
    "a little bird in the blue sky", "then we play with the toy",
};
#define N_TINY ((int)(sizeof tiny_prompts / sizeof *tiny_prompts))

/* Greedy output of every prompt with drafts equals the target's alone; returns the drafts
 * accepted in all (and drafted). */
static int64_t assert_lossless(specd_engine *e, const char *const *prompts, int n, int32_t n_predict, int64_t *drafted) {
    int64_t accepted = 0;
    *drafted = 0;
    for (int i = 0; i < n; i++) {
        specd_generation_params plain = greedy(false, n_predict), spec = greedy(true, n_predict);
        specd_result want = generate_text(e, prompts[i], &plain), got = generate_text(e, prompts[i], &spec);
        assert_same_tokens(&got, &want, prompts[i]);
        print_message("'%s': drafted %d, accepted %d\n", prompts[i], got.stats.n_drafted, got.stats.n_accepted);
        *drafted += got.stats.n_drafted;
        accepted += got.stats.n_accepted;
        /* the drafter priced its draft tokens (decode and conversion) in the engine's cost model */
        if (got.stats.n_drafted > 0) assert_true(got.stats.draft_token_ms > 0.0);
        specd_result_clear(&want);
        specd_result_clear(&got);
    }
    return accepted;
}

static void test_greedy_output_is_the_targets(void **state) {
    (void)state;
    int64_t drafted = 0, accepted = assert_lossless(engine, tiny_prompts, N_TINY, 48, &drafted);
    assert_true(accepted > 0 && accepted < drafted);
}

/* Adaptive lengths (the default) too: the plan prices the draft with its conversion. */
static void test_adaptive_lengths_stay_lossless(void **state) {
    (void)state;
    specd_generation_params plain = greedy(false, 48), spec = greedy(true, 48);
    spec.speculative.adaptive = true;
    spec.speculative.draft_min = 0;
    spec.speculative.draft_max = 8;
    specd_result want = generate_text(engine, tiny_prompts[0], &plain), got = generate_text(engine, tiny_prompts[0], &spec);
    assert_same_tokens(&got, &want, "adaptive");
    specd_result_clear(&want);
    specd_result_clear(&got);
}

/* Past the context (256 cells): the target's history is cut in the middle, and the draft follows
 * its text anew (the drafter's prepare), still lossless. */
static void test_context_shifts_stay_lossless(void **state) {
    (void)state;
    specd_generation_params plain = greedy(false, 400), spec = greedy(true, 400);
    plain.context_shift = spec.context_shift = true;
    specd_result want = generate_text(engine, tiny_prompts[1], &plain), got = generate_text(engine, tiny_prompts[1], &spec);
    assert_true(got.stats.n_context_shifts > 0);
    assert_same_tokens(&got, &want, "context shifts");
    assert_true(got.stats.n_accepted > 0);
    specd_result_clear(&want);
    specd_result_clear(&got);
}

static specd_sampling_params temperature_one(bool reproducible) {
    specd_sampling_params sp = specd_generation_default_params().sampling;
    sp.temperature = 1.0f;
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    sp.reproducible = reproducible;
    return sp;
}

static void test_sampling_is_exact(void **state) {
    (void)state;
    assert_fixed_drafts_are_exact(engine, target_path, "the little girl was", temperature_one(false), 3, 10000,
                                  "another vocabulary, rejection sampling");
}

/* A seeded request's draws are coupled (the same text with any speculation): each seed's output
 * with drafts through text is the target's alone, token for token. */
static void test_coupled_draws_are_the_targets(void **state) {
    (void)state;
    int64_t drafted = 0, accepted = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        specd_generation_params plain = greedy(false, 24), spec = greedy(true, 24);
        plain.sampling = spec.sampling = temperature_one(true);
        plain.sampling.seed = spec.sampling.seed = seed;
        specd_result want = generate_text(engine, tiny_prompts[seed % N_TINY], &plain);
        specd_result got = generate_text(engine, tiny_prompts[seed % N_TINY], &spec);
        assert_same_tokens(&got, &want, "coupled draws");
        drafted += got.stats.n_drafted;
        accepted += got.stats.n_accepted;
        specd_result_clear(&want);
        specd_result_clear(&got);
    }
    print_message("coupled draws: %lld of %lld drafts accepted\n", (long long)accepted, (long long)drafted);
    assert_true(accepted > 0 && accepted < drafted);
}

/* ---- the boundaries, through the bridge itself ------------------------------------------------ */

/* The last token of `text` in the side's vocabulary (its tokenizer may put a space before). */
static specd_token last_token(specd_vocab_side side, const char *text) {
    specd_token t[64];
    int32_t n = specd_vocab_tokenize(engine, side, text, (int32_t)strlen(text), t, 64);
    assert_true(n > 0);
    return t[n - 1];
}

/* The text of tokens[0..n) in the side's vocabulary, into buf (NUL-terminated). */
static const char *text_of(specd_vocab_side side, const specd_token *tokens, int32_t n, char *buf, size_t size) {
    size_t len = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t k = specd_vocab_piece(engine, side, tokens[i], buf + len, (int32_t)(size - len - 1));
        assert_true(k >= 0);
        len += (size_t)k;
    }
    buf[len] = '\0';
    return buf;
}

/* Adds a draft token: whether its text lines up with the history. */
static bool add(specd_vocab_bridge *b, specd_token token, const specd_token **targets, int32_t *n_targets) {
    bool lined_up = false;
    assert_int_equal(specd_vocab_bridge_add(b, token, targets, n_targets, &lined_up, NULL), SPECD_OK);
    return lined_up;
}

static specd_vocab_bridge *bridge_after(const specd_token *history, int32_t n, const specd_token **draft,
                                        int32_t *n_draft) {
    specd_vocab_bridge *b = specd_vocab_bridge_new(engine);
    assert_non_null(b);
    assert_int_equal(specd_vocab_bridge_follow(b, history, n, draft, n_draft, NULL), SPECD_OK);
    return b;
}

/* " little" is one target token and two of the draft's ("▁littl" "e"); the draft's "ing" is two
 * of the target's: each side gets the other's text whole. */
static void test_a_token_the_other_side_splits(void **state) {
    (void)state;
    specd_token bos = specd_vocab_added_bos(engine, SPECD_VOCAB_TARGET);
    specd_token history[] = {bos, last_token(SPECD_VOCAB_TARGET, " the"), last_token(SPECD_VOCAB_TARGET, " little")};
    const specd_token *draft = NULL, *targets = NULL;
    int32_t n_draft = 0, n_targets = 0;
    specd_vocab_bridge *b = bridge_after(history, 3, &draft, &n_draft);
    char buf[256];
    assert_int_equal(draft[0], specd_vocab_added_bos(engine, SPECD_VOCAB_DRAFT));
    assert_int_equal(n_draft, 4); /* BOS "▁the" "▁littl" "e" */
    assert_string_equal(text_of(SPECD_VOCAB_DRAFT, draft + 1, n_draft - 1, buf, sizeof buf), " the little");
    assert_true(specd_vocab_bridge_begin(b));
    specd_token ing = history[2]; /* the split vocabulary has "ing" where the target has "▁little" */
    assert_string_equal(text_of(SPECD_VOCAB_DRAFT, &ing, 1, buf, sizeof buf), "ing");
    assert_true(add(b, ing, &targets, &n_targets));
    assert_true(n_targets >= 2);
    assert_string_equal(text_of(SPECD_VOCAB_TARGET, targets, n_targets, buf, sizeof buf), "ing");
    /* the history grows by a word: only its tail is tokenized again, the rest kept */
    specd_token longer[] = {history[0], history[1], history[2], last_token(SPECD_VOCAB_TARGET, " girl")};
    assert_int_equal(specd_vocab_bridge_follow(b, longer, 4, &draft, &n_draft, NULL), SPECD_OK);
    assert_string_equal(text_of(SPECD_VOCAB_DRAFT, draft + 1, n_draft - 1, buf, sizeof buf), " the little girl");
    specd_vocab_bridge_free(b);
}

/* The target's history ends inside a character ("é" is two byte tokens of the target's, one token
 * of the draft's): the draft sees the text before it, and its draft must complete it. */
static void test_an_incomplete_character_in_the_history(void **state) {
    (void)state;
    specd_token bos = specd_vocab_added_bos(engine, SPECD_VOCAB_TARGET);
    specd_token c3 = last_token(SPECD_VOCAB_TARGET, "\xC3"), a9 = last_token(SPECD_VOCAB_TARGET, "\xA9");
    specd_token history[] = {bos, last_token(SPECD_VOCAB_TARGET, " the"), c3};
    const specd_token *draft = NULL, *targets = NULL;
    int32_t n_draft = 0, n_targets = 0;
    specd_vocab_bridge *b = bridge_after(history, 3, &draft, &n_draft);
    char buf[256];
    assert_string_equal(text_of(SPECD_VOCAB_DRAFT, draft + 1, n_draft - 1, buf, sizeof buf), " the");
    specd_token e_acute = last_token(SPECD_VOCAB_DRAFT, "\xC3\xA9");
    assert_int_equal(specd_vocab_piece(engine, SPECD_VOCAB_DRAFT, e_acute, buf, sizeof buf), 2); /* one token */
    assert_true(specd_vocab_bridge_begin(b));
    assert_true(add(b, e_acute, &targets, &n_targets));
    assert_int_equal(n_targets, 1);
    assert_int_equal(targets[0], a9); /* the rest of the character */
    /* a draft that goes elsewhere than the character begun lines up with nothing */
    assert_true(specd_vocab_bridge_begin(b));
    assert_false(add(b, last_token(SPECD_VOCAB_DRAFT, " a"), &targets, &n_targets));
    assert_int_equal(n_targets, 0);
    specd_vocab_bridge_free(b);
}

/* A draft that ends inside a character proposes nothing of it until its last byte comes. */
static void test_an_incomplete_character_in_a_draft(void **state) {
    (void)state;
    specd_token bos = specd_vocab_added_bos(engine, SPECD_VOCAB_TARGET);
    specd_token history[] = {bos, last_token(SPECD_VOCAB_TARGET, " the")};
    const specd_token *draft = NULL, *targets = NULL;
    int32_t n_draft = 0, n_targets = 0;
    specd_vocab_bridge *b = bridge_after(history, 2, &draft, &n_draft);
    assert_true(specd_vocab_bridge_begin(b));
    assert_true(add(b, last_token(SPECD_VOCAB_DRAFT, "\xE2"), &targets, &n_targets));
    assert_int_equal(n_targets, 0);
    assert_true(add(b, last_token(SPECD_VOCAB_DRAFT, "\x82"), &targets, &n_targets));
    assert_int_equal(n_targets, 0);
    assert_true(add(b, last_token(SPECD_VOCAB_DRAFT, "\xAC"), &targets, &n_targets));
    char buf[64];
    assert_string_equal(text_of(SPECD_VOCAB_TARGET, targets, n_targets, buf, sizeof buf), "\xE2\x82\xAC"); /* € */
    specd_vocab_bridge_free(b);
    assert_int_equal(specd_utf8_whole("a\xE2\x82", 3), 1);
    assert_int_equal(specd_utf8_whole("a\xE2\x82\xAC", 4), 4);
    assert_int_equal(specd_utf8_whole("a\x82", 2), 2); /* a stray continuation byte stays */
    assert_int_equal(specd_utf8_whole("\xF0\x9F\x98", 3), 0);
}

/* ---- stories260K drafted for by aidreams260K --------------------------------------------------- */

/* Held out: chosen before the bridge was measured on any of them, and never tuned on. */
static const char *stories_prompts[] = {
    "Once upon a time",        "Lily and Tom went to the park",  "The little dog was sad because",
    "One day, a bird",         "Tim had a big red ball.",       "The sun was shining and",
    "Mom said, \"Let's go",    "There was a girl named Sue who",
};

static void test_stories_with_aidreams(void **state) {
    (void)state;
    if (access(stories_path, R_OK) != 0 || access(aidreams_path, R_OK) != 0) {
        print_message("SKIP: %s or %s is absent (the shared models are not beside this checkout)\n", stories_path,
                      aidreams_path);
        skip();
    }
    specd_engine *e = open_engine(stories_path, aidreams_path, 512);
    assert_true(specd_engine_draft_vocab_differs(e));
    int64_t drafted = 0, accepted = assert_lossless(e, stories_prompts, 8, 64, &drafted);
    print_message("stories260K with aidreams260K: %lld of %lld drafts accepted\n", (long long)accepted,
                  (long long)drafted);
    assert_true(accepted > 0);
    specd_engine_free(e);
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target_path, draft_path, sizeof draft_path)) return 2;
    snprintf(split_path, sizeof split_path, "%s/split-vocab.gguf", argv[1]);
    const char *shared = argc > 2 ? argv[2] : "../shared/models";
    snprintf(stories_path, sizeof stories_path, "%s/stories260K.gguf", shared);
    snprintf(aidreams_path, sizeof aidreams_path, "%s/aidreams260K-different-vocab/aidreams260K.gguf", shared);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_pair_is_taken_and_said),
        cmocka_unit_test(test_greedy_output_is_the_targets),
        cmocka_unit_test(test_adaptive_lengths_stay_lossless),
        cmocka_unit_test(test_context_shifts_stay_lossless),
        cmocka_unit_test(test_sampling_is_exact),
        cmocka_unit_test(test_coupled_draws_are_the_targets),
        cmocka_unit_test(test_a_token_the_other_side_splits),
        cmocka_unit_test(test_an_incomplete_character_in_the_history),
        cmocka_unit_test(test_an_incomplete_character_in_a_draft),
        cmocka_unit_test(test_stories_with_aidreams),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
