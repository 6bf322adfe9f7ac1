/* test_round_gate.c - whether rounds of several slots draft, chosen by timing both ways
 * (round_gate.h): on machines where drafting loses, pays, or changes its mind, with the draft's
 * catch-up after plain rounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "draft/round_gate.h"

/* A load on a machine: what a round makes, tokens per ms, drafting or not; a drafted round makes
 * `drafted_tokens`, a plain one a token a slot; the first drafted round after plain ones also
 * takes `catch_up_ms` (the draft model learns every token since). */
typedef struct machine {
    int32_t load;
    double draft_rate, plain_rate;
    int32_t drafted_tokens;
    double catch_up_ms;
} machine;

typedef struct outcome {
    int32_t drafted, plain;
} outcome;

typedef struct clock_state {
    double now;
    bool drafted_last;
} clock_state;

/* n rounds of machine m, each split into accepts of a slot's tokens as the engine reports them. */
static outcome run(specd_round_gate *gate, const machine *m, clock_state *c, int n) {
    outcome o = {0};
    for (int i = 0; i < n; i++) {
        bool drafts = specd_round_gate_begin(gate, m->load, true, c->now);
        int32_t tokens = drafts ? m->drafted_tokens : m->load;
        double ms = tokens / (drafts ? m->draft_rate : m->plain_rate);
        if (drafts && !c->drafted_last) ms += m->catch_up_ms;
        c->drafted_last = drafts;
        int32_t first = tokens / 2;
        specd_round_gate_emitted(gate, first, c->now + ms / 2);
        specd_round_gate_emitted(gate, tokens - first, c->now + ms);
        c->now += ms + 3.0; /* the scheduler's own work between rounds: not the round's */
        if (drafts) o.drafted++;
        else o.plain++;
    }
    return o;
}

/* Serving 8 clients on the benchmark pair (2 cores): drafting break-even at best, and each return
 * to drafting pays the catch-up (a round of 130 ms where a plain one takes 50). Plain rounds drive
 * after the first spell and trial; drafting is tried again at doubling waits. */
static void test_plain_rounds_drive_where_drafting_loses(void **state) {
    (void)state;
    specd_round_gate gate;
    specd_round_gate_init(&gate);
    machine m = {8, 0.145, 0.16, 13, 80.0};
    clock_state c = {0};
    outcome o = run(&gate, &m, &c, 2000);
    assert_false(specd_round_gate_drafts(&gate, 8));
    assert_true(o.drafted >= SPECD_GATE_SPELL);
    /* the first spell, then trials of drafting after 64, 128, 256, 512, 512, ... plain rounds */
    assert_true(o.drafted <= SPECD_GATE_SPELL + 7 * SPECD_GATE_TRIAL);
    assert_true(specd_round_gate_rate(&gate, 8, SPECD_GATE_PLAIN) > specd_round_gate_rate(&gate, 8, SPECD_GATE_DRAFT));
}

/* Two clients, where a drafted round makes 1.3x a plain one's tokens per ms: drafting drives, plain
 * rounds are tried (one trial, then again at doubling waits), each trial ended once it is clearly
 * lost (a settling round and SPECD_GATE_DECISIVE_ROUNDS timed ones): some 1.5% of the rounds. */
static void test_drafting_drives_where_it_pays(void **state) {
    (void)state;
    specd_round_gate gate;
    specd_round_gate_init(&gate);
    machine m = {2, 0.072, 0.055, 4, 20.0};
    clock_state c = {0};
    outcome o = run(&gate, &m, &c, 2000);
    assert_true(specd_round_gate_drafts(&gate, 2));
    assert_true(o.plain >= SPECD_GATE_SETTLE + SPECD_GATE_DECISIVE_ROUNDS);
    assert_true(o.plain <= 7 * (SPECD_GATE_SETTLE + SPECD_GATE_DECISIVE_ROUNDS));
}

