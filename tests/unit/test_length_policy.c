/* test_length_policy.c - the engine's rate, and the check that the planned draft lengths never lose
 * to a fixed length (length_policy.h), on steps made up to the measured costs of one machine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "draft/length_policy.h"

/* A machine whose passes step with the GEMM's tiles (T(1..9), ms), a draft token 2.3 ms. */
static const double TILED[] = {0, 24.1, 25.6, 29.2, 32.9, 48.2, 52.1, 54.8, 47.2, 63.6};

typedef struct fixture {
    specd_costs costs;
    specd_acceptance acceptance;
    specd_length_policy policy;
} fixture;

static void set_up(fixture *f) {
    specd_costs_init(&f->costs);
    for (int32_t n = 1; n <= 9; n++) specd_costs_record_calibration(&f->costs, n, TILED[n]);
    specd_costs_record_draft(&f->costs, 1, 2.3);
    specd_acceptance_init(&f->acceptance);
    for (int i = 0; i < 100; i++) specd_acceptance_record(&f->acceptance, SPECD_ACCEPT_GREEDY, 1, 0.5f, i % 10 < 8);
    specd_length_policy_init(&f->policy);
}

/* A chain step: `drafted` drafts, `accepted` of them accepted, as the planner or a spell chose. */
static void step(fixture *f, int32_t drafted, int32_t accepted, bool planned) {
    specd_policy_step s = {.mode = SPECD_ACCEPT_GREEDY, .n_nodes = drafted + 1, .n_chain = drafted,
                           .n_accepted = accepted, .n_emitted = accepted + 1, .draft_ms = 2.3 * drafted,
                           .planned = planned};
    specd_length_policy_record_step(&f->policy, &f->costs, &f->acceptance, &s);
}

/* The accepted run of step i (deterministic): drafts of this text are accepted 0..8 in a row. */
static int32_t run_of(int i) {
    static const int32_t runs[] = {4, 1, 8, 2, 0, 5, 3, 6, 2, 8, 1, 4, 3, 0, 7, 2};
    return runs[i % 16];
}

static double rate(fixture *f) {
    return specd_length_policy_rate(&f->policy, &f->costs, &f->acceptance, SPECD_ACCEPT_GREEDY, NULL);
}

/* The rate a ms is worth: before any step, the best fixed length by the cost model at the mean
 * acceptance by depth (here 3 drafts: 1 + a1 + a1 a2 + a1 a2 a3 tokens in T(4) + 3 draft tokens); then the best
 * fixed length on the steps seen; the engine's own rate where it is higher (several slots). */
static void test_the_rate_is_the_best_fixed_lengths_or_the_engines(void **state) {
    (void)state;
    fixture f;
    set_up(&f);
    double a1 = specd_acceptance_at_depth(&f.acceptance, SPECD_ACCEPT_GREEDY, 1);
    double a2 = specd_acceptance_at_depth(&f.acceptance, SPECD_ACCEPT_GREEDY, 2);
    double a3 = specd_acceptance_at_depth(&f.acceptance, SPECD_ACCEPT_GREEDY, 3);
    assert_float_equal(rate(&f), (1 + a1 + a1 * a2 + a1 * a2 * a3) / (TILED[4] + 3 * 2.3), 1e-9);
    for (int i = 0; i < 64; i++) step(&f, 8, 8, true); /* every draft accepted: 8 or more beats 3 */
    double best = 0.0;
    for (int32_t k = 0; k <= SPECD_POLICY_MAX_FIXED; k++)
        if (f.policy.fixed_tokens[k] / f.policy.fixed_ms[k] > best) best = f.policy.fixed_tokens[k] / f.policy.fixed_ms[k];
    assert_true(best >= 9.0 / (TILED[9] + 8 * 2.3) - 1e-9);
    assert_float_equal(rate(&f), best, 1e-9);
    /* the engine made more than that (two slots' tokens per pass): its own rate */
    for (int i = 0; i < 400; i++) specd_length_policy_record_time(&f.policy, 6, 40.0);
    assert_float_equal(rate(&f), 6.0 / 40.0, 0.002);
    /* a slow moment of its own does not lower the rate below the best fixed length's */
    for (int i = 0; i < 400; i++) specd_length_policy_record_time(&f.policy, 1, 400.0);
    assert_float_equal(rate(&f), best, 1e-9);
}

