/* head_dflash.c - DFlash and DSpark (llama.cpp's draft-dflash, draft-dspark): their KV cache holds the
 * target's features of each position, injected by decoding the target layers' rows as an embedding
 * batch (the model projects them into K and V). Drafting is one pass over a block (head.c:
 * specd_head_block): the root and masks after it, every position predicted at once. */
#include "head_internal.h"

#include "../util/util.h"

static specd_status dflash_catch_up(specd_engine *e, specd_head *h, int32_t slot, const specd_token *tokens,
                                    int32_t up_to, char **error) {
    (void)e;
    struct llama_batch inject = h->batch; /* the target's rows as they are stored, one per position */
    inject.token = NULL;
    for (int32_t from = h->views[slot].n_kv; from < up_to; from += h->batch_cap) {
        int32_t n = up_to - from < h->batch_cap ? up_to - from : h->batch_cap;
        inject.embd = (float *)specd_head_row(h, slot, from);
        inject.n_tokens = n;
        for (int32_t i = 0; i < n; i++) {
            inject.pos[i] = from + i;
            inject.n_seq_id[i] = 1;
            inject.seq_id[i][0] = slot;
            inject.logits[i] = false;
        }
        if (!inject.embd || llama_decode(h->ctx, inject) != 0) {
            specd_set_error(error, "the %s could not take in the target's hidden states of positions %d to %d",
                            h->desc, from, from + n - 1);
            return SPECD_ERR_DECODE;
        }
        specd_head_confirm(h, slot, tokens, from + n);
    }
    return SPECD_OK;
}

const specd_head_ops specd_head_dflash_ops = {
    .lookahead = 0,
    .row_lag = 0,
    .catch_up = dflash_catch_up,
    .start = NULL,
    .next = NULL,
};
