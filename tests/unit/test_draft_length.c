/* test_draft_length.c - the plan of a drafting step (draft_length.h): each drawn draft token is kept
 * and followed by another only when what it is expected to add beats what its time is worth at the
 * engine's rate; and when a draft is forced to test the plan (exploration.h).
 *
 * The costs are those measured on the benchmark pair (2 cores): on an empty cache T(4) = 34 ms,
 * T(5) = 50 ms, T(8) = 53 ms; a draft token 3.4 ms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "draft/draft_length.h"
#include "draft/exploration.h"

static const double EMPTY_CACHE_MS[] = {0, 22, 27, 31, 34, 50, 51, 52, 53, 57};
#define N_SIZES 9
#define DRAFT_MS 3.4
/* What the run makes drafting 3 at 90%: 3.44 tokens per 44 ms. */
#define BENCHMARK_RATE (3.44 / 44.2)

typedef struct fixture {
    specd_costs costs;
    specd_acceptance acceptance;
    specd_draft_plan plan;
} fixture;

static void calibrate(fixture *f, const double *ms, int32_t n_sizes, double draft_ms) {
    specd_costs_init(&f->costs);
    specd_acceptance_init(&f->acceptance);
    for (int32_t n = 1; n <= n_sizes; n++)
        if (ms[n] > 0.0) specd_costs_record_calibration(&f->costs, n, ms[n]);
    specd_costs_record_draft(&f->costs, 1, draft_ms);
}

/* Drafts of `confidence` accepted `per_ten` times in 10. */
static void learn_acceptance(fixture *f, float confidence, int per_ten) {
    for (int i = 0; i < 200; i++) specd_acceptance_record(&f->acceptance, SPECD_ACCEPT_GREEDY, 1, confidence, i % 10 < per_ten);
}

static void begin(fixture *f, double rate, int32_t other_tokens, int32_t copies) {
    specd_draft_plan_params p = {.costs = &f->costs, .acceptance = &f->acceptance, .mode = SPECD_ACCEPT_GREEDY,
                                 .rate = rate, .max_len = 16, .other_tokens = other_tokens, .copies = copies};
    specd_draft_plan_begin(&f->plan, &p);
}

/* A target whose passes cost 22 ms whatever their size. */
static const double FLAT[] = {0, 22, 22, 22, 22, 22, 22, 22, 22, 22};

/* The flat target with a draft token of draft_ms and drafts of `confidence` accepted `per_ten`
 * times in 10, its plan begun at the rate of one token a pass. */
static void begin_flat(fixture *f, double draft_ms, float confidence, int per_ten) {
    calibrate(f, FLAT, N_SIZES, draft_ms);
    learn_acceptance(f, confidence, per_ten);
    begin(f, 1.0 / 22.0, 0, 1);
}

/* How deep the plan drafts tokens of this confidence: each drawn if worth continuing, kept if
 * worth adding (as the draft-model drafter does). */
static int32_t planned_depth(fixture *f, float confidence) {
    int32_t depth = 0;
    while (depth < 16 && specd_draft_plan_worth_continuing(&f->plan, depth)) {
        specd_draft_plan_add_draft_decode(&f->plan);
        if (!specd_draft_plan_worth_adding(&f->plan, depth, confidence)) break;
        specd_draft_plan_add(&f->plan, depth++, confidence);
    }
    return depth;
}

static void test_on_an_empty_cache_three_drafts_are_best(void **state) {
    (void)state;
    fixture f;
    calibrate(&f, EMPTY_CACHE_MS, N_SIZES, DRAFT_MS);
    learn_acceptance(&f, 0.9f, 9);
    begin(&f, BENCHMARK_RATE, 0, 1);
    assert_int_equal(planned_depth(&f, 0.9f), 3);
}

/* The rate decides: where time is worth little (a slow run), drafting goes on; where it is worth
 * much, it stops sooner. */
