/* draft_model.c - the draft-model drafter (its trees: draft_tree.c): sample a chain from the draft
 * model under the request's transforms (sampled_chain.h), one token per draft decode, until the
 * length controller or the bounds say stop.
 *
 * The draft's KV cache follows the history lazily: each step first syncs it to the history (usually
 * one or two new tokens), then decodes each drafted token it needs logits after. */
#include "draft_model.h"

#include "draft_bridged.h"
#include "draft_tree.h"
#include "sampled_chain.h"

#include "../util/util.h"

#include <stdlib.h>

typedef struct draft_model {
    specd_engine *engine;
    specd_dist q;
    specd_draft_tree *tree; /* trees: draft_tree.h */
} draft_model;

static specd_status dm_prepare(void *self, const specd_token *tokens, int32_t n, char **error) {
    draft_model *dm = self;
    specd_status st = specd_slot_sync(dm->engine, specd_engine_draft(dm->engine), tokens, n, false, NULL, NULL, error);
    /* A recurrent draft keeps its state after the prompt for the next request's prompt cache. */
    return st == SPECD_OK ? specd_slot_checkpoint(specd_engine_draft(dm->engine), SPECD_CHECKPOINT_PROMPT, error) : st;
}

/* The chain's source: the draft's cache synced to the history (the root's logits), then one decode
 * per drafted token. */
static specd_status dm_first(void *self, const specd_draft_request *req, const float **logits, char **error) {
    draft_model *dm = self;
    specd_engine *e = dm->engine;
    specd_model_slot *draft = specd_engine_draft(e);
    int32_t idx = 0, reused = 0;
    double t0 = specd_now_ms();
    specd_status st = specd_slot_sync(e, draft, req->history, req->n_history, true, &idx, &reused, error);
    /* A catch-up of one or two tokens (the step before's last draft and its own token) is the
     * step's first draft decode (costs.h; a decode of two costs what one does): a chain of one draft
     * has no other, and a file's draft costs must be re-measured even where the plan drafts one. */
    if (st == SPECD_OK && req->costs && req->n_history - reused <= 2)
        specd_costs_record_first_draft(req->costs, specd_now_ms() - t0);
    /* A recurrent draft cannot drop the drafts the target rejects: keep its state before them. */
    if (st == SPECD_OK) st = specd_slot_checkpoint(draft, SPECD_CHECKPOINT_STEP, error);
    if (st == SPECD_OK) *logits = specd_slot_logits(draft, idx);
    return st;
}

static specd_status dm_next(void *self, const specd_draft_request *req, specd_token token, const float **logits,
                            char **error) {
    draft_model *dm = self;
    specd_engine *e = dm->engine;
    double t0 = specd_now_ms();
    specd_status st = specd_slot_push(e, specd_engine_draft(e), token, error);
    if (st != SPECD_OK) return st;
    /* Only single-token decodes measure the draft's cost per token: the sync before the
     * first token may catch up on many tokens after steps without drafts. */
    if (req->costs) specd_costs_record_draft(req->costs, 1, specd_now_ms() - t0);
    *logits = specd_slot_logits(specd_engine_draft(e), 0);
    return SPECD_OK;
}

/* ---- several slots' chains, their draft decodes joined ---------------------------------------- */

/* One chain of a joint draft: what draft_chain keeps in locals. */
typedef struct joint_chain {
    draft_model *dm;
    const specd_draft_request *req;
    specd_token_tree *tree;
    int32_t slot, parent, n_history, depth;
    specd_token next; /* the token to decode for the next depth, while growing */
    bool growing;
    specd_status st;
} joint_chain;

/* Draws the chain's token at its depth from `logits`; it keeps growing when one more is wanted. */
static void joint_draw(joint_chain *c, const float *logits, char **error) {
    float confidence = 0.0f;
    c->growing = false;
    specd_token t = specd_chain_draw(&c->dm->q, c->req, logits, c->n_history, NULL, &confidence);
    if (t >= 0 && c->req->drawn) specd_acceptance_record_drawn(c->req->drawn, c->req->acceptance_mode, confidence);
    if (t >= 0 && !specd_chain_keep(c->req, c->depth, confidence)) return;
    if (t >= 0) c->parent = specd_tree_add(c->tree, c->parent, t, &c->dm->q, confidence);
    if (t < 0 || c->parent < 0) {
        specd_set_error(error, "out of memory while drafting");
        c->st = SPECD_ERR_NO_MEMORY;
        return;
    }
    c->req->history[c->n_history++] = t;
    c->depth++;
    c->next = t;
    c->growing = specd_chain_more(c->req, c->depth);
}

/* The first token of every chain that drafts, after ONE catch-up decode of all their slots (one
 * per slot cost 4 decodes of 1-2 tokens where one of 4-8 tokens costs less than two of them:
 * draft part 17.3 ms per step at 4 clients on the benchmark pair). */
