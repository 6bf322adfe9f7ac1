/* round_gate.h - whether the rounds of several slots draft at all, chosen by timing them.
 *
 * With several slots in one pass the cost model (length_policy.h) plans each slot's draft against
 * the pass the others make; near break-even its plans flip between drafting and not, and each
 * flip has a cost the model does not see: the draft model catches up on every token since a slot
 * last drafted, for all slots at once. Serving 8 clients on the benchmark pair (2 cores, where a
 * pass of 16 tokens costs 1.56 passes of 8) specd ran at 0.92x itself without speculation: a
 * round of plain steps made 8 tokens in 50 ms, a round of drafts of 1 about 14 in 88 (the same),
 * and the rounds where every slot's draft caught up took 130 ms.
 *
 * So, per load (the number of slots in a round), the gate measures the two policies themselves:
 * rounds as the planner drafts them (arm DRAFT) and rounds that draft nothing (arm PLAIN), each
 * round's tokens and ms (from its draft part to its last accept; decayed sums). The planner drives
 * first, for SPECD_GATE_SPELL rounds; then plain rounds are tried for SPECD_GATE_TRIAL; then
 * drafting drives where its rounds made SPECD_GATE_MARGIN more tokens per ms than plain ones, and
 * plain rounds elsewhere: drafting has costs no round's time shows (the draft model learns each
 * prompt in rounds that are not timed; under batch invariance the cells of rejected drafts stay in
 * the attention window until the cache is compacted: 1.4% of a plain round at 8 slots). The arm
 * not driving is tried again after `wait` rounds, a wait that doubles each time the
 * trial confirms it loses (up to SPECD_GATE_WAIT_MAX) and starts again at SPECD_GATE_WAIT_FIRST
 * when it wins: the text, and with it what drafts are worth, changes. A trial that makes a quarter
 * less than the arm it challenges after SPECD_GATE_DECISIVE_ROUNDS timed rounds ends there: where
 * drafting makes 1.3x (2 clients on the Q8 pair) or plain rounds far more (a GPU whose target alone
 * outran every draft length), the other five rounds would only cost. The first SPECD_GATE_SETTLE
 * rounds after a switch are not timed (the draft model's catch-up: a cost of the switch, not of
 * the arm). A load that has not seen a trial drafts as the planner says, as it did before.
 *
 * One stream is not gated: its policy times lengths itself (held_lengths.h) or plans them from
 * costs it re-measures (length_policy.h). Not thread-safe: the engine's rounds run on one thread
 * at a time (specd.h). */
#ifndef SPECD_ROUND_GATE_H
#define SPECD_ROUND_GATE_H

#include <stdbool.h>
#include <stdint.h>

#define SPECD_GATE_MAX_LOAD 32 /* SPECD_MAX_PARALLEL (specd.h) */
#define SPECD_GATE_SPELL 16
#define SPECD_GATE_TRIAL 8
#define SPECD_GATE_SETTLE 1
#define SPECD_GATE_MARGIN 0.03
#define SPECD_GATE_DECISIVE 0.25     /* a trial this far behind after SPECD_GATE_DECISIVE_ROUNDS ends */
#define SPECD_GATE_DECISIVE_ROUNDS 3
#define SPECD_GATE_WAIT_FIRST 64
#define SPECD_GATE_WAIT_MAX 512

typedef enum specd_gate_arm { SPECD_GATE_DRAFT = 0, SPECD_GATE_PLAIN = 1 } specd_gate_arm;

typedef struct specd_gate_load {
    double tokens[2], ms[2], rounds[2]; /* decayed, per arm */
    specd_gate_arm arm;                  /* driving now */
    int32_t spell_left;                  /* rounds before the next choice */
    int32_t settle_left;                 /* rounds still untimed since the arm changed */
    int32_t since_other;                 /* rounds since the other arm last drove */
    int32_t wait;                        /* rounds the other arm waits before its next trial */
    bool trial;                          /* the arm driving is on trial */
} specd_gate_load;

typedef struct specd_round_gate {
    specd_gate_load load[SPECD_GATE_MAX_LOAD + 1];
    /* the round in flight: begun by specd_round_gate_begin, timed by its accepts */
    int32_t round_load;  /* 0: none being timed */
    double round_t0, round_t_last;
    int32_t round_tokens;
} specd_round_gate;

void specd_round_gate_init(specd_round_gate *gate);
/* Whether a round of `load` slots drafts (false: a plain round), without changing anything. */
bool specd_round_gate_drafts(const specd_round_gate *gate, int32_t load);
/* A round of `load` slots begins at now_ms (the one before it, if timed, is recorded first);
 * `timed`: whether this round is like the others of its load (no prompt chunk in its pass, every
 * slot adaptive), else it is neither timed nor counted. Returns whether the round drafts. */
bool specd_round_gate_begin(specd_round_gate *gate, int32_t load, bool timed, double now_ms);
/* A slot of the round in flight emitted `tokens` at now_ms. */
void specd_round_gate_emitted(specd_round_gate *gate, int32_t tokens, double now_ms);
/* The round in flight recorded now (the next begin does it otherwise). */
void specd_round_gate_end(specd_round_gate *gate);
/* Tokens per ms an arm made at a load (0: never timed). */
double specd_round_gate_rate(const specd_round_gate *gate, int32_t load, specd_gate_arm arm);

#endif
