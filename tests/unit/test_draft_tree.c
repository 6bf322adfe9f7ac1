/* test_draft_tree.c - draft-model trees (src/draft/draft_tree.c) end to end on the tiny models:
 * greedy trees give the target's own output, sampled trees its exact distribution, and a tree step
 * leaves no rejected branch behind in either KV cache.
 *
 *   test_draft_tree MODELS_DIR      (target.gguf and draft.gguf, made by tests/CMakeLists.txt) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "chi_square.h"
#include "engine/engine_internal.h"
#include "engine_helpers.h"
#include "exact_pairs.h"
#include "llama.h"
#include "specd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char target_path[1024], draft_path[1024];
static specd_engine *engine;

static const char *prompts[] = {
    "the little girl saw a big red ball",
    "one day the dog ran to the park with his mom",
    "she was happy",
};

SPECD_TEST_ENGINE_FIXTURE(engine, target_path, draft_path)

static specd_generation_params tree_params(specd_draft_tree_mode mode, int32_t branches, float p_split) {
    specd_generation_params g = greedy_params(SPECD_SPEC_DRAFT, 6, true);
    g.sampling.reproducible = false; /* sampled trees: rejection sampling over siblings */
    g.speculative.tree = mode;
    g.speculative.draft_branches = branches;
    g.speculative.draft_p_split = p_split;
    return g;
}

/* ---- lossless greedy ------------------------------------------------------------------------ */

static void test_greedy_trees_equal_target_alone(void **state) {
    (void)state;
    const struct {
        specd_draft_tree_mode mode;
        int32_t branches;
        float p_split;
        bool fixed;
    } shapes[] = {
        {SPECD_DRAFT_TREE_ON, 2, 0.0f, false}, {SPECD_DRAFT_TREE_ON, 4, 0.1f, false},
        {SPECD_DRAFT_TREE_ON, 8, 0.0f, true},  {SPECD_DRAFT_TREE_AUTO, 4, 0.1f, false},
        {SPECD_DRAFT_TREE_OFF, 4, 0.1f, false},
    };
    int64_t drafted = 0, accepted = 0, tree_steps = 0;
    for (size_t p = 0; p < sizeof prompts / sizeof *prompts; p++) {
        specd_generation_params base = tree_params(SPECD_DRAFT_TREE_OFF, 1, 0.0f);
        base.speculative.type = SPECD_SPEC_NONE;
        specd_result want = generate_text(engine, prompts[p], &base);
        for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
            specd_generation_params g = tree_params(shapes[k].mode, shapes[k].branches, shapes[k].p_split);
            if (shapes[k].fixed) {
                g.speculative.adaptive = false;
                g.speculative.draft_min = g.speculative.draft_max;
            }
            specd_result got = generate_text(engine, prompts[p], &g);
            char what[128];
            snprintf(what, sizeof what, "prompt %zu, tree %s, %d branches, p_split %.1f", p,
                     specd_draft_tree_mode_name(shapes[k].mode), shapes[k].branches, (double)shapes[k].p_split);
            assert_same_tokens(&got, &want, what);
            if (shapes[k].mode == SPECD_DRAFT_TREE_OFF) assert_int_equal(got.stats.n_tree_steps, 0);
            if (shapes[k].mode == SPECD_DRAFT_TREE_ON) {
                drafted += got.stats.n_tree_drafted;
                accepted += got.stats.n_tree_accepted;
                tree_steps += got.stats.n_tree_steps;
            }
            specd_result_clear(&got);
        }
        specd_result_clear(&want);
    }
    print_message("greedy trees: %lld tree steps, %lld drafted, %lld accepted\n", (long long)tree_steps,
                  (long long)drafted, (long long)accepted);
    /* Trees were really verified, with both outcomes. */
    assert_true(tree_steps > 10);
    assert_true(accepted > 0 && accepted < drafted);
}

