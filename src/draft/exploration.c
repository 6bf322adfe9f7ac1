/* exploration.c - the wait before a forced draft (see exploration.h). */
#include "exploration.h"

static int32_t wait_of(const specd_exploration *x) { return x->wait > 0 ? x->wait : SPECD_EXPLORE_FIRST; }

bool specd_exploration_due(const specd_exploration *x) { return x->steps_without_draft >= wait_of(x); }

void specd_exploration_note(specd_exploration *x, bool explored, bool drafted) {
    int32_t wait = wait_of(x);
    /* The step after an exploration tells what it taught: drafting on its own, the estimate moved
     * to "pays" (wait back to the first); not, it did not (wait doubled). */
    if (!explored && drafted) wait = SPECD_EXPLORE_FIRST;
    else if (!explored && x->explored_last && wait < SPECD_EXPLORE_MAX) wait *= 2;
    x->wait = wait;
    x->explored_last = explored;
    x->steps_without_draft = drafted ? 0 : x->steps_without_draft + 1;
}
