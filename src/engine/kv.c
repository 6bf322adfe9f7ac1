/* kv.c - keeps a model slot's KV cache in step with the token history: reuse the longest common
 * prefix, drop the rest, decode what is missing. A slot is one sequence of a context shared by
 * every slot (engine_internal.h); a recurrent state goes back to checkpoints (state.c). */
#include "engine_internal.h"
#include "features.h"
#include "images.h"

#include "../util/util.h"

#include <stdlib.h>
#include <string.h>

/* A drafting head hears of the target's decodes through e->observer (engine_internal.h). */
static specd_status observe_decode(specd_engine *e, specd_model_slot *view, int32_t b0, int32_t pos, int32_t n,
                                   char **error) {
    return e->observer ? e->observer->decoded(e, view, b0, pos, n, error) : SPECD_OK;
}

static specd_status observe_keep_up(specd_engine *e, specd_model_slot *view, char **error) {
    return e->observer ? e->observer->keep_up(e, view, error) : SPECD_OK;
}

/* The sequence id of tree branch `branch` of this view: its own for branch 0, else a scratch one. */
static llama_seq_id branch_seq(const specd_model_slot *slot, int32_t branch) {
    return branch == 0 ? slot->seq : slot->branch_base + branch - 1;
}

/* Forgets everything the slot holds. Removing a whole sequence never fails in llama.cpp. */
static void slot_clear(specd_model_slot *slot) {
    specd_invariance_seq_rm(slot->inv, slot->ctx, slot->seq, -1, -1);
    slot->n_kv = 0;
    specd_slot_forget_checkpoints(slot, -1);
}

/* Whether llama.cpp can drop the last `n_drop` tokens of the slot in place: any attention cache;
 * a recurrent state only by its per-token snapshots, which exist for fewer tokens than the latest
 * decode wrote (llama.cpp would read a stale snapshot otherwise, without failing). */
static bool can_drop_in_place(const specd_model_slot *slot, int32_t n_drop) {
    return slot->can_drop_tail || (n_drop <= slot->n_rs_seq && n_drop < slot->last_decode_n);
}

void specd_slot_truncate(specd_model_slot *slot, int32_t n) {
    if (n >= slot->n_kv) return;
    specd_slot_forget_checkpoints(slot, n); /* those after n hold tokens being dropped */
    if (can_drop_in_place(slot, slot->n_kv - n) && specd_invariance_seq_rm(slot->inv, slot->ctx, slot->seq, n, -1)) {
        if (!slot->can_drop_tail) {
            slot->n_rollbacks++;
            slot->last_decode_n = 0; /* one rollback per decode (llama.cpp's rule) */
        }
        slot->n_kv = n;
        return;
    }
    /* A recurrent state cannot drop its last tokens: go back to the latest checkpoint before
     * them (state.c), or start over. Either way the slot then holds n tokens or fewer, exactly
     * known; the next sync decodes the rest again. */
    if (!specd_slot_restore_checkpoint(slot, n)) slot_clear(slot);
    if (n > slot->lost_until) slot->lost_until = n;
}

/* Where the slot's logits start in the coming pass, token i at row i. */
static void logits_start(specd_model_slot *slot, int32_t offset) {
    slot->logits_offset = offset;
    slot->rows_reordered = false;
}

/* A token, or a position of an embeddings batch (b->token NULL: an image's, decode_image). */
static void batch_add(struct llama_batch *b, llama_seq_id seq, specd_token token, int32_t pos, bool logits) {
    int32_t i = b->n_tokens++;
    if (b->token) b->token[i] = token;
    b->pos[i] = pos;
    b->n_seq_id[i] = 1;
    b->seq_id[i][0] = seq;
    b->logits[i] = logits;
}

/* llama_decode, finished: on a GPU llama_decode only queues the pass, and what it costs would
 * land on whoever reads the logits next (the sampler), so the pass costs the length policy
 * learns would be the launch alone (measured on an H200: 0.1-0.2 ms for a 1 ms pass, and the
 * policy drafted 11-20 tokens a step). On the CPU the pass is already done: nothing to wait for. */
static int32_t decode_finished(struct llama_context *ctx, struct llama_batch b) {
    int32_t rc = llama_decode(ctx, b);
    if (rc == 0) llama_synchronize(ctx);
    return rc;
}

/* llama_decode, and for the target a batch-invariant pass (invariance.h): the trash compacted away
 * first when the pass would not fit beside it, a padding token where one row would take another
 * kernel than several. The batch is as it was afterwards. */
static int32_t decode(specd_engine *e, specd_model_slot *slot, struct llama_batch *b) {
    if (specd_invariance_needs_compaction(e, slot->inv, slot->ctx, b->n_tokens + 1) &&
        specd_invariance_compact(e, NULL) != SPECD_OK)
        return 1; /* no room: as llama_decode says when the cache is full */
    specd_lora_apply(e, slot); /* the slot's adapter scales (every slot of a pass has the same) */
    bool padded = b->token && specd_invariance_pad(slot->inv, b); /* an image's rows are never one alone */
    int32_t rc = decode_finished(slot->ctx, *b);
    if (slot->ctx == e->target.ctx) e->target_decodes++;
    specd_invariance_after_decode(slot->inv, slot->ctx, b, padded, rc);
    if (padded) b->n_tokens--;
    return rc;
}

