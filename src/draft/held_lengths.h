/* held_lengths.h - one draft length held for a spell of steps, chosen by what the lengths really
 * cost and what each would have made on the same text (an offloaded target's policy:
 * length_policy.h).
 *
 * On a GPU a pass runs from a captured CUDA graph only once its shape has held for two passes, and
 * llama.cpp rebuilds the graph of a pass whose size changed; so a length is held for
 * SPECD_HELD_SPELL steps, and every change costs: on an H200 with an 8.8 GB target the two steps
 * after a change took 7-11 ms more each, where a settled step takes 6 (three passes lost a change).
 *
 * Which length. A length is a step's tokens over its ms. The tokens come from the length policy's
 * paired sums (length_policy.h): on the same recent steps, what a chain cut at each k would have
 * accepted (exact up to the length drafted, the acceptance by depth past it), so that the text
 * is the same for every length. The ms come from each length's own settled steps, timed as they ran
 * (decayed; the first SPECD_HELD_SETTLE steps after a change are not timed), which on a GPU vary by
 * a percent; a length not timed yet is priced by the cost model, scaled by what the length driving
 * really costs against its model. Timing each length's tokens on its own steps instead compared
 * the lengths on different text: on the H200 their spells made 0.15-0.39 tokens/ms by the text
 * alone, the choice followed the text, it changed length a dozen times in 100 steps, and held
 * lengths ran at 0.82-0.87x the best fixed length (1.08-1.12x no drafts).
 *
 * At the end of a spell: a trial that made more than the length it interrupted drives on (going
 * back costs a change too), else that length drives again. The best timed length takes over when
 * it makes SPECD_HELD_MARGIN more than the one driving. Else a neighbour not timed yet is tried for
 * SPECD_HELD_TRIAL steps where it could beat the length driving by SPECD_HELD_TRY: one more draft
 * first, priced at the pass driving now and one more draft token (a pass never costs less for more
 * tokens: the most a longer length could make), else one fewer or no drafts at all, or a shorter
 * length timed before, by the cost model (no plain steps time T(1) under held lengths: generate.c).
 * A neighbour is tried again once its timing is stale (below SPECD_HELD_FRESH). The lengths climb
 * one at a time: on the big target a length made 2-5% more than the one before it from 3 to 6.
 * Not thread-safe (specd.h). */
#ifndef SPECD_HELD_LENGTHS_H
#define SPECD_HELD_LENGTHS_H

#include <stdbool.h>
#include <stdint.h>

#define SPECD_HELD_MAX 16
#define SPECD_HELD_SPELL 16
#define SPECD_HELD_TRIAL 8
#define SPECD_HELD_FIRST 3 /* llama-speculative's draft, before anything is timed */
#define SPECD_HELD_SETTLE 2 /* steps after a change of length left untimed: a rebuilt graph, a capture */
#define SPECD_HELD_TIMED 1.0 /* steps' weight from which a length counts as timed */
#define SPECD_HELD_FRESH 5.0 /* and as timed lately (a neighbour is not tried again) */
#define SPECD_HELD_MARGIN 0.05 /* a timed length beats the one driving by this to take over */
#define SPECD_HELD_TRY 0.02    /* a neighbour could beat it by this to be tried */

/* What the length policy's paired sums say of each length k up to SPECD_HELD_MAX, per step of the
 * recent ones: the tokens a chain cut at k would have made, and what the cost model prices such a
 * step at; and what one more draft token costs. steps 0: no step yet (nothing is chosen). */
typedef struct specd_held_view {
    double tokens[SPECD_HELD_MAX + 1], model_ms[SPECD_HELD_MAX + 1];
    double draft_token_ms;
    double steps;
} specd_held_view;

typedef struct specd_held_lengths {
    double tokens[SPECD_HELD_MAX + 1], ms[SPECD_HELD_MAX + 1], steps[SPECD_HELD_MAX + 1]; /* decayed */
    int32_t length;      /* the length held now */
    int32_t before;      /* in a trial: the length it interrupted; -1 otherwise */
    int32_t spell_left;  /* steps before the next choice */
    int32_t step_length; /* the length the last step drafted (-1: none since its time was taken) */
    int32_t last_drafted; /* the length the step before drafted (-1: none yet) */
    int32_t settle_left;  /* steps still untimed since the drafted length changed */
} specd_held_lengths;

/* Starts with SPECD_HELD_FIRST, at most max, for a trial (a calibration file's timings may name a
 * better one: specd_held_lengths_start_at_best). */
void specd_held_lengths_init(specd_held_lengths *h, int32_t max);
/* A step drafted `drafted` tokens (its time follows: specd_held_lengths_record_time). */
void specd_held_lengths_record_step(specd_held_lengths *h, int32_t drafted);
/* The step's tokens and the ms it took, as it ran. */
void specd_held_lengths_record_time(specd_held_lengths *h, int32_t tokens, double ms);
/* Whether the step now ending ends a spell, so that specd_held_lengths_step_done chooses (and needs
 * a view; otherwise it may be NULL). */
bool specd_held_lengths_spell_ends(const specd_held_lengths *h);
/* A step ended: at the end of a spell the next length, at most max, is chosen by `view` (above). */
void specd_held_lengths_step_done(specd_held_lengths *h, const specd_held_view *view, int32_t max);
/* Whether a timing of length k could be one: k a length, the numbers positive, a token or more a
 * step. */
bool specd_held_timing_valid(int32_t k, double tokens, double ms, double steps);
/* An earlier process's timing of length k (a calibration file's, calibrate.h): taken as this
 * process's own; false, changing nothing, for one that is not valid. */
bool specd_held_lengths_restore(specd_held_lengths *h, int32_t k, double tokens, double ms, double steps);
/* After restoring: the best timed length up to max drives first (a fresh process started at
 * SPECD_HELD_FIRST and spent its first spells finding it again). */
void specd_held_lengths_start_at_best(specd_held_lengths *h, int32_t max);

#endif
