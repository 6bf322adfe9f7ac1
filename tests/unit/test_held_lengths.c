/* test_held_lengths.c - one draft length held a spell, chosen by the tokens each length would make
 * on the same text over its timed steps (held_lengths.h): on machines whose lengths really make
 * known tokens per ms, with a cost model that is right or wrong, and text that changes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "draft/held_lengths.h"

/* A machine and a text: per length k, the tokens a step makes (what the length policy's paired
 * sums report for every length alike) and what a settled step really takes, ms. */
typedef struct machine {
    double tokens[SPECD_HELD_MAX + 1], ms[SPECD_HELD_MAX + 1];
    double settling_ms; /* what each of the first two steps after a change of length takes more (a
                           GPU's rebuilt, then captured graph: on the H200 1-11 ms) */
    double draft_ms;    /* a draft token */
    double model_error[SPECD_HELD_MAX + 1]; /* the cost model's price of k: ms x (1 + this) */
} machine;

typedef struct outcome {
    int32_t steps_at[SPECD_HELD_MAX + 1];
    int32_t changes_between_spells; /* changes of length not at the end of a spell or trial (none) */
    int32_t changes;                /* changes of length in all */
    int32_t longest;                /* the longest length held after a step */
} outcome;

/* A chain whose drafts are accepted at depth i with probability a (a step of k: the expected
 * tokens), each step costing a target pass of k + 1 tokens and k draft tokens. */
static machine chain_machine(double a, const double *pass_ms, double draft_ms, double settling_ms) {
    machine m = {.settling_ms = settling_ms, .draft_ms = draft_ms};
    double tokens = 1.0, p = 1.0;
    for (int32_t k = 0; k <= SPECD_HELD_MAX; k++) {
        if (k > 0) tokens += (p *= a);
        m.tokens[k] = tokens;
        m.ms[k] = pass_ms[k < 8 ? k : 8] + k * draft_ms;
    }
    return m;
}

static double rate_at(const machine *m, int32_t k) { return m->tokens[k] / m->ms[k]; }

/* n steps on machine m; `text(i)` scales every length's tokens on step i alike (1: none). */
static outcome run_text(specd_held_lengths *h, const machine *m, int32_t max, int n, double (*text)(int)) {
    outcome o = {0};
    int32_t last = h->length, same = 2;
    for (int i = 1; i <= n; i++) {
        int32_t k = h->length, ending = h->spell_left == 1;
        same = k == last ? same + 1 : 0, last = k;
        double settling = same < 2 ? m->settling_ms : 0.0, f = text ? text(i) : 1.0;
        o.steps_at[k]++;
        specd_held_lengths_record_step(h, k);
        specd_held_lengths_record_time(h, (int32_t)(m->tokens[k] * f + 0.5), m->ms[k] + settling);
        specd_held_view v = {.draft_token_ms = m->draft_ms, .steps = i};
        for (int32_t j = 0; j <= SPECD_HELD_MAX; j++)
            v.tokens[j] = m->tokens[j] * f, v.model_ms[j] = m->ms[j] * (1.0 + m->model_error[j]);
        specd_held_lengths_step_done(h, &v, max);
        if (h->length != k) o.changes++;
        if (h->length != k && !ending) o.changes_between_spells++;
        if (h->length > o.longest) o.longest = h->length;
    }
    return o;
}

static outcome run(specd_held_lengths *h, const machine *m, int32_t max, int n) { return run_text(h, m, max, n, NULL); }

/* The H200 with the 8.8 GB target: T(1) 3.8 ms, 5.3 for two tokens, then nearly flat. */
static const double BIG_PASS[9] = {3.82, 5.29, 6.04, 6.07, 6.22, 6.24, 6.28, 6.36, 6.59};
/* The H200 with the small benchmark pairs: a draft token 0.4 of a pass. */
static const double SMALL_PASS[9] = {0.79, 0.90, 0.99, 1.02, 1.09, 1.11, 1.15, 1.19, 2.00};

static void test_the_first_length_is_llama_speculatives_3_within_draft_max(void **state) {
    (void)state;
    specd_held_lengths h;
    specd_held_lengths_init(&h, 8);
    assert_int_equal(h.length, SPECD_HELD_FIRST);
    specd_held_lengths_init(&h, 2);
    assert_int_equal(h.length, 2);
}

static int32_t best_length(const machine *m, int32_t max) {
    int32_t best = 0;
    for (int32_t k = 1; k <= max; k++)
        if (rate_at(m, k) > rate_at(m, best)) best = k;
    return best;
}

