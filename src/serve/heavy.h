/* heavy.h - which slots step in a scheduler round, so that no slot's grammar stalls the others.
 *
 * A round steps every active slot and verifies them in one target pass, so it lasts as long as the
 * slowest slot's own work plus the pass. A grammar can make that work grow without bound (an
 * ambiguous one multiplies llama.cpp's parse stacks with every letter: 128 tokens took over 60 s,
 * and an 8-token request in another slot 1.5 s instead of 5 ms), and its steps cannot be cut
 * short. What the grammars cost is measured exactly: the CPU time the scheduler thread spends in
 * llama.cpp's grammar engine during a round (specd_grammar_thread_ms; neither preemption on a busy
 * machine nor the target pass's threads count in it). So:
 *  - a slot with a grammar becomes heavy when the grammars of a round it was in cost more than
 *    max(HEAVY_MIN_MS, a typical target pass), and stays heavy until its request ends (its steps
 *    alternate between cheap ones and dear ones, where it accepted drafts, and only grow): a
 *    heavy slot steps alone, in a round of its own, where its grammar's cost is its own;
 *  - the others' rounds get at least as much time as the heavy rounds took (after a heavy round of
 *    D ms, D ms of theirs come before the next one), and a heavy slot runs back to back when no
 *    other slot is active; so a light request waits at most one heavy step;
 *  - a heavy slot whose grammar cost more than the step limit in one step (request.h, serve_limits:
 *    max(step_limit_ms, STEP_LIMIT_PASSES typical passes), so the work a large model's grammar
 *    needs is never cut) ends with stop_type time_limit, stopping_limit "--step-limit", before its
 *    steps grow longer still (they grow by about a fifth per token, several times over in a step
 *    that accepted a draft, so the longest step anyone waits for is a few times the limit).
 * A server's scheduler thread's only. */
#ifndef SPECD_SERVE_HEAVY_H
#define SPECD_SERVE_HEAVY_H

#include "specd.h"

#include <stdbool.h>
#include <stdint.h>

#define HEAVY_MIN_MS 2.0
#define STEP_LIMIT_PASSES 10.0

/* One server's: who is heavy, the time owed to the light slots, what a typical pass takes. */
typedef struct heavy_state {
    bool heavy[SPECD_MAX_PARALLEL];
    double owed_ms;      /* the light slots' time still due before the next heavy round */
    int32_t next_heavy;  /* round-robin among heavy slots */
    double pass_ms;      /* a typical target pass: what "long" is measured against */
    int64_t step_limit_ms; /* the floor of the step limit (serve_limits.step_limit_ms; 0: none) */
} heavy_state;

/* The slots to step this round, from the active ones (active[0..n), slot numbers, in order): all
 * light ones, or one heavy one alone (*solo). Returns how many went to `out`. */
int32_t heavy_pick_round(heavy_state *h, const int32_t *active, int32_t n, int32_t *out, bool *solo);

/* What a round did: the slots that stepped (whether each has a grammar), how long it took, what
 * its grammars cost (CPU ms) and how long its target pass took. Updates who is heavy and the time
 * owed to the light slots; returns the slot that passed the step limit (to be ended), or -1. */
int32_t heavy_after_round(heavy_state *h, const int32_t *stepped, const bool *has_grammar, int32_t n, bool solo, double round_ms,
                          double grammar_ms, double pass_ms);

/* The most a heavy slot's grammar may cost in one step now (0: no limit). */
double heavy_step_limit_ms(const heavy_state *h);

/* The slot is free again (its job ended): it starts light. */
void heavy_forget(heavy_state *h, int32_t slot);
/* A fresh state: nothing known about the passes or slots; `step_limit_ms` as serve_limits has it. */
void heavy_reset(heavy_state *h, int64_t step_limit_ms);

#endif
