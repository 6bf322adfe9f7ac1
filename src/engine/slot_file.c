/* slot_file.c - a slot's caches as bytes and back (specd_engine_slot_save, specd_engine_slot_restore;
 * specd.h): the target's cells of the slot's sequence and the tokens they hold, the draft's the
 * same, after a header that names the models and the slot's context, so that bytes saved for
 * other models or another context are refused by name instead of read into the wrong cache. What
 * llama-server's POST /slots/N?action=save|restore does, with the draft's cache beside the
 * target's (a restored slot drafts from its cache as well as it verifies from it). */
#include "engine_internal.h"
#include "invariance.h"

#include "../util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOT_MAGIC "SPECDSLT"
#define SLOT_VERSION 1u

typedef struct slot_header {
    char magic[8];
    uint32_t version;
    uint32_t identity_len; /* the identity text follows the header */
    int32_t n_target, n_draft; /* the tokens each cache holds */
    uint64_t target_size, draft_size; /* llama.cpp's sequence states */
    float lora_scales[SPECD_MAX_LORA]; /* what the target's cells were made with */
} slot_header;

/* One model's part of the identity: llama.cpp's description, its size, its vocabulary. */
static int describe_model(const struct llama_model *m, char *buf, size_t size) {
    char desc[128];
    llama_model_desc(m, desc, sizeof desc);
    return snprintf(buf, size, "%s, %llu parameters, %d tokens", desc, (unsigned long long)llama_model_n_params(m),
                    llama_vocab_n_tokens(llama_model_get_vocab(m)));
}

/* What the saved cells are only valid for: the models, the slot's context, the cache types. */
static void identity_of(const specd_engine *e, char *buf, size_t size) {
    int n = snprintf(buf, size, "target ");
    n += describe_model(e->target.model, buf + n, size - (size_t)n);
    n += snprintf(buf + n, size - (size_t)n, "; draft ");
    if (e->draft.ctx) n += describe_model(e->draft.model, buf + n, size - (size_t)n);
    else n += snprintf(buf + n, size - (size_t)n, "none");
    snprintf(buf + n, size - (size_t)n, "; %d tokens a slot; cache K %s, V %s", e->n_ctx,
             specd_cache_type_name(e->params.cache_type_k), specd_cache_type_name(e->params.cache_type_v));
}

/* Which slots can go to bytes: an attention cache (a recurrent state keeps checkpoints that do not
 * follow), and no drafting head (its own cache and the target's hidden states do not either). */
