/* test_costs.c - the cost model (costs.h): what target passes and draft tokens cost, learnt from
 * real passes and from a calibration file.
 *
 * The costs are those measured on the benchmark pair (2 cores): on an empty cache T(4) = 34 ms,
 * T(5) = 50 ms, T(8) = 53 ms; with about 150 tokens cached every pass costs some 18% more
 * (attention reads the whole cache). A generation that drafts 3 tokens per step only ever times
 * passes of 4, so the model must carry what those passes show to the sizes it does not choose. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "draft/costs.h"

static const double EMPTY_CACHE_MS[] = {0, 22, 27, 31, 34, 50, 51, 52, 53, 57};
#define N_SIZES 9

/* The cache the passes priced in a test attend (set_fill); empty unless a test sets it. */
static specd_fill fill;

static int empty_fill(void **state) {
    (void)state;
    fill = (specd_fill){0.0, 0.0};
    return 0;
}

static void set_fill(double own_cells, double all_cells) { fill = (specd_fill){own_cells, all_cells}; }

static double T(const specd_costs *c, int32_t n) { return specd_costs_pass(c, n, &fill); }

/* A pass of n tokens on an empty cache, and at a fill. */
static void record(specd_costs *c, int32_t n, double ms) { specd_costs_record_verify(c, n, ms); }

static void record_pass(specd_costs *c, int32_t n, double own_work, int64_t all_cells, double ms) {
    specd_costs_record_pass(c, n, own_work, all_cells, ms);
}

/* A calibration file's costs. */
static void calibrate(specd_costs *c) {
    specd_costs_init(c);
    for (int32_t n = 1; n <= N_SIZES; n++) specd_costs_record_calibration(c, n, EMPTY_CACHE_MS[n]);
}

static void test_uncalibrated_costs_follow_the_prior(void **state) {
    (void)state;
    specd_costs c;
    specd_costs_init(&c);
    assert_float_equal(T(&c, 1), 1.0, 1e-9);
    assert_true(T(&c, 4) > T(&c, 2));
}

static void test_calibrated_costs_are_used_as_timed(void **state) {
    (void)state;
    specd_costs c;
    calibrate(&c);
    for (int32_t n = 1; n <= N_SIZES; n++)
        assert_float_equal(T(&c, n), EMPTY_CACHE_MS[n], 1e-9);
}

static void test_passes_of_one_size_move_every_size(void **state) {
    (void)state;
    specd_costs c;
    calibrate(&c);
    for (int i = 0; i < 40; i++) record(&c, 4, 40.0);
    assert_float_equal(T(&c, 4), 40.0, 0.5);
    /* Never timed since calibration, yet as much dearer as the passes of 4 became. */
    assert_float_equal(T(&c, 8), 53.0 * 40.0 / 34.0, 0.5);
    assert_float_equal(T(&c, 1), 22.0 * 40.0 / 34.0, 0.5);
}

static void test_a_much_slower_pass_is_ignored(void **state) {
    (void)state;
    specd_costs c;
    calibrate(&c);
    record(&c, 4, 34.0);
    record(&c, 4, 34.0 * 5.0); /* the machine was busy */
    assert_float_equal(T(&c, 4), 34.0, 1e-9);
}

static void test_an_untimed_size_joins_at_the_current_level(void **state) {
    (void)state;
    specd_costs c;
    calibrate(&c);
    for (int i = 0; i < 40; i++) record(&c, 4, 68.0); /* level x2 */
    record(&c, 20, 200.0);
    assert_float_equal(T(&c, 20), 200.0, 1.0);
}

/* The cache fill, as tools/pass_costs measured it on the benchmark pair's target (2 threads, flash
 * attention off as specd runs it): on an empty cache T(1) 12.6 ms, T(2) 28.1, T(8) 47.8; each
 * token of a pass reads every used cell of the context, and the pass once more: A = 0.00153 ms a
 * cell. */
#define FILL_A 0.00153
static const double FILL_EMPTY_MS[] = {0, 12.6, 28.1, 0, 39.2, 0, 0, 0, 47.8};

