/* exploration.h - when a draft is forced although the cost model says it does not pay.
 *
 * The cost model (draft_length.h) drafts only where it expects drafting to pay, and it learns
 * acceptance only from drafts: once it says no, it would never see that drafting pays again (a
 * repetitive request, an acceptance estimate made on other text). So after `wait` steps without a
 * draft, one is forced. Each exploration after which the cost model still says no doubles the wait,
 * up to SPECD_EXPLORE_MAX; a step that drafts on its own brings it back to SPECD_EXPLORE_FIRST.
 *
 * The state is the engine's (draft/learned.h), counted over the steps of every request, as the
 * acceptance it tests is: kept per request, each new request started again at a wait of 16 and
 * explored 3 times in 128 tokens where drafting loses, each costing about 3 plain steps on the
 * benchmark pair on AMD EPYC (2 threads): the 7% specd serve lost to llama-server with one client.
 * Not thread-safe: the engine's steps run on one thread at a time (specd.h). */
#ifndef SPECD_EXPLORATION_H
#define SPECD_EXPLORATION_H

#include <stdbool.h>
#include <stdint.h>

#define SPECD_EXPLORE_FIRST 16
#define SPECD_EXPLORE_MAX 256

typedef struct specd_exploration {
    int32_t steps_without_draft; /* steps, of any request, since one drafted */
    int32_t wait;                /* steps without a draft before one is forced (FIRST..MAX); 0: FIRST */
    bool explored_last;          /* the last step that could draft was an exploration */
} specd_exploration;

/* Is this step's draft forced? */
bool specd_exploration_due(const specd_exploration *x);
/* After a step that could draft: whether it was forced, and whether it drafted anything. */
void specd_exploration_note(specd_exploration *x, bool explored, bool drafted);

#endif