static specd_status decode_batch(specd_engine *e, specd_model_slot *slot, struct llama_batch *b, char **error) {
    int32_t rc = decode(e, slot, b);
    if (slot->ctx == e->draft.ctx) e->draft_decodes++;
    slot->last_decode_n = rc == 0 ? b->n_tokens : 0;
    if (rc != 0) {
        specd_set_error(error, "llama_decode failed (code %d) on %d tokens at position %d: %s", rc,
                        b->n_tokens, b->n_tokens ? b->pos[0] : 0,
                        rc == 1 ? "no KV cache slot; try a larger context (-c)" : "see the log (--verbose)");
        return SPECD_ERR_DECODE;
    }
    return SPECD_OK;
}

/* What a failed decode from `start` on wrote is unknown: forget it (all of it for a recurrent
 * state, whose rollback snapshots may not match). */
static void forget_from(specd_model_slot *slot, int32_t start) {
    if (!slot->can_drop_tail || !specd_invariance_seq_rm(slot->inv, slot->ctx, slot->seq, start, -1))
        slot_clear(slot);
}

/* Whether the view is one of the target's (the one model with the images' projector). */
static bool target_view(const specd_engine *e, const specd_model_slot *slot) { return slot->ctx == e->target.ctx; }

/* Whether the view decodes images from embeddings: the target's, and the draft's where the draft
 * has a projector of its own (images.h). */
static bool embeds_images(const specd_engine *e, const specd_model_slot *slot) {
    return target_view(e, slot) || specd_images_draft_embeds(e->images);
}

/* The token a view decodes at position `t` of the history: a draft model without a projector
 * decodes a filler token at an image's positions (images.h) and drafts from the text around. */
static specd_token pass_token(const specd_engine *e, specd_token t) {
    return t >= 0 ? t : e->images ? specd_images_filler(e->images) : 0;
}

/* Whether tokens[0..n) hold an image's position. */
static bool holds_image(const specd_token *tokens, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0) return true;
    return false;
}

/* Where the pass that starts at `start` ends (at most `end`): where the view embeds images, an
 * image's positions go alone, from its embeddings (decode_image), and text stops before the next. */
static int32_t segment_end(const specd_engine *e, const specd_model_slot *slot, const specd_token *tokens,
                           int32_t start, int32_t end, int32_t n) {
    if (!embeds_images(e, slot)) return end;
    int32_t run = specd_images_run(tokens + start, n - start);
    if (run > 0) return start + run;
    for (int32_t i = start; i < end; i++)
        if (tokens[i] < 0) return i;
    return end;
}

/* The view decodes an image's positions tokens[start..end) from its model's embeddings (images.c),
 * in passes of the batch, or in one pass with full attention where the projector's model asks. */
static specd_status decode_image(specd_engine *e, specd_model_slot *slot, const specd_token *tokens, int32_t start,
                                 int32_t end, char **error) {
    int side = target_view(e, slot) ? SPECD_IMAGE_TARGET : SPECD_IMAGE_DRAFT;
    int32_t n = end - start, width = specd_images_n_embd(e->images, side);
    float *embd = malloc((size_t)n * (size_t)width * sizeof *embd);
    if (!embd) {
        specd_set_error(error, "out of memory for an image's %d embeddings", n);
        return SPECD_ERR_NO_MEMORY;
    }
    bool non_causal = false;
    specd_status st = specd_images_embd(e->images, side, tokens[start], n, embd, &non_causal, error);
    if (st == SPECD_OK && non_causal && n > e->n_batch) {
        specd_set_error(error, "an image of %d positions is one pass for this projector: raise the batch (-b, -ub) "
                        "to %d", n, n);
        st = SPECD_ERR_CONTEXT;
    }
    int32_t step = non_causal ? n : e->n_batch;
    if (st == SPECD_OK && non_causal) llama_set_causal_attn(slot->ctx, false);
    for (int32_t p = start; st == SPECD_OK && p < end; p += step) {
        int32_t q = p + step < end ? p + step : end;
        struct llama_batch b = e->batch;
        b.token = NULL;
        b.embd = embd + (size_t)(p - start) * (size_t)width;
        b.n_tokens = 0;
        for (int32_t i = p; i < q; i++) batch_add(&b, slot->seq, 0, i, false);
        st = decode_batch(e, slot, &b, error);
        if (st != SPECD_OK) {
            forget_from(slot, p);
            break;
        }
        memcpy(slot->kv_tokens + p, tokens + p, (size_t)(q - p) * sizeof *tokens);
        slot->n_kv = q;
    }
    if (non_causal) llama_set_causal_attn(slot->ctx, true);
    free(embd);
    return st;
}

/* The most tokens a catch-up decodes one per pass on a slot that wants one-token passes: what a
 * draft step leaves (its last draft and the target's own token), not a prompt. */
#define ONE_TOKEN_CATCH_UP_MAX 2

/* Tokens per decode for a catch-up of n_missing tokens (engine_internal.h: one_token_passes). */
static int32_t catch_up_chunk(const specd_engine *e, const specd_model_slot *slot, int32_t n_missing,
                              bool want_logits) {
    return slot->one_token_passes && want_logits && n_missing <= ONE_TOKEN_CATCH_UP_MAX ? 1 : e->n_batch;
}

