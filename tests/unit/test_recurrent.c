/* test_recurrent.c - speculation on recurrent models (tiny Mamba) and hybrid ones (tiny LFM2:
 * convolution and attention layers; tests/make_tiny_models.cmake),
 * as target and as draft: llama.cpp cannot drop the last tokens of a recurrent state, so the
 * engine keeps a checkpoint before the tokens it may drop (src/engine/kv.c). Greedy output with
 * every drafter equals the target alone, sampling follows the target's exact distribution, the
 * prompt cache stays exact, and draft trees get a clear error.
 *
 *   test_recurrent MODELS_DIR
 * MODELS_DIR holds mamba-target.gguf, mamba-draft.gguf (its noisy copy), lfm2-target.gguf,
 * lfm2-draft.gguf, target.gguf and draft.gguf (attention models with the same vocabulary). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "chi_square.h"
#include "draft/learned.h"
#include "engine/engine_internal.h"
#include "engine_helpers.h"
#include "exact_pairs.h"
#include "specd.h"

#include <stdio.h>
#include <string.h>

static char mamba_target[1024], mamba_draft[1024], attn_target[1024], attn_draft[1024];
static char lfm2_target[1024], lfm2_draft[1024];

static const char *prompts[] = {
    "the little girl saw a big red ball",
    "one day the dog ran to the park with his mom",
};

static specd_generation_params greedy(specd_spec_type type, int32_t draft_max) {
    specd_generation_params g = greedy_params(type, draft_max, false);
    g.n_predict = 40;
    return g;
}

/* A list of drafters (as --spec a,b). */
static specd_generation_params greedy_list(const specd_spec_type *types, int32_t n, int32_t draft_max) {
    specd_generation_params g = greedy(types[0], draft_max);
    for (int32_t i = 0; i < n; i++) g.speculative.types[i] = types[i];
    g.speculative.n_types = n;
    return g;
}

/* Generates every prompt with `spec` and without speculation on the same engine, and asserts the
 * same tokens; adds the drafted and accepted counts. */
static void assert_lossless(specd_engine *e, const specd_generation_params *spec, const char *what,
                            int64_t *drafted, int64_t *accepted) {
    for (size_t p = 0; p < sizeof prompts / sizeof *prompts; p++) {
        specd_generation_params none = greedy(SPECD_SPEC_NONE, 0);
        specd_result want = generate_text(e, prompts[p], &none);
        specd_result got = generate_text(e, prompts[p], spec);
        char label[160];
        snprintf(label, sizeof label, "%s, prompt %zu", what, p);
        assert_same_tokens(&got, &want, label);
        *drafted += got.stats.n_drafted;
        *accepted += got.stats.n_accepted;
        specd_result_clear(&want);
        specd_result_clear(&got);
    }
}

/* Greedy speculation with the draft model, fixed lengths and adaptive, equals the target alone;
 * drafts were rejected, so the state went back; returns the engine for more checks. */
static specd_engine *check_draft_model_lossless(const char *target, const char *draft, const char *what) {
    specd_engine *e = open_engine(target, draft, 256);
    int64_t drafted = 0, accepted = 0;
    const int32_t lengths[] = {1, 3, 6, 12}; /* 12: past the target's rollback snapshots (8) */
    for (size_t l = 0; l < 4; l++) {
        specd_generation_params g = greedy(SPECD_SPEC_DRAFT, lengths[l]);
        assert_lossless(e, &g, what, &drafted, &accepted);
    }
    specd_generation_params adaptive = greedy(SPECD_SPEC_DRAFT, 8);
    adaptive.speculative.adaptive = true;
    adaptive.speculative.draft_min = 0;
    assert_lossless(e, &adaptive, what, &drafted, &accepted);
    print_message("%s: %lld drafted, %lld accepted\n", what, (long long)drafted, (long long)accepted);
    assert_true(accepted > 0 && accepted < drafted);
    return e;
}