/* A planner that drafts 8 on this text (its estimates wrong), where 3 does best: after its trial
 * a fixed length drives, the one that did best on the same drafts; after the spell the planner
 * is tried again, and when it loses again the next spell is twice as long. */
static void test_a_planner_that_loses_gives_way_to_the_best_fixed_length(void **state) {
    (void)state;
    fixture f;
    set_up(&f);
    int i = 0;
    for (; i < SPECD_POLICY_TRIAL - 1; i++) step(&f, 8, run_of(i) < 8 ? run_of(i) : 8, true);
    assert_int_equal(specd_length_policy_fixed(&f.policy), -1);
    step(&f, 8, run_of(i), true), i++;
    int32_t fixed = specd_length_policy_fixed(&f.policy);
    assert_true(fixed >= 2 && fixed <= 4);
    int32_t spell = 0;
    while (specd_length_policy_fixed(&f.policy) >= 0) {
        int32_t k = specd_length_policy_fixed(&f.policy);
        step(&f, k, run_of(i) < k ? run_of(i) : k, false), i++;
        spell++;
    }
    assert_int_equal(spell, SPECD_POLICY_FIRST_SPELL);
    for (int j = 0; j < SPECD_POLICY_TRIAL; j++, i++) step(&f, 8, run_of(i) < 8 ? run_of(i) : 8, true);
    assert_true(specd_length_policy_fixed(&f.policy) >= 0);
    assert_int_equal(f.policy.spell_left, 2 * SPECD_POLICY_FIRST_SPELL);
    assert_int_equal(f.policy.n_spells, 2);
}

/* Steps of a planner drafting 8 (as above), in passes that n_sharing slots share. */
static int32_t fixed_after_a_trial(int32_t n_sharing) {
    fixture f;
    set_up(&f);
    /* past 9 tokens this machine is compute-bound: every token of a pass costs 6 ms */
    for (int32_t n = 10; n <= SPECD_COSTS_MAX_BATCH; n++) specd_costs_record_calibration(&f.costs, n, 6.0 * n);
    for (int i = 0; i < SPECD_POLICY_TRIAL; i++) {
        int32_t accepted = run_of(i) < 8 ? run_of(i) : 8;
        specd_policy_step s = {.mode = SPECD_ACCEPT_GREEDY, .n_nodes = 9, .n_chain = 8, .n_accepted = accepted,
                               .n_emitted = accepted + 1, .draft_ms = 2.3 * 8, .planned = true,
                               .n_sharing = n_sharing};
        specd_length_policy_record_step(&f.policy, &f.costs, &f.acceptance, &s);
    }
    return specd_length_policy_fixed(&f.policy);
}

/* The fixed lengths are every slot's: with 8 slots in the pass, a draft of 3 each makes it 32
 * tokens (192 ms here) where plain steps pass 8 (47.2 ms), so no drafts do best; alone, 2-4 do. */
static void test_a_pass_that_slots_share_is_priced_for_all_of_them(void **state) {
    (void)state;
    int32_t alone = fixed_after_a_trial(1), shared = fixed_after_a_trial(8);
    assert_true(alone >= 2 && alone <= 4);
    assert_int_equal(shared, 0);
}

/* A planner that chooses what the best fixed length would (3 here) keeps driving. */
static void test_a_planner_as_good_as_fixed_keeps_driving(void **state) {
    (void)state;
    fixture f;
    set_up(&f);
    for (int i = 0; i < 10 * SPECD_POLICY_TRIAL; i++) step(&f, 3, run_of(i) < 3 ? run_of(i) : 3, true);
    assert_int_equal(specd_length_policy_fixed(&f.policy), -1);
    assert_int_equal(f.policy.n_spells, 0);
}

/* Drafts that are never accepted: the best fixed length is none at all. */
static void test_drafts_that_never_pay_give_way_to_no_drafts(void **state) {
    (void)state;
    fixture f;
    set_up(&f);
    for (int i = 0; i < SPECD_POLICY_TRIAL; i++) step(&f, 2, 0, true);
    assert_int_equal(specd_length_policy_fixed(&f.policy), 0);
}

/* Steps that did not follow the planner (a forced draft, a fixed-length request) teach the fixed
 * lengths but are not held against the planner. */
static void test_steps_the_planner_did_not_choose_are_not_its_trial(void **state) {
    (void)state;
    fixture f;
    set_up(&f);
    for (int i = 0; i < 4 * SPECD_POLICY_TRIAL; i++) step(&f, 8, 0, false);
    assert_int_equal(specd_length_policy_fixed(&f.policy), -1);
    assert_int_equal(f.policy.plan_steps, 0);
}