/* Where the two are within the margin, plain rounds drive: drafting has costs no round's time
 * shows (the draft model learns each prompt; under batch invariance the cells of rejected drafts
 * stay in the attention window until the cache is compacted, 1.4% of a plain round at 8 slots),
 * so a drafted round must make SPECD_GATE_MARGIN more; where it does, drafting drives. */
static void test_drafting_drives_only_where_it_makes_the_margin_more(void **state) {
    (void)state;
    specd_round_gate gate;
    specd_round_gate_init(&gate);
    machine tie = {4, 0.101, 0.100, 6, 0.0}, margin = {4, 0.105, 0.100, 6, 0.0};
    clock_state c = {0};
    outcome o = run(&gate, &tie, &c, 1000);
    assert_false(specd_round_gate_drafts(&gate, 4));
    assert_true(o.plain > 900);
    specd_round_gate_init(&gate);
    o = run(&gate, &margin, &c, 1000);
    assert_true(specd_round_gate_drafts(&gate, 4));
    assert_true(o.drafted > 950);
}

/* Each load learns its own arm: 8 slots stop drafting, 2 slots still draft, one slot (not gated)
 * and a load past SPECD_GATE_MAX_LOAD always do. */
static void test_each_load_keeps_its_own_arm(void **state) {
    (void)state;
    specd_round_gate gate;
    specd_round_gate_init(&gate);
    machine eight = {8, 0.145, 0.16, 13, 80.0}, two = {2, 0.072, 0.055, 4, 20.0};
    clock_state c = {0};
    for (int i = 0; i < 20; i++) {
        run(&gate, &eight, &c, 50);
        run(&gate, &two, &c, 50);
    }
    assert_false(specd_round_gate_drafts(&gate, 8));
    assert_true(specd_round_gate_drafts(&gate, 2));
    assert_true(specd_round_gate_drafts(&gate, 1));
    assert_true(specd_round_gate_begin(&gate, 1, true, c.now));
    assert_true(specd_round_gate_drafts(&gate, SPECD_GATE_MAX_LOAD + 1));
    assert_true(specd_round_gate_rate(&gate, 2, SPECD_GATE_DRAFT) > 0.07);
    assert_true(specd_round_gate_rate(&gate, 8, SPECD_GATE_PLAIN) > 0.15);
    assert_true(specd_round_gate_rate(&gate, 3, SPECD_GATE_DRAFT) == 0.0);
}

/* Rounds that are not like the others (a prompt chunk in the pass, a slot not gated) are neither
 * timed nor counted: however slow, they do not move the arm. */
static void test_untimed_rounds_do_not_count(void **state) {
    (void)state;
    specd_round_gate gate;
    specd_round_gate_init(&gate);
    double now = 0.0;
    for (int i = 0; i < 500; i++) {
        assert_true(specd_round_gate_begin(&gate, 8, false, now));
        specd_round_gate_emitted(&gate, 8, now + 1000.0);
        now += 1001.0;
    }
    specd_round_gate_end(&gate);
    assert_true(specd_round_gate_drafts(&gate, 8));
    assert_int_equal(gate.load[8].spell_left, SPECD_GATE_SPELL);
    assert_true(specd_round_gate_rate(&gate, 8, SPECD_GATE_DRAFT) == 0.0);
    /* a round that emitted nothing (every slot failed) is not timed either */
    specd_round_gate_begin(&gate, 8, true, now);
    specd_round_gate_end(&gate);
    assert_int_equal(gate.load[8].spell_left, SPECD_GATE_SPELL);
}

/* The text changes: drafting loses for 1000 rounds, then pays twice over. The gate goes back to
 * drafting at its next trial (at most the longest wait later); the trial's first round, the draft
 * model's catch-up (here 20 plain rounds' time), is not timed: timed, it would sink the trial. */
