/* chain_siblings.h - a drafting head's trees: beside each token of its chain at the first depths,
 * one more child drawn from the same q (the head gives a distribution per node), verified like any
 * tree's children. Greedy: the second-best token under the request's transforms; seeded
 * reproducible: the second-highest key under the request's keyed noise (sample/coupled.h); both
 * verified by the greedy walk. Sampling: a draw from q without the chain's token (sibling_draws.h),
 * so recursive rejection sampling stays exact. The siblings are leaves: the head decodes only the
 * chain, so a tree costs the head nothing more than its chain. */
#ifndef SPECD_CHAIN_SIBLINGS_H
#define SPECD_CHAIN_SIBLINGS_H

#include "drafter.h"

#include "../verify/sibling_draws.h"

typedef struct specd_chain_siblings {
    int32_t depths;     /* siblings beside the chain's tokens at depths below this (0: none) */
    int32_t max_leaves; /* the most leaves (branches) the target verifies at once */
    int32_t n_leaves;   /* leaves so far (the chain's own is the first) */
    double path_p;      /* q's probability of the chain up to the node the next token hangs under */
    specd_sibling_draws draws;
    specd_dist q_i;
} specd_chain_siblings;

/* Starts a step's tree: siblings at depths below `depths` when the request asks for trees (branches,
 * no grammar, not the cost model's auto: a leaf's worth is not priced here) and the target can
 * verify one (`target_branches` sequences, 1 for a recurrent state). */
void specd_chain_siblings_begin(specd_chain_siblings *s, const specd_draft_request *req, int32_t depths,
                                int32_t target_branches);
/* After the chain's token `token` (confidence `confidence`, drawn from q after n_history tokens of
 * req->history) went under `parent` at `depth`: one sibling under `parent`, when the tree has room
 * and its expected path probability reaches req->tree_p_split. Returns false when out of memory. */
bool specd_chain_sibling(specd_chain_siblings *s, const specd_draft_request *req, const specd_dist *q,
                         specd_token_tree *tree, int32_t parent, int32_t depth, specd_token token, float confidence,
                         int32_t n_history);
void specd_chain_siblings_free(specd_chain_siblings *s);

#endif
