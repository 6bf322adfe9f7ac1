/* length_policy.h - the rate a ms is worth, and the check that the planned lengths never lose to
 * a fixed one.
 *
 * The rate: what every draft token is weighed against (draft_length.h): the tokens per ms the best
 * fixed length makes on the recent steps (the check's sums below, priced by the cost model; before
 * any step, the cost model at the mean acceptance), or the tokens per ms the engine really made
 * (all its slots, decayed), the higher. Not the rate of the moment alone: while the planner tried
 * long drafts that lost, that rate fell, a lower rate made longer drafts look worth it, and a
 * 128-token generation spent a third of its steps in that loop. The best fixed length is what the
 * planner must beat, and what it is measured against. Not thread-safe (specd.h).
 *
 * The check. The planner weighs each token by estimates (acceptance by confidence, a lookahead at
 * the mean); a fixed length needs none, and on some text and machines it wins (a fixed 3 was 10%
 * faster than the planner of the time on a machine where T(8) costs what T(5) does). Every chain
 * step of the draft model also says what each fixed length k = 0..SPECD_POLICY_MAX_FIXED would have
 * given on the same drafts: a chain cut at k <= the drafted length m accepts min(r, k) of them (r
 * accepted), exactly (the drafts a fixed length would draw are the same draws); past m, the same r
 * when the chain was rejected within m, and when all m were accepted, the mean acceptance for the
 * tokens it did not draw. Each is priced by the cost model (costs.h) at the step's fill, as the
 * planner's own step is, so the comparison is paired, step by step, and only what the two chose
 * differs. When over the planner's recent steps a fixed length gave more tokens per ms (by more than
 * SPECD_POLICY_MARGIN), that length drives the next steps; then the planner is tried again, for
 * SPECD_POLICY_TRIAL steps, and each trial that loses again doubles how long the fixed length
 * drives (up to SPECD_POLICY_MAX_SPELL). Fixed length 0 is drafting nothing.
 *
 * A pass of another size than the step's before pays what a resize costs (costs.h: llama.cpp
 * builds the pass's graph anew): the planner's step when its pass differs from the last one, a
 * fixed length never (its passes keep one size). On a CPU that is nothing; on a GPU, where it is a
 * third of a pass, the planner's varying lengths lost 10% to a fixed 3, which the check could not
 * see while it priced both by T(n) alone. For the same reason a spell keeps the length it began
 * with where a resize costs a tenth of a pass or more (the next trial chooses again).
 *
 * Held lengths (specd_length_policy_hold: the target's layers on a GPU; on rpc-servers alone, once
 * a resize is learnt to cost a tenth of a pass, as a GPU behind one makes it): every step drafts a
 * fixed length held for a spell, chosen by the check's sums (the tokens each length would have
 * made) over the lengths' own timed steps (held_lengths.h); the planner never drives. On an H200 the planner's lengths, changing
 * every step, ran at 0.71-0.78x llama-speculative's fixed 3, and a fixed 3 of specd's own at 1.02x
 * it; behind an rpc-server on a CPU the planner was 4-6% faster than held lengths.
 *
 * The engine's (learned.h), over every request. */
#ifndef SPECD_LENGTH_POLICY_H
#define SPECD_LENGTH_POLICY_H

#include "acceptance.h"
#include "costs.h"
#include "held_lengths.h"

#include <stdbool.h>
#include <stdint.h>

#define SPECD_POLICY_MAX_FIXED 16
#define SPECD_POLICY_TRIAL 16
#define SPECD_POLICY_FIRST_SPELL 32
#define SPECD_POLICY_MAX_SPELL 512
#define SPECD_POLICY_MARGIN 0.03

/* What one verified step did, for the check. */
typedef struct specd_policy_step {
    specd_accept_mode mode;
    specd_fill fill;
    int32_t n_nodes;    /* tokens in the step's target pass: the root and every draft (a tree's too) */
    int32_t n_chain;    /* drafts on the chain a fixed length would have drafted (a tree: its main
                         * branch, the draft model's first choice at each depth) */
    int32_t n_accepted; /* accepted on that chain (< n_chain: verification refused its next one) */
    int32_t n_emitted;  /* tokens the step emitted (accepted on the verified path, and one more) */
    double draft_ms;    /* what drafting took (measured) */
    bool planned;       /* the planner chose its length (not a fixed spell, a forced or fixed request) */
    int32_t n_sharing;  /* slots whose tokens shared the step's pass (0 or 1: it ran alone) */
} specd_policy_step;

typedef struct specd_length_policy {
    double tokens, ms; /* the rate: decayed sums */
    /* The planner's trial: paired sums over its steps since it was last put in charge. */
    double plan_tokens, plan_ms;
    double trial_tokens[SPECD_POLICY_MAX_FIXED + 1], trial_ms[SPECD_POLICY_MAX_FIXED + 1];
    int32_t plan_steps;
    /* Every step: what each fixed length would have done, decayed (which one drives a spell). */
    double fixed_tokens[SPECD_POLICY_MAX_FIXED + 1], fixed_ms[SPECD_POLICY_MAX_FIXED + 1];
    double fixed_steps; /* the steps in those sums, decayed alike */
    int32_t fixed;      /* the fixed length driving now; -1: the planner */
    int32_t spell_left; /* steps before the planner is tried again */
    int32_t spell;      /* how long the next fixed spell lasts */
    uint32_t n_spells;  /* fixed spells so far (statistics) */
    int32_t max_fixed;  /* the longest fixed length that can drive: the engine's draft_max */
    int32_t last_nodes; /* the previous step's pass size (0: none yet) */
    bool hold;          /* held lengths (see above): held.length drives, not fixed */
    bool hold_once_resizes_matter; /* held lengths from the step a resize costs a tenth of a pass on */
    specd_held_lengths held;
} specd_length_policy;

void specd_length_policy_init(specd_length_policy *p);
/* Fixed lengths above max (the engine's draft_max) are not chosen: a spell of 16 on an engine that
 * drafts at most 8 drafted 8, which the check never compared with the planner. */
void specd_length_policy_limit(specd_length_policy *p, int32_t max);
/* Held lengths from now on, or the planner again (see above). */
void specd_length_policy_hold(specd_length_policy *p, bool hold);
/* What one ms of the engine is worth, in tokens, for a step of this mode at this fill. */
double specd_length_policy_rate(const specd_length_policy *p, const specd_costs *costs,
                                const specd_acceptance *acceptance, specd_accept_mode mode, const specd_fill *fill);
/* A step of any session emitted `tokens` in `ms` of the engine's time (its share of a round). */
void specd_length_policy_record_time(specd_length_policy *p, int32_t tokens, double ms);
/* A verified chain or tree step of the draft model. */
void specd_length_policy_record_step(specd_length_policy *p, const specd_costs *costs,
                                    const specd_acceptance *acceptance, const specd_policy_step *step);
/* The fixed length that drives the next step, or -1 when the planner does. */
int32_t specd_length_policy_fixed(const specd_length_policy *p);

#endif