static void joint_start(specd_engine *e, joint_chain *chains, int32_t n, char **errors) {
    specd_model_slot *views[SPECD_MAX_PARALLEL];
    const specd_token *histories[SPECD_MAX_PARALLEL];
    int32_t lengths[SPECD_MAX_PARALLEL], idx[SPECD_MAX_PARALLEL], at[SPECD_MAX_PARALLEL], m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!specd_chain_more(chains[i].req, 0)) continue;
        views[m] = specd_engine_draft_view(e, chains[i].slot);
        histories[m] = chains[i].req->history, lengths[m] = chains[i].req->n_history, at[m++] = i;
    }
    if (m == 0) return;
    char *message = NULL;
    specd_status st = specd_slots_sync(e, views, histories, lengths, m, idx, &message);
    for (int32_t k = 0; k < m; k++) {
        joint_chain *c = &chains[at[k]];
        if (st == SPECD_OK) {
            joint_draw(c, specd_slot_logits(views[k], idx[k]), &errors[at[k]]);
            continue;
        }
        c->st = st;
        specd_set_error(&errors[at[k]], "%s", message ? message : "the draft's catch-up decode failed");
    }
    specd_free(message);
}

/* The ops' draft_joint (drafter.h). */
static void dm_draft_joint(specd_engine *e, specd_drafter *const *drafters, const int32_t *slots,
                           const specd_draft_request *reqs, specd_token_tree *const *trees, int32_t n,
                           specd_costs *costs, specd_status *status, char **errors) {
    joint_chain chains[SPECD_MAX_PARALLEL];
    for (int32_t i = 0; i < n; i++) {
        chains[i] = (joint_chain){.dm = drafters[i]->self, .req = &reqs[i], .tree = trees[i], .slot = slots[i],
                                  .n_history = reqs[i].n_history};
    }
    joint_start(e, chains, n, errors);
    for (;;) { /* one draft decode per depth for every chain still growing */
        specd_model_slot *views[SPECD_MAX_PARALLEL];
        specd_token tokens[SPECD_MAX_PARALLEL];
        int32_t at[SPECD_MAX_PARALLEL], m = 0;
        for (int32_t i = 0; i < n; i++)
            if (chains[i].st == SPECD_OK && chains[i].growing)
                views[m] = specd_engine_draft_view(e, chains[i].slot), tokens[m] = chains[i].next, at[m++] = i;
        if (m == 0) break;
        double ms = 0.0;
        char *message = NULL;
        specd_status st = specd_slots_push(e, views, tokens, m, &ms, &message);
        if (st == SPECD_OK && costs) specd_costs_record_draft(costs, m, ms); /* a draft token's share */
        for (int32_t k = 0; k < m; k++) {
            joint_chain *c = &chains[at[k]];
            if (st != SPECD_OK) {
                c->st = st;
                if (message) specd_set_error(&errors[at[k]], "%s", message);
                continue;
            }
            joint_draw(c, specd_slot_logits(views[k], k), &errors[at[k]]);
        }
        specd_free(message);
    }
    for (int32_t i = 0; i < n; i++) status[i] = chains[i].st;
}

/* The draft's cache moves with the history (see specd_slot_shift), so the next sync finds it
 * in step instead of re-decoding everything after n_keep. */
static specd_status dm_shift(void *self, int32_t n_keep, int32_t n_discard, const specd_token *tokens, int32_t n,
                             char **error) {
    (void)tokens, (void)n, (void)error;
    draft_model *dm = self;
    specd_slot_shift(specd_engine_draft(dm->engine), n_keep, n_discard);
    return SPECD_OK;
}

static specd_status dm_draft(void *self, const specd_draft_request *req, specd_token_tree *tree,
                             char **error) {
    draft_model *dm = self;
    if (specd_draft_tree_wanted(req)) return specd_draft_tree_run(dm->tree, dm->engine, req, tree, error);
    specd_chain_source src = {dm, dm_first, dm_next, NULL};
    return specd_sampled_chain(&src, &dm->q, req, tree, error);
}

static void dm_destroy(void *self) {
    draft_model *dm = self;
    if (!dm) return;
    specd_dist_free(&dm->q);
    specd_draft_tree_free(dm->tree);
    free(dm);
}

static const specd_drafter_ops draft_model_ops = {
    .name = "draft",
    .prepare = dm_prepare,
    .draft = dm_draft,
    .destroy = dm_destroy,
    .shift = dm_shift,
    .draft_joint = dm_draft_joint,
    .plans_length = true,
};

specd_status specd_draft_model_new(specd_engine *engine, specd_drafter *out, char **error) {
    if (!specd_engine_has_draft(engine)) {
        specd_set_error(error, "speculative type 'draft' needs a draft model (-md)");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    /* a draft of another vocabulary drafts through text (draft_bridged.h) */
    if (specd_engine_draft_vocab_differs(engine)) return specd_draft_bridged_new(engine, out, error);
    draft_model *dm = calloc(1, sizeof *dm);
    if (dm && !(dm->tree = specd_draft_tree_new(specd_engine_n_vocab(engine)))) {
        free(dm);
        dm = NULL;
    }
    if (!dm) {
        specd_set_error(error, "out of memory for the draft-model drafter");
        return SPECD_ERR_NO_MEMORY;
    }
    dm->engine = engine;
    out->ops = &draft_model_ops;
    out->self = dm;
    return SPECD_OK;
}