/* Where longer chains pay (acceptance 0.75 at every depth on the big target's costs: 3 makes 0.39
 * tokens/ms, 4 0.41, 5 0.42, 6 0.43), the length climbs from 3 one at a time while each trial
 * wins, stops where the next could not make 2% more, and drives there; lengths change only at the
 * end of a spell or a trial, and only as often as the climb needs. */
static void test_the_length_climbs_to_the_best_and_stays(void **state) {
    (void)state;
    machine m = chain_machine(0.75, BIG_PASS, 0.31, 10.0);
    int32_t best = best_length(&m, 8);
    assert_int_equal(best, 6);
    specd_held_lengths h;
    specd_held_lengths_init(&h, 8);
    outcome o = run(&h, &m, 8, 40 * SPECD_HELD_SPELL);
    assert_int_equal(o.changes_between_spells, 0);
    assert_true(h.length >= 5);
    assert_true(rate_at(&m, h.length) >= 0.98 * rate_at(&m, best));
    assert_true(o.steps_at[h.length] >= 36 * SPECD_HELD_SPELL);
    assert_true(o.changes <= 4);
    assert_int_equal(o.steps_at[0] + o.steps_at[1] + o.steps_at[2], 0); /* never priced near the best */
}

/* The text's difficulty changes from spell to spell (tokens x 0.5..1.5 for every length alike):
 * the lengths are compared on the same text, so the best one drives anyway. Judged by its
 * own steps, each length's rate was the text's: on the H200 held lengths changed length a dozen
 * times in 100 steps and ran at 0.82-0.87x the best fixed length. */
static double bursty_text(int i) {
    static const double f[7] = {0.5, 1.5, 0.7, 1.3, 0.6, 1.2, 1.0};
    return f[(i / 11) % 7];
}

static void test_the_text_of_the_moment_does_not_move_the_length(void **state) {
    (void)state;
    machine m = chain_machine(0.7, BIG_PASS, 0.31, 10.0);
    int32_t best = best_length(&m, 8);
    specd_held_lengths h;
    specd_held_lengths_init(&h, 8);
    outcome o = run_text(&h, &m, 8, 40 * SPECD_HELD_SPELL, bursty_text);
    assert_true(rate_at(&m, h.length) >= 0.98 * rate_at(&m, best));
    assert_true(o.steps_at[h.length] >= 36 * SPECD_HELD_SPELL);
    assert_true(o.changes <= 4);
}

/* The H200's small benchmark pairs: a draft token costs 0.4 of a target pass and the target alone
 * (1.27 tokens/ms settled) outruns every length; the cost model says so, no drafts are tried at the
 * end of the first trial of 3, win, and drive nearly all the steps after it. The steps that settle
 * them are not timed (timed, they would price the trial below 3). */
static void test_no_drafts_drive_where_the_target_alone_is_fastest(void **state) {
    (void)state;
    machine m = chain_machine(0.55, SMALL_PASS, 0.35, 3.0);
    for (int32_t k = 1; k <= 8; k++) assert_true(rate_at(&m, 0) > rate_at(&m, k));
    specd_held_lengths h;
    specd_held_lengths_init(&h, 8);
    outcome o = run(&h, &m, 8, 40 * SPECD_HELD_SPELL);
    assert_int_equal(o.changes_between_spells, 0);
    assert_int_equal(h.length, 0);
    assert_true(o.steps_at[0] >= 38 * SPECD_HELD_SPELL);
}

/* The model is wrong (it prices no drafts at half their cost, where 3 makes 1.3x as much): no
 * drafts are tried once, lose, and are never tried again (their ms are timed now); 3 or better
 * drives the rest. */
static void test_a_length_the_model_prices_wrongly_is_tried_once(void **state) {
    (void)state;
    machine m = chain_machine(0.7, BIG_PASS, 0.31, 10.0);
    m.model_error[0] = -0.5;
    specd_held_lengths h;
    specd_held_lengths_init(&h, 8);
    outcome o = run(&h, &m, 8, 60 * SPECD_HELD_SPELL);
    assert_int_equal(o.changes_between_spells, 0);
    assert_int_equal(o.steps_at[0], SPECD_HELD_TRIAL);
    assert_true(h.length >= 3);
    assert_true(o.steps_at[h.length] >= 50 * SPECD_HELD_SPELL);
}

/* The text changes for good (acceptance 0.8, then 0.35): the tokens the lengths would make change
 * with it, and the shorter length takes over without waiting for its timing to go stale. */
