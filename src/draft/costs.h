/* costs.h - what a target pass and a draft token cost on this machine now: the cost model the
 * draft length is planned from (draft_length.h), learnt from the passes generations make anyway and
 * kept between processes (calibrate.h).
 *
 * T(n), a target pass over n tokens, is (base(n) + what the cache fill adds) x level. base(n) is
 * the pass on an empty cache; every size has its own, since the curve is far from linear on a CPU
 * (GEMM tiles: on one machine T(5) costs 1.5 T(4) while T(8) costs what T(5) does; on another T(2)
 * is 2.5 T(1)). The level is one factor for all sizes: the machine's speed of the moment (another
 * process, frequency), learnt from every real pass, so sizes not passed lately move too.
 *
 * Nothing is timed for its own sake (such passes produce nothing and would clear the caches a
 * request relies on). A size's base comes from the cheapest of this process's first passes of it
 * (what slows a pass on a CPU only ever adds time), or, until the process has passed it, from a
 * calibration file: a starting point, not the truth. Its sizes first set the level (the least
 * ratio of the first passes to them: a file written on a busy machine, 3x too dear, is brought to
 * this machine's speed by the first pass), then each is re-learnt from this process's passes of
 * it. A size neither the file nor this process knows is priced optimistically from the measured
 * ones, so that it is tried once where it might pay. The draft token's cost is re-measured the
 * same way: the file's value stands only until the first draft decode.
 *
 * Not thread-safe: the engine's steps run on one thread at a time (specd.h). */
#ifndef SPECD_COSTS_H
#define SPECD_COSTS_H

#include <stdbool.h>
#include <stdint.h>

#define SPECD_COSTS_MAX_BATCH 64
#define SPECD_COSTS_LEARN_PASSES 4

/* What the cache fill costs a pass: T(n) = base(n) + A x work, where work weighs the cells each
 * of the pass's tokens reads: own_weight for each cell of its own sequence before it, all_weight
 * for each used cell of the whole context (other slots', idle slots' prompt caches), and the pass
 * as a whole pass_weight for each used cell. Measured with tools/pass_costs on the benchmark pair's
 * target (2 threads, 1 and 4 slots, fills 0-1000, passes of 1-16 tokens): with flash attention off
 * (specd's default) every token reads every used cell, masked or not, and the pass pays about as
 * much again once: own 0, all 1, pass 1, A = 0.00153 ms (T(1) 12.6 ms); with it on, masked cells
 * are skipped but still visited: own 1, all 0.21, pass 0, A = 0.00345 ms. A is the lesser of
 * per_t1 x base(1) (so it follows base(1) as that is learnt: another machine) and max_ms (from the
 * operations a cell takes at this CPU's rate: a small model, whose base(1) is mostly overhead, not
 * operations); all zero: not known, the fill is left out. */
typedef struct specd_attention_cost {
    double per_t1, max_ms;
    double own_weight, all_weight, pass_weight;
} specd_attention_cost;

/* The cache a pass attends: the drafting slot's cells before its root, and the context's used
 * cells (every slot's). */
typedef struct specd_fill {
    double own_cells, all_cells;
} specd_fill;

typedef struct specd_costs {
    double base_ms[SPECD_COSTS_MAX_BATCH + 1]; /* 0 = not known */
    /* passes of this process that made base_ms[n]; 0 with base_ms[n] > 0: a calibration file's
     * value, a prior until this process passes that size */
    int32_t base_passes[SPECD_COSTS_MAX_BATCH + 1];
    int32_t seen[SPECD_COSTS_MAX_BATCH + 1]; /* passes of each size this process timed, all kinds */
    /* measured / base over real passes of known sizes: the least of the first
     * SPECD_COSTS_LEARN_PASSES (a warm-up or busy first pass must not set the level), then a
     * moving average that leans to the low end, as the bases do (costs.c, level_average); 0 = none
     * yet (1) */
    double level;
    int32_t level_passes;
    int32_t level_moves; /* passes that moved the level's average, counted while it settles */
    /* A draft token: the first of a step (the draft catching up on the tokens the step before
     * accepted, right after a target pass has pushed its weights out of the CPU's caches: 5-6 ms
     * where the next ones take 2.5 on the benchmark pair) and each one after it; moving averages,
     * 0 = not known. Priced as one average, the next token looked as dear as the first, and chains
     * stopped one token short of the best fixed length. */
    double first_draft_ms, draft_ms;
    int32_t draft_decodes; /* draft decodes this process measured (0: the costs are a file's) */
    /* The level when the draft costs were last measured: until they are again, they follow the
     * level (both models share the machine). Kept apart, a busy moment raised every T(n) but not
     * the draft token, drafting looked cheaper than it was, and a run that should not draft did. */
    double draft_level;
    specd_attention_cost attention;
    /* On a model whose state cannot drop rejected tokens (recurrent, hybrid): what a step that
     * drafts pays on top of its passes, moving average in ms: saving the state before the drafts,
     * going back to it after a rejection and decoding the accepted tokens again. 0 otherwise. */
    double state_ms;
    /* A pass whose size differs from the pass before it: llama.cpp reuses the previous pass's
     * graph only for a pass of the same shape (and a GPU its captured CUDA graph), and builds a new
     * one otherwise. On a CPU that is lost in a 25 ms pass; on a GPU, where a pass takes a ms, it
     * is a third of one: a draft length that changed every step ran 10% slower than a fixed 3 on an
     * H200. Learnt as the difference between what resized passes and same-size passes cost over
     * the model (signed moving averages of their residuals, ms), so that whatever the model misses
     * for both cancels. last_pass_n: the size of the pass before (0: none). */
    int32_t last_pass_n;
    double same_size_residual, resized_residual;
    int32_t same_size_passes, resized_passes;
    /* Counts every change to what a calibration file keeps (base_ms, draft_ms known): the engine
     * saves the file when it moved (calibrate.h). */
    uint32_t n_learnt;
} specd_costs;

