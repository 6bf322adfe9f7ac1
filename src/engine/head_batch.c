/* head_batch.c - what the kinds (head_mtp.c, head_eagle3.c, head_dflash.c) build their decodes of the
 * companion context with: its batch, its decode, the target's rows and the entries it confirms.
 * Apart from head.c, which drives the kinds through their ops, so that the kinds and the driver do
 * not use each other. */
#include "head_internal.h"

#include "llama_ext.h"

#include "../util/util.h"

#include <string.h>

void specd_head_confirm(specd_head *h, int32_t slot, const specd_token *tokens, int32_t to) {
    specd_head_view *v = &h->views[slot];
    int32_t covered = to + h->ops->lookahead;
    memcpy(v->tokens, tokens, (size_t)covered * sizeof *tokens);
    v->n_kv = to;
    specd_features_drop_before(&h->features[slot], specd_head_first_row(h, slot));
}

const float *specd_head_row(const specd_head *h, int32_t slot, int32_t pos) {
    return pos < 0 ? h->zeros : specd_features_row(&h->features[slot], pos);
}

void specd_head_batch_add(specd_head *h, specd_token token, const float *row, int32_t width, int32_t pos, int32_t seq,
                          bool logits) {
    struct llama_batch *b = &h->batch;
    int32_t i = b->n_tokens++;
    b->token[i] = token;
    if (row) memcpy(b->embd + (size_t)i * (size_t)width, row, (size_t)width * sizeof *row);
    b->pos[i] = pos;
    b->n_seq_id[i] = 1;
    b->seq_id[i][0] = seq;
    b->logits[i] = logits;
}

specd_status specd_head_keep_prev(specd_head *h, int32_t i, int32_t width, const float **logits, char **error) {
    const float *row = specd_ext_nextn_row(h->ctx, i);
    *logits = llama_get_logits_ith(h->ctx, i);
    if (!row || !*logits) {
        specd_set_error(error, "llama.cpp gave no output for the %s's draft", h->desc);
        return SPECD_ERR_DECODE;
    }
    memcpy(h->prev, row, (size_t)width * sizeof *h->prev);
    return SPECD_OK;
}

specd_status specd_head_decode(specd_head *h, char **error) {
    int32_t rc = llama_decode(h->ctx, h->batch);
    if (rc == 0) llama_synchronize(h->ctx); /* the head's cost is measured: wait for a GPU (kv.c) */
    int32_t n = h->batch.n_tokens;
    h->batch.n_tokens = 0;
    if (rc == 0) return SPECD_OK;
    specd_set_error(error, "llama_decode failed (code %d) on %d tokens of the %s", rc, n, h->desc);
    return SPECD_ERR_DECODE;
}