/* Decodes tokens[common..n) after the slot's first `common` tokens, in chunks of n_batch (or one
 * token a pass, each with its logits, where catch_up_chunk says). */
static specd_status decode_from(specd_engine *e, specd_model_slot *slot, const specd_token *tokens, int32_t common,
                                int32_t n, bool want_logits, int32_t *logits_idx, char **error) {
    struct llama_batch *b = &e->batch;
    logits_start(slot, 0);
    int32_t chunk = catch_up_chunk(e, slot, n - common, want_logits);
    for (int32_t start = common, end; start < n; start = end) {
        end = segment_end(e, slot, tokens, start, start + chunk < n ? start + chunk : n, n);
        if (tokens[start] < 0 && embeds_images(e, slot)) {
            specd_status st = decode_image(e, slot, tokens, start, end, error);
            if (st != SPECD_OK) return st;
            continue;
        }
        b->n_tokens = 0;
        for (int32_t i = start; i < end; i++)
            batch_add(b, slot->seq, pass_token(e, tokens[i]), i, want_logits && (i == n - 1 || chunk == 1));
        specd_status st = decode_batch(e, slot, b, error);
        if (st != SPECD_OK) {
            forget_from(slot, start);
            return st;
        }
        memcpy(slot->kv_tokens + start, tokens + start, (size_t)(end - start) * sizeof *tokens);
        slot->n_kv = end;
        if (logits_idx) *logits_idx = end - start - 1;
        /* a drafting head reads the target's hidden states: kept, and taken in chunk by chunk */
        st = observe_decode(e, slot, 0, start, end - start, error);
        if (st == SPECD_OK) st = observe_keep_up(e, slot, error);
        if (st != SPECD_OK) return st;
    }
    return SPECD_OK;
}

static specd_status check_fits(const specd_model_slot *slot, int32_t n, char **error) {
    if (n <= slot->cap) return SPECD_OK;
    specd_set_error(error, "%d tokens do not fit the context of %d", n, slot->cap);
    return SPECD_ERR_CONTEXT;
}

/* Keeps the longest prefix the slot shares with tokens[0..n) and drops the rest; returns how many
 * tokens the slot still holds (less than shared when a recurrent state had to go back further). */
static int32_t keep_common_prefix(specd_model_slot *slot, const specd_token *tokens, int32_t n, bool want_logits) {
    int32_t common = 0;
    while (common < slot->n_kv && common < n && slot->kv_tokens[common] == tokens[common]) common++;
    /* an image's positions go in together (a projector may attend the whole image at once) */
    while (common > 0 && common < n && tokens[common] < 0 && tokens[common - 1] == tokens[common] + 1) common--;
    /* Logits exist only for tokens we decode now: re-decode the last one if it is cached. */
    if (want_logits && common == n && n > 0) common = n - 1;
    specd_slot_truncate(slot, common);
    return slot->n_kv;
}

specd_status specd_slot_sync(specd_engine *e, specd_model_slot *slot, const specd_token *tokens,
                             int32_t n, bool want_logits, int32_t *logits_idx, int32_t *n_reused,
                             char **error) {
    specd_status fits = check_fits(slot, n, error);
    if (fits != SPECD_OK) return fits;
    int32_t common = keep_common_prefix(slot, tokens, n, want_logits);
    if (n_reused) *n_reused = common;
    /* Tokens the slot held before going back, decoded again now: part of what a recurrent
     * state's checkpoints cost (the cost model counts it). */
    int32_t again = (slot->lost_until < n ? slot->lost_until : n) - common;
    slot->lost_until = 0;
    double t0 = specd_now_ms();
    specd_status st = decode_from(e, slot, tokens, common, n, want_logits, logits_idx, error);
    if (st == SPECD_OK && again > 0) slot->redecode_ms += (specd_now_ms() - t0) * (double)again / (double)(n - common);
    /* the verify passes' hidden states a head has not taken in yet, when they pile up */
    return st == SPECD_OK ? observe_keep_up(e, slot, error) : st;
}

/* Draft passes of several slots keep one shape: every slot's part is padded to two tokens, its
 * catch-up (one or two tokens after a step: the last draft and the target's own token, or the
 * target's correction) and each later depth's one token alike, the padding after the slot's own
 * tokens in its own sequence, without logits, and dropped after the pass. llama.cpp rebuilds a
 * context's graph whenever a pass's tokens, sequences or outputs change, and a GPU replays its
 * captured graph only for a pass of the shape before: at 4 clients the draft's passes alternated
 * 4, 5, 6, 7 and 8 tokens, and 20% of them reused the graph. A small model's pass over 2m tokens
 * costs what one over m does from about 3 slots on (draft.gguf on 2 CPU cores: T(4) 6.5 ms,
 * T(8) 6.6 ms; T(2) 4.1 ms against T(1) 1.4), so only passes of that many slots are padded. The
 * draft's logits decide nothing about the output (verification does), so its passes need no
 * invariance; the target's are not padded here. Only where the draft runs on a GPU (its views'
 * pads_joint_passes): on the CPU it served 4 clients 0.85x as fast on the Q8_0 pair. */