static specd_status check_saveable(const specd_engine *e, int32_t slot, char **error) {
    if (slot < 0 || slot >= e->n_parallel) {
        specd_set_error(error, "there is no slot %d: the slots are 0 to %d", slot, e->n_parallel - 1);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (!e->target.can_drop_tail || (e->draft.ctx && !e->draft.can_drop_tail) || e->head) {
        specd_set_error(error, "a slot's cache cannot be saved or restored with %s: its state does not follow the "
                        "cells", e->head ? "a drafting head (MTP, EAGLE-3, DFlash)" : "a recurrent or hybrid model");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    return SPECD_OK;
}

int32_t specd_engine_slot_tokens(specd_engine *e, int32_t slot) {
    if (!e || slot < 0 || slot >= e->n_parallel) return 0;
    return specd_engine_target_view(e, slot)->n_kv;
}

static size_t state_size(const specd_model_slot *v) {
    return v && v->n_kv > 0 ? llama_state_seq_get_size_ext(v->ctx, v->seq, 0) : 0;
}

static bool get_state(const specd_model_slot *v, uint8_t *at, size_t size) {
    return size == 0 || llama_state_seq_get_data_ext(v->ctx, at, size, v->seq, 0) == size;
}

specd_status specd_engine_slot_save(specd_engine *e, int32_t slot, void **data, size_t *size, char **error) {
    if (error) *error = NULL;
    if (!e || !data || !size) {
        specd_set_error(error, "specd_engine_slot_save needs an engine and output pointers");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    *data = NULL;
    *size = 0;
    specd_status st = check_saveable(e, slot, error);
    if (st != SPECD_OK) return st;
    specd_model_slot *t = specd_engine_target_view(e, slot), *d = specd_engine_draft_view(e, slot);
    char identity[1024];
    identity_of(e, identity, sizeof identity);
    slot_header h = {.version = SLOT_VERSION, .identity_len = (uint32_t)strlen(identity), .n_target = t->n_kv,
                     .n_draft = d ? d->n_kv : 0, .target_size = state_size(t), .draft_size = state_size(d)};
    memcpy(h.magic, SLOT_MAGIC, sizeof h.magic);
    memcpy(h.lora_scales, t->lora_scales, sizeof h.lora_scales);
    size_t n = sizeof h + h.identity_len + ((size_t)h.n_target + (size_t)h.n_draft) * sizeof(specd_token) +
               h.target_size + h.draft_size;
    uint8_t *buf = malloc(n), *at = buf;
    if (!buf) {
        specd_set_error(error, "out of memory for the %zu bytes of slot %d's caches", n, slot);
        return SPECD_ERR_NO_MEMORY;
    }
    memcpy(at, &h, sizeof h), at += sizeof h;
    memcpy(at, identity, h.identity_len), at += h.identity_len;
    memcpy(at, t->kv_tokens, (size_t)h.n_target * sizeof(specd_token)), at += (size_t)h.n_target * sizeof(specd_token);
    if (d) memcpy(at, d->kv_tokens, (size_t)h.n_draft * sizeof(specd_token)), at += (size_t)h.n_draft * sizeof(specd_token);
    bool ok = get_state(t, at, h.target_size) && get_state(d, at + h.target_size, h.draft_size);
    if (!ok) {
        free(buf);
        specd_set_error(error, "llama.cpp could not copy slot %d's cells", slot);
        return SPECD_ERR_DECODE;
    }
    *data = buf;
    *size = n;
    return SPECD_OK;
}

/* The header and where each part starts; false with *error when the bytes are not a slot's. */
static bool read_header(const uint8_t *data, size_t size, slot_header *h, char **error) {
    if (size < sizeof *h || memcmp(data, SLOT_MAGIC, 8) != 0) {
        specd_set_error(error, "the file is not a slot saved by specd");
        return false;
    }
    memcpy(h, data, sizeof *h);
    uint64_t need = sizeof *h + (uint64_t)h->identity_len + h->target_size + h->draft_size;
    if (h->version != SLOT_VERSION || h->n_target < 0 || h->n_draft < 0 || h->identity_len > 4096) {
        specd_set_error(error, "the file is a slot saved by another version of specd");
        return false;
    }
    need += ((uint64_t)h->n_target + (uint64_t)h->n_draft) * sizeof(specd_token);
    if (need != size) {
        specd_set_error(error, "the file is cut short or has bytes after its slot (%zu bytes, %llu expected)", size,
                        (unsigned long long)need);
        return false;
    }
    return true;
}

/* Sets view v's cells from `state` and its tokens; false when llama.cpp cannot read them. */
static bool put_state(specd_engine *e, specd_model_slot *v, const uint8_t *state, size_t size, const uint8_t *tokens,
                      int32_t n) {
    if (n == 0) return true;
    if (n > v->cap) return false;
    if (v->inv && specd_invariance_needs_compaction(e, v->inv, v->ctx, n) && specd_invariance_compact(e, NULL) != SPECD_OK)
        return false;
    if (llama_state_seq_set_data_ext(v->ctx, state, size, v->seq, 0) != size) return false;
    if (v->inv) v->inv->cells_used += n;
    memcpy(v->kv_tokens, tokens, (size_t)n * sizeof *v->kv_tokens); /* bytes: the file aligns nothing */
    v->n_kv = n;
    return true;
}

specd_status specd_engine_slot_restore(specd_engine *e, int32_t slot, const void *data, size_t size, int32_t *n_tokens,
                                       char **error) {
    if (error) *error = NULL;
    if (n_tokens) *n_tokens = 0;
    if (!e || !data) {
        specd_set_error(error, "specd_engine_slot_restore needs an engine and the saved bytes");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    specd_status st = check_saveable(e, slot, error);
    slot_header h;
    if (st != SPECD_OK) return st;
    if (!read_header(data, size, &h, error)) return SPECD_ERR_INVALID_ARGUMENT;
    const uint8_t *at = (const uint8_t *)data + sizeof h;
    char identity[1024];
    identity_of(e, identity, sizeof identity);
    if (h.identity_len != strlen(identity) || memcmp(at, identity, h.identity_len) != 0) {
        specd_set_error(error, "the file was saved for another model or context (%.*s), not this one (%s)",
                        (int)(h.identity_len < 600 ? h.identity_len : 600), (const char *)at, identity);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    at += h.identity_len;
    const uint8_t *target_tokens = at, *draft_tokens = at + (size_t)h.n_target * sizeof(specd_token);
    const uint8_t *target_state = draft_tokens + (size_t)h.n_draft * sizeof(specd_token);
    specd_engine_slot_forget(e, slot);
    specd_model_slot *t = specd_engine_target_view(e, slot), *d = specd_engine_draft_view(e, slot);
    bool ok = put_state(e, t, target_state, h.target_size, target_tokens, h.n_target) &&
              (!d || put_state(e, d, target_state + h.target_size, h.draft_size, draft_tokens, h.n_draft));
    if (!ok) {
        specd_engine_slot_forget(e, slot);
        specd_set_error(error, "llama.cpp could not read the saved cells into slot %d (no room in the cache, or "
                        "saved with other context settings such as flash attention)", slot);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    memcpy(t->lora_scales, h.lora_scales, sizeof t->lora_scales);
    if (n_tokens) *n_tokens = h.n_target;
    return SPECD_OK;
}