static void test_the_rate_a_ms_is_worth_decides(void **state) {
    (void)state;
    fixture f;
    calibrate(&f, EMPTY_CACHE_MS, N_SIZES, DRAFT_MS);
    learn_acceptance(&f, 0.9f, 9);
    begin(&f, BENCHMARK_RATE / 4.0, 0, 1);
    int32_t cheap = planned_depth(&f, 0.9f);
    begin(&f, BENCHMARK_RATE * 2.0, 0, 1);
    int32_t dear = planned_depth(&f, 0.9f);
    assert_true(cheap > 3 && dear < 3);
}

/* A machine whose passes step with the GEMM's tiles (measured on one: T(1..9) = 24, 25.6, 29.2,
 * 32.9, 48.2, 52.1, 54.8, 47.2, 63.6 ms, a draft token 2.3 ms; the run makes 74 tokens/s drafting
 * 3): at 80% acceptance 3 drafts, as the best fixed length; at 90% (a confident chain) 7, into the
 * pass of 8 that costs less than one of 5. A plan that weighs each step by its own tokens per ms drafted 3
 * to 9 here and lost 10% to a fixed 3. */
static void test_a_tiled_machine_drafts_into_its_cheap_passes(void **state) {
    (void)state;
    static const double TILED[] = {0, 24.1, 25.6, 29.2, 32.9, 48.2, 52.1, 54.8, 47.2, 63.6};
    fixture f;
    calibrate(&f, TILED, 9, 2.3);
    learn_acceptance(&f, 0.5f, 8);
    learn_acceptance(&f, 0.99f, 9);
    begin(&f, 0.074, 0, 1);
    assert_int_equal(planned_depth(&f, 0.5f), 3);
    begin(&f, 0.074, 0, 1);
    assert_int_equal(planned_depth(&f, 0.99f), 7);
}

/* A draft token that costs as much as a target pass can never pay, however often it is accepted:
 * k drafts then cost k passes and yield at most k + 1 tokens from a pass that costs at least one
 * more. stories260K drafting for itself (make demo) was 1,319 tokens/s against 2,415 alone. */
static void test_a_draft_as_dear_as_the_target_is_not_used(void **state) {
    (void)state;
    fixture f;
    begin_flat(&f, 22.0, 0.99f, 10);
    assert_false(specd_draft_plan_worth_continuing(&f.plan, 0));
    /* the same pair with a draft ten times cheaper drafts */
    begin_flat(&f, 2.2, 0.99f, 10);
    assert_true(specd_draft_plan_worth_continuing(&f.plan, 0));
}

/* The same on the benchmark's pass costs (T(n) grows with n), at 90% acceptance. */
static void test_a_dear_draft_on_the_benchmark_costs_is_not_used(void **state) {
    (void)state;
    fixture f;
    calibrate(&f, EMPTY_CACHE_MS, N_SIZES, EMPTY_CACHE_MS[1]);
    learn_acceptance(&f, 0.9f, 9);
    begin(&f, 1.0 / EMPTY_CACHE_MS[1], 0, 1);
    assert_false(specd_draft_plan_worth_continuing(&f.plan, 0));
}

/* On a recurrent model a drafting step also saves the state, and after a rejection restores it and
 * decodes the accepted tokens again: when that costs as much as a target pass, drafts that pay on
 * an attention model (flat T(n), cheap drafts, 90% acceptance) no longer do; a cheap state keeps
 * them. */
static void test_a_dear_recurrent_state_stops_drafting(void **state) {
    (void)state;
    fixture f;
    begin_flat(&f, 8.0, 0.9f, 9);
    assert_true(specd_draft_plan_worth_continuing(&f.plan, 0));
    assert_true(specd_draft_plan_worth_adding(&f.plan, 0, 0.9f));
    specd_costs_record_state(&f.costs, 60.0);
    begin(&f, 1.0 / 22.0, 0, 1);
    assert_false(specd_draft_plan_worth_continuing(&f.plan, 0));
    assert_false(specd_draft_plan_worth_adding(&f.plan, 0, 0.9f));
    calibrate(&f, FLAT, N_SIZES, 8.0);
    learn_acceptance(&f, 0.9f, 9);
    specd_costs_record_state(&f.costs, 0.5);
    begin(&f, 1.0 / 22.0, 0, 1);
    assert_true(specd_draft_plan_worth_adding(&f.plan, 0, 0.9f));
}

