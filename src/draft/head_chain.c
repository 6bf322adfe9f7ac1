/* head_chain.c - the 'mtp' and 'eagle3' drafters: a chain drawn token by token from a drafting head's
 * logits (sampled_chain.h), the head fed the target's hidden states by the engine (engine/head.h).
 * Costs go where the draft model's go: the head's first decode of a step (its catch-up with the
 * target and the root) and each decode after it. */
#include "head_drafters.h"

#include "sampled_chain.h"

#include "../engine/head.h"
#include "../util/util.h"

#include <stdlib.h>

typedef struct head_chain {
    struct specd_engine *engine;
    specd_dist q;
} head_chain;

static specd_status hc_first(void *self, const specd_draft_request *req, const float **logits, char **error) {
    head_chain *hc = self;
    double t0 = specd_now_ms();
    specd_status st = specd_head_start(hc->engine, req->history, req->n_history, logits, error);
    if (st == SPECD_OK && *logits && req->costs) specd_costs_record_first_draft(req->costs, specd_now_ms() - t0);
    return st;
}

static specd_status hc_next(void *self, const specd_draft_request *req, specd_token token, const float **logits,
                            char **error) {
    head_chain *hc = self;
    double t0 = specd_now_ms();
    specd_status st = specd_head_next(hc->engine, token, logits, error);
    if (st == SPECD_OK && req->costs) specd_costs_record_draft(req->costs, 1, specd_now_ms() - t0);
    return st;
}

static specd_status hc_draft(void *self, const specd_draft_request *req, specd_token_tree *tree, char **error) {
    head_chain *hc = self;
    specd_chain_source src = {hc, hc_first, hc_next};
    specd_status st = specd_sampled_chain(&src, &hc->q, req, tree, error);
    specd_head_end(hc->engine); /* the drafts' entries go; the companion keeps what the target has */
    return st;
}

static specd_status hc_prepare(void *self, const specd_token *tokens, int32_t n, char **error) {
    head_chain *hc = self;
    return specd_head_catch_up(hc->engine, tokens, n, error);
}

static specd_status hc_shift(void *self, int32_t n_keep, int32_t n_discard, const specd_token *tokens, int32_t n,
                             char **error) {
    (void)tokens, (void)n, (void)error;
    head_chain *hc = self;
    specd_head_shift(hc->engine, n_keep, n_discard);
    return SPECD_OK;
}

static void hc_destroy(void *self) {
    head_chain *hc = self;
    if (!hc) return;
    specd_dist_free(&hc->q);
    free(hc);
}

static const specd_drafter_ops head_chain_ops = {
    .name = "head-chain",
    .prepare = hc_prepare,
    .draft = hc_draft,
    .destroy = hc_destroy,
    .shift = hc_shift,
};

specd_status specd_head_chain_new(struct specd_engine *engine, specd_drafter *out, char **error) {
    head_chain *hc = calloc(1, sizeof *hc);
    if (!hc) {
        specd_set_error(error, "out of memory for the %s drafter", specd_engine_head_desc(engine));
        return SPECD_ERR_NO_MEMORY;
    }
    hc->engine = engine;
    out->ops = &head_chain_ops;
    out->self = hc;
    return SPECD_OK;
}