/* A tree drafter that never splits (p_split 1) drafts the very chains of the chain drafter: the
 * same tokens from the same draws, seeded sampling included. */
static void test_tree_without_splits_is_the_chain(void **state) {
    (void)state;
    for (int sampled = 0; sampled <= 2; sampled++) { /* greedy, sampled, seeded reproducible */
        specd_generation_params chain = tree_params(SPECD_DRAFT_TREE_OFF, 4, 1.0f);
        specd_generation_params tree = tree_params(SPECD_DRAFT_TREE_ON, 4, 1.0f);
        specd_generation_params *both[2] = {&chain, &tree};
        for (int i = 0; i < 2; i++) {
            both[i]->speculative.adaptive = false;
            both[i]->speculative.draft_max = both[i]->speculative.draft_min = 4;
            both[i]->sampling.temperature = sampled ? 1.0f : 0.0f;
            both[i]->sampling.seed = 7;
            both[i]->sampling.reproducible = sampled == 2;
        }
        specd_result a = generate_text(engine, prompts[0], &chain);
        specd_result b = generate_text(engine, prompts[0], &tree);
        assert_same_tokens(&b, &a, sampled == 2 ? "seeded" : sampled ? "sampled" : "greedy");
        assert_int_equal(b.stats.n_tree_steps, 0);
        assert_int_equal(b.stats.n_steps, a.stats.n_steps);
        assert_int_equal(b.stats.n_drafted, a.stats.n_drafted);
        assert_int_equal(b.stats.n_accepted, a.stats.n_accepted);
        assert_true(a.stats.n_drafted > 0);
        specd_result_clear(&a);
        specd_result_clear(&b);
    }
}

/* ---- seeded reproducible mode ---------------------------------------------------------------- */

/* A seeded request at temperature 0.8 (reproducible, the default): its text is the target's
 * coupled draws (sample/coupled.h), the same with trees of any shape as with no speculation at
 * all, and trees really run there: the siblings are the draft's next-best keys under the same
 * noise. The control: another seed gives other text. */