static void calibrate_with_fill(specd_costs *c) {
    specd_costs_init(c);
    specd_costs_set_attention(c, &(specd_attention_cost){FILL_A / FILL_EMPTY_MS[1], 1.0, 0.0, 1.0, 1.0});
    specd_costs_record_calibration(c, 1, FILL_EMPTY_MS[1]);
    specd_costs_record_calibration(c, 8, FILL_EMPTY_MS[8]);
}

/* What the pass costs on that CPU: 8 tokens spread over 4 slots of 600 cells each. */
static double spread_pass_ms(double *own_work, int64_t *all_cells) {
    *own_work = 4 * (601 + 602);
    *all_cells = 4 * 600;
    return FILL_EMPTY_MS[8] + FILL_A * (8 + 1) * (double)(*all_cells + 8); /* 81.0 (measured 80.1) */
}

static void test_a_pass_grows_with_the_fill_as_measured(void **state) {
    (void)state;
    specd_costs c;
    calibrate_with_fill(&c);
    set_fill(0, 0);
    assert_float_equal(T(&c, 8), FILL_EMPTY_MS[8], 0.5);
    /* 4 slots of 1000 cells: pass_costs measured T(1) 23.2 ms and T(8) 98.9 */
    set_fill(1000, 4000);
    double t1 = T(&c, 1), t8 = T(&c, 8);
    assert_float_equal(t1, 23.2, 0.1 * 23.2);
    assert_float_equal(t8, 98.9, 0.1 * 98.9);
    /* a pass of many tokens grows more than a pass of one (measured: 1.13x the empty cache's
     * ratio): no level factor can price both */
    assert_true(t8 / t1 > FILL_EMPTY_MS[8] / FILL_EMPTY_MS[1] * 1.08);
}

/* The defect a multi-client server wrote into its calibration cache: passes of 8 tokens at a high
 * fill raised the one level factor to 1.7, and a size first met afterwards on an empty cache was
 * learnt at 1/1.7 of its cost (T(2) 17 ms where it is 28.1), then kept. */
static void test_passes_at_a_high_fill_leave_the_empty_cache_costs_alone(void **state) {
    (void)state;
    specd_costs c;
    calibrate_with_fill(&c);
    double own_work;
    int64_t all_cells;
    double ms = spread_pass_ms(&own_work, &all_cells);
    for (int i = 0; i < 40; i++) record_pass(&c, 8, own_work, all_cells, ms);
    set_fill(0, 0);
    assert_float_equal(T(&c, 1), FILL_EMPTY_MS[1], 0.05 * FILL_EMPTY_MS[1]);
    record_pass(&c, 2, 3.0, 0, FILL_EMPTY_MS[2]); /* a new request, alone */
    assert_float_equal(T(&c, 2), FILL_EMPTY_MS[2], 0.05 * FILL_EMPTY_MS[2]);
    /* and the busy pass again, priced at its fill */
    set_fill(600, 2400);
    assert_float_equal(T(&c, 8), ms, 0.05 * ms);
}

/* A first pass learnt at a high fill gives its size's empty-cache cost. */
static void test_a_base_learnt_at_a_high_fill_is_the_empty_cache_cost(void **state) {
    (void)state;
    specd_costs c;
    specd_costs_init(&c);
    specd_costs_set_attention(&c, &(specd_attention_cost){FILL_A / FILL_EMPTY_MS[1], 1.0, 0.0, 1.0, 1.0});
    record_pass(&c, 1, 1001.0, 1000, FILL_EMPTY_MS[1] + FILL_A * 2 * 1001);
    record_pass(&c, 8, 8036.0, 1000, FILL_EMPTY_MS[8] + FILL_A * 9 * 1008);
    set_fill(0, 0);
    assert_float_equal(T(&c, 1), FILL_EMPTY_MS[1], 0.01 * FILL_EMPTY_MS[1]);
    assert_float_equal(T(&c, 8), FILL_EMPTY_MS[8], 0.02 * FILL_EMPTY_MS[8]);
}

/* A small model's T(1) is mostly overhead: its cells cost what their operations do (the cap), not
 * a share of T(1). With flash attention a token reads the cells of its own sequence. */