/* A planner that drafts 2, all accepted, where a fixed 3 would do better (its third draft at the
 * mean acceptance): a spell of 3 drives; on an engine whose draft_max is 2, no fixed length past it
 * does (it would draft 2, which the check never compared with the planner). */
static void test_fixed_lengths_past_the_engines_draft_max_are_not_chosen(void **state) {
    (void)state;
    for (int32_t limit = 8; limit >= 2; limit -= 6) {
        fixture f;
        set_up(&f);
        specd_length_policy_limit(&f.policy, limit);
        for (int i = 0; i < SPECD_POLICY_TRIAL; i++) step(&f, 2, 2, true);
        assert_int_equal(specd_length_policy_fixed(&f.policy), limit == 8 ? 3 : -1);
    }
}

/* A GPU's passes (H200, the Q8_0 benchmark target, T(1..9) ms: a step at 9 rows), its draft token 0.3 ms; with
 * `rebuild` ms more on a pass whose size differs from the pass before, learnt as the engine learns
 * it (from passes of the sizes a planner takes, costs.h). */
static const double GPU_MS[] = {0, 0.78, 0.89, 0.98, 1.01, 1.07, 1.10, 1.14, 1.17, 1.99};

static void set_up_gpu(fixture *f, double rebuild) {
    set_up(f);
    specd_costs_init(&f->costs);
    for (int32_t n = 1; n <= 9; n++)
        for (int k = 0; k < SPECD_COSTS_LEARN_PASSES; k++) specd_costs_record_verify(&f->costs, n, GPU_MS[n]);
    int32_t last = 8;
    for (int i = 0; i < 64; i++) {
        int32_t n = 4 + i % 2 + (i % 5 == 0); /* some repeat, most change */
        specd_costs_record_verify(&f->costs, n, GPU_MS[n] + (n != last ? rebuild : 0.0));
        last = n;
    }
    specd_costs_record_draft(&f->costs, 1, 0.3);
}

/* A planner that drafts 2 and 3 by turns: as good as the best fixed length by T(n) (it keeps
 * driving), but on a GPU whose every change of pass size costs a rebuild, a fixed length's passes
 * keep one size, and it gives way to one; that length then holds for the spell. */
static void test_a_planner_whose_pass_size_changes_pays_the_rebuilds(void **state) {
    (void)state;
    for (int rebuild = 0; rebuild <= 1; rebuild++) {
        fixture f;
        set_up_gpu(&f, rebuild ? 0.35 : 0.0);
        assert_true(rebuild ? specd_costs_resize(&f.costs) > 0.25 : specd_costs_resize(&f.costs) == 0.0);
        for (int i = 0; i < 4 * SPECD_POLICY_TRIAL && specd_length_policy_fixed(&f.policy) < 0; i++) {
            int32_t k = 2 + i % 2, run = run_of(i) < k ? run_of(i) : k;
            specd_policy_step s = {.mode = SPECD_ACCEPT_GREEDY, .n_nodes = k + 1, .n_chain = k, .n_accepted = run,
                                   .n_emitted = run + 1, .draft_ms = 0.3 * k, .planned = true};
            specd_length_policy_record_step(&f.policy, &f.costs, &f.acceptance, &s);
        }
        int32_t fixed = specd_length_policy_fixed(&f.policy);
        if (!rebuild) {
            assert_int_equal(fixed, -1);
            continue;
        }
        assert_true(fixed >= 2 && fixed <= 3);
        int32_t changes = 0;
        for (int i = 0; i < SPECD_POLICY_FIRST_SPELL - 1; i++) {
            /* two drafts accepted, twice, then none: 2 and 3 take turns at looking best */
            int32_t k = specd_length_policy_fixed(&f.policy), run = i % 3 ? (k < 2 ? k : 2) : 0;
            specd_policy_step s = {.mode = SPECD_ACCEPT_GREEDY, .n_nodes = k + 1, .n_chain = k, .n_accepted = run,
                                   .n_emitted = run + 1, .draft_ms = 0.3 * k};
            specd_length_policy_record_step(&f.policy, &f.costs, &f.acceptance, &s);
            changes += specd_length_policy_fixed(&f.policy) != k;
        }
        assert_int_equal(changes, 0);
    }
}