static void test_seeded_trees_keep_the_seeded_text(void **state) {
    (void)state;
    const struct {
        specd_draft_tree_mode mode;
        int32_t branches;
        float p_split;
    } shapes[] = {{SPECD_DRAFT_TREE_ON, 2, 0.0f}, {SPECD_DRAFT_TREE_ON, 4, 0.1f}, {SPECD_DRAFT_TREE_ON, 8, 0.0f},
                  {SPECD_DRAFT_TREE_AUTO, 4, 0.1f}};
    int64_t drafted = 0, accepted = 0, tree_steps = 0, chain_accepted = 0, chain_steps = 0, tree_steps_all = 0;
    int differs = 0;
    for (size_t p = 0; p < sizeof prompts / sizeof *prompts; p++) {
        for (uint64_t seed = 1; seed <= 2; seed++) {
            specd_generation_params base = tree_params(SPECD_DRAFT_TREE_OFF, 1, 0.0f);
            base.sampling.temperature = 0.8f;
            base.sampling.seed = seed;
            base.sampling.reproducible = true;
            base.speculative.type = SPECD_SPEC_NONE;
            specd_result want = generate_text(engine, prompts[p], &base);
            specd_generation_params other = base;
            other.sampling.seed = seed + 100;
            specd_result r = generate_text(engine, prompts[p], &other);
            differs += memcmp(r.tokens, want.tokens, (size_t)want.n_tokens * sizeof *want.tokens) != 0;
            specd_result_clear(&r);
            specd_generation_params chain = base;
            chain.speculative = tree_params(SPECD_DRAFT_TREE_OFF, 1, 0.0f).speculative;
            chain.speculative.adaptive = false; /* drafts every step, as the trees below */
            chain.speculative.draft_min = chain.speculative.draft_max = 3;
            r = generate_text(engine, prompts[p], &chain);
            assert_same_tokens(&r, &want, "seeded chains");
            chain_accepted += r.stats.n_accepted;
            chain_steps += r.stats.n_steps;
            specd_result_clear(&r);
            for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
                specd_generation_params g = base;
                g.speculative = tree_params(shapes[k].mode, shapes[k].branches, shapes[k].p_split).speculative;
                if (shapes[k].mode == SPECD_DRAFT_TREE_ON) { /* a tree every step */
                    g.speculative.adaptive = false;
                    g.speculative.draft_min = g.speculative.draft_max = 3;
                }
                specd_result got = generate_text(engine, prompts[p], &g);
                char what[128];
                snprintf(what, sizeof what, "seeded: prompt %zu, seed %llu, tree %s, %d branches, p_split %.1f", p,
                         (unsigned long long)seed, specd_draft_tree_mode_name(shapes[k].mode), shapes[k].branches,
                         (double)shapes[k].p_split);
                assert_same_tokens(&got, &want, what);
                tree_steps_all += got.stats.n_tree_steps;
                if (shapes[k].mode == SPECD_DRAFT_TREE_ON && shapes[k].p_split == 0.0f) {
                    drafted += got.stats.n_tree_drafted;
                    accepted += got.stats.n_tree_accepted;
                    tree_steps += got.stats.n_tree_steps;
                }
                specd_result_clear(&got);
            }
            specd_result_clear(&want);
        }
    }
    print_message("seeded trees: %lld tree steps, %lld drafted, %lld accepted (chains: %lld accepted in %lld "
                  "steps)\n", (long long)tree_steps, (long long)drafted, (long long)accepted,
                  (long long)chain_accepted, (long long)chain_steps);
    assert_true(tree_steps > 10); /* trees ran in the seeded mode, with both outcomes */
    assert_true(accepted > 0 && accepted < drafted);
    assert_true(tree_steps_all >= tree_steps);
    /* The siblings are worth their place: more accepted per step than the chains of the same depth
     * (about 2.0 against 1.5 on the tiny pair). */
    assert_true((double)accepted / (double)tree_steps > (double)chain_accepted / (double)chain_steps);
    assert_true(differs > 0);
}

/* ---- exact sampling ------------------------------------------------------------------------- */

/* Sampling at temperature 1 with top_k/top_p on prompts[2] (tokenized into *prompt, owned by the
 * caller), and the target's exact distribution of its first two tokens under it. */
static exact_pairs exact_setup(int32_t top_k, float top_p, specd_sampling_params *sp, specd_token **prompt,
                               int32_t *n) {
    *sp = specd_generation_default_params().sampling;
    sp->temperature = 1.0f;
    sp->top_k = top_k;
    sp->top_p = top_p;
    sp->min_p = 0.0f;
    assert_int_equal(specd_tokenize(engine, prompts[2], true, prompt, n, NULL), SPECD_OK);
    exact_pairs ex = exact_first_two(target_path, *prompt, *n, sp);
    assert_non_null(ex.prob);
    return ex;
}

static void check_sampled_trees_are_exact(int32_t top_k, float top_p, int n_samples) {
    specd_sampling_params sp;
    specd_token *prompt = NULL;
    int32_t n = 0;
    exact_pairs ex = exact_setup(top_k, top_p, &sp, &prompt, &n);
    /* Trees forced: every split drafted (p_split 0), four siblings at the root. */
    specd_generation_params g = tree_params(SPECD_DRAFT_TREE_ON, 4, 0.0f);
    g.sampling = sp;
    g.sampling.reproducible = false; /* rejection sampling */
    g.speculative.draft_max = 3;
    g.speculative.draft_min = 3;
    g.speculative.adaptive = false;
    /* The trees are there: a generation of a few tokens verifies some. */
    g.n_predict = 8;
    g.sampling.seed = 5;
    specd_result r;
    assert_int_equal(specd_generate(engine, prompt, n, &g, &r, NULL), SPECD_OK);
    assert_true(r.stats.n_tree_steps > 0);
    assert_true(r.stats.n_tree_drafted > r.stats.n_tree_steps * 3); /* more than a chain each */
    specd_result_clear(&r);
    char label[96];
    snprintf(label, sizeof label, "sampled trees (top_k %d top_p %.2f)", top_k, (double)top_p);
    assert_first_two_follow(engine, prompt, n, g, &ex, n_samples, label);
    free(ex.prob);
    specd_free(prompt);
}