static void test_the_attention_cost_is_capped(void **state) {
    (void)state;
    specd_costs c;
    specd_costs_init(&c);
    specd_costs_set_attention(&c, &(specd_attention_cost){0.01, 0.0001, 1.0, 0.0, 0.0});
    specd_costs_record_calibration(&c, 1, 10.0);
    set_fill(999, 5000);
    assert_float_equal(T(&c, 1), 10.0 + 0.0001 * 1000, 1e-9);
    specd_costs_set_attention(&c, NULL); /* not known: the fill is left out */
    assert_float_equal(T(&c, 1), 10.0, 1e-9);
}

static void test_sizes_are_learnt_from_real_passes(void **state) {
    (void)state;
    specd_costs c;
    specd_costs_init(&c);
    uint32_t learnt = c.n_learnt;
    record(&c, 4, 34.0); /* the first pass of all sets the level */
    assert_float_equal(T(&c, 4), 34.0, 1e-9);
    assert_true(c.n_learnt > learnt);
    record(&c, 5, 50.0); /* a new size, at that level */
    assert_float_equal(T(&c, 5), 50.0, 1e-9);
    record(&c, 1, 22.0);
    /* sizes never passed are priced from the known ones: between two, on the line between them;
     * past them, growing by the least the known sizes grow per token from the smallest (to 4:
     * (34 - 22) / 3 = 4 ms; to 5: 7 ms, a pass the machine may have slowed) */
    assert_float_equal(T(&c, 8), 50.0 + 3 * 4.0, 1e-9);
    assert_float_equal(T(&c, 3), 22.0 + (34.0 - 22.0) * 2 / 3, 1e-9);
}

/* The cheapest of a size's first passes: what slows a pass down only adds time. */
static void test_a_size_keeps_the_cheapest_of_its_first_passes(void **state) {
    (void)state;
    specd_costs c;
    specd_costs_init(&c);
    record(&c, 1, 22.0);
    record(&c, 1, 22.0); /* the level: 1 */
    record(&c, 4, 40.0);
    record(&c, 4, 30.0);
    record(&c, 4, 32.0);
    record(&c, 4, 34.0);
    assert_float_equal(c.base_ms[4], 30.0, 1e-9);
    /* learnt: later passes move the level only */
    uint32_t learnt = c.n_learnt;
    record(&c, 4, 20.0);
    assert_float_equal(c.base_ms[4], 30.0, 1e-9);
    assert_int_equal(c.n_learnt, learnt);
}

/* Known sizes (a cache file's): a slow first pass (warming up) does not set the level alone, and
 * the passes after it do not lower the sizes. Run after run of a cache file, they used to: the
 * file's T(1) and T(2) shrank against T(4) until one-token drafts looked cheap. */
static void test_a_slow_first_pass_does_not_bend_known_sizes(void **state) {
    (void)state;
    specd_costs c;
    specd_costs_init(&c);
    const double t1 = 11.0, t2 = 28.0, t4 = 36.0;
    specd_costs_record_calibration(&c, 1, t1);
    specd_costs_record_calibration(&c, 2, t2);
    specd_costs_record_calibration(&c, 4, t4);
    record(&c, 1, t1 * 1.6); /* warming up */
    record(&c, 1, t1);
    record(&c, 2, t2);
    record(&c, 4, t4);
    assert_float_equal(c.base_ms[1], t1, 1e-9);
    assert_float_equal(c.base_ms[2], t2, 1e-9);
    assert_float_equal(c.base_ms[4], t4, 1e-9);
    assert_float_equal(T(&c, 1), t1, 1e-9);
    assert_float_equal(T(&c, 2), t2, 1e-9);
}

/* A pass the scheduler interrupted, ten times slower than its neighbours suggest, is not learnt:
 * the size would look so dear that it was never chosen again (and the cache file would keep it). */
static void test_an_interrupted_first_pass_is_not_learnt(void **state) {
    (void)state;
    specd_costs c;
    specd_costs_init(&c);
    record(&c, 4, 34.0);
    record(&c, 2, 270.0);
    assert_float_equal(c.base_ms[2], 0.0, 1e-12);
    record(&c, 2, 27.0);
    assert_float_equal(c.base_ms[2], 27.0, 1e-9);
}

