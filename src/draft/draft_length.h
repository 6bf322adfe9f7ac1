/* draft_length.h - how long to draft, from measured costs.
 *
 * Expected tokens per step with a chain of k drafts is 1 + sum_i prod_{j<=i} a_j, where a_j is the
 * chance that draft j is accepted. We learn a as a function of the drafter's confidence (calibrated
 * online, by confidence bucket) and we measure what a target pass over n tokens costs (T(n)) and
 * what one draft token costs. While drafting, each token is kept only if it raises the expected
 * tokens per second of the step, and drafting goes on only if one more token is expected to. */
#ifndef SPECD_DRAFT_LENGTH_H
#define SPECD_DRAFT_LENGTH_H

#include <stdbool.h>
#include <stdint.h>

#define SPECD_DL_BINS 10
#define SPECD_DL_MAX_BATCH 64
#define SPECD_DL_LEARN_PASSES 4

/* What the cache fill costs a pass: T(n) = base(n) + A x work, where work weighs the cells each
 * of the pass's tokens reads: own_weight for each cell of its own sequence before it, all_weight
 * for each used cell of the whole context (other slots', idle slots' prompt caches), and the pass
 * as a whole pass_weight for each used cell. Measured with tools/pass_costs on the benchmark pair's
 * target (2 threads, 1 and 4 slots, fills 0-1000, passes of 1-16 tokens): with flash attention off
 * (specd's default) every token reads every used cell, masked or not, and the pass pays about as
 * much again once: own 0, all 1, pass 1, A = 0.00153 ms (T(1) 12.6 ms); with it on, masked cells
 * are skipped but still visited: own 1, all 0.21, pass 0, A = 0.00345 ms. A is the lesser of per_t1 x base(1)
 * (so it follows base(1) as that is learnt: another machine) and max_ms (from the operations a
 * cell takes at this CPU's rate: a small model, whose base(1) is mostly overhead, not operations);
 * all zero: not known, the fill is left out. */
typedef struct specd_attention_cost {
    double per_t1, max_ms;
    double own_weight, all_weight, pass_weight;
} specd_attention_cost;

typedef struct specd_draft_length {
    double accepted[SPECD_DL_BINS]; /* decayed counts by confidence bucket */
    double drafted[SPECD_DL_BINS];
    /* T(n), the cost of a target pass over n tokens, is (base_ms[n] + its cache fill's part) x
     * drift (the fill: specd_attention_cost). The curve's shape is far from linear on CPU (on the
     * benchmark pair T(2) is 2.2x T(1) and T(8) 3.7x), so every size gets its own base, the cost
     * on an empty cache (0 = not known yet): from the calibration cache file of an earlier
     * process, else learnt from the first passes of that size the generation makes anyway, brought
     * to the level of the moment and rid of the fill's part; sizes not known yet are scaled from
     * the nearest known one by a prior shape. Nothing is timed for its own sake: such passes
     * produce nothing and would clear the KV caches a request relies on. The level changes with
     * the machine's load, and a generation only passes the sizes it chooses, so one factor learnt
     * from every real pass moves all sizes together; a per-size average would keep a stale,
     * too-cheap T(n) for sizes not chosen lately. */
    double base_ms[SPECD_DL_MAX_BATCH + 1];
    /* Passes that made base_ms[n]: a size learnt from the generation's own passes (not given by
     * specd_draft_length_record_calibration) keeps the cheapest of its first SPECD_DL_LEARN_PASSES,
     * so one pass slowed by the machine does not fix its cost for good. */
    int32_t base_passes[SPECD_DL_MAX_BATCH + 1];
    /* measured / base over real passes of known sizes: the least of the first
     * SPECD_DL_LEARN_PASSES (a warm-up or busy first pass must not set the level), then a moving
     * average; 0 = none yet (1) */
    double drift;
    int32_t level_passes; /* passes that set the drift so far */
    double draft_ms;                          /* moving average cost of one draft token */
    /* The cache fill: what attention costs a pass grows with the cells its tokens read, so a pass
     * grows with the fill in proportion to its tokens and no one level factor prices both a pass
     * of 1 and one of 8 (see specd_attention_cost). Bases learnt at one fill priced passes at
     * another wrongly: a server that ran 4 clients wrote T(8) at 1.4x T(1) where it is 3.7x. */
    specd_attention_cost attention;
    /* the fill of the step being drafted (specd_draft_length_set_fill): cells before the root in
     * the drafting slot's sequence, and used cells of the whole context */
    double own_cells, all_cells;
    /* On a model whose state cannot drop rejected tokens (recurrent, hybrid): what a step that
     * drafts pays on top of its passes, moving average in ms: saving the state before the drafts,
     * going back to it after a rejection and decoding the accepted tokens again. 0 otherwise.
     * The first kept draft of a step carries it. */
    double state_ms;
    /* Counts every change to what a calibration cache keeps (base_ms, draft_ms known): the
     * engine saves the cache when it moved (draft/calibrate.h). */
    uint32_t n_learnt;
    /* the step being drafted */
    int32_t batch_tokens;   /* tokens other slots put in the same target pass */
    double batch_expected;  /* tokens those slots are expected to give from it */
    /* Chains drafted together with this one (one draft decode per depth), each taken to draft as
     * this one does: 1 alone. Every own token then stands for this many in the pass. */
    int32_t copies;
    double p_all;     /* chance that every draft kept so far is accepted */
    double expected;  /* expected tokens from this step */
    double cost;      /* cost of this step so far, in ms: the target pass plus draft decodes */
} specd_draft_length;

