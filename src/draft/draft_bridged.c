/* draft_bridged.c - the draft-model drafter for a draft of another vocabulary: the draft runs on
 * its own tokens of the target's text, and its chain becomes the target's tokens through text
 * (vocab_bridge.h).
 *
 * Each proposal is deterministic (q one-hot, as an n-gram drafter's): the draft's argmax at every
 * temperature. The draft's probabilities are over its own tokens, not the target's, so they
 * cannot be a q the verifier could weigh; a one-hot q is exact for any token however it was
 * chosen (verify.h), and the argmax is the proposal a one-hot q is most often accepted for. */
#include "draft_bridged.h"

#include "sampled_chain.h"
#include "vocab_bridge.h"

#include "../sample/softmax.h"
#include "../util/util.h"

#include <math.h>
#include <stdlib.h>

typedef struct bridged {
    specd_engine *engine;
    specd_vocab_bridge *bridge;
    int32_t n_vocab; /* the draft's */
} bridged;

/* One step's chain, as draft_chain keeps it in locals. */
typedef struct chain {
    const specd_draft_request *req;
    specd_token_tree *tree;
    int32_t parent, depth; /* the last node added; target tokens proposed */
    float confidence;      /* the least of the draft's confidences in the tokens since the last proposal */
    float last;            /* its confidence in its latest token (the next proposal's text starts in it) */
    bool done;
} chain;

/* The draft's greedy token after `logits` and its probability (its confidence). */
static specd_token draft_argmax(const float *logits, int32_t n_vocab, float *confidence) {
    specd_token best = 0;
    for (specd_token t = 1; t < n_vocab; t++)
        if (logits[t] > logits[best]) best = t;
    float max;
    double sum = specd_softmax_denominator(logits, n_vocab, &max);
    *confidence = (float)(exp((double)logits[best] - max) / sum);
    return best;
}

/* Proposes `token` under the chain if the plan keeps it. */
static specd_status propose_one(chain *c, specd_token token, char **error) {
    if (!specd_chain_keep(c->req, c->depth, c->confidence)) {
        c->done = true;
        return SPECD_OK;
    }
    c->parent = specd_tree_add(c->tree, c->parent, token, NULL, c->confidence);
    if (c->parent < 0) {
        specd_set_error(error, "out of memory while drafting");
        return SPECD_ERR_NO_MEMORY;
    }
    c->confidence = c->last;
    c->depth++;
    c->done = !specd_chain_more(c->req, c->depth);
    return SPECD_OK;
}

/* Proposes target tokens [c->depth, n) while the plan keeps them. */
static specd_status propose(chain *c, const specd_token *targets, int32_t n, char **error) {
    specd_status st = SPECD_OK;
    while (st == SPECD_OK && !c->done && c->depth < n) st = propose_one(c, targets[c->depth], error);
    return st;
}

/* The most draft tokens one step decodes: a target token may take several of the draft's. */
static int32_t draft_token_budget(const specd_draft_request *req) { return 2 * req->max_len + 2; }

/* The draft's cache brought to its own tokens of the history: the logits after them, or NULL
 * when the draft's context has no room for them and a chain (then nothing is drafted). */
static specd_status catch_up(bridged *b, const specd_draft_request *req, const float **logits, char **error) {
    specd_engine *e = b->engine;
    specd_model_slot *draft = specd_engine_draft(e);
    const specd_token *tokens = NULL;
    int32_t n = 0, idx = 0, reused = 0;
    *logits = NULL;
    double t0 = specd_now_ms();
    specd_status st = specd_vocab_bridge_follow(b->bridge, req->history, req->n_history, &tokens, &n, error);
    if (st != SPECD_OK || n == 0 || n + draft_token_budget(req) > specd_engine_n_ctx(e)) return st;
    st = specd_slot_sync(e, draft, tokens, n, true, &idx, &reused, error);
    /* as draft_model.c's: a catch-up of a few tokens is the step's first draft decode, with its
     * conversion (the cost model prices both) */
    if (st == SPECD_OK && req->costs && n - reused <= 2)
        specd_costs_record_first_draft(req->costs, specd_now_ms() - t0);
    if (st == SPECD_OK) st = specd_slot_checkpoint(draft, SPECD_CHECKPOINT_STEP, error);
    if (st == SPECD_OK) *logits = specd_slot_logits(draft, idx);
    return st;
}

