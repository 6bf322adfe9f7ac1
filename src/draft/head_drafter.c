/* head_drafter.c - the drafters that run a drafting head (engine/head.h), fed the target's hidden
 * states by the engine. Each draws its chain from the head's logits (sampled_chain.h):
 *  - 'mtp' and 'eagle3' decode the head once per token (after catching up with the target and
 *    decoding the root, one decode);
 *  - 'dflash' and 'dspark' decode one block (the root and masks after it) that predicts every
 *    position at once, then draw position by position. A position's q does not depend on the tokens
 *    drawn before it (the block was decoded before any draw), so each token is still a draw from the
 *    q it is verified against: exact at every temperature. DFlash drafts from the positions after
 *    the root, DSpark (its Markov head chaining the block) from the root's own position on.
 * Costs go where the draft model's go: a step's first decode, and each after it (a block's tokens
 * after the first cost only their draw). */
#include "head_drafters.h"

#include "chain_siblings.h"
#include "sampled_chain.h"

#include "../engine/engine.h"
#include "../engine/head.h"
#include "../util/util.h"

#include <stdlib.h>

/* A head's trees: a sibling beside the chain's first two tokens (top-2 there, chain_siblings.h). */
#define HEAD_TREE_DEPTHS 2

typedef struct head_drafter {
    struct specd_engine *engine;
    specd_dist q;
    specd_chain_siblings siblings;
    int32_t next, end; /* blocks: the block position of the next depth, and the block's length */
} head_drafter;

/* ---- chains: a head decode per token ---------------------------------------------------------- */

static specd_status chain_first(void *self, const specd_draft_request *req, const float **logits, char **error) {
    head_drafter *hd = self;
    double t0 = specd_now_ms();
    specd_status st = specd_head_start(hd->engine, req->history, req->n_history, logits, error);
    if (st == SPECD_OK && *logits && req->costs) specd_costs_record_first_draft(req->costs, specd_now_ms() - t0);
    return st;
}

static specd_status chain_next(void *self, const specd_draft_request *req, specd_token token, const float **logits,
                               char **error) {
    head_drafter *hd = self;
    double t0 = specd_now_ms();
    specd_status st = specd_head_next(hd->engine, token, logits, error);
    if (st == SPECD_OK && req->costs) specd_costs_record_draft(req->costs, 1, specd_now_ms() - t0);
    return st;
}

/* ---- blocks: one pass predicts them all -------------------------------------------------------- */

/* The block: as long as the longest chain the step may draft, within the head's trained block. */
static int32_t block_tokens(const head_drafter *hd, const specd_draft_request *req, int32_t *first) {
    bool anchor = specd_head_drafts_anchor(hd->engine);
    int32_t size = specd_head_block_size(hd->engine), most = anchor ? size : size - 1;
    int32_t drafts = req->max_len < most ? req->max_len : most;
    *first = anchor ? 0 : 1;
    return drafts + *first;
}

static specd_status block_first(void *self, const specd_draft_request *req, const float **logits, char **error) {
    head_drafter *hd = self;
    int32_t first = 0, n = block_tokens(hd, req, &first);
    double t0 = specd_now_ms();
    specd_status st = specd_head_block(hd->engine, req->history, req->n_history, n, error);
    if (st != SPECD_OK) return st;
    if (req->costs) specd_costs_record_first_draft(req->costs, specd_now_ms() - t0);
    hd->next = first + 1;
    hd->end = n;
    *logits = specd_head_block_logits(hd->engine, first);
    return SPECD_OK;
}

static specd_status block_next(void *self, const specd_draft_request *req, specd_token token, const float **logits,
                               char **error) {
    (void)token;
    head_drafter *hd = self;
    *logits = NULL;
    if (hd->next >= hd->end) return SPECD_OK; /* the block is drafted: a longer chain needs a longer block */
    double t0 = specd_now_ms();
    *logits = specd_head_block_logits(hd->engine, hd->next++);
    /* decoded with the block: a token after the first costs only this */
    if (req->costs) specd_costs_record_draft(req->costs, 1, specd_now_ms() - t0);
    if (*logits) return SPECD_OK;
    specd_set_error(error, "the %s gave no logits for block position %d", specd_engine_head_desc(hd->engine),
                    hd->next - 1);
    return SPECD_ERR_DECODE;
}

/* ---- the drafter ---------------------------------------------------------------------------------- */

static bool drafts_blocks(const head_drafter *hd) {
    specd_head_kind kind = specd_engine_head(hd->engine);
    return kind == SPECD_HEAD_DFLASH || kind == SPECD_HEAD_DSPARK;
}

/* The branches the target can verify at once: its sequences, one for a recurrent state. */
static int32_t target_branches(const head_drafter *hd) {
    const specd_model_slot *target = specd_engine_target(hd->engine);
    return specd_slot_can_drop_tail(target) ? specd_slot_n_seq_max(target) : 1;
}

static specd_status hd_draft(void *self, const specd_draft_request *req, specd_token_tree *tree, char **error) {
    head_drafter *hd = self;
    specd_chain_siblings_begin(&hd->siblings, req, HEAD_TREE_DEPTHS, target_branches(hd));
    specd_chain_siblings *siblings = hd->siblings.depths > 0 ? &hd->siblings : NULL;
    specd_chain_source src = drafts_blocks(hd) ? (specd_chain_source){hd, block_first, block_next, siblings}
                                               : (specd_chain_source){hd, chain_first, chain_next, siblings};
    specd_status st = specd_sampled_chain(&src, &hd->q, req, tree, error);
    specd_head_end(hd->engine); /* the drafts' entries go; the companion keeps what the target has */
    return st;
}

static specd_status hd_prepare(void *self, const specd_token *tokens, int32_t n, char **error) {
    head_drafter *hd = self;
    return specd_head_catch_up(hd->engine, tokens, n, error);
}

static specd_status hd_shift(void *self, int32_t n_keep, int32_t n_discard, const specd_token *tokens, int32_t n,
                             char **error) {
    (void)tokens, (void)n, (void)error;
    head_drafter *hd = self;
    specd_head_shift(hd->engine, n_keep, n_discard);
    return SPECD_OK;
}

static void hd_destroy(void *self) {
    head_drafter *hd = self;
    if (!hd) return;
    specd_dist_free(&hd->q);
    specd_chain_siblings_free(&hd->siblings);
    free(hd);
}

static const specd_drafter_ops head_drafter_ops = {
    .name = "head",
    .prepare = hd_prepare,
    .draft = hd_draft,
    .destroy = hd_destroy,
    .shift = hd_shift,
};

specd_status specd_head_drafter_new(struct specd_engine *engine, specd_drafter *out, char **error) {
    head_drafter *hd = calloc(1, sizeof *hd);
    if (!hd) {
        specd_set_error(error, "out of memory for the %s drafter", specd_engine_head_desc(engine));
        return SPECD_ERR_NO_MEMORY;
    }
    hd->engine = engine;
    out->ops = &head_drafter_ops;
    out->self = hd;
    return SPECD_OK;
}
