/* kv.c - keeps a model slot's KV cache in step with the token history: reuse the longest common
 * prefix, drop the rest, decode what is missing. */
#include "engine_internal.h"

#include "../util/util.h"

#include <string.h>

/* The sequence id of tree branch `branch` of this view: its own for branch 0, else a scratch one. */
static llama_seq_id branch_seq(const specd_model_slot *slot, int32_t branch) {
    return branch == 0 ? slot->seq : slot->branch_base + branch - 1;
}

void specd_slot_truncate(specd_model_slot *slot, int32_t n) {
    if (n >= slot->n_kv) return;
    llama_memory_seq_rm(llama_get_memory(slot->ctx), slot->seq, n, -1);
    slot->n_kv = n;
}

static void batch_add(struct llama_batch *b, llama_seq_id seq, specd_token token, int32_t pos, bool logits) {
    int32_t i = b->n_tokens++;
    b->token[i] = token;
    b->pos[i] = pos;
    b->n_seq_id[i] = 1;
    b->seq_id[i][0] = seq;
    b->logits[i] = logits;
}

static specd_status decode_batch(specd_model_slot *slot, struct llama_batch *b, char **error) {
    int32_t rc = llama_decode(slot->ctx, *b);
    if (rc != 0) {
        specd_set_error(error, "llama_decode failed (code %d) on %d tokens at position %d: %s", rc,
                        b->n_tokens, b->n_tokens ? b->pos[0] : 0,
                        rc == 1 ? "no KV cache slot; try a larger context (-c)" : "see the log (--verbose)");
        return SPECD_ERR_DECODE;
    }
    return SPECD_OK;
}

specd_status specd_slot_sync(specd_engine *e, specd_model_slot *slot, const specd_token *tokens,
                             int32_t n, bool want_logits, int32_t *logits_idx, int32_t *n_reused,
                             char **error) {
    if (n > slot->cap) {
        specd_set_error(error, "%d tokens do not fit the context of %d", n, slot->cap);
        return SPECD_ERR_CONTEXT;
    }
    int32_t common = 0;
    while (common < slot->n_kv && common < n && slot->kv_tokens[common] == tokens[common]) common++;
    /* Logits exist only for tokens we decode now: re-decode the last one if it is cached. */
    if (want_logits && common == n && n > 0) common = n - 1;
    if (n_reused) *n_reused = common;
    specd_slot_truncate(slot, common);
    struct llama_batch *b = &e->batch;
    slot->logits_offset = 0;
    for (int32_t start = common; start < n; start += e->n_batch) {
        int32_t end = start + e->n_batch < n ? start + e->n_batch : n;
        b->n_tokens = 0;
        for (int32_t i = start; i < end; i++) batch_add(b, slot->seq, tokens[i], i, want_logits && i == n - 1);
        specd_status st = decode_batch(slot, b, error);
        if (st != SPECD_OK) {
            /* What this chunk wrote is unknown: forget it. */
            llama_memory_seq_rm(llama_get_memory(slot->ctx), slot->seq, start, -1);
            return st;
        }
        memcpy(slot->kv_tokens + start, tokens + start, (size_t)(end - start) * sizeof *tokens);
        slot->n_kv = end;
        if (logits_idx) *logits_idx = end - start - 1;
    }
    return SPECD_OK;
}

specd_status specd_slot_push(specd_engine *e, specd_model_slot *slot, specd_token token, char **error) {
    if (slot->n_kv >= slot->cap) {
        specd_set_error(error, "the context of %d tokens is full", slot->cap);
        return SPECD_ERR_CONTEXT;
    }
    struct llama_batch *b = &e->batch;
    b->n_tokens = 0;
    slot->logits_offset = 0;
    batch_add(b, slot->seq, token, slot->n_kv, true);
    specd_status st = decode_batch(slot, b, error);
    if (st != SPECD_OK) return st;
    slot->kv_tokens[slot->n_kv++] = token;
    return SPECD_OK;
}