/* Chains whose length the draft's confidence decides (p_min, the adaptive controller): a token is
 * never drawn and then dropped for its own confidence, which would bias the output toward what
 * the draft likes. */
static void test_sampled_chains_cut_by_confidence_are_exact(void **state) {
    (void)state;
    specd_sampling_params sp;
    specd_token *prompt = NULL;
    int32_t n = 0;
    exact_pairs ex = exact_setup(0, 1.0f, &sp, &prompt, &n);
    specd_generation_params g = tree_params(SPECD_DRAFT_TREE_OFF, 4, 0.1f);
    g.sampling = sp;
    g.sampling.reproducible = false; /* rejection sampling */
    g.speculative.draft_max = 3;
    g.speculative.draft_min = 0;
    g.speculative.draft_p_min = 0.1f; /* cuts some chains, not all (the chain drafter's code before: z = 27) */
    g.speculative.adaptive = false; /* p_min alone cuts (the controller would not draft two tokens) */
    assert_first_two_follow(engine, prompt, n, g, &ex, 12000, "chains cut by confidence");
    free(ex.prob);
    specd_free(prompt);
}

static void test_sampled_trees_at_temperature_one_are_exact(void **state) {
    (void)state;
    check_sampled_trees_are_exact(0, 1.0f, 12000);
}

static void test_sampled_trees_with_top_k_top_p_are_exact(void **state) {
    (void)state;
    check_sampled_trees_are_exact(8, 0.8f, 8000);
}

/* ---- KV caches after a tree step ------------------------------------------------------------- */

/* Only the slot's own sequence is left (none of its branches' scratch sequences), holding exactly
 * the positions the slot says it holds. */
static void assert_only_sequence_zero(const specd_model_slot *slot, const char *what) {
    llama_memory_t mem = llama_get_memory(slot->ctx);
    for (int32_t b = 1; b < slot->n_seq_max; b++) {
        llama_seq_id s = slot->branch_base + b - 1;
        if (llama_memory_seq_pos_max(mem, s) != -1)
            fail_msg("%s: sequence %d still holds positions up to %d", what, s, (int)llama_memory_seq_pos_max(mem, s));
    }
    assert_int_equal(llama_memory_seq_pos_min(mem, slot->seq), 0);
    assert_int_equal(llama_memory_seq_pos_max(mem, slot->seq), slot->n_kv - 1);
}