/* A pass shared by several slots: alone, drafting at 9-in-10 acceptance pays; in a pass already
 * holding 32 other tokens (CPU: past a few tokens every token costs about the same, 1.6 ms here),
 * with the engine making 32 tokens per such pass, a draft token's share of the pass and its draft
 * decode are worth more than it adds: drafting does not start. Past the sizes kept, costs grow with
 * the tokens instead of stopping at the last size. */
static void test_drafting_shrinks_as_the_pass_fills(void **state) {
    (void)state;
    double ms[SPECD_COSTS_MAX_BATCH + 1] = {0};
    for (int32_t n = 1; n <= SPECD_COSTS_MAX_BATCH; n++) ms[n] = n <= 4 ? 20.0 + 2.0 * n : 28.0 + 1.6 * (n - 4);
    fixture f;
    calibrate(&f, ms, SPECD_COSTS_MAX_BATCH, DRAFT_MS);
    learn_acceptance(&f, 0.9f, 9);
    begin(&f, 1.0 / ms[1], 0, 1);
    assert_true(specd_draft_plan_worth_continuing(&f.plan, 0));
    assert_true(specd_draft_plan_worth_adding(&f.plan, 0, 0.9f));
    begin(&f, 32.0 / ms[33], 32, 1);
    assert_false(specd_draft_plan_worth_continuing(&f.plan, 0)); /* not worth drawing a draft token */
    double t64 = specd_costs_pass(&f.costs, SPECD_COSTS_MAX_BATCH, NULL);
    assert_float_equal(specd_costs_pass(&f.costs, 2 * SPECD_COSTS_MAX_BATCH, NULL), 2.0 * t64, 1e-9);
}

/* Two slots drafting together (one draft decode per depth for both) on a CPU whose pass cost steps
 * with the GEMM's tiles of 4 (this machine: T(1) 10 ms, T(2) 25, T(5) 45, T(8) 41): a chain alone
 * beside the other's root sees only T(2 + k), where no draft pays at 6 in 10 accepted, but the two
 * chains together fill the cheap pass of 8, and 3 drafts each pay. */
static const double TILED_MS[] = {0, 10, 25, 33, 35, 45, 47, 50, 41, 50, 53, 51, 53, 60, 62, 64, 55, 66, 68};
#define TWO_SLOTS_RATE (2.0 / 25.0)

static void test_chains_drafted_together_see_the_pass_they_fill(void **state) {
    (void)state;
    fixture f;
    calibrate(&f, TILED_MS, 18, 1.5);
    learn_acceptance(&f, 0.9f, 6);
    begin(&f, TWO_SLOTS_RATE, 1, 1); /* as decided before: the other is a root */
    assert_false(specd_draft_plan_worth_continuing(&f.plan, 0));
    begin(&f, TWO_SLOTS_RATE, 0, 2);
    assert_int_equal(planned_depth(&f, 0.9f), 3);
    assert_float_equal(f.plan.cost, 41.0 + 3 * 2 * 1.5, 1e-9); /* T(8) and the 3 joint draft decodes */
    begin(&f, TWO_SLOTS_RATE, 0, 1); /* alone: a chain of 3 beside nothing is T(4), as ever */
    assert_float_equal(f.plan.cost, 10.0, 1e-9);
}

/* A pass size never tried is priced from the known ones (here from T(1..6): T(8) about 62 ms) and
 * two slots draft one each; once a pass of 8 is timed, its real cost decides: where it is cheap
 * (41 ms), two chains of 3 fill it. */