static void test_hybrid_target_and_draft_greedy_is_lossless(void **state) {
    (void)state;
    specd_engine *e = check_draft_model_lossless(lfm2_target, lfm2_draft, "lfm2 draft for lfm2");
    /* LFM2 has llama.cpp's per-token rollback: the target drops rejected drafts with it (drafts
     * past its snapshots use a checkpoint); the draft, one token per decode, goes back to its
     * checkpoints. */
    print_message("lfm2 target: %d snapshots, %lld rollbacks, %lld checkpoints, %lld restores; draft: %lld restores\n",
                  e->target.n_rs_seq, (long long)e->target.n_rollbacks, (long long)e->target.n_checkpoints,
                  (long long)e->target.n_restores, (long long)e->draft.n_restores);
    assert_true(e->target.n_rs_seq > 0);
    assert_true(e->target.n_rollbacks > 0);
    assert_true(e->target.n_checkpoints > 0 && e->target.n_restores > 0);
    assert_int_equal(e->draft.n_rs_seq, 0);
    assert_true(e->draft.n_restores > 0);
    specd_engine_free(e);
}

/* Decode time per step over a fixed workload (greedy, 4 drafts), and the state's share as the
 * cost model learnt it: printed for the report, never asserted (no timed tests). */
static void measure_steps(specd_engine *e, const char *what) {
    specd_generation_params g = greedy(SPECD_SPEC_DRAFT, 4);
    g.n_predict = 64;
    double ms = 0.0;
    int64_t steps = 0;
    for (int round = 0; round < 5; round++)
        for (size_t p = 0; p < sizeof prompts / sizeof *prompts; p++) {
            specd_result r = generate_text(e, prompts[p], &g);
            ms += r.stats.decode_ms;
            steps += r.stats.n_steps;
            specd_result_clear(&r);
        }
    print_message("%s: %.1f us per step, state %.1f us per drafting step (%lld rollbacks, %lld restores)\n", what,
                  1e3 * ms / (double)steps, 1e3 * e->learned->costs.state_ms, (long long)e->target.n_rollbacks,
                  (long long)e->target.n_restores);
}

/* The checkpoint path on a hybrid model, as on a hybrid architecture without llama.cpp's rollback
 * (Jamba, Falcon-H1, Granite): the same model with its snapshots unused. Lossless, and the two
 * ways' costs printed side by side. */
static void test_hybrid_target_without_rollback_uses_checkpoints(void **state) {
    (void)state;
    specd_engine *with = open_engine(lfm2_target, lfm2_draft, 256);
    specd_engine *without = open_engine(lfm2_target, lfm2_draft, 256);
    without->target.n_rs_seq = 0;
    int64_t drafted = 0, accepted = 0;
    specd_generation_params g = greedy(SPECD_SPEC_DRAFT, 4);
    assert_lossless(without, &g, "lfm2 without rollback", &drafted, &accepted);
    assert_true(accepted < drafted);
    assert_int_equal(without->target.n_rollbacks, 0);
    assert_true(without->target.n_restores > 0);
    measure_steps(with, "lfm2 target, rollback");
    measure_steps(without, "lfm2 target, checkpoints");
    specd_engine_free(with);
    specd_engine_free(without);
}

static void test_recurrent_target_and_draft_greedy_is_lossless(void **state) {
    (void)state;
    specd_engine *e = open_engine(mamba_target, mamba_draft, 256);
    assert_int_equal(e->target.n_rs_seq, 0); /* Mamba has no per-token rollback in llama.cpp */
    assert_int_equal(e->target.n_seq_max, 1); /* chains only: no state per tree branch */
    int64_t drafted = 0, accepted = 0;
    const int32_t lengths[] = {1, 3, 6};
    for (size_t l = 0; l < 3; l++) {
        specd_generation_params g = greedy(SPECD_SPEC_DRAFT, lengths[l]);
        assert_lossless(e, &g, "mamba draft for mamba", &drafted, &accepted);
    }
    specd_generation_params adaptive = greedy(SPECD_SPEC_DRAFT, 8);
    adaptive.speculative.adaptive = true;
    adaptive.speculative.draft_min = 0;
    assert_lossless(e, &adaptive, "mamba draft for mamba, adaptive", &drafted, &accepted);
    print_message("mamba/mamba: %lld drafted, %lld accepted\n", (long long)drafted, (long long)accepted);
    assert_true(accepted > 0 && accepted < drafted); /* rejections happened: the state went back */
    /* Checkpoints were taken and restored in both models. */
    assert_true(e->target.n_checkpoints > 0 && e->target.n_restores > 0);
    assert_true(e->draft.n_checkpoints > 0 && e->draft.n_restores > 0);
    /* What the state costs per step, for the report (the cost model learns it: state_ms). */
    print_message("target: %lld checkpoints %.1f us each, %lld restores %.1f us each; draft: %.1f us, %.1f us; "
                  "state cost per drafting step %.3f ms\n",
                  (long long)e->target.n_checkpoints, 1e3 * e->target.checkpoint_ms / (double)e->target.n_checkpoints,
                  (long long)e->target.n_restores, 1e3 * e->target.restore_ms / (double)e->target.n_restores,
                  1e3 * e->draft.checkpoint_ms / (double)e->draft.n_checkpoints,
                  1e3 * e->draft.restore_ms / (double)e->draft.n_restores, e->learned->costs.state_ms);
    assert_true(e->learned->costs.state_ms > 0.0);
    specd_engine_free(e);
}

