/* held_lengths.c - one draft length held a spell, chosen by its timed steps (see .h). */
#include "held_lengths.h"

#include <string.h>

/* Timings decay by this per step: a trial's (8 steps) drops below SPECD_HELD_FRESH some 280 steps
 * after it, so the trials of three lengths take some 8% of the steps. */
#define DECAY (1.0 - 1.0 / 1024.0)

void specd_held_lengths_init(specd_held_lengths *h, int32_t max) {
    memset(h, 0, sizeof *h);
    h->length = SPECD_HELD_FIRST < max ? SPECD_HELD_FIRST : max;
    h->spell_left = SPECD_HELD_TRIAL;
    h->step_length = h->last_drafted = -1;
}

void specd_held_lengths_record_step(specd_held_lengths *h, int32_t drafted) {
    h->step_length = drafted < 0 ? 0 : drafted > SPECD_HELD_MAX ? SPECD_HELD_MAX : drafted;
    if (h->step_length != h->last_drafted) h->settle_left = SPECD_HELD_SETTLE;
    h->last_drafted = h->step_length;
}

void specd_held_lengths_record_time(specd_held_lengths *h, int32_t tokens, double ms) {
    if (h->step_length < 0 || tokens <= 0 || !(ms > 0.0)) return;
    if (h->settle_left > 0) {
        h->settle_left--, h->step_length = -1;
        return;
    }
    for (int32_t k = 0; k <= SPECD_HELD_MAX; k++) h->tokens[k] *= DECAY, h->ms[k] *= DECAY, h->steps[k] *= DECAY;
    h->tokens[h->step_length] += tokens;
    h->ms[h->step_length] += ms;
    h->steps[h->step_length] += 1.0;
    h->step_length = -1;
}

static double rate_of(const specd_held_lengths *h, int32_t k) { return h->ms[k] > 0.0 ? h->tokens[k] / h->ms[k] : 0.0; }

static int fresh(const specd_held_lengths *h, int32_t k) { return h->steps[k] >= SPECD_HELD_FRESH; }

/* The best timed length up to max, among the fresh ones only or all. */
static int32_t best_timed(const specd_held_lengths *h, int32_t max, int fresh_only) {
    int32_t best = -1;
    for (int32_t k = 0; k <= max; k++) {
        if (h->ms[k] <= 0.0 || (fresh_only && !fresh(h, k))) continue;
        if (best < 0 || rate_of(h, k) > rate_of(h, best)) best = k;
    }
    return best;
}

/* The length that drives next, and for how many steps. */
static int32_t next_length(const specd_held_lengths *h, int32_t modelled, int32_t max, int32_t *spell) {
    int32_t now = h->length;
    *spell = SPECD_HELD_SPELL;
    int32_t best = best_timed(h, max, 0); /* stale timings too: the length is timed again as it drives */
    if (best >= 0 && best != now && rate_of(h, best) > rate_of(h, now) * (1.0 + SPECD_HELD_MARGIN)) return best;
    *spell = SPECD_HELD_TRIAL;
    if (now != 0 && !fresh(h, 0)) return 0; /* first: whether drafting pays at all */
    if (modelled >= 0 && modelled <= max && modelled != now && !fresh(h, modelled)) return modelled;
    if (now + 1 <= max && !fresh(h, now + 1)) return now + 1;
    if (now - 1 >= 0 && !fresh(h, now - 1)) return now - 1;
    *spell = SPECD_HELD_SPELL;
    return now;
}

bool specd_held_timing_valid(int32_t k, double tokens, double ms, double steps) {
    return k >= 0 && k <= SPECD_HELD_MAX && tokens > 0.0 && ms > 0.0 && steps > 0.0 && tokens >= steps;
}

bool specd_held_lengths_restore(specd_held_lengths *h, int32_t k, double tokens, double ms, double steps) {
    if (!specd_held_timing_valid(k, tokens, ms, steps)) return false;
    h->tokens[k] = tokens, h->ms[k] = ms, h->steps[k] = steps;
    return true;
}

void specd_held_lengths_start_at_best(specd_held_lengths *h, int32_t max) {
    int32_t best = best_timed(h, max, 0);
    if (best >= 0) h->length = best;
}

void specd_held_lengths_step_done(specd_held_lengths *h, int32_t modelled_best, int32_t max) {
    if (h->length > max) h->length = max;
    if (--h->spell_left > 0) return;
    h->length = next_length(h, modelled_best, max, &h->spell_left);
}