#define JOINT_PAD_MIN_SLOTS 3
#define JOINT_PAD_WIDTH 2

static bool pads_joint_passes(const specd_engine *e, specd_model_slot *const *views, int32_t n_views) {
    if (n_views < JOINT_PAD_MIN_SLOTS || n_views * JOINT_PAD_WIDTH > e->batch_cap || views[0]->ctx == e->target.ctx)
        return false;
    if (!views[0]->pads_joint_passes) return false; /* (the draft's on a GPU: engine_internal.h) */
    for (int32_t i = 0; i < n_views; i++)
        if (!views[i]->can_drop_tail || views[i]->features) return false;
    return true;
}

/* Pads each slot whose part of the pass (n[i] - from[i] tokens, ending at position n[i] - 1) is
 * shorter than JOINT_PAD_WIDTH, when every slot's padding fits its context; returns whether it did. */
static bool add_joint_padding(const specd_engine *e, struct llama_batch *b, specd_model_slot *const *views,
                              const specd_token *last, const int32_t *n, const int32_t *from, int32_t n_views) {
    if (!pads_joint_passes(e, views, n_views)) return false;
    for (int32_t i = 0; i < n_views; i++)
        if (n[i] - from[i] > JOINT_PAD_WIDTH || from[i] + JOINT_PAD_WIDTH > views[i]->cap) return false;
    for (int32_t i = 0; i < n_views; i++)
        for (int32_t p = n[i]; p < from[i] + JOINT_PAD_WIDTH; p++) batch_add(b, views[i]->seq, last[i], p, false);
    return true;
}

static void drop_joint_padding(specd_model_slot *const *views, const int32_t *n, int32_t n_views) {
    for (int32_t i = 0; i < n_views; i++) llama_memory_seq_rm(llama_get_memory(views[i]->ctx), views[i]->seq, n[i], -1);
}

/* Whether the slots' missing tokens go in one decode as they are: they fit one batch, and no
 * recurrent state needs specd_slot_sync's accounting of what it decodes again. */
static bool sync_fits_one_decode(const specd_engine *e, specd_model_slot *const *views,
                                 const specd_token *const *tokens, const int32_t *n, const int32_t *from,
                                 int32_t n_views) {
    int32_t total = 0;
    for (int32_t i = 0; i < n_views; i++) {
        if (!views[i]->can_drop_tail) return false;
        /* a view that embeds images takes their positions in passes of their own (decode_from) */
        if (embeds_images(e, views[i]) && holds_image(tokens[i] + from[i], n[i] - from[i])) return false;
        total += n[i] - from[i];
    }
    return total <= e->batch_cap;
}