/* When the very first pass of all was the interrupted one, nothing could be expected of it; once a
 * smaller size is known, a pass of n tokens cannot cost more than n passes of one. */
static void test_an_interrupted_very_first_pass_is_bounded_later(void **state) {
    (void)state;
    specd_costs c;
    specd_costs_init(&c);
    record(&c, 4, 340.0);
    record(&c, 1, 22.0);
    assert_true(T(&c, 4) <= 1.25 * 4 * 22.0 * (1 + 1e-9));
    /* and a size dearer than a larger one */
    specd_costs_init(&c);
    record(&c, 2, 1600.0);
    record(&c, 4, 34.0);
    assert_true(T(&c, 2) <= 1.25 * 34.0 * (1 + 1e-9));
}

/* A calibration file written while the machine was busy: every size 3.5x too dear, T(1) more so
 * (81 ms where the machine gives 23; a draft token 78 ms where it costs 4). The first passes bring
 * the level to this machine's, the sizes passed are re-learnt, and the first draft decode replaces
 * the file's draft cost. */
static void test_a_busy_machines_file_is_corrected_within_a_few_passes(void **state) {
    (void)state;
    static const double quiet[] = {0, 23, 25, 29, 33};
    specd_costs c;
    specd_costs_init(&c);
    specd_costs_record_calibration(&c, 1, 81.0);
    for (int32_t n = 2; n <= 4; n++) specd_costs_record_calibration(&c, n, 3.0 * quiet[n]);
    specd_costs_record_calibration_draft(&c, 78.0, 78.0);
    assert_float_equal(specd_costs_draft_token(&c), 78.0, 1e-9);
    specd_costs_record_draft(&c, 1, 4.0);
    assert_float_equal(specd_costs_draft_token(&c), 4.0, 1e-9);
    for (int i = 0; i < 2; i++)
        for (int32_t n = 1; n <= 4; n++) record(&c, n, quiet[n]);
    for (int32_t n = 1; n <= 4; n++) assert_float_equal(T(&c, n), quiet[n], 0.05 * quiet[n]);
}

/* A quiet machine's file, on a machine now twice as slow: every size follows the level. */
static void test_a_quiet_file_follows_a_busy_machine(void **state) {
    (void)state;
    specd_costs c;
    calibrate(&c);
    for (int i = 0; i < 8; i++) record(&c, 4, 2.0 * EMPTY_CACHE_MS[4]);
    for (int32_t n = 1; n <= N_SIZES; n++) assert_float_equal(T(&c, n), 2.0 * EMPTY_CACHE_MS[n], 0.05 * EMPTY_CACHE_MS[n]);
}

/* A size neither a file nor this process knows is priced optimistically from the measured ones, so
 * that a memory-bound machine's long passes are tried: on the benchmark's F32 target T(1) 51 ms,
 * T(4) 57, T(8) 71 (where the prior's shape says 2.05 T(1) = 105), a pass of 8 is priced below its
 * cost, yet above a pass of 4. */
static void test_an_untried_size_is_priced_to_be_tried(void **state) {
    (void)state;
    specd_costs c;
    specd_costs_init(&c);
    record(&c, 1, 51.0);
    record(&c, 1, 51.0);
    record(&c, 4, 57.0);
    assert_true(T(&c, 8) > 57.0 && T(&c, 8) < 71.0);
    /* once passed, its own cost */
    for (int i = 0; i < 4; i++) record(&c, 8, 71.0);
    assert_float_equal(T(&c, 8), 71.0, 0.5);
}

/* Two sizes known are one growth, which may be a step of the machine's curve rather than its
 * slope: on a GPU (an H200, a target of 8.8 GB) T(2) is 1.4 T(1) and T(3..16) cost what T(2)
 * does, and the first pass of 2 paid its graph's rebuild too (7.3 ms where T(1) is 3.8). Priced
 * along that growth, T(8) looked 28 ms, no longer draft was ever tried, and the planner stopped
 * drafting where a fixed 6 made 1.35x its tokens. Past two known sizes the growth is at most the
 * prior's (0.15 T(1) a token); a third known size gives the least growth again. */
