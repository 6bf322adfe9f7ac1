/* held_lengths.c - one draft length held a spell, chosen by paired tokens over timed ms (see .h). */
#include "held_lengths.h"

#include <string.h>

/* Timings decay by this per step: a length's ms follow the machine (another process, the cache
 * growing) while the tokens, which follow the text, come from the length policy's paired sums. A
 * trial's 6 timed steps drop below SPECD_HELD_FRESH some 190 steps after it. */
#define DECAY (1.0 - 1.0 / 1024.0)

void specd_held_lengths_init(specd_held_lengths *h, int32_t max) {
    memset(h, 0, sizeof *h);
    h->length = SPECD_HELD_FIRST < max ? SPECD_HELD_FIRST : max;
    h->spell_left = SPECD_HELD_TRIAL;
    h->step_length = h->last_drafted = h->before = -1;
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

/* The tokens per ms a length made on its own steps (what a calibration file keeps). */
static double own_rate(const specd_held_lengths *h, int32_t k) { return h->ms[k] > 0.0 ? h->tokens[k] / h->ms[k] : 0.0; }

static bool timed(const specd_held_lengths *h, int32_t k) { return h->steps[k] >= SPECD_HELD_TIMED && h->ms[k] > 0.0; }

/* A step of k, ms: timed, or the cost model's price scaled as the model misprices `driving`. */
static double step_ms(const specd_held_lengths *h, const specd_held_view *v, int32_t k, int32_t driving) {
    if (timed(h, k)) return h->ms[k] / h->steps[k];
    double scale = timed(h, driving) && v->model_ms[driving] > 0.0 ? h->ms[driving] / h->steps[driving] / v->model_ms[driving] : 1.0;
    return v->model_ms[k] * scale;
}

/* Tokens per ms of length k on the recent text (see the header); 0 when nothing prices it. */
static double rate(const specd_held_lengths *h, const specd_held_view *v, int32_t k, int32_t driving) {
    double ms = step_ms(h, v, k, driving);
    return ms > 0.0 ? v->tokens[k] / ms : 0.0;
}

/* The most a length not timed yet could make (see the header). */
static double hopeful_rate(const specd_held_lengths *h, const specd_held_view *v, int32_t k, int32_t driving) {
    if (k != driving + 1) return rate(h, v, k, driving);
    double ms = step_ms(h, v, driving, driving) + v->draft_token_ms;
    return ms > 0.0 ? v->tokens[k] / ms : 0.0;
}

/* The best timed length up to max (the driving one where none beats it). */
static int32_t best_timed(const specd_held_lengths *h, const specd_held_view *v, int32_t max, int32_t driving) {
    int32_t best = driving;
    for (int32_t k = 0; k <= max; k++)
        if (timed(h, k) && rate(h, v, k, driving) > rate(h, v, best, driving)) best = k;
    return best;
}

/* Whether length k could beat the driving length by SPECD_HELD_TRY, and is not timed lately. */
static bool worth_trying(const specd_held_lengths *h, const specd_held_view *v, int32_t k, int32_t max, int32_t driving) {
    if (k < 0 || k > max || k == driving || h->steps[k] >= SPECD_HELD_FRESH) return false;
    return hopeful_rate(h, v, k, driving) > rate(h, v, driving, driving) * (1.0 + SPECD_HELD_TRY);
}

/* The neighbour to try, or -1: one more draft first (its price is a bound, see the header), then
 * one fewer or no drafts, the more hopeful (their price is the cost model's guess: on the H200 it
 * priced the big target's T(3) 20% low from T(4) alone, and fresh runs tried 2 where it lost), or a
 * shorter length timed before, whose timing is stale now: on the H200's F32 target (T(1) 0.92 ms,
 * T(2) 1.17, T(5..8) 1.8) a warm engine held 5, 2.8% under a fixed 1, tried only 4 and 0, both
 * worse, and never 1, which it had timed in its first generation (0.977x the best fixed length;
 * 1.03x with it). Any shorter length priced by the model alone (the big target's T(2) extrapolated
 * from T(4)) tried 1 there and lost 3-5% on a fresh engine.
 * Tried again once its timing is stale: one trial's 6 timed steps, one of them slowed by another
 * process, kept 4 from ever driving in replays where it beat 3. */
static int32_t trial_length(const specd_held_lengths *h, const specd_held_view *v, int32_t max, int32_t driving) {
    if (worth_trying(h, v, driving + 1, max, driving)) return driving + 1;
    int32_t pick = -1;
    for (int32_t k = driving - 1; k >= 0; k--)
        if ((k == driving - 1 || k == 0 || h->ms[k] > 0.0) && worth_trying(h, v, k, max, driving) &&
            (pick < 0 || hopeful_rate(h, v, k, driving) > hopeful_rate(h, v, pick, driving)))
            pick = k;
    return pick;
}

/* The length that drives next, and for how many steps. */
static int32_t next_length(specd_held_lengths *h, const specd_held_view *v, int32_t max, int32_t *spell) {
    int32_t driving = h->length;
    if (h->before >= 0) { /* a trial ended: it drives on where it beat what it interrupted */
        int32_t before = h->before < max ? h->before : max;
        if (driving > max || rate(h, v, before, before) >= rate(h, v, driving, before)) driving = before;
        h->before = -1;
    }
    if (driving > max) driving = max;
    *spell = SPECD_HELD_SPELL;
    int32_t best = best_timed(h, v, max, driving);
    if (best != driving && rate(h, v, best, driving) > rate(h, v, driving, driving) * (1.0 + SPECD_HELD_MARGIN))
        return best;
    int32_t trial = trial_length(h, v, max, driving);
    if (trial < 0) return driving;
    h->before = driving;
    *spell = SPECD_HELD_TRIAL;
    return trial;
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
    int32_t best = -1;
    for (int32_t k = 0; k <= max; k++)
        if (h->ms[k] > 0.0 && (best < 0 || own_rate(h, k) > own_rate(h, best))) best = k;
    if (best >= 0) h->length = best;
}

bool specd_held_lengths_spell_ends(const specd_held_lengths *h) { return h->spell_left <= 1; }

void specd_held_lengths_step_done(specd_held_lengths *h, const specd_held_view *view, int32_t max) {
    if (h->length > max) h->length = max;
    if (--h->spell_left > 0) return;
    if (!view || !(view->steps > 0.0)) {
        h->spell_left = SPECD_HELD_SPELL;
        return;
    }
    h->length = next_length(h, view, max, &h->spell_left);
}