specd_status specd_slots_push(specd_engine *e, specd_model_slot *const *views, const specd_token *tokens, int32_t n,
                              double *ms, char **error) {
    if (ms) *ms = 0.0;
    if (n > e->batch_cap) {
        specd_set_error(error, "%d draft tokens do not fit the engine's batch of %d", n, e->batch_cap);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    struct llama_batch *b = &e->batch;
    b->n_tokens = 0;
    for (int32_t i = 0; i < n; i++) {
        if (views[i]->n_kv >= views[i]->cap) {
            specd_set_error(error, "the context of %d tokens is full", views[i]->cap);
            return SPECD_ERR_CONTEXT;
        }
        views[i]->logits_offset = 0;
        batch_add(b, views[i]->seq, tokens[i], views[i]->n_kv, true);
    }
    double t0 = specd_now_ms();
    specd_status st = n > 0 ? decode_batch(views[0], b, error) : SPECD_OK;
    if (ms) *ms = specd_now_ms() - t0;
    for (int32_t i = 0; i < n && st == SPECD_OK; i++) views[i]->kv_tokens[views[i]->n_kv++] = tokens[i];
    for (int32_t i = 0; i < n && st != SPECD_OK; i++) /* what the decode wrote is unknown: forget it */
        llama_memory_seq_rm(llama_get_memory(views[i]->ctx), views[i]->seq, views[i]->n_kv, -1);
    return st;
}

bool specd_slot_can_shift(const specd_model_slot *slot) {
    return slot->ctx && llama_memory_can_shift(llama_get_memory(slot->ctx));
}

void specd_slot_shift(specd_model_slot *slot, int32_t n_keep, int32_t n_discard) {
    int32_t end = n_keep + n_discard;
    if (slot->n_kv <= end || !specd_slot_can_shift(slot)) {
        /* Nothing cached after the dropped tokens (or it cannot move): the next sync decodes it. */
        specd_slot_truncate(slot, n_keep);
        return;
    }
    llama_memory_t mem = llama_get_memory(slot->ctx);
    llama_memory_seq_rm(mem, slot->seq, n_keep, end);
    llama_memory_seq_add(mem, slot->seq, end, -1, -n_discard);
    memmove(slot->kv_tokens + n_keep, slot->kv_tokens + end, (size_t)(slot->n_kv - end) * sizeof *slot->kv_tokens);
    slot->n_kv -= n_discard;
}

/* Gets the slot ready for a tree under pos_root: nothing cached from the root on, each branch's
 * scratch sequence sharing the history. */
static void prepare_tree(specd_model_slot *slot, int32_t n_branches, int32_t pos_root) {
    specd_slot_truncate(slot, pos_root); /* normally a no-op: the root is not cached */
    llama_memory_t mem = llama_get_memory(slot->ctx);
    for (int32_t s = 1; s < n_branches; s++) llama_memory_seq_cp(mem, slot->seq, branch_seq(slot, s), 0, pos_root);
}

/* Appends a slot's tree to the batch, every token with logits; the slot's logits start there. */
static void add_tree(struct llama_batch *b, specd_model_slot *slot, const specd_tree_token *tokens, int32_t n_tokens,
                     int32_t n_branches, int32_t pos_root, bool logits) {
    if (logits) slot->logits_offset = b->n_tokens;
    for (int32_t i = 0; i < n_tokens; i++) {
        int32_t j = b->n_tokens++;
        b->token[j] = tokens[i].token;
        b->pos[j] = pos_root + tokens[i].depth;
        b->logits[j] = logits;
        int32_t n_seq = 0;
        for (int32_t s = 0; s < n_branches; s++)
            if (tokens[i].seq_mask & (1u << s)) b->seq_id[j][n_seq++] = branch_seq(slot, s);
        b->n_seq_id[j] = n_seq;
    }
}

/* After a failed pass: the slot's sequence and its scratch branches lose the tree's positions
 * (other slots keep their caches). */
static void drop_tree(specd_model_slot *slot, int32_t n_branches, int32_t pos_root) {
    llama_memory_t mem = llama_get_memory(slot->ctx);
    for (int32_t s = 0; s < n_branches; s++) llama_memory_seq_rm(mem, branch_seq(slot, s), s == 0 ? pos_root : 0, -1);
}

specd_status specd_slots_decode_trees(specd_engine *e, const specd_tree_pass *passes, int32_t n_passes, double *ms,
                                      char **error) {
    int32_t total = 0;
    for (int32_t p = 0; p < n_passes; p++) {
        total += passes[p].n_tokens;
        if (passes[p].n_branches > passes[p].slot->n_seq_max) total = INT32_MAX / 2;
    }
    if (ms) *ms = 0.0;
    if (total > e->batch_cap) {
        specd_set_error(error, "trees of %d tokens in all do not fit the engine's batch of %d (draft_max, -b)", total,
                        e->batch_cap);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    struct llama_batch *b = &e->batch;
    b->n_tokens = 0;
    for (int32_t p = 0; p < n_passes; p++) {
        const specd_tree_pass *t = &passes[p];
        if (t->prompt_chunk && t->pos_root != t->slot->n_kv) {
            specd_set_error(error, "a prompt chunk at position %d of a slot that holds %d tokens", t->pos_root,
                            t->slot->n_kv);
            return SPECD_ERR_INVALID_ARGUMENT;
        }
    }
    for (int32_t p = 0; p < n_passes; p++) {
        const specd_tree_pass *t = &passes[p];
        prepare_tree(t->slot, t->n_branches, t->pos_root);
        add_tree(b, t->slot, t->tokens, t->n_tokens, t->n_branches, t->pos_root, !t->prompt_chunk);
    }
    double t0 = specd_now_ms();
    int32_t rc = llama_decode(passes[0].slot->ctx, *b);
    if (ms) *ms = specd_now_ms() - t0;
    if (rc == 0) {
        for (int32_t p = 0; p < n_passes; p++) { /* prompt chunks stay in their slot's cache */
            const specd_tree_pass *t = &passes[p];
            for (int32_t i = 0; t->prompt_chunk && i < t->n_tokens; i++) t->slot->kv_tokens[t->slot->n_kv++] = t->tokens[i].token;
        }
        return SPECD_OK;
    }
    for (int32_t p = 0; p < n_passes; p++) drop_tree(passes[p].slot, passes[p].n_branches, passes[p].pos_root);
    specd_set_error(error, "llama_decode failed (code %d) on the trees of %d slots, %d tokens in all", rc, n_passes,
                    total);
    return SPECD_ERR_DECODE;
}

specd_status specd_slot_decode_tree(specd_engine *e, specd_model_slot *slot, const specd_tree_token *tokens,
                                    int32_t n_tokens, int32_t n_branches, int32_t pos_root, double *ms,
                                    char **error) {
    if (n_tokens > e->batch_cap || n_branches > slot->n_seq_max) {
        specd_set_error(error, "a tree of %d tokens in %d branches does not fit the engine (at most %d tokens, "
                        "%d branches: draft_max)", n_tokens, n_branches, e->batch_cap, slot->n_seq_max);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    specd_tree_pass pass = {slot, tokens, n_tokens, n_branches, pos_root, false};
    specd_status st = specd_slots_decode_trees(e, &pass, 1, ms, error);
    if (st == SPECD_ERR_DECODE)
        specd_set_error(error, "llama_decode failed on a tree of %d tokens at position %d", n_tokens, pos_root);
    return st;
}

void specd_slot_keep_branch(specd_model_slot *slot, int32_t keep, int32_t n_branches, int32_t pos_root,
                            const specd_token *path, int32_t n_path) {
    llama_memory_t mem = llama_get_memory(slot->ctx);
    int32_t pos_end = pos_root + n_path;
    for (int32_t s = 0; s < n_branches; s++)
        if (s != keep) llama_memory_seq_rm(mem, branch_seq(slot, s), s == 0 ? pos_root : 0, -1);
    llama_memory_seq_rm(mem, branch_seq(slot, keep), pos_end, -1);
    if (keep != 0) {
        llama_memory_seq_cp(mem, branch_seq(slot, keep), slot->seq, 0, pos_end);
        llama_memory_seq_rm(mem, branch_seq(slot, keep), 0, -1);
    }
    memcpy(slot->kv_tokens + pos_root, path, (size_t)n_path * sizeof *path);
    slot->n_kv = pos_end;
}

const float *specd_slot_logits(const specd_model_slot *slot, int32_t i) {
    return llama_get_logits_ith(slot->ctx, slot->logits_offset + i);
}