specd_status specd_slots_sync(specd_engine *e, specd_model_slot *const *views, const specd_token *const *tokens,
                              const int32_t *n, int32_t n_views, int32_t *logits_idx, char **error) {
    int32_t from[SPECD_MAX_PARALLEL];
    if (n_views > SPECD_MAX_PARALLEL || n_views > e->batch_cap) {
        specd_set_error(error, "%d slots to sync at once: at most %d, and no more than the batch (%d)", n_views,
                        SPECD_MAX_PARALLEL, e->batch_cap);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    for (int32_t i = 0; i < n_views; i++) { /* every history checked before any cache changes */
        specd_status fits = check_fits(views[i], n[i], error);
        if (fits != SPECD_OK) return fits;
        if (n[i] < 1) {
            specd_set_error(error, "slot %d: an empty history has no logits to sync for", i);
            return SPECD_ERR_INVALID_ARGUMENT;
        }
    }
    for (int32_t i = 0; i < n_views; i++) from[i] = keep_common_prefix(views[i], tokens[i], n[i], true);
    if (!sync_fits_one_decode(e, views, tokens, n, from, n_views)) {
        /* A long catch-up (or a recurrent state) in chunks first; the last tokens still go together. */
        for (int32_t i = 0; i < n_views; i++) {
            specd_status st = specd_slot_sync(e, views[i], tokens[i], n[i] - 1, false, NULL, NULL, error);
            if (st != SPECD_OK) return st;
            from[i] = views[i]->n_kv;
        }
    }
    struct llama_batch *b = &e->batch;
    b->n_tokens = 0;
    specd_token last[SPECD_MAX_PARALLEL];
    for (int32_t i = 0; i < n_views; i++) {
        for (int32_t p = from[i]; p < n[i]; p++) batch_add(b, views[i]->seq, pass_token(e, tokens[i][p]), p, p == n[i] - 1);
        logits_idx[i] = b->n_tokens - 1;
        last[i] = tokens[i][n[i] - 1];
    }
    bool padded = b->n_tokens > 0 && add_joint_padding(e, b, views, last, n, from, n_views);
    specd_status st = b->n_tokens > 0 ? decode_batch(e, views[0], b, error) : SPECD_OK;
    if (padded && st == SPECD_OK) drop_joint_padding(views, n, n_views);
    int32_t b0 = 0;
    for (int32_t i = 0; i < n_views; i++) {
        specd_model_slot *v = views[i];
        if (st != SPECD_OK) {
            forget_from(v, from[i]);
            continue;
        }
        memcpy(v->kv_tokens + from[i], tokens[i] + from[i], (size_t)(n[i] - from[i]) * sizeof *tokens[i]);
        v->n_kv = n[i];
        logits_start(v, 0);
        v->last_decode_n = n[i] - from[i]; /* its own part of the decode */
        st = observe_decode(e, v, b0, from[i], n[i] - from[i], error);
        b0 += n[i] - from[i];
    }
    return st;
}

specd_status specd_slot_push(specd_engine *e, specd_model_slot *slot, specd_token token, char **error) {
    if (slot->n_kv >= slot->cap) {
        specd_set_error(error, "the context of %d tokens is full", slot->cap);
        return SPECD_ERR_CONTEXT;
    }
    struct llama_batch *b = &e->batch;
    b->n_tokens = 0;
    logits_start(slot, 0);
    batch_add(b, slot->seq, token, slot->n_kv, true);
    specd_status st = decode_batch(e, slot, b, error);
    if (st != SPECD_OK) return st;
    slot->kv_tokens[slot->n_kv++] = token;
    return SPECD_OK;
}

specd_status specd_slots_push(specd_engine *e, specd_model_slot *const *views, const specd_token *tokens, int32_t n,
                              double *ms, char **error) {
    if (ms) *ms = 0.0;
    if (n > e->batch_cap || n > SPECD_MAX_PARALLEL) {
        specd_set_error(error, "%d draft tokens do not fit the engine's batch of %d (or pass %d slots)", n,
                        e->batch_cap, SPECD_MAX_PARALLEL);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    int32_t from[SPECD_MAX_PARALLEL], ends[SPECD_MAX_PARALLEL];
    struct llama_batch *b = &e->batch;
    b->n_tokens = 0;
    for (int32_t i = 0; i < n; i++) {
        if (views[i]->n_kv >= views[i]->cap) {
            specd_set_error(error, "the context of %d tokens is full", views[i]->cap);
            return SPECD_ERR_CONTEXT;
        }
        logits_start(views[i], 0);
        batch_add(b, views[i]->seq, tokens[i], views[i]->n_kv, true);
        from[i] = views[i]->n_kv, ends[i] = from[i] + 1;
    }
    bool padded = n > 0 && add_joint_padding(e, b, views, tokens, ends, from, n);
    double t0 = specd_now_ms();
    specd_status st = n > 0 ? decode_batch(e, views[0], b, error) : SPECD_OK;
    if (ms) *ms = specd_now_ms() - t0;
    if (padded && st == SPECD_OK) drop_joint_padding(views, ends, n);
    for (int32_t i = 0; i < n; i++) {
        if (st == SPECD_OK) {
            views[i]->kv_tokens[views[i]->n_kv++] = tokens[i];
            views[i]->last_decode_n = 1; /* its own part of the decode */
        } else {
            forget_from(views[i], views[i]->n_kv);
        }
    }
    return st;
}

specd_status specd_slot_redecode(specd_engine *e, specd_model_slot *slot, const specd_token *tokens, int32_t from,
                                 int32_t to, char **error) {
    if (from >= to) return SPECD_OK;
    if (!slot->can_drop_tail || slot->n_seq_max < 2 || to > slot->n_kv || to - from > e->batch_cap) {
        specd_slot_truncate(slot, from); /* the slot's own sequence decodes them again */
        return specd_slot_sync(e, slot, tokens, to, false, NULL, NULL, error);
    }
    llama_memory_t mem = llama_get_memory(slot->ctx);
    llama_seq_id scratch = branch_seq(slot, 1);
    llama_memory_seq_rm(mem, scratch, -1, -1);
    llama_memory_seq_cp(mem, slot->seq, scratch, 0, from); /* shares the cells: nothing is copied */
    struct llama_batch *b = &e->batch;
    b->n_tokens = 0;
    for (int32_t p = from; p < to; p++) batch_add(b, scratch, tokens[p], p, false);
    specd_status st = decode_batch(e, slot, b, error);
    slot->last_decode_n = 0; /* the sequence's own last decode is no longer the context's last */
    llama_memory_seq_rm(mem, scratch, -1, -1);
    return st == SPECD_OK ? observe_decode(e, slot, 0, from, to - from, error) : st;
}

void specd_slot_copy_branch(specd_model_slot *slot, int32_t from, int32_t to) {
    llama_memory_t mem = llama_get_memory(slot->ctx);
    llama_memory_seq_rm(mem, branch_seq(slot, to), -1, -1);
    llama_memory_seq_cp(mem, branch_seq(slot, from), branch_seq(slot, to), -1, -1);
}

/* A draft tree's pass: no token list to keep (the tree is the drafter's) and no rollback to
 * count (trees never run on a recurrent state: specd_draft_tree_run). */
specd_status specd_slot_decode_branches(specd_engine *e, specd_model_slot *slot, const specd_branch_token *tokens,
                                        int32_t n, char **error) {
    struct llama_batch *b = &e->batch;
    b->n_tokens = 0;
    for (int32_t i = 0; i < n; i++) batch_add(b, branch_seq(slot, tokens[i].branch), tokens[i].token, tokens[i].pos, true);
    logits_start(slot, 0);
    int32_t rc = decode_finished(slot->ctx, *b);
    if (slot->ctx == e->draft.ctx) e->draft_decodes++;
    if (rc == 0) return SPECD_OK;
    specd_set_error(error, "llama_decode failed (code %d) on a draft tree pass of %d tokens", rc, n);
    return SPECD_ERR_DECODE;
}

/* llama.cpp says a recurrent memory can shift (it only renumbers the state's position), but the
 * state still holds the dropped tokens: the model would no longer see the history the slot says
 * it holds, and a later restart from the history would give another state. So no shift there. */
bool specd_slot_can_shift(const specd_model_slot *slot) {
    return slot->ctx && slot->can_drop_tail && llama_memory_can_shift(llama_get_memory(slot->ctx));
}

void specd_slot_shift(specd_model_slot *slot, int32_t n_keep, int32_t n_discard) {
    int32_t end = n_keep + n_discard;
    if (slot->features) specd_features_shift(slot->features, n_keep, n_discard);
    if (slot->n_kv <= end || !specd_slot_can_shift(slot)) {
        /* Nothing cached after the dropped tokens (or it cannot move): the next sync decodes it. */
        specd_slot_truncate(slot, n_keep);
        return;
    }
    llama_memory_t mem = llama_get_memory(slot->ctx);
    specd_slot_forget_checkpoints(slot, -1); /* positions move: no checkpoint matches them */
    if (!specd_invariance_seq_rm(slot->inv, slot->ctx, slot->seq, n_keep, end)) {
        slot_clear(slot); /* the next sync decodes the history again */
        return;
    }
    llama_memory_seq_add(mem, slot->seq, end, -1, -n_discard);
    memmove(slot->kv_tokens + n_keep, slot->kv_tokens + end, (size_t)(slot->n_kv - end) * sizeof *slot->kv_tokens);
    slot->n_kv -= n_discard;
}

/* Gets the slot ready for a tree under pos_root: nothing cached from the root on (a recurrent
 * state's checkpoint kept before drafts its rollback cannot drop), each branch's scratch sequence
 * sharing the history. */
static specd_status prepare_tree(specd_model_slot *slot, const specd_tree_pass *t, char **error) {
    if (!slot->can_drop_tail && t->n_branches > 1) {
        specd_set_error(error, "a draft tree of %d branches cannot be verified on the %s: its recurrent state "
                        "holds one sequence; draft chains (speculative.suffix_branches 1)", t->n_branches, slot->desc);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    specd_slot_truncate(slot, t->pos_root); /* normally a no-op: the root is not cached */
    if (slot->n_kv != t->pos_root) {
        specd_set_error(error, "the %s's cache holds %d tokens, not the %d before the tree: sync it first",
                        slot->desc, slot->n_kv, t->pos_root);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    /* Drafts a recurrent state may have to drop, more than its rollback covers: keep the state
     * before them. (The whole tree is one ubatch: n_ubatch = n_batch >= draft_max + 1.) */
    if (!t->prompt_chunk && t->n_tokens > 1 && t->n_tokens - 1 > slot->n_rs_seq) {
        specd_status st = specd_slot_checkpoint(slot, SPECD_CHECKPOINT_STEP, error);
        if (st != SPECD_OK) return st;
    }
    llama_memory_t mem = llama_get_memory(slot->ctx);
    for (int32_t s = 1; s < t->n_branches; s++)
        llama_memory_seq_cp(mem, slot->seq, branch_seq(slot, s), 0, t->pos_root);
    return SPECD_OK;
}

/* Plain attention is batch-invariant only while the slot's cells run contiguously in position
 * order (invariance.h): a tree's accepted path sits between its siblings' cells, so what of it is
 * not in place is dropped and the next sync decodes it again, in place. */
static bool relays_trees(const specd_model_slot *slot) {
    return slot->inv && slot->inv->attention == SPECD_INVARIANT_PLAIN;
}

/* Whether the tree's first branch goes first in its pass (relays_trees): its tokens then take the
 * cells after the slot's, in position order, so when the accepted path follows that branch (the
 * draft's first choices: most steps) it is in place, and only a path that leaves it is decoded
 * again (on the F32 pair that extra pass cost about 60 ms a tree step, more than the tree won). */
static bool main_branch_first(const specd_model_slot *slot, const specd_tree_pass *t) {
    return relays_trees(slot) && t->n_branches > 1 && !t->prompt_chunk && t->n_tokens <= SPECD_TREE_ROWS_MAX;
}

static void add_tree_token(struct llama_batch *b, const specd_tree_pass *t, int32_t i, bool logits) {
    int32_t j = b->n_tokens++;
    b->token[j] = t->tokens[i].token;
    b->pos[j] = t->pos_root + t->tokens[i].depth;
    b->logits[j] = logits;
    int32_t n_seq = 0;
    for (int32_t s = 0; s < t->n_branches; s++)
        if (t->tokens[i].seq_mask & (1u << s)) b->seq_id[j][n_seq++] = branch_seq(t->slot, s);
    b->n_seq_id[j] = n_seq;
}

/* A tree with its first branch's tokens first (main_branch_first), the others after; token i's
 * logits at row tree_rows[i]. The first branch's tokens that are one per depth from the root on
 * are the ones in place. */
static void add_tree_main_first(struct llama_batch *b, const specd_tree_pass *t) {
    specd_model_slot *slot = t->slot;
    int32_t row = 0;
    slot->n_in_place = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < t->n_tokens; i++) {
            bool first_branch = t->tokens[i].seq_mask & 1u;
            if (first_branch != (pass == 0)) continue;
            if (first_branch && t->tokens[i].depth == slot->n_in_place && slot->n_in_place == row)
                slot->in_place[slot->n_in_place++] = t->tokens[i].token;
            slot->tree_rows[i] = (int16_t)row++;
            add_tree_token(b, t, i, true);
        }
    slot->rows_reordered = true;
}

/* The padding a pass gets (specd_tree_pass.n_padding): a chain's, where the slot has room for it. */
static int32_t padding_of(const specd_tree_pass *t) {
    const specd_model_slot *slot = t->slot;
    bool chain = t->n_branches == 1 && !t->prompt_chunk && t->n_tokens > 0;
    if (!chain || t->n_padding <= 0 || slot->features || !slot->can_drop_tail) return 0;
    return t->pos_root + t->n_tokens + t->n_padding <= slot->cap ? t->n_padding : 0;
}

/* Appends a slot's part to the batch: a tree, every token with logits, or a prompt chunk, with
 * logits only on a root it ends with; the slot's logits start at the first token that has them.
 * A chain's padding follows it. */
static void add_tree(struct llama_batch *b, const specd_tree_pass *t) {
    specd_model_slot *slot = t->slot;
    bool all_logits = !t->prompt_chunk;
    logits_start(slot, all_logits ? b->n_tokens : t->ends_at_root ? b->n_tokens + t->n_tokens - 1 : 0);
    slot->n_in_place = 0;
    if (main_branch_first(slot, t)) {
        add_tree_main_first(b, t);
        return;
    }
    for (int32_t i = 0; i < t->n_tokens; i++)
        add_tree_token(b, t, i, all_logits || (t->ends_at_root && i == t->n_tokens - 1));
    for (int32_t i = 0, n = padding_of(t); i < n; i++)
        batch_add(b, slot->seq, t->tokens[t->n_tokens - 1].token, t->pos_root + t->n_tokens + i, true);
}

/* After a failed pass: the slot's sequence and its scratch branches lose the tree's positions
 * (other slots keep their caches); a recurrent state is cleared. */
static void drop_tree(specd_model_slot *slot, int32_t n_branches, int32_t pos_root) {
    for (int32_t s = 1; s < n_branches; s++) /* cannot fail */
        specd_invariance_seq_rm(slot->inv, slot->ctx, branch_seq(slot, s), pos_root, -1);
    for (int32_t s = 1; s < n_branches; s++) llama_memory_seq_rm(llama_get_memory(slot->ctx), branch_seq(slot, s), -1, -1);
    forget_from(slot, pos_root);
}

/* After a good pass: a chain or a prompt chunk is in the slot's cache, so its token list holds it
 * (keep_branch then drops a chain's rejected tail, which a recurrent state does by going back), and
 * a head keeps its hidden states (batch index b0 on); a tree's branches share positions: the head's
 * rows end at its root. */
static specd_status record_pass(specd_engine *e, const specd_tree_pass *t, int32_t b0, char **error) {
    specd_model_slot *slot = t->slot;
    slot->last_decode_n = t->n_tokens; /* its own part of the decode */
    if (padding_of(t) > 0) /* (cannot fail: the slot's own sequence, from past its chain) */
        specd_invariance_seq_rm(slot->inv, slot->ctx, slot->seq, t->pos_root + t->n_tokens, -1);
    if (t->n_branches != 1) {
        if (slot->features) specd_features_cut(slot->features, t->pos_root);
        return SPECD_OK;
    }
    for (int32_t i = 0; i < t->n_tokens; i++) slot->kv_tokens[t->pos_root + t->tokens[i].depth] = t->tokens[i].token;
    slot->n_kv = t->pos_root + t->n_tokens;
    return observe_decode(e, slot, b0, t->pos_root, t->n_tokens, error);
}

specd_status specd_slots_decode_trees(specd_engine *e, const specd_tree_pass *passes, int32_t n_passes, double *ms,
                                      char **error) {
    int32_t total = 0;
    for (int32_t p = 0; p < n_passes; p++) {
        total += passes[p].n_tokens + padding_of(&passes[p]);
        if (passes[p].n_branches > passes[p].slot->n_seq_max) total = INT32_MAX / 2;
    }
    if (ms) *ms = 0.0;
    if (total > e->batch_cap) {
        specd_set_error(error, "trees of %d tokens in all do not fit the engine's batch of %d (draft_max, -b)", total,
                        e->batch_cap);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    for (int32_t p = 0; p < n_passes; p++) {
        const specd_tree_pass *t = &passes[p];
        if (t->n_padding < 0) {
            specd_set_error(error, "a pass padded with %d tokens", t->n_padding);
            return SPECD_ERR_INVALID_ARGUMENT;
        }
        if (t->prompt_chunk && t->pos_root != t->slot->n_kv) {
            specd_set_error(error, "a prompt chunk at position %d of a slot that holds %d tokens", t->pos_root,
                            t->slot->n_kv);
            return SPECD_ERR_INVALID_ARGUMENT;
        }
    }
    /* Before the branches share the history: compaction writes back the slots' own sequences only. */
    if (specd_invariance_needs_compaction(e, passes[0].slot->inv, passes[0].slot->ctx, total + 1)) {
        specd_status st = specd_invariance_compact(e, error);
        if (st != SPECD_OK) return st;
    }
    struct llama_batch *b = &e->batch;
    b->n_tokens = 0;
    for (int32_t p = 0; p < n_passes; p++) {
        const specd_tree_pass *t = &passes[p];
        specd_status st = prepare_tree(t->slot, t, error);
        if (st != SPECD_OK) {
            for (int32_t q = 0; q < p; q++) drop_tree(passes[q].slot, passes[q].n_branches, passes[q].pos_root);
            return st;
        }
        add_tree(b, t);
    }
    double t0 = specd_now_ms();
    int32_t rc = decode(e, passes[0].slot, b);
    if (ms) *ms = specd_now_ms() - t0;
    if (rc == 0) {
        specd_status st = SPECD_OK;
        for (int32_t p = 0, b0 = 0; p < n_passes; b0 += passes[p].n_tokens + padding_of(&passes[p]), p++) {
            specd_status sp = record_pass(e, &passes[p], b0, error);
            if (st == SPECD_OK) st = sp;
        }
        return st;
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
    specd_tree_pass pass = {slot, tokens, n_tokens, n_branches, pos_root, false, false, 0};
    specd_status st = specd_slots_decode_trees(e, &pass, 1, ms, error);
    if (st == SPECD_ERR_DECODE)
        specd_set_error(error, "llama_decode failed on a tree of %d tokens at position %d", n_tokens, pos_root);
    return st;
}

/* Plain attention (relays_trees): the path's tokens that the tree's first branch laid in place
 * stay, with the slot's own sequence up to them; the rest of the tree goes (the next sync decodes
 * the rest of the path again, in place). */
static void keep_in_place(specd_model_slot *slot, int32_t n_branches, int32_t pos_root, const specd_token *path,
                          int32_t n_path) {
    int32_t kept = 0;
    /* (a drafting head's hidden states of a tree are not kept: record_pass) */
    if (slot->rows_reordered && !slot->features)
        while (kept < n_path && kept < slot->n_in_place && slot->in_place[kept] == path[kept]) kept++;
    memcpy(slot->kv_tokens + pos_root, path, (size_t)kept * sizeof *path);
    slot->n_kv = pos_root + kept;
    drop_tree(slot, n_branches, pos_root + kept); /* (a failure there clears the slot) */
}

void specd_slot_keep_branch(specd_model_slot *slot, int32_t keep, int32_t n_branches, int32_t pos_root,
                            const specd_token *path, int32_t n_path) {
    int32_t pos_end = pos_root + n_path;
    if (n_branches == 1) {
        /* The chain is in kv_tokens (record_pass): drop its rejected tail, which a recurrent state
         * does by going back to its checkpoint (the next sync decodes the accepted tokens again). */
        specd_slot_truncate(slot, pos_end);
        return;
    }
    if (relays_trees(slot)) {
        keep_in_place(slot, n_branches, pos_root, path, n_path);
        return;
    }
    llama_memory_t mem = llama_get_memory(slot->ctx);
    bool ok = true; /* an attention cache drops any range: a failure here is unexpected, and clears */
    for (int32_t s = 0; s < n_branches; s++)
        if (s != keep) {
            specd_invariance_seq_rm(slot->inv, slot->ctx, branch_seq(slot, s), pos_root, -1);
            ok = llama_memory_seq_rm(mem, branch_seq(slot, s), s == 0 ? pos_root : 0, -1) && ok;
        }
    ok = specd_invariance_seq_rm(slot->inv, slot->ctx, branch_seq(slot, keep), pos_end, -1) && ok;
    if (keep != 0) {
        llama_memory_seq_cp(mem, branch_seq(slot, keep), slot->seq, 0, pos_end);
        ok = llama_memory_seq_rm(mem, branch_seq(slot, keep), 0, -1) && ok;
    }
    memcpy(slot->kv_tokens + pos_root, path, (size_t)n_path * sizeof *path);
    slot->n_kv = pos_end;
    if (!ok) {
        for (int32_t s = 1; s < n_branches; s++) llama_memory_seq_rm(mem, branch_seq(slot, s), -1, -1);
        slot_clear(slot);
    }
}

const float *specd_slot_logits(const specd_model_slot *slot, int32_t i) {
    int32_t row = slot->rows_reordered && i >= 0 && i < SPECD_TREE_ROWS_MAX ? slot->tree_rows[i] : i;
    return llama_get_logits_ith(slot->ctx, slot->logits_offset + row);
}

/* (lora.c loads the adapters and applies them before each target decode; this is kv.c's, since
 * it empties the slot: lora.c calling kv.c and kv.c lora.c would be a circle.) */
void specd_slot_use_lora(specd_engine *e, specd_model_slot *view, const float *scales) {
    if (e->lora.n == 0 || !memcmp(view->lora_scales, scales, (size_t)e->lora.n * sizeof *scales)) return;
    specd_slot_truncate(view, 0); /* computed with other adapters: nothing of it is valid now */
    memcpy(view->lora_scales, scales, (size_t)e->lora.n * sizeof *scales);
}
