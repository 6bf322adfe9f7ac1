/* sampled_chain.h - a chain drawn token by token from a model's logits: the draft model's, or a
 * drafting head's (MTP, EAGLE-3). Each token is drawn from q, the request's transforms of the
 * source's logits (under the grammar when there is one), so verification stays exact at every
 * temperature; the length controller (draft_length.h) or the bounds decide when to stop. The source
 * decodes: the root after catching up (first), then each kept token (next). */
#ifndef SPECD_SAMPLED_CHAIN_H
#define SPECD_SAMPLED_CHAIN_H

#include "drafter.h"

typedef struct specd_chain_source {
    void *self;
    /* The logits after the root req->history[req->n_history - 1] (the source catches up first);
     * NULL (and SPECD_OK): no draft this step. */
    specd_status (*first)(void *self, const specd_draft_request *req, const float **logits, char **error);
    /* The logits after one more token, decoded after the last; NULL (and SPECD_OK): no more. */
    specd_status (*next)(void *self, const specd_draft_request *req, specd_token token, const float **logits,
                         char **error);
    /* Optional (NULL: a chain): a sibling beside the chain's tokens at the first depths, begun for
     * the step (chain_siblings.h: a head's tree). */
    struct specd_chain_siblings *siblings;
} specd_chain_source;

/* Draws the chain under tree->nodes[0]; q is scratch for each token's distribution. */
specd_status specd_sampled_chain(const specd_chain_source *src, specd_dist *q, const specd_draft_request *req,
                                 specd_token_tree *tree, char **error);

/* The pieces, for drafters that interleave several chains (the draft model's joint drafts). */

/* Draws the next token and its q (under `filter`, the grammar at this depth, when not NULL) from
 * `logits` after n_history tokens of req->history; -1 when out of memory. */
specd_token specd_chain_draw(specd_dist *q, const specd_draft_request *req, const float *logits, int32_t n_history,
                             const specd_token_filter *filter, float *confidence);
/* Keep the token just drawn at `depth`? (Tokens below min_len always; the plan counts them.) */
bool specd_chain_keep(const specd_draft_request *req, int32_t depth, float confidence);
/* Spend a decode on one more token after `depth` kept ones? */
bool specd_chain_more(const specd_draft_request *req, int32_t depth);

#endif