void specd_draft_length_init(specd_draft_length *dl);
/* Starts a step; resets the running expectation. */
void specd_draft_length_begin(specd_draft_length *dl);
/* Starts a step whose target pass also carries other slots' trees: other_tokens tokens, expected to
 * give other_expected tokens. A draft token then has to raise the whole pass's tokens per ms: its
 * cost is what it adds to T(all the pass's tokens), and the gain is weighed against every token the
 * pass gives. As slots fill, the pass is already large and well used, so drafting shrinks, and
 * stops where it does not pay. */
void specd_draft_length_begin_in_batch(specd_draft_length *dl, int32_t other_tokens, double other_expected);
/* Starts a step drafted together with copies - 1 other chains (one draft decode per depth for
 * all), besides other_tokens tokens of slots drafted before them. The others' lengths are not
 * known yet, so each chain decides as if they all drafted as it does: a pass of other_tokens +
 * copies x (depth + 1) tokens. Deciding each as alone beside the others' roots missed what T(n)
 * does at the size they reach together (on the benchmark pair's CPU a pass of 8 tokens costs less
 * than one of 5, so two slots drafting 3 each is cheap while one drafting 3 beside a root is not). */
void specd_draft_length_begin_joint(specd_draft_length *dl, int32_t other_tokens, double other_expected,
                                    int32_t copies);
/* A draft token at `depth` with this confidence was drawn: would keeping it pay? */
bool specd_draft_length_worth_adding(const specd_draft_length *dl, int32_t depth, float confidence);
/* It is kept: the step's expectation and cost grow. */
void specd_draft_length_add(specd_draft_length *dl, int32_t depth, float confidence);
/* `depth` tokens are kept: is drafting one more expected to pay? */
bool specd_draft_length_worth_continuing(const specd_draft_length *dl, int32_t depth);
/* One more draft decode is spent. */
void specd_draft_length_add_draft_decode(specd_draft_length *dl);
/* What the cache fill costs (NULL: not known, the fill is left out). */
void specd_draft_length_set_attention(specd_draft_length *dl, const specd_attention_cost *attention);
/* The fill of the next step's pass: the drafting slot's cells before its root, and the context's
 * used cells (every slot's). Costs from then on are priced at this fill. */
void specd_draft_length_set_fill(specd_draft_length *dl, int32_t own_cells, int64_t all_cells);
/* A known cost of a pass over n tokens (a calibration cache file): sets the base of that size. */
void specd_draft_length_record_calibration(specd_draft_length *dl, int32_t n_tokens, double ms);
/* Brings bases no real pass could have (a pass of n tokens dearer than n/m passes of m < n, or
 * than a pass of more tokens, beyond some slack) back within those bounds. Learning applies it;
 * so does reading a calibration cache file. */
void specd_draft_length_bound_costs(specd_draft_length *dl);
/* Measurements after a step. A pass over n tokens on an empty cache: */
void specd_draft_length_record_verify(specd_draft_length *dl, int32_t n_tokens, double ms);
/* A pass over n tokens whose tokens attended own_work cells of their own sequences in all, in a
 * context of all_cells used cells (before the pass): */
void specd_draft_length_record_pass(specd_draft_length *dl, int32_t n_tokens, double own_work, int64_t all_cells,
                                    double ms);
void specd_draft_length_record_draft(specd_draft_length *dl, int32_t n_decodes, double ms);
/* What a drafting step paid for saving and restoring recurrent state (see state_ms). */
void specd_draft_length_record_state(specd_draft_length *dl, double ms);
void specd_draft_length_record_outcome(specd_draft_length *dl, float confidence, bool accepted);
/* Estimated acceptance for a draft of this confidence. */
double specd_draft_length_acceptance(const specd_draft_length *dl, float confidence);
/* Estimated cost of a target pass over n tokens at the step's fill (set_fill). */
double specd_draft_length_verify_cost(const specd_draft_length *dl, int32_t n_tokens);

#endif