static void test_two_known_sizes_do_not_price_longer_passes_along_their_step(void **state) {
    (void)state;
    specd_costs c;
    specd_costs_init(&c);
    record(&c, 1, 3.8);
    record(&c, 2, 7.3);
    assert_float_equal(T(&c, 8), 7.3 + 6 * 0.15 * 3.8, 1e-9);
    assert_true(T(&c, 8) < 12.0);
    record(&c, 4, 8.0); /* a third size: the least growth from the smallest, (8 - 3.8) / 3 a token */
    assert_float_equal(T(&c, 8), 8.0 + 4 * (8.0 - 3.8) / 3, 1e-9);
    /* where the one growth is the slope (a CPU, T(2) 1.1 T(1)), it stands */
    specd_costs_init(&c);
    record(&c, 1, 25.0);
    record(&c, 2, 27.5);
    assert_float_equal(T(&c, 8), 27.5 + 6 * 2.5, 1e-9);
}

/* One pass slowed by the machine (46 ms where the size costs 37) must not keep its size dear for
 * good: while a size has fewer than SPECD_COSTS_LEARN_PASSES passes, a choice prices it below what
 * it measured, so it is passed again, and the cheaper pass is kept. Estimates (what the statistics
 * report) keep what was measured. */
static void test_one_slow_pass_does_not_keep_a_size_dear(void **state) {
    (void)state;
    specd_costs c;
    specd_costs_init(&c);
    for (int i = 0; i < 2; i++) record(&c, 1, 26.0); /* T(1) learnt, and the level set */
    record(&c, 4, 46.0);
    assert_float_equal(T(&c, 4), 46.0, 1e-9);
    double priced = specd_costs_pass_to_choose(&c, 4, &fill);
    assert_true(priced < 0.9 * 46.0 && priced > 0.8 * 46.0);
    record(&c, 4, 37.0);
    assert_float_equal(T(&c, 4), 37.0, 1e-9);
    for (int i = 0; i < 2; i++) record(&c, 4, 38.0);
    assert_float_equal(specd_costs_pass_to_choose(&c, 4, &fill), T(&c, 4), 1e-9); /* settled: as estimated */
    assert_float_equal(T(&c, 4), 37.0, 0.5);
}

/* Passes that vary as a machine's do (lognormal, 5%; one in 20 slowed 1.3x), the sizes learnt one
 * after another while known ones keep being passed (a generation drafting a little longer as it
 * learns): each size's base is the cheapest of its first passes, and the level, which follows the
 * low end of the passes as they do, keeps every size's price against the others near the truth.
 * As a mean of every pass it stood above the bases learnt at it and rose with each size learnt
 * (to 1.09-1.78x the machine's speed over these seeds; 0.95-1.45x now), and some size was priced
 * 19-43% off against T(8) (28% on average; 4-19% now, 11% on average). */
static uint64_t noise_state;

static double uniform(void) {
    noise_state ^= noise_state << 13, noise_state ^= noise_state >> 7, noise_state ^= noise_state << 17;
    return (double)(noise_state >> 11) / 9007199254740992.0;
}

static double machine_noise(void) {
    double u1 = uniform() + 1e-12, u2 = uniform();
    return exp(0.05 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2)) * (uniform() < 0.05 ? 1.3 : 1.0);
}

static void test_sizes_learnt_one_after_another_keep_their_proportions(void **state) {
    (void)state;
    double sum = 0.0;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        noise_state = 88172645463325252ull * seed + seed;
        specd_costs c;
        specd_costs_init(&c);
        for (int32_t s = 1; s <= 8; s++)
            for (int i = 0; i < 40; i++) {
                int32_t n = i % 2 ? s : 1 + (int32_t)(uniform() * s);
                record(&c, n, EMPTY_CACHE_MS[n] * machine_noise());
            }
        double worst = 0.0;
        for (int32_t n = 1; n <= 8; n++) {
            double off = fabs(T(&c, n) / T(&c, 8) / (EMPTY_CACHE_MS[n] / EMPTY_CACHE_MS[8]) - 1.0);
            if (off > worst) worst = off;
        }
        assert_true(worst < 0.25);
        sum += worst;
    }
    assert_true(sum / 8 < 0.15);
}