static void test_tree_steps_leave_no_rejected_branches(void **state) {
    (void)state;
    const bool greedy[] = {true, false};
    for (int k = 0; k < 2; k++) {
        specd_generation_params g = tree_params(SPECD_DRAFT_TREE_ON, 8, 0.0f);
        g.speculative.adaptive = false; /* every step drafts a full tree */
        g.speculative.draft_min = g.speculative.draft_max;
        if (!greedy[k]) g.sampling.temperature = 1.0f;
        specd_token *prompt = NULL;
        int32_t n = 0;
        assert_int_equal(specd_tokenize(engine, prompts[1], true, &prompt, &n, NULL), SPECD_OK);
        specd_session *s = NULL;
        assert_int_equal(specd_session_new(engine, prompt, n, &g, &s, NULL), SPECD_OK);
        int tree_steps = 0, kept_in_place = 0;
        for (bool done = false; !done;) {
            int32_t before = specd_session_result(s)->n_tokens, trees_before = tree_steps;
            assert_int_equal(specd_session_step(s, &done, NULL), SPECD_OK);
            const specd_result *r = specd_session_result(s);
            tree_steps = r->stats.n_tree_steps;
            /* The target holds the history but the newest token (the next root), or, after a tree
             * under plain attention's batch invariance, the history before the step's root and the
             * accepted path's tokens the main branch laid in place (the rest is decoded again);
             * the draft, as after a chain, the history up to the last root and the main branch's
             * drafts (the next step's sync keeps what of them was accepted). */
            bool relaid = engine->inv.attention == SPECD_INVARIANT_PLAIN && tree_steps > trees_before;
            if (relaid) {
                assert_in_range(engine->target.n_kv, n + before - 1, n + r->n_tokens - 1);
                kept_in_place += engine->target.n_kv > n + before - 1;
                for (int32_t i = 0; i < engine->target.n_kv - n; i++) /* what it holds is the history */
                    assert_int_equal(engine->target.kv_tokens[n + i], r->tokens[i]);
            } else {
                assert_int_equal(engine->target.n_kv, n + r->n_tokens - 1);
            }
            assert_true(engine->draft.n_kv <= n + r->n_tokens - 1 + g.speculative.draft_max);
            assert_only_sequence_zero(&engine->target, greedy[k] ? "target, greedy" : "target, sampled");
            assert_only_sequence_zero(&engine->draft, greedy[k] ? "draft, greedy" : "draft, sampled");
        }
        print_message("%s: %d tree steps, %d kept their path in place\n", greedy[k] ? "greedy" : "sampled",
                      tree_steps, kept_in_place);
        assert_true(tree_steps > 5);
        /* the main branch is the draft's first choices: its path is accepted at many steps */
        if (engine->inv.attention == SPECD_INVARIANT_PLAIN) assert_true(kept_in_place > 0);
        specd_session_free(s);
        specd_free(prompt);
    }
}

/* ---- requests ----------------------------------------------------------------------------- */

static void test_tree_settings_are_validated(void **state) {
    (void)state;
    const char *field = NULL;
    char *err = NULL;
    specd_generation_params g = tree_params(SPECD_DRAFT_TREE_ON, 9, 0.1f);
    assert_int_equal(specd_generation_params_validate(&g, &field, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_string_equal(field, "speculative.draft_branches");
    assert_non_null(strstr(err, "must be from 1 to 8 (got 9)"));
    specd_free(err);
    g = tree_params((specd_draft_tree_mode)7, 4, 0.1f);
    assert_int_equal(specd_generation_params_validate(&g, &field, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_string_equal(field, "speculative.tree");
    specd_free(err);
    g = tree_params(SPECD_DRAFT_TREE_ON, 4, 1.5f);
    assert_int_equal(specd_generation_params_validate(&g, &field, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_string_equal(field, "speculative.draft_p_split");
    specd_free(err);
    specd_draft_tree_mode m;
    assert_true(specd_draft_tree_mode_from_name("on", &m) && m == SPECD_DRAFT_TREE_ON);
    assert_true(specd_draft_tree_mode_from_name("auto", &m) && m == SPECD_DRAFT_TREE_AUTO);
    assert_false(specd_draft_tree_mode_from_name("yes", &m));
    assert_string_equal(specd_draft_tree_mode_name(SPECD_DRAFT_TREE_OFF), "off");
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target_path, draft_path, sizeof target_path)) return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_trees_equal_target_alone),
        cmocka_unit_test(test_tree_without_splits_is_the_chain),
        cmocka_unit_test(test_seeded_trees_keep_the_seeded_text),
        cmocka_unit_test(test_sampled_chains_cut_by_confidence_are_exact),
        cmocka_unit_test(test_sampled_trees_at_temperature_one_are_exact),
        cmocka_unit_test(test_sampled_trees_with_top_k_top_p_are_exact),
        cmocka_unit_test(test_tree_steps_leave_no_rejected_branches),
        cmocka_unit_test(test_tree_settings_are_validated),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
