/* held_lengths.h - one draft length held for a spell of steps, chosen by what the lengths really
 * made (an offloaded target's policy: length_policy.h).
 *
 * On a GPU a pass runs from a captured CUDA graph only once its shape has held for two passes, and
 * llama.cpp rebuilds the graph of a pass whose size changed; so a length is held for
 * SPECD_HELD_SPELL steps. Which one: the cost model's pricing of a length it has not driven is a
 * model's; on a GPU, where a pass costs a ms and its overheads are a third of it, the model went
 * wrong both ways (in a replay of the H200's costs its T(1) was learnt 25% low, a fixed 0 looked
 * best, and the run never drafted again; on the H200 itself it priced 4 and 5 best where 3 was, and
 * drafting at all lost on both benchmark pairs). So each length's own steps are timed as they ran
 * (tokens and ms, decayed; steps that draft nothing time length 0), and at the end of a spell:
 *   - the best timed length drives, when it made SPECD_HELD_MARGIN more than the one driving (a
 *     stale timing counts: the length is timed again as it drives);
 *   - else a length whose timing is stale (fewer than SPECD_HELD_FRESH steps' weight) is tried for
 *     SPECD_HELD_TRIAL steps: first no drafting at all (0), then the one the cost model prices
 *     best, then the neighbours of the one driving (a climb to the best);
 *   - else the one driving drives on.
 * The first length, SPECD_HELD_FIRST, is itself a trial. Each length is tried again as its timing
 * goes stale, some 280 steps after it last drove: the text may have changed. The first
 * SPECD_HELD_SETTLE steps after the drafted length changed are not timed: on the H200 they cost up
 * to three times a settled step (the resized pass's graph is rebuilt, then captured).
 *
 * Why no drafts are tried first: on the H200 with the benchmark pairs a draft token cost 0.4 of a
 * target pass, and the target alone (1180-1250 tokens/s on the Q8_0 target, 1090-1140 on the F32)
 * outran every length (fixed 3: 1160-1190 and 900-990); held lengths, which tried 0 only as a
 * neighbour of 1 and timed it by warm-up steps (0.71 tokens/ms where settled steps made 1.14),
 * held 2-6 and ran at 0.72-0.93x no speculation (once 1.08x). Where drafting pays, the trial
 * costs: replayed on the H200's costs with a draft token at a tenth of a pass, 2-7% of a fresh
 * 128-token run (docs/performance.md). Not thread-safe (specd.h). */
#ifndef SPECD_HELD_LENGTHS_H
#define SPECD_HELD_LENGTHS_H

#include <stdbool.h>
#include <stdint.h>

#define SPECD_HELD_MAX 16
#define SPECD_HELD_SPELL 16
#define SPECD_HELD_TRIAL 8
#define SPECD_HELD_FIRST 3 /* llama-speculative's draft, before anything is timed */
#define SPECD_HELD_SETTLE 2 /* steps after a change of length left untimed: a rebuilt graph, a capture */
#define SPECD_HELD_FRESH 5.0
#define SPECD_HELD_MARGIN 0.03

typedef struct specd_held_lengths {
    double tokens[SPECD_HELD_MAX + 1], ms[SPECD_HELD_MAX + 1], steps[SPECD_HELD_MAX + 1]; /* decayed */
    int32_t length;      /* the length held now */
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
/* A step ended: at the end of a spell the next length is chosen (modelled_best: the length the
 * cost model prices best, at most max). */
void specd_held_lengths_step_done(specd_held_lengths *h, int32_t modelled_best, int32_t max);
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