/* Both models share the machine: while the draft token is not measured again, it follows the level
 * the target's passes show. Kept apart, a busy moment raised every T(n) but not the draft token,
 * drafting looked cheaper than it was, and a run that should not draft did (a test engine drafted
 * 17 steps of 128 where its costs said no draft pays). */
static void test_the_draft_token_follows_the_level(void **state) {
    (void)state;
    specd_costs c;
    specd_costs_init(&c);
    for (int i = 0; i < 8; i++) specd_costs_record_verify(&c, 4, EMPTY_CACHE_MS[4]); /* learnt, the level 1 */
    specd_costs_record_draft(&c, 1, 3.0);
    assert_float_equal(specd_costs_draft_token(&c), 3.0, 1e-9);
    for (int i = 0; i < 60; i++) specd_costs_record_verify(&c, 4, 2.0 * EMPTY_CACHE_MS[4]);
    assert_float_equal(specd_costs_draft_token(&c) / T(&c, 4), 3.0 / EMPTY_CACHE_MS[4], 0.02 * 3.0 / EMPTY_CACHE_MS[4]);
}

/* A GPU's passes (H200, the Q8_0 benchmark target, T(1..8) ms), and what building a pass's graph
 * anew added there when the size changed. */
static const double GPU_MS[] = {0, 0.78, 0.89, 0.98, 1.01, 1.07, 1.10, 1.14, 1.17};
#define REBUILD_MS 0.35

/* Sizes a planner's passes take, step after step: some repeat, most change. */
static int32_t planned_size(int i) {
    static const int32_t sizes[] = {4, 4, 6, 3, 3, 3, 7, 5, 5, 2, 4, 8, 8, 6, 6, 6};
    return sizes[i % 16];
}

/* `n` passes in that order, each T(size) x slow, plus `rebuild` where its size differs from the
 * pass before; first, each size's first passes (learnt) in runs of one size. */
static void gpu_passes(specd_costs *c, int n, double slow, double rebuild) {
    specd_costs_init(c);
    for (int32_t size = 1; size <= 8; size++)
        for (int k = 0; k < SPECD_COSTS_LEARN_PASSES; k++) record(c, size, GPU_MS[size] * slow + (k == 0 ? rebuild : 0.0));
    int32_t last = 8;
    for (int i = 0; i < n; i++) {
        int32_t size = planned_size(i);
        record(c, size, GPU_MS[size] * slow + (size != last ? rebuild : 0.0));
        last = size;
    }
}

/* What a pass of another size than the one before costs: learnt from the passes as they come, as
 * what resized passes cost over the model less what same-size ones do; nothing before enough of
 * both kinds were timed, nothing where every pass costs the same over the model (a slower machine). */
static void test_a_resized_pass_costs_its_graph_rebuild(void **state) {
    (void)state;
    specd_costs c;
    gpu_passes(&c, 6, 1.0, REBUILD_MS);
    assert_float_equal(specd_costs_resize(&c), 0.0, 1e-12); /* 2 same-size passes: not yet */
    gpu_passes(&c, 160, 1.0, REBUILD_MS);
    assert_float_equal(specd_costs_resize(&c), REBUILD_MS, 0.15 * REBUILD_MS);
    gpu_passes(&c, 160, 1.3, 0.0);
    assert_true(specd_costs_resize(&c) < 0.02);
    /* a CPU's: a 25 ms pass, no rebuild to speak of */
    specd_costs_init(&c);
    for (int i = 0; i < 200; i++) record(&c, planned_size(i), EMPTY_CACHE_MS[planned_size(i)]);
    assert_true(specd_costs_resize(&c) < 0.01 * EMPTY_CACHE_MS[1]);
}