static void check_model_free_lossless(const char *target, const char *draft) {
    specd_engine *e = open_engine(target, draft, 256);
    const specd_spec_type lists[][2] = {
        {SPECD_SPEC_NGRAM_SIMPLE, SPECD_SPEC_NONE},
        {SPECD_SPEC_SUFFIX, SPECD_SPEC_NONE},
        {SPECD_SPEC_NGRAM_SIMPLE, SPECD_SPEC_SUFFIX},
        {SPECD_SPEC_NGRAM_SIMPLE, SPECD_SPEC_DRAFT},
    };
    const int32_t counts[] = {1, 1, 2, 2};
    int64_t drafted = 0, accepted = 0;
    for (size_t i = 0; i < 4; i++) {
        specd_generation_params g = greedy_list(lists[i], counts[i], 4);
        char what[64];
        snprintf(what, sizeof what, "drafter list %zu", i);
        /* A prompt that repeats, so the model-free drafters find something to draft. */
        specd_token prompt[256];
        specd_generation_params seed = greedy(SPECD_SPEC_NONE, 0);
        seed.n_predict = 12;
        int32_t n = repeating_prompt(e, prompts[i % 2], &seed, prompt, 256);
        specd_generation_params none = greedy(SPECD_SPEC_NONE, 0);
        specd_result want, got;
        assert_int_equal(specd_generate(e, prompt, n, &none, &want, NULL), SPECD_OK);
        assert_int_equal(specd_generate(e, prompt, n, &g, &got, NULL), SPECD_OK);
        assert_same_tokens(&got, &want, what);
        drafted += got.stats.n_drafted;
        accepted += got.stats.n_accepted;
        specd_result_clear(&want);
        specd_result_clear(&got);
    }
    print_message("model-free on %s: %lld drafted, %lld accepted\n", target, (long long)drafted, (long long)accepted);
    assert_true(drafted > 0 && accepted > 0);
    specd_engine_free(e);
}

static void test_model_free_drafters_on_recurrent_target_are_lossless(void **state) {
    (void)state;
    check_model_free_lossless(mamba_target, mamba_draft);
}

static void test_model_free_drafters_on_hybrid_target_are_lossless(void **state) {
    (void)state;
    check_model_free_lossless(lfm2_target, lfm2_draft);
}

/* The draft recurrent with an attention target, and the reverse: they share the vocabulary. */
static void test_mixed_pairs_are_lossless(void **state) {
    (void)state;
    const char *pairs[][2] = {{attn_target, mamba_draft}, {mamba_target, attn_draft}, {attn_target, lfm2_draft},
                              {lfm2_target, attn_draft}, {lfm2_target, mamba_draft}, {mamba_target, lfm2_draft}};
    for (int i = 0; i < 6; i++) {
        specd_engine *e = open_engine(pairs[i][0], pairs[i][1], 256);
        int64_t drafted = 0, accepted = 0;
        specd_generation_params g = greedy(SPECD_SPEC_DRAFT, 4);
        char what[64];
        snprintf(what, sizeof what, "pair %d", i);
        assert_lossless(e, &g, what, &drafted, &accepted);
        assert_true(drafted > 0);
        specd_engine_free(e);
    }
}

