/* round_gate.c - whether a round of several slots drafts, chosen by timed rounds (see .h). */
#include "round_gate.h"

#include <string.h>

/* Timings decay by this per round of their arm: some 64 rounds' worth, a few seconds of serving,
 * long enough to average out what the text does to one round, short enough to follow it. */
#define DECAY (1.0 - 1.0 / 64.0)

void specd_round_gate_init(specd_round_gate *gate) {
    memset(gate, 0, sizeof *gate);
    for (int32_t m = 0; m <= SPECD_GATE_MAX_LOAD; m++) {
        specd_gate_load *l = &gate->load[m];
        l->arm = SPECD_GATE_DRAFT;
        l->spell_left = SPECD_GATE_SPELL;
        l->wait = SPECD_GATE_WAIT_FIRST;
    }
}

static bool gated_load(int32_t load) { return load >= 2 && load <= SPECD_GATE_MAX_LOAD; }

bool specd_round_gate_drafts(const specd_round_gate *gate, int32_t load) {
    return !gated_load(load) || gate->load[load].arm == SPECD_GATE_DRAFT;
}

static double rate_of(const specd_gate_load *l, specd_gate_arm arm) {
    return l->ms[arm] > 0.0 ? l->tokens[arm] / l->ms[arm] : 0.0;
}

double specd_round_gate_rate(const specd_round_gate *gate, int32_t load, specd_gate_arm arm) {
    return gated_load(load) ? rate_of(&gate->load[load], arm) : 0.0;
}

static specd_gate_arm other_arm(specd_gate_arm arm) {
    return arm == SPECD_GATE_DRAFT ? SPECD_GATE_PLAIN : SPECD_GATE_DRAFT;
}

static void drive(specd_gate_load *l, specd_gate_arm arm, bool trial) {
    if (arm != l->arm) l->settle_left = SPECD_GATE_SETTLE, l->since_other = 0;
    l->arm = arm;
    l->trial = trial;
    l->spell_left = trial ? SPECD_GATE_TRIAL : SPECD_GATE_SPELL;
}

/* Whether drafted rounds made the margin more than plain ones. */
static bool drafting_pays(const specd_gate_load *l) {
    return rate_of(l, SPECD_GATE_DRAFT) > rate_of(l, SPECD_GATE_PLAIN) * (1.0 + SPECD_GATE_MARGIN);
}

/* A trial just ended: the arm on trial drives on if it won (drafting: made the margin more). */
static void end_trial(specd_gate_load *l) {
    specd_gate_arm tried = l->arm, other = other_arm(tried);
    if (drafting_pays(l) == (tried == SPECD_GATE_DRAFT)) {
        l->wait = SPECD_GATE_WAIT_FIRST; /* the text changed: the loser is tried again soon */
        drive(l, tried, false);
        l->since_other = 0;
        return;
    }
    if (l->wait < SPECD_GATE_WAIT_MAX) l->wait *= 2;
    drive(l, other, false);
}

/* The other arm's trial: its old timings dropped, it is measured as things are now. */
static void try_other(specd_gate_load *l) {
    specd_gate_arm other = other_arm(l->arm);
    l->tokens[other] = l->ms[other] = l->rounds[other] = 0.0;
    drive(l, other, true);
}

static void spell_ended(specd_gate_load *l) {
    specd_gate_arm other = other_arm(l->arm);
    if (l->trial) end_trial(l);
    else if (l->rounds[other] <= 0.0 || l->since_other >= l->wait) try_other(l);
    else l->spell_left = SPECD_GATE_SPELL;
}

/* The arm on trial is a quarter behind the one it challenges, over enough timed rounds to tell. */
static bool trial_lost_clearly(const specd_gate_load *l) {
    specd_gate_arm other = other_arm(l->arm);
    return l->trial && l->rounds[l->arm] > SPECD_GATE_DECISIVE_ROUNDS - 0.5 &&
           rate_of(l, l->arm) * (1.0 + SPECD_GATE_DECISIVE) < rate_of(l, other);
}

static void record(specd_gate_load *l, int32_t tokens, double ms) {
    l->since_other++;
    if (l->settle_left > 0) {
        l->settle_left--;
    } else {
        specd_gate_arm a = l->arm;
        l->tokens[a] = l->tokens[a] * DECAY + tokens;
        l->ms[a] = l->ms[a] * DECAY + ms;
        l->rounds[a] = l->rounds[a] * DECAY + 1.0;
    }
    if (--l->spell_left <= 0 || trial_lost_clearly(l)) spell_ended(l);
}

void specd_round_gate_end(specd_round_gate *gate) {
    int32_t m = gate->round_load;
    gate->round_load = 0;
    double ms = gate->round_t_last - gate->round_t0;
    if (!gated_load(m) || gate->round_tokens <= 0 || !(ms > 0.0)) return;
    record(&gate->load[m], gate->round_tokens, ms);
}

bool specd_round_gate_begin(specd_round_gate *gate, int32_t load, bool timed, double now_ms) {
    specd_round_gate_end(gate);
    if (timed && gated_load(load)) {
        gate->round_load = load;
        gate->round_t0 = gate->round_t_last = now_ms;
        gate->round_tokens = 0;
    }
    return specd_round_gate_drafts(gate, load);
}

void specd_round_gate_emitted(specd_round_gate *gate, int32_t tokens, double now_ms) {
    if (gate->round_load == 0 || tokens <= 0) return;
    gate->round_tokens += tokens;
    if (now_ms > gate->round_t_last) gate->round_t_last = now_ms;
}
