/* draft_length.h - how long to draft in one step: a plan each drawn draft token is weighed against.
 *
 * A step that keeps k drafts is expected to give 1 + sum_i prod_{j<=i} a_j tokens, a_j the chance
 * draft j is accepted (acceptance.h, by the drafter's confidence in it), and costs a target pass
 * over k + 1 tokens plus the draft decodes (costs.h). What a step should maximise is not its own
 * tokens per ms but the generation's: a token is worth drafting when what it is expected to add
 * exceeds what its time is worth at the rate the engine makes tokens (rate: tokens per ms, from
 * length_policy.h). Weighed by each step's own ratio, a cheap step refused a draft the run's rate
 * called for, and an expensive one kept drafting where the run lost (on a machine where T(8)
 * costs what T(5) does, drafts of 3 to 9 where a fixed 3 was 10% faster). As a token is drawn,
 * keeping it is weighed with what drafting on from it may add (a lookahead at the mean acceptance:
 * on a CPU T(n) is not convex, and one more token may not pay while three more do).
 *
 * The plan is a step's own (a local of the drafter's caller); what it reads is the engine's. */
#ifndef SPECD_DRAFT_LENGTH_H
#define SPECD_DRAFT_LENGTH_H

#include "acceptance.h"
#include "costs.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct specd_draft_plan_params {
    const specd_costs *costs;
    const specd_acceptance *acceptance; /* the drafter's */
    specd_accept_mode mode;
    double rate;          /* what one ms of the engine is worth, in tokens */
    specd_fill fill;      /* the cache the step's pass attends */
    int32_t max_len;      /* the longest chain the step may draft (its lookahead) */
    /* Several slots in one target pass: other_tokens tokens of slots drafted before this one ride
     * in the pass; `copies` chains are drafted together (one draft decode per depth for all), each
     * taken to draft as this one does (1: alone). A token of this chain stands for `copies`. */
    int32_t other_tokens;
    int32_t copies;
} specd_draft_plan_params;

typedef struct specd_draft_plan {
    specd_draft_plan_params params;
    double p_all;    /* chance every draft kept so far is accepted */
    double expected; /* tokens the step's chains are expected to give */
    double cost;     /* ms: the target pass with the kept drafts, the state, the draft decodes spent */
    int32_t n_decodes; /* draft decodes spent (the first of a step costs more: costs.h) */
} specd_draft_plan;

/* Starts a step: nothing drafted, the pass over the root(s). */
void specd_draft_plan_begin(specd_draft_plan *plan, const specd_draft_plan_params *params);
/* The cost of the step's target pass when this chain has n tokens in it (the root and n - 1
 * drafts), with the other slots' tokens. */
double specd_draft_plan_pass_ms(const specd_draft_plan *plan, int32_t n);
/* `depth` drafts are kept: is drawing one more expected to pay? */
bool specd_draft_plan_worth_continuing(const specd_draft_plan *plan, int32_t depth);
/* One more draft decode is spent. */
void specd_draft_plan_add_draft_decode(specd_draft_plan *plan);
/* A draft token at `depth` with this confidence was drawn: would keeping it pay? */
bool specd_draft_plan_worth_adding(const specd_draft_plan *plan, int32_t depth, float confidence);
/* It is kept: the step's expectation and cost grow. */
void specd_draft_plan_add(specd_draft_plan *plan, int32_t depth, float confidence);
/* The estimated acceptance of a draft of this confidence (the plan's drafter and mode). */
double specd_draft_plan_acceptance(const specd_draft_plan *plan, float confidence);
/* What drafting a value of v tokens for ms is worth: v - rate x ms (> 0: it pays). */
double specd_draft_plan_net(const specd_draft_plan *plan, double tokens, double ms);

#endif