/* Temperature 1: the first two tokens follow the target's exact distribution (chi-square), with
 * drafts both accepted and rejected, so the restored state was used for the rejection's draw. */
static void check_sampling_is_exact(const char *target, const char *draft, const char *label) {
    specd_engine *e = open_engine(target, draft, 256);
    specd_sampling_params sp = plain_sampling(1.0f);
    sp.reproducible = false; /* rejection sampling */
    assert_fixed_drafts_are_exact(e, target, prompts[1], sp, 3, 6000, label);
    specd_engine_free(e);
}

static void test_sampling_on_recurrent_target_is_exact(void **state) {
    (void)state;
    check_sampling_is_exact(mamba_target, mamba_draft, "mamba target, mamba draft, temperature 1");
}

static void test_sampling_on_hybrid_target_is_exact(void **state) {
    (void)state;
    check_sampling_is_exact(lfm2_target, lfm2_draft, "lfm2 target, lfm2 draft, temperature 1");
}

/* The prompt cache reuses a recurrent state only where it is exact: a repeated prompt gives the
 * same output, and a prompt that shares only a prefix with the cached history is decoded again
 * (its state after the shorter prefix was never saved), with the same output as a fresh engine. */
static void test_prompt_cache_on_recurrent_target_is_exact(void **state) {
    (void)state;
    specd_engine *e = open_engine(mamba_target, mamba_draft, 256);
    specd_generation_params g = greedy(SPECD_SPEC_DRAFT, 3);
    specd_result first = generate_text(e, prompts[1], &g);
    specd_result again = generate_text(e, prompts[1], &g);
    assert_same_tokens(&again, &first, "repeated prompt");
    /* From the state saved after the prompt: all of it but the last token (the first step's). */
    assert_int_equal(again.stats.n_prompt_cached, again.stats.n_prompt - 1);
    specd_result other = generate_text(e, prompts[0], &g); /* shares only the BOS */
    specd_engine *fresh = open_engine(mamba_target, mamba_draft, 256);
    specd_result want = generate_text(fresh, prompts[0], &g);
    assert_same_tokens(&other, &want, "prompt after another");
    specd_result_clear(&first);
    specd_result_clear(&again);
    specd_result_clear(&other);
    specd_result_clear(&want);
    specd_engine_free(fresh);
    specd_engine_free(e);
}

/* Slots share a context by sequences, and a recurrent state's checkpoints belong to the running
 * slot: such models serve one slot, however many were asked for, and still generate exactly. */
static void test_recurrent_models_serve_one_slot(void **state) {
    (void)state;
    const char *pairs[][2] = {{mamba_target, mamba_draft}, {attn_target, mamba_draft}, {lfm2_target, NULL}};
    for (int i = 0; i < 3; i++) {
        specd_engine_params p = test_engine_params(pairs[i][0], pairs[i][1], 256);
        p.n_parallel = 4;
        specd_engine *e = open_engine_with(&p);
        assert_int_equal(specd_engine_n_parallel(e), 1);
        specd_engine_free(e);
    }
    specd_engine_params p = test_engine_params(attn_target, attn_draft, 256);
    p.n_parallel = 4;
    specd_engine *e = open_engine_with(&p);
    assert_int_equal(specd_engine_n_parallel(e), 4); /* attention models keep them */
    specd_engine_free(e);
}