void specd_costs_init(specd_costs *c);
/* What the cache fill costs (NULL: not known, the fill is left out). */
void specd_costs_set_attention(specd_costs *c, const specd_attention_cost *attention);

/* T(n) at `fill` (NULL: an empty cache), as estimated (see above). Before any pass is known, in
 * units of one target token. */
double specd_costs_pass(const specd_costs *c, int32_t n_tokens, const specd_fill *fill);
/* As a choice prices it: a size with fewer than SPECD_COSTS_LEARN_PASSES passes a little below what
 * it measured, so that one slow pass does not keep it from being passed again. */
double specd_costs_pass_to_choose(const specd_costs *c, int32_t n_tokens, const specd_fill *fill);
/* A draft token after the first of a step: measured, or a tenth of a target token before it is. */
double specd_costs_draft_token(const specd_costs *c);
/* The first draft token of a step (its catch-up decode): measured, or as the others. */
double specd_costs_first_draft_token(const specd_costs *c);
/* What drafting n tokens costs in draft decodes: the first, then the others. */
double specd_costs_drafts(const specd_costs *c, int32_t n);
/* The cells a pass of n tokens reads at `fill` (each attends to the slot's cells before the root
 * and to those before it in the pass), for specd_costs_record_pass's own_work. */
double specd_costs_own_work(int32_t n_tokens, const specd_fill *fill);

/* What a pass costs on top of T(n) when its size differs from the pass before it (see
 * last_pass_n), ms: 0 until enough passes of both kinds were timed, and never below 0. */
double specd_costs_resize(const specd_costs *c);

/* Whether a resize costs a tenth of a one-token pass or more (a GPU's; never a CPU's). */
bool specd_costs_resizes_matter(const specd_costs *c);
/* Tokens to pad a pass of n tokens with (engine.h: specd_tree_pass.n_padding) so that it keeps
 * the size of the pass before (last_pass_n), when that costs less than a change of size:
 * T(last) - T(n) at `fill` under specd_costs_resize. 0 where the pass before was not larger, it
 * would pass max_tokens, or resizes do not matter (specd_costs_resizes_matter): on a CPU, where llama.cpp rebuilds a graph in
 * a fraction of a ms, a padded token costs more than that, and nothing is padded; on a GPU, where
 * a rebuild (and the warm-up passes without a CUDA graph) costs a third of a pass, the step keeps
 * its width. */
int32_t specd_costs_padding(const specd_costs *c, int32_t n, const specd_fill *fill, int32_t max_tokens);

/* A calibration file's cost of a pass over n tokens: that size's prior. */
void specd_costs_record_calibration(specd_costs *c, int32_t n_tokens, double ms);
/* A calibration file's draft tokens (first_ms 0: not in the file): the prior until this process
 * measures a draft decode. */
void specd_costs_record_calibration_draft(specd_costs *c, double first_ms, double ms);
/* Brings bases no real pass could have (a pass of n tokens dearer than n/m passes of m < n, or
 * than a pass of more tokens, beyond some slack) back within those bounds. Learning applies it;
 * so does reading a calibration file. */
void specd_costs_bound(specd_costs *c);
/* A real pass over n tokens whose tokens attended own_work cells of their own sequences in all, in
 * a context of all_cells used cells (before the pass), that took ms. */
void specd_costs_record_pass(specd_costs *c, int32_t n_tokens, double own_work, int64_t all_cells, double ms);
/* A pass on an empty cache. */
void specd_costs_record_verify(specd_costs *c, int32_t n_tokens, double ms);
/* n_decodes draft tokens after a step's first, decoded in ms (one decode each, or one decode
 * holding them all). */
void specd_costs_record_draft(specd_costs *c, int32_t n_decodes, double ms);
/* A step's first draft decode (one token, or one decode for several slots' first tokens). */
void specd_costs_record_first_draft(specd_costs *c, double ms);
/* What a drafting step paid for saving and restoring recurrent state (see state_ms). */
void specd_costs_record_state(specd_costs *c, double ms);

#endif