/* Where a change of size costs more than the padding (the GPU above: a rebuild 0.35 ms, T(8) - T(6)
 * 0.07 ms), a pass keeps the size of the one before, padded; not where padding costs more (T(8) -
 * T(1) there), not past the batch, not to a smaller size, and never on the CPU (no rebuild cost). */
static void test_a_pass_is_padded_where_a_rebuild_costs_more(void **state) {
    (void)state;
    specd_costs c;
    gpu_passes(&c, 160, 1.0, REBUILD_MS);
    record(&c, 8, GPU_MS[8]); /* the pass before: 8 tokens */
    assert_int_equal(c.last_pass_n, 8);
    assert_int_equal(specd_costs_padding(&c, 6, NULL, 64), 2);
    assert_int_equal(specd_costs_padding(&c, 5, NULL, 64), 3);
    assert_int_equal(specd_costs_padding(&c, 1, NULL, 64), 0); /* T(8) - T(1) 0.39 ms > 0.35 */
    assert_int_equal(specd_costs_padding(&c, 6, NULL, 7), 0);  /* the batch holds 7 */
    assert_int_equal(specd_costs_padding(&c, 8, NULL, 64), 0);
    record(&c, 3, GPU_MS[3]);
    assert_int_equal(specd_costs_padding(&c, 6, NULL, 64), 0); /* the pass before was smaller */
    specd_costs_init(&c);
    for (int i = 0; i < 200; i++) record(&c, planned_size(i), EMPTY_CACHE_MS[planned_size(i)]);
    for (int32_t n = 1; n < c.last_pass_n; n++) assert_int_equal(specd_costs_padding(&c, n, NULL, 64), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_uncalibrated_costs_follow_the_prior, empty_fill),
        cmocka_unit_test_setup(test_calibrated_costs_are_used_as_timed, empty_fill),
        cmocka_unit_test_setup(test_passes_of_one_size_move_every_size, empty_fill),
        cmocka_unit_test_setup(test_a_much_slower_pass_is_ignored, empty_fill),
        cmocka_unit_test_setup(test_an_untimed_size_joins_at_the_current_level, empty_fill),
        cmocka_unit_test_setup(test_a_pass_grows_with_the_fill_as_measured, empty_fill),
        cmocka_unit_test_setup(test_passes_at_a_high_fill_leave_the_empty_cache_costs_alone, empty_fill),
        cmocka_unit_test_setup(test_a_base_learnt_at_a_high_fill_is_the_empty_cache_cost, empty_fill),
        cmocka_unit_test_setup(test_the_attention_cost_is_capped, empty_fill),
        cmocka_unit_test_setup(test_sizes_are_learnt_from_real_passes, empty_fill),
        cmocka_unit_test_setup(test_a_size_keeps_the_cheapest_of_its_first_passes, empty_fill),
        cmocka_unit_test_setup(test_a_slow_first_pass_does_not_bend_known_sizes, empty_fill),
        cmocka_unit_test_setup(test_an_interrupted_first_pass_is_not_learnt, empty_fill),
        cmocka_unit_test_setup(test_an_interrupted_very_first_pass_is_bounded_later, empty_fill),
        cmocka_unit_test_setup(test_a_busy_machines_file_is_corrected_within_a_few_passes, empty_fill),
        cmocka_unit_test_setup(test_a_quiet_file_follows_a_busy_machine, empty_fill),
        cmocka_unit_test_setup(test_an_untried_size_is_priced_to_be_tried, empty_fill),
        cmocka_unit_test_setup(test_two_known_sizes_do_not_price_longer_passes_along_their_step, empty_fill),
        cmocka_unit_test_setup(test_one_slow_pass_does_not_keep_a_size_dear, empty_fill),
        cmocka_unit_test_setup(test_sizes_learnt_one_after_another_keep_their_proportions, empty_fill),
        cmocka_unit_test_setup(test_the_draft_token_follows_the_level, empty_fill),
        cmocka_unit_test_setup(test_a_resized_pass_costs_its_graph_rebuild, empty_fill),
        cmocka_unit_test_setup(test_a_pass_is_padded_where_a_rebuild_costs_more, empty_fill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
