/* state.c - checkpoints of a recurrent or hybrid model's state (kv.c uses them): llama.cpp cannot
 * drop the last tokens of such a state, so the slot saves it before tokens it may have to drop
 * and goes back to it later. Two are kept: one before each step's drafts (rejected drafts), one
 * after the prompt (a later request that shares the prompt, or regenerates it). */
#include "engine_internal.h"

#include "../util/util.h"

#include <stdlib.h>

/* Only the recurrent part (PARTIAL_ONLY): a hybrid model's attention cells before the checkpoint
 * stay valid, and those after it are dropped the usual way. */
#define STATE_FLAGS LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY

specd_status specd_slot_checkpoint(specd_model_slot *slot, specd_checkpoint_kind kind, char **error) {
    if (slot->can_drop_tail) return SPECD_OK;
    specd_state_checkpoint *c = &slot->ckpt[kind];
    double t0 = specd_now_ms();
    size_t size = llama_state_seq_get_size_ext(slot->ctx, slot->seq, STATE_FLAGS);
    if (size > c->cap) {
        uint8_t *grown = realloc(c->data, size);
        if (!grown) {
            specd_set_error(error, "out of memory for a %zu-byte state checkpoint of the %s", size, slot->desc);
            return SPECD_ERR_NO_MEMORY;
        }
        c->data = grown;
        c->cap = size;
    }
    c->pos = -1;
    if (size == 0 || llama_state_seq_get_data_ext(slot->ctx, c->data, size, slot->seq, STATE_FLAGS) != size) {
        specd_set_error(error, "the %s keeps a recurrent state that cannot drop rejected tokens, and llama.cpp "
                        "could not save that state: speculation cannot verify drafts on it; use --spec none "
                        "(speculative.type [\"none\"])", slot->desc);
        return SPECD_ERR_DECODE;
    }
    c->size = size;
    c->pos = slot->n_kv;
    slot->n_checkpoints++;
    slot->checkpoint_ms += specd_now_ms() - t0;
    return SPECD_OK;
}

void specd_slot_forget_checkpoints(specd_model_slot *slot, int32_t n) {
    for (int k = 0; k < SPECD_CHECKPOINT_KINDS; k++)
        if (slot->ckpt[k].pos > n) slot->ckpt[k].pos = -1;
}

/* Puts the slot back to checkpoint c; false (the slot then in an unknown state: clear it) when
 * llama.cpp cannot read it back. */
static bool restore(specd_model_slot *slot, const specd_state_checkpoint *c) {
    double t0 = specd_now_ms();
    if (llama_state_seq_set_data_ext(slot->ctx, c->data, c->size, slot->seq, STATE_FLAGS) == 0) return false;
    /* The recurrent part now sits at c->pos: a hybrid's attention cells after it can go. */
    if (!llama_memory_seq_rm(llama_get_memory(slot->ctx), slot->seq, c->pos, -1)) return false;
    slot->n_kv = c->pos;
    /* llama.cpp's per-token snapshots are of the last decode, not of the state read back: a later
     * truncation must not drop tokens in place by them (kv.c's can_drop_in_place), or it would
     * put back a state of that decode (seen: the MTP head asking for a cached prompt's last row
     * right after a restore). */
    slot->last_decode_n = 0;
    slot->n_restores++;
    slot->restore_ms += specd_now_ms() - t0;
    return true;
}

bool specd_slot_restore_checkpoint(specd_model_slot *slot, int32_t n) {
    specd_slot_forget_checkpoints(slot, n);
    const specd_state_checkpoint *best = NULL;
    for (int k = 0; k < SPECD_CHECKPOINT_KINDS; k++)
        if (slot->ckpt[k].pos >= 0 && (!best || slot->ckpt[k].pos > best->pos)) best = &slot->ckpt[k];
    return best && restore(slot, best);
}

void specd_slot_free_checkpoints(specd_model_slot *slot) {
    for (int k = 0; k < SPECD_CHECKPOINT_KINDS; k++) {
        free(slot->ckpt[k].data);
        slot->ckpt[k] = (specd_state_checkpoint){.pos = -1};
    }
}
