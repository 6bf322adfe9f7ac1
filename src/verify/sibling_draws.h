/* sibling_draws.h - several children of one tree node drawn from the draft's q without replacement.
 *
 * Multi-branch verification (verify.h) tries a node's children in order; child i is accepted with
 * min(1, p_i(x_i) / q_i(x_i)) and on rejection p_{i+1} = norm(max(0, p_i - q_i)). That is exact
 * (SpecTr; Jeon et al. 2024, "recursive rejection sampling") when q_i is the distribution x_i was
 * really drawn from. Drawing siblings without replacement (so the tree never holds the same token
 * twice under one parent) means x_i comes from q with x_1..x_{i-1} removed and renormalized: that
 * q_i is what each child must keep, and what specd_sibling_draw hands out.
 *
 * Whether to draw one more sibling may depend on the draws so far and on q (a stopping rule), never
 * on the draw itself: a child drawn and then dropped for its own value biases the output. */
#ifndef SPECD_SIBLING_DRAWS_H
#define SPECD_SIBLING_DRAWS_H

#include "../sample/dist.h"
#include "../sample/rng.h"

typedef struct specd_sibling_draws {
    specd_dist rest;  /* q with the tokens drawn so far removed, renormalized: the next q_i */
    double mass_left; /* q's original mass not yet drawn (1 before the first draw) */
} specd_sibling_draws;

/* Starts drawing from q (copied). Returns false when out of memory. */
bool specd_sibling_draws_begin(specd_sibling_draws *d, const specd_dist *q);
/* Whether another draw is possible (some of q's mass is left). */
bool specd_sibling_draws_left(const specd_sibling_draws *d);
/* Draws the next sibling: *token, and in *q_i the distribution it came from (to store in its tree
 * node). Then removes it from what is left. Returns false when nothing is left or out of memory. */
bool specd_sibling_draw(specd_sibling_draws *d, specd_rng *rng, specd_token *token, specd_dist *q_i);
void specd_sibling_draws_free(specd_sibling_draws *d);

/* Removes `token` from `dist` and renormalizes the rest; returns the probability it had. */
float specd_dist_remove(specd_dist *dist, specd_token token);

#endif