/* Held lengths (an offloaded target): llama-speculative's 3 first (at most draft_max); then every
 * step a fixed length, changed only as a spell or a trial ends (held_lengths.h); the planner never
 * drives. On text whose drafts are all accepted, longer lengths win and drive most steps. */
static void test_held_lengths_change_only_as_a_hold_spell_ends(void **state) {
    (void)state;
    fixture f;
    set_up_gpu(&f, 0.0);
    specd_costs_record_draft(&f.costs, 1, 0.05); /* a cheap draft: on all-accepted text, long wins */
    specd_length_policy_limit(&f.policy, 2);
    specd_length_policy_hold(&f.policy, true);
    assert_int_equal(specd_length_policy_fixed(&f.policy), 2);
    specd_length_policy_limit(&f.policy, 8);
    specd_length_policy_hold(&f.policy, true);
    assert_int_equal(specd_length_policy_fixed(&f.policy), SPECD_HELD_FIRST);
    int32_t changes = 0, last = SPECD_HELD_FIRST, steps_at[SPECD_HELD_MAX + 1] = {0};
    for (int i = 1; i <= 20 * SPECD_HELD_SPELL; i++) {
        int32_t k = specd_length_policy_fixed(&f.policy), ending = f.policy.held.spell_left == 1;
        specd_policy_step s = {.mode = SPECD_ACCEPT_GREEDY, .n_nodes = k + 1, .n_chain = k, .n_accepted = k,
                               .n_emitted = k + 1, .draft_ms = 0.05 * k, .planned = false};
        specd_length_policy_record_step(&f.policy, &f.costs, &f.acceptance, &s);
        specd_length_policy_record_time(&f.policy, k + 1, GPU_MS[k + 1] + 0.05 * k); /* as it ran */
        int32_t now = specd_length_policy_fixed(&f.policy);
        assert_true(now >= 0);
        steps_at[k]++;
        if (now != last) {
            assert_true(ending);
            changes++, last = now;
        }
    }
    int32_t most = 0;
    for (int32_t k = 1; k <= SPECD_HELD_MAX; k++)
        if (steps_at[k] > steps_at[most]) most = k;
    assert_true(changes >= 1);
    assert_true(most > SPECD_HELD_FIRST);
    specd_length_policy_hold(&f.policy, false);
    assert_int_equal(specd_length_policy_fixed(&f.policy), -1);
}

/* A target on rpc-servers alone (their devices not known): the planner drives until a resize is
 * learnt to cost a tenth of a pass (a GPU behind the server), then lengths are held; where resizes
 * cost nothing (a CPU behind it) the planner keeps driving. */
static void test_lengths_are_held_once_resizes_matter(void **state) {
    (void)state;
    for (int rebuild = 0; rebuild <= 1; rebuild++) {
        fixture f;
        set_up_gpu(&f, rebuild ? 0.35 : 0.0);
        f.policy.hold_once_resizes_matter = true;
        assert_int_equal(specd_length_policy_fixed(&f.policy), -1);
        specd_policy_step s = {.mode = SPECD_ACCEPT_GREEDY, .n_nodes = 4, .n_chain = 3, .n_accepted = 2,
                               .n_emitted = 3, .draft_ms = 0.9, .planned = true};
        specd_length_policy_record_step(&f.policy, &f.costs, &f.acceptance, &s);
        assert_int_equal(f.policy.hold, rebuild == 1);
        assert_int_equal(specd_length_policy_fixed(&f.policy), rebuild ? SPECD_HELD_FIRST : -1);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_rate_is_the_best_fixed_lengths_or_the_engines),
        cmocka_unit_test(test_a_planner_that_loses_gives_way_to_the_best_fixed_length),
        cmocka_unit_test(test_a_planner_as_good_as_fixed_keeps_driving),
        cmocka_unit_test(test_drafts_that_never_pay_give_way_to_no_drafts),
        cmocka_unit_test(test_steps_the_planner_did_not_choose_are_not_its_trial),
        cmocka_unit_test(test_a_pass_that_slots_share_is_priced_for_all_of_them),
        cmocka_unit_test(test_fixed_lengths_past_the_engines_draft_max_are_not_chosen),
        cmocka_unit_test(test_a_planner_whose_pass_size_changes_pays_the_rebuilds),
        cmocka_unit_test(test_held_lengths_change_only_as_a_hold_spell_ends),
        cmocka_unit_test(test_lengths_are_held_once_resizes_matter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