/* Draft trees need a cache that holds several branches: on a recurrent target a clear error. */
static void test_draft_trees_on_recurrent_target_are_refused(void **state) {
    (void)state;
    specd_engine *e = open_engine(mamba_target, NULL, 256);
    specd_token prompt[256];
    specd_generation_params seed = greedy(SPECD_SPEC_NONE, 0);
    seed.n_predict = 12;
    int32_t n = repeating_prompt(e, prompts[0], &seed, prompt, 256);
    specd_generation_params g = greedy(SPECD_SPEC_SUFFIX, 6);
    g.speculative.suffix_branches = 4;
    specd_result r;
    char *err = NULL;
    specd_status st = specd_generate(e, prompt, n, &g, &r, &err);
    assert_int_equal(st, SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(err);
    print_message("%s\n", err);
    assert_non_null(strstr(err, "mamba, recurrent"));
    assert_non_null(strstr(err, "suffix_branches"));
    specd_free(err);
    specd_engine_free(e);
}

/* Context shift moves cached positions, which a recurrent state does not have: refused up front
 * with the model named; the JSON API turns it off for such a target (completion_request.c). */
static void test_context_shift_on_recurrent_target_is_refused(void **state) {
    (void)state;
    specd_engine *e = open_engine(mamba_target, NULL, 64);
    assert_false(specd_engine_can_shift_context(e));
    specd_generation_params g = greedy(SPECD_SPEC_NONE, 0);
    g.context_shift = true;
    specd_token *prompt = NULL;
    int32_t n = 0;
    assert_int_equal(specd_tokenize(e, prompts[0], true, &prompt, &n, NULL), SPECD_OK);
    specd_result r;
    char *err = NULL;
    assert_int_equal(specd_generate(e, prompt, n, &g, &r, &err), SPECD_ERR_INVALID_ARGUMENT);
    print_message("%s\n", err);
    assert_non_null(strstr(err, "context_shift"));
    assert_non_null(strstr(err, "mamba, recurrent"));
    specd_free(err);
    specd_free(prompt);
    specd_engine_free(e);
}

/* A recurrent draft for an attention target that shifts its context: the draft cannot shift, so
 * it starts over from the shifted history (draft_model.c's shift op), and the output still equals
 * the target alone with the same shifts. */
static void test_context_shift_with_recurrent_draft_is_lossless(void **state) {
    (void)state;
    specd_engine *e = open_engine(attn_target, mamba_draft, 64);
    specd_generation_params none = greedy(SPECD_SPEC_NONE, 0), spec = greedy(SPECD_SPEC_DRAFT, 4);
    none.n_predict = spec.n_predict = 150; /* past the context of 64: shifts happen */
    none.context_shift = spec.context_shift = true;
    specd_result want = generate_text(e, prompts[0], &none);
    specd_result got = generate_text(e, prompts[0], &spec);
    assert_int_equal(want.n_tokens, 150);
    assert_same_tokens(&got, &want, "context shift, mamba draft");
    assert_true(got.stats.n_drafted > 0);
    specd_result_clear(&want);
    specd_result_clear(&got);
    specd_engine_free(e);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODELS_DIR\n", argv[0]);
        return 2;
    }
    snprintf(mamba_target, sizeof mamba_target, "%s/mamba-target.gguf", argv[1]);
    snprintf(mamba_draft, sizeof mamba_draft, "%s/mamba-draft.gguf", argv[1]);
    snprintf(attn_target, sizeof attn_target, "%s/target.gguf", argv[1]);
    snprintf(attn_draft, sizeof attn_draft, "%s/draft.gguf", argv[1]);
    snprintf(lfm2_target, sizeof lfm2_target, "%s/lfm2-target.gguf", argv[1]);
    snprintf(lfm2_draft, sizeof lfm2_draft, "%s/lfm2-draft.gguf", argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recurrent_target_and_draft_greedy_is_lossless),
        cmocka_unit_test(test_hybrid_target_and_draft_greedy_is_lossless),
        cmocka_unit_test(test_hybrid_target_without_rollback_uses_checkpoints),
        cmocka_unit_test(test_model_free_drafters_on_recurrent_target_are_lossless),
        cmocka_unit_test(test_model_free_drafters_on_hybrid_target_are_lossless),
        cmocka_unit_test(test_mixed_pairs_are_lossless),
        cmocka_unit_test(test_prompt_cache_on_recurrent_target_is_exact),
        cmocka_unit_test(test_recurrent_models_serve_one_slot),
        cmocka_unit_test(test_draft_trees_on_recurrent_target_are_refused),
        cmocka_unit_test(test_context_shift_on_recurrent_target_is_refused),
        cmocka_unit_test(test_context_shift_with_recurrent_draft_is_lossless),
        cmocka_unit_test(test_sampling_on_recurrent_target_is_exact),
        cmocka_unit_test(test_sampling_on_hybrid_target_is_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
