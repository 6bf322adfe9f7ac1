/* head_block.c - the 'dflash' and 'dspark' drafters: one pass of the head over a block (the root and
 * masks after it) predicts every position at once; the chain is then drawn position by position
 * from those logits (sampled_chain.h). A position's q does not depend on the tokens drawn before it
 * (the block was decoded before any draw), so each token is still a draw from the q it is verified
 * against: exact at every temperature. DFlash drafts from the positions after the root, DSpark
 * (its Markov head chaining the block) from the root's own position on. The pass is the step's one
 * draft decode: its cost is the first draft token's, and every token after it costs nothing more. */
#include "head_drafters.h"

#include "sampled_chain.h"

#include "../engine/head.h"
#include "../util/util.h"

#include <stdlib.h>

typedef struct head_block {
    struct specd_engine *engine;
    specd_dist q;
    int32_t next; /* the block position of the next depth */
} head_block;

/* The block: as long as the longest chain the step may draft, within the head's trained block. */
static int32_t block_tokens(const head_block *hb, const specd_draft_request *req, int32_t *first) {
    bool anchor = specd_head_drafts_anchor(hb->engine);
    int32_t size = specd_head_block_size(hb->engine), most = anchor ? size : size - 1;
    int32_t drafts = req->max_len < most ? req->max_len : most;
    *first = anchor ? 0 : 1;
    return drafts + *first;
}

static specd_status hb_first(void *self, const specd_draft_request *req, const float **logits, char **error) {
    head_block *hb = self;
    int32_t first = 0, n = block_tokens(hb, req, &first);
    double t0 = specd_now_ms();
    specd_status st = specd_head_block(hb->engine, req->history, req->n_history, n, error);
    if (st != SPECD_OK) return st;
    if (req->costs) specd_costs_record_first_draft(req->costs, specd_now_ms() - t0);
    hb->next = first + 1;
    *logits = specd_head_block_logits(hb->engine, first);
    return SPECD_OK;
}

static specd_status hb_next(void *self, const specd_draft_request *req, specd_token token, const float **logits,
                            char **error) {
    (void)token;
    head_block *hb = self;
    double t0 = specd_now_ms();
    *logits = specd_head_block_logits(hb->engine, hb->next++);
    /* decoded with the block: a token after the first costs only this */
    if (req->costs) specd_costs_record_draft(req->costs, 1, specd_now_ms() - t0);
    if (*logits) return SPECD_OK;
    specd_set_error(error, "the %s gave no logits for block position %d", specd_engine_head_desc(hb->engine),
                    hb->next - 1);
    return SPECD_ERR_DECODE;
}

static specd_status hb_draft(void *self, const specd_draft_request *req, specd_token_tree *tree, char **error) {
    head_block *hb = self;
    specd_chain_source src = {hb, hb_first, hb_next};
    specd_status st = specd_sampled_chain(&src, &hb->q, req, tree, error);
    specd_head_end(hb->engine); /* the block's entries go; the companion keeps the target's features */
    return st;
}

static specd_status hb_prepare(void *self, const specd_token *tokens, int32_t n, char **error) {
    head_block *hb = self;
    return specd_head_catch_up(hb->engine, tokens, n, error);
}

static specd_status hb_shift(void *self, int32_t n_keep, int32_t n_discard, const specd_token *tokens, int32_t n,
                             char **error) {
    (void)tokens, (void)n, (void)error;
    head_block *hb = self;
    specd_head_shift(hb->engine, n_keep, n_discard);
    return SPECD_OK;
}

static void hb_destroy(void *self) {
    head_block *hb = self;
    if (!hb) return;
    specd_dist_free(&hb->q);
    free(hb);
}

static const specd_drafter_ops head_block_ops = {
    .name = "head-block",
    .prepare = hb_prepare,
    .draft = hb_draft,
    .destroy = hb_destroy,
    .shift = hb_shift,
};

specd_status specd_head_block_new(struct specd_engine *engine, specd_drafter *out, char **error) {
    head_block *hb = calloc(1, sizeof *hb);
    if (!hb) {
        specd_set_error(error, "out of memory for the %s drafter", specd_engine_head_desc(engine));
        return SPECD_ERR_NO_MEMORY;
    }
    hb->engine = engine;
    out->ops = &head_block_ops;
    out->self = hb;
    return SPECD_OK;
}