static specd_status bridged_draft(void *self, const specd_draft_request *req, specd_token_tree *tree, char **error) {
    bridged *b = self;
    if (!specd_chain_more(req, 0)) return SPECD_OK;
    const float *logits = NULL;
    specd_status st = catch_up(b, req, &logits, error);
    if (st != SPECD_OK || !logits || !specd_vocab_bridge_begin(b->bridge)) return st;
    chain c = {req, tree, 0, 0, 1.0f, 1.0f, false};
    const specd_token *targets = NULL;
    int32_t n_targets = 0;
    for (int32_t k = 0; st == SPECD_OK && !c.done; k++) {
        /* a draft token's cost is its decode and its conversion: the cost model prices both */
        double t0 = specd_now_ms();
        float confidence;
        specd_token d = draft_argmax(logits, b->n_vocab, &confidence);
        c.last = confidence;
        if (confidence < c.confidence) c.confidence = confidence;
        if (specd_vocab_is_eog(b->engine, SPECD_VOCAB_DRAFT, d)) { /* the text ends: every token is whole */
            st = propose(&c, targets, n_targets, error);
            specd_token eos = specd_vocab_eos(b->engine, SPECD_VOCAB_TARGET);
            if (st == SPECD_OK && !c.done && c.depth == n_targets && eos >= 0) st = propose_one(&c, eos, error);
            break;
        }
        bool lined_up = false;
        st = specd_vocab_bridge_add(b->bridge, d, &targets, &n_targets, &lined_up, error);
        if (st != SPECD_OK || !lined_up) break;
        /* the last target token may be only partly covered yet: it waits for more text */
        st = propose(&c, targets, n_targets - 1, error);
        if (st != SPECD_OK || c.done || k + 1 >= draft_token_budget(req)) break;
        st = specd_slot_push(b->engine, specd_engine_draft(b->engine), d, error);
        if (st == SPECD_OK && req->costs) specd_costs_record_draft(req->costs, 1, specd_now_ms() - t0);
        if (st == SPECD_OK) logits = specd_slot_logits(specd_engine_draft(b->engine), 0);
    }
    return st;
}

/* A new prompt, or a context shift (no shift op: the history's text changed in the middle): the
 * draft follows it anew, its cache keeping what its new tokens share with the old. */
static specd_status bridged_prepare(void *self, const specd_token *tokens, int32_t n, char **error) {
    bridged *b = self;
    const specd_token *draft = NULL;
    int32_t n_draft = 0;
    specd_status st = specd_vocab_bridge_follow(b->bridge, tokens, n, &draft, &n_draft, error);
    if (st != SPECD_OK || n_draft > specd_engine_n_ctx(b->engine)) return st;
    specd_model_slot *slot = specd_engine_draft(b->engine);
    st = specd_slot_sync(b->engine, slot, draft, n_draft, false, NULL, NULL, error);
    return st == SPECD_OK ? specd_slot_checkpoint(slot, SPECD_CHECKPOINT_PROMPT, error) : st;
}

static void bridged_destroy(void *self) {
    bridged *b = self;
    if (!b) return;
    specd_vocab_bridge_free(b->bridge);
    free(b);
}

static const specd_drafter_ops bridged_ops = {
    .name = "draft",
    .prepare = bridged_prepare,
    .draft = bridged_draft,
    .destroy = bridged_destroy,
    .plans_length = true,
};

specd_status specd_draft_bridged_new(specd_engine *engine, specd_drafter *out, char **error) {
    bridged *b = calloc(1, sizeof *b);
    if (b) b->bridge = specd_vocab_bridge_new(engine);
    if (!b || !b->bridge) {
        free(b);
        specd_set_error(error, "out of memory for the draft-model drafter of another vocabulary");
        return SPECD_ERR_NO_MEMORY;
    }
    b->engine = engine;
    b->n_vocab = specd_vocab_n_tokens(engine, SPECD_VOCAB_DRAFT);
    out->ops = &bridged_ops;
    out->self = b;
    return SPECD_OK;
}