static void test_a_change_in_the_text_moves_the_held_length(void **state) {
    (void)state;
    machine before = chain_machine(0.8, BIG_PASS, 0.31, 10.0), after = chain_machine(0.35, BIG_PASS, 0.31, 10.0);
    specd_held_lengths h;
    specd_held_lengths_init(&h, 8);
    run(&h, &before, 8, 20 * SPECD_HELD_SPELL);
    assert_true(h.length >= 6);
    int32_t best = best_length(&after, 8);
    assert_true(best <= 3);
    outcome o = run(&h, &after, 8, 20 * SPECD_HELD_SPELL);
    assert_int_equal(h.length, best);
    assert_true(o.steps_at[best] >= 15 * SPECD_HELD_SPELL);
}

/* Another process slows every pass by 1.6x for 1000 steps, then leaves: the length driving is
 * re-timed slower while the others keep their quiet timings, so a few changes follow, and no more;
 * afterwards a length within 2% of the best drives. */
static void test_a_busy_stretch_moves_the_length_a_few_times_only(void **state) {
    (void)state;
    machine quiet = chain_machine(0.75, BIG_PASS, 0.31, 10.0), busy = quiet;
    for (int32_t k = 0; k <= SPECD_HELD_MAX; k++) busy.ms[k] *= 1.6;
    busy.draft_ms *= 1.6;
    specd_held_lengths h;
    specd_held_lengths_init(&h, 8);
    run(&h, &quiet, 8, 400);
    outcome during = run(&h, &busy, 8, 1000), after = run(&h, &quiet, 8, 1600);
    int32_t best = best_length(&quiet, 8);
    assert_true(during.changes <= 8);
    assert_true(after.changes <= 4);
    assert_true(rate_at(&quiet, h.length) >= 0.98 * rate_at(&quiet, best));
    assert_true(after.steps_at[h.length] >= 1400);
}

/* The H200's F32 target (T(1) 0.92 ms, T(2) 1.17, T(5..8) about 1.8), acceptance 0.8: 1 makes
 * 1.22 tokens/ms, 5 1.13, and 4, 6 and 0 less than 5. An engine holding 5 that drove 1 long ago
 * (its timing stale) tries 1 again, which wins and drives: trying only 6, 4 and 0, a warm engine
 * stayed at 5 for good (0.977x the best fixed length in policy_replay). */
static const double F32_PASS[9] = {0.92, 1.17, 1.49, 1.69, 1.79, 1.78, 1.78, 1.80, 1.86};

static void test_a_shorter_length_timed_long_ago_is_tried_again(void **state) {
    (void)state;
    machine m = chain_machine(0.8, F32_PASS, 0.3, 0.3);
    assert_int_equal(best_length(&m, 8), 1);
    assert_true(rate_at(&m, 4) < rate_at(&m, 5) && rate_at(&m, 6) < rate_at(&m, 5) && rate_at(&m, 0) < rate_at(&m, 5));
    specd_held_lengths h;
    specd_held_lengths_init(&h, 8);
    h.length = 5;
    assert_true(specd_held_lengths_restore(&h, 1, 0.9, 0.75, 0.5)); /* decayed below a timed step */
    outcome o = run(&h, &m, 8, 20 * SPECD_HELD_SPELL);
    assert_int_equal(h.length, 1);
    assert_true(o.steps_at[1] >= 15 * SPECD_HELD_SPELL);
}

/* A smaller draft_max than the length held: the length follows it at once. */
static void test_the_held_length_never_passes_draft_max(void **state) {
    (void)state;
    machine m = chain_machine(0.8, BIG_PASS, 0.31, 10.0);
    specd_held_lengths h;
    specd_held_lengths_init(&h, 8);
    outcome o = run(&h, &m, 8, 20 * SPECD_HELD_SPELL);
    assert_true(o.longest >= 5);
    o = run(&h, &m, 2, 20 * SPECD_HELD_SPELL);
    assert_true(o.longest <= 2);
    assert_true(o.steps_at[2] >= 15 * SPECD_HELD_SPELL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_first_length_is_llama_speculatives_3_within_draft_max),
        cmocka_unit_test(test_the_length_climbs_to_the_best_and_stays),
        cmocka_unit_test(test_the_text_of_the_moment_does_not_move_the_length),
        cmocka_unit_test(test_no_drafts_drive_where_the_target_alone_is_fastest),
        cmocka_unit_test(test_a_length_the_model_prices_wrongly_is_tried_once),
        cmocka_unit_test(test_a_change_in_the_text_moves_the_held_length),
        cmocka_unit_test(test_a_busy_stretch_moves_the_length_a_few_times_only),
        cmocka_unit_test(test_a_shorter_length_timed_long_ago_is_tried_again),
        cmocka_unit_test(test_the_held_length_never_passes_draft_max),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