static void test_a_measured_cheap_pass_is_used(void **state) {
    (void)state;
    for (int dear = 0; dear <= 1; dear++) {
        fixture f;
        calibrate(&f, TILED_MS, 6, 1.5);
        learn_acceptance(&f, 0.9f, 6);
        begin(&f, TWO_SLOTS_RATE, 0, 2);
        assert_int_equal(planned_depth(&f, 0.9f), 1);
        for (int32_t n = 7; n <= 18; n++) /* passes of these sizes, timed */
            specd_costs_record_verify(&f.costs, n, n % 4 == 0 && !dear ? 33.0 + n : 60.0 + 2.0 * n);
        begin(&f, TWO_SLOTS_RATE, 0, 2);
        assert_int_equal(planned_depth(&f, 0.9f), dear ? 1 : 3);
    }
}

/* Acceptance is kept apart for greedy and sampled verification: a server's greedy requests do not
 * set what its sampled ones expect. */
static void test_acceptance_is_kept_per_mode(void **state) {
    (void)state;
    specd_acceptance a;
    specd_acceptance_init(&a);
    for (int i = 0; i < 200; i++) specd_acceptance_record(&a, SPECD_ACCEPT_GREEDY, 1, 0.3f, i % 10 < 9);
    for (int i = 0; i < 200; i++) specd_acceptance_record(&a, SPECD_ACCEPT_SAMPLED, 1, 0.3f, i % 10 < 3);
    assert_float_equal(specd_acceptance_of(&a, SPECD_ACCEPT_GREEDY, 0.3f), 0.9, 0.02);
    assert_float_equal(specd_acceptance_of(&a, SPECD_ACCEPT_SAMPLED, 0.3f), 0.3, 0.02);
    assert_float_equal(specd_acceptance_mean(&a, SPECD_ACCEPT_SAMPLED), 0.3, 0.02);
}

/* The wait before a forced draft: it doubles after each exploration the next step does not follow
 * with a draft of its own, up to SPECD_EXPLORE_MAX, and goes back to SPECD_EXPLORE_FIRST when a step
 * drafts on its own. */
static int32_t steps_to_next_exploration(specd_exploration *x) {
    int32_t steps = 0;
    while (!specd_exploration_due(x)) {
        specd_exploration_note(x, false, false);
        steps++;
    }
    specd_exploration_note(x, true, true); /* the forced draft */
    return steps;
}

static void test_explorations_that_teach_nothing_wait_longer(void **state) {
    (void)state;
    specd_exploration x = {0};
    assert_int_equal(steps_to_next_exploration(&x), SPECD_EXPLORE_FIRST);
    int32_t want = SPECD_EXPLORE_FIRST;
    for (int i = 0; i < 8; i++) {
        want = want * 2 > SPECD_EXPLORE_MAX ? SPECD_EXPLORE_MAX : want * 2;
        /* the step after the exploration does not draft: it counts as one without */
        assert_int_equal(steps_to_next_exploration(&x), want);
    }
    /* a step that drafts on its own: drafting paid after all, the wait starts again */
    specd_exploration_note(&x, false, true);
    assert_int_equal(steps_to_next_exploration(&x), SPECD_EXPLORE_FIRST);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_on_an_empty_cache_three_drafts_are_best),
        cmocka_unit_test(test_the_rate_a_ms_is_worth_decides),
        cmocka_unit_test(test_a_tiled_machine_drafts_into_its_cheap_passes),
        cmocka_unit_test(test_a_draft_as_dear_as_the_target_is_not_used),
        cmocka_unit_test(test_a_dear_draft_on_the_benchmark_costs_is_not_used),
        cmocka_unit_test(test_a_dear_recurrent_state_stops_drafting),
        cmocka_unit_test(test_drafting_shrinks_as_the_pass_fills),
        cmocka_unit_test(test_chains_drafted_together_see_the_pass_they_fill),
        cmocka_unit_test(test_a_measured_cheap_pass_is_used),
        cmocka_unit_test(test_acceptance_is_kept_per_mode),
        cmocka_unit_test(test_explorations_that_teach_nothing_wait_longer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