static void test_drafting_comes_back_when_it_pays_again(void **state) {
    (void)state;
    specd_round_gate gate;
    specd_round_gate_init(&gate);
    machine loses = {8, 0.14, 0.16, 13, 80.0}, pays = {8, 0.30, 0.16, 13, 1000.0};
    clock_state c = {0};
    run(&gate, &loses, &c, 1000);
    assert_false(specd_round_gate_drafts(&gate, 8));
    outcome o = run(&gate, &pays, &c, SPECD_GATE_WAIT_MAX + SPECD_GATE_SPELL + SPECD_GATE_TRIAL);
    assert_true(specd_round_gate_drafts(&gate, 8));
    /* plain drove to the end of its spell (8 rounds here), drafting's trial won; then plain rounds
     * are tried again at waits that start at the first and double: three trials, all lost by far
     * and so ended after their settling round and SPECD_GATE_DECISIVE_ROUNDS, in those rounds (64,
     * 128 and 256 rounds after), and drafting drives on */
    assert_int_equal(o.plain, SPECD_GATE_TRIAL + 3 * (SPECD_GATE_SETTLE + SPECD_GATE_DECISIVE_ROUNDS));
    outcome later = run(&gate, &pays, &c, 400);
    assert_true(specd_round_gate_drafts(&gate, 8));
    assert_true(later.plain <= SPECD_GATE_TRIAL);
}

/* The machine is busy while drafting is first timed (every round at half speed, as when builds ran
 * beside a server), then quiet again: the plain trial that follows wins on that verdict, and the
 * next trial of drafting, at most a first wait and a spell later, puts drafting back for good. A
 * busy plain trial instead keeps drafting driving: what it did before the gate. */
static void test_a_verdict_taken_while_the_machine_was_busy_is_corrected(void **state) {
    (void)state;
    specd_round_gate gate;
    specd_round_gate_init(&gate);
    machine quiet = {2, 0.072, 0.055, 4, 20.0}, busy = {2, 0.036, 0.0275, 4, 40.0};
    clock_state c = {0};
    run(&gate, &busy, &c, SPECD_GATE_SPELL);
    outcome o = run(&gate, &quiet, &c, SPECD_GATE_TRIAL);
    assert_int_equal(o.plain, SPECD_GATE_TRIAL);
    assert_false(specd_round_gate_drafts(&gate, 2)); /* the busy drafting lost to the quiet plain rounds */
    o = run(&gate, &quiet, &c, SPECD_GATE_WAIT_FIRST + SPECD_GATE_SPELL + SPECD_GATE_TRIAL);
    assert_true(specd_round_gate_drafts(&gate, 2));
    o = run(&gate, &quiet, &c, 2000);
    assert_true(specd_round_gate_drafts(&gate, 2));
    assert_true(o.plain <= 6 * SPECD_GATE_TRIAL);

    specd_round_gate_init(&gate);
    c = (clock_state){0};
    run(&gate, &quiet, &c, SPECD_GATE_SPELL);
    o = run(&gate, &busy, &c, SPECD_GATE_TRIAL); /* the plain trial, busy: lost by far, ended early */
    assert_int_equal(o.plain, SPECD_GATE_SETTLE + SPECD_GATE_DECISIVE_ROUNDS);
    o = run(&gate, &quiet, &c, 1); /* its last round is recorded as the next begins */
    assert_int_equal(o.drafted, 1);
    o = run(&gate, &quiet, &c, 2000);
    assert_true(specd_round_gate_drafts(&gate, 2));
    assert_true(o.plain <= 6 * SPECD_GATE_TRIAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_rounds_drive_where_drafting_loses),
        cmocka_unit_test(test_drafting_drives_where_it_pays),
        cmocka_unit_test(test_drafting_drives_only_where_it_makes_the_margin_more),
        cmocka_unit_test(test_each_load_keeps_its_own_arm),
        cmocka_unit_test(test_untimed_rounds_do_not_count),
        cmocka_unit_test(test_drafting_comes_back_when_it_pays_again),
        cmocka_unit_test(test_a_verdict_taken_while_the_machine_was_busy_is_corrected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
