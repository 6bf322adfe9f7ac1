/* test_heavy.c - which slots step in a scheduler round (src/serve/heavy.c): a grammar slot that
 * stalls a round steps alone from then on, the light slots get as much time as the heavy rounds
 * took, and a heavy step over the step limit (its floor, or 10 typical passes on a slow model)
 * ends the request. Numbers stand in for measured times: the policy alone is under test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "serve/heavy.h"

static heavy_state H; /* a server's */

static const int32_t both[] = {0, 1};
static const bool grammar_in_0[] = {true, false};

/* One round's pick over slots 0 and 1: how many step, which first, alone or not. */
static int32_t pick(int32_t *first, bool *solo) {
    int32_t at[SPECD_MAX_PARALLEL];
    int32_t n = heavy_pick_round(&H, both, 2, at, solo);
    *first = at[0];
    return n;
}

static void reset(void) {
    heavy_reset(&H, 10);
}

static void light_slots_step_together(void **state) {
    (void)state;
    reset();
    int32_t first;
    bool solo;
    assert_int_equal(pick(&first, &solo), 2);
    assert_false(solo);
    /* a round whose grammars cost less than max(2 ms, the pass): nobody becomes heavy */
    assert_int_equal(heavy_after_round(&H, both, grammar_in_0, 2, false, 1.5, 1.0, 0.5), -1);
    assert_int_equal(pick(&first, &solo), 2);
}

static void a_stalling_grammar_steps_alone_and_the_others_get_as_much_time(void **state) {
    (void)state;
    reset();
    int32_t first;
    bool solo;
    /* grammars costing 8 ms in a round of a 0.2 ms pass: the grammar slot (0) is heavy, not slot 1 */
    assert_int_equal(heavy_after_round(&H, both, grammar_in_0, 2, false, 8.2, 8.0, 0.2), -1);
    assert_int_equal(pick(&first, &solo), 1);
    assert_true(solo);
    assert_int_equal(first, 0);
    /* its round took 6 ms: then slot 1 alone until it has had 6 ms */
    assert_int_equal(heavy_after_round(&H, &first, grammar_in_0, 1, true, 6.2, 6.0, 0.2), -1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pick(&first, &solo), 1);
        assert_false(solo);
        assert_int_equal(first, 1);
        heavy_after_round(&H, &first, grammar_in_0 + 1, 1, false, 2.5, 0.1, 0.2);
    }
    assert_int_equal(pick(&first, &solo), 1); /* 7.5 ms given: the heavy slot's turn */
    assert_true(solo);
    assert_int_equal(first, 0);
    /* a cheap step does not make it light again: dear ones come back */
    heavy_after_round(&H, &first, grammar_in_0, 1, true, 0.5, 0.3, 0.2);
    const int32_t only_0[] = {0};
    int32_t at[SPECD_MAX_PARALLEL];
    assert_int_equal(heavy_pick_round(&H, only_0, 1, at, &solo), 1); /* alone: back to back */
    assert_true(solo);
    heavy_forget(&H, 0); /* its request ended: the next one in slot 0 starts light */
    assert_int_equal(pick(&first, &solo), 2);
}

static void a_step_past_the_limit_ends_the_request(void **state) {
    (void)state;
    reset();
    const int32_t slot0[] = {0};
    heavy_after_round(&H, slot0, grammar_in_0, 1, false, 5.2, 5.0, 0.2); /* heavy */
    assert_int_equal(heavy_after_round(&H, slot0, grammar_in_0, 1, true, 9.2, 9.0, 0.2), -1);
    assert_int_equal(heavy_after_round(&H, slot0, grammar_in_0, 1, true, 12.2, 12.0, 0.2), 0);
    /* preemption stretches the round, not the grammar's CPU time: no end */
    assert_int_equal(heavy_after_round(&H, slot0, grammar_in_0, 1, true, 40.2, 3.0, 0.2), -1);
    H.step_limit_ms = 0;
    assert_int_equal(heavy_after_round(&H, slot0, grammar_in_0, 1, true, 500.2, 500.0, 0.2), -1); /* 0: no limit */
}

static void on_a_slow_model_the_limit_is_ten_passes(void **state) {
    (void)state;
    reset();
    const int32_t slot0[] = {0};
    /* 40 ms passes: 30 ms of grammar work is not heavy (less than a pass), 60 ms is, and the limit
     * is 400 ms, not the 10 ms floor */
    heavy_after_round(&H, slot0, grammar_in_0 + 1, 1, false, 0.3, 0.1, 0.2); /* a fast start, then 40 ms passes */
    for (int i = 0; i < 200; i++) heavy_after_round(&H, slot0, grammar_in_0 + 1, 1, false, 40.5, 0.5, 40.0);
    assert_int_equal(heavy_after_round(&H, slot0, grammar_in_0, 1, false, 70.0, 30.0, 40.0), -1);
    int32_t first;
    bool solo;
    assert_int_equal(pick(&first, &solo), 2);
    heavy_after_round(&H, slot0, grammar_in_0, 1, false, 100.0, 60.0, 40.0);
    assert_int_equal(heavy_after_round(&H, slot0, grammar_in_0, 1, true, 340.0, 300.0, 40.0), -1);
    assert_int_equal(heavy_after_round(&H, slot0, grammar_in_0, 1, true, 490.0, 450.0, 40.0), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(light_slots_step_together),
        cmocka_unit_test(a_stalling_grammar_steps_alone_and_the_others_get_as_much_time),
        cmocka_unit_test(a_step_past_the_limit_ends_the_request),
        cmocka_unit_test(on_a_slow_model_the_limit_is_ten_passes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
