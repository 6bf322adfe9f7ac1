/* head_eagle3.c - EAGLE-3 (llama.cpp's draft-eagle3): its encoder fuses the three target layers of a
 * position into one row g (llama_encode), and its decoder's entry at position p pairs token p+1 with
 * g of position p, predicting token p+2. Drafting decodes the root with the target's last g, then each
 * drafted token with the decoder's own hidden state (before its output norm) for the token before. */
#include "head_internal.h"

#include "../util/util.h"

#include "llama_ext.h"

#include <string.h>

/* The encoder's rows for target positions [from, to) into h->scratch (to - from at most a batch). */
static specd_status encode(specd_head *h, int32_t slot, int32_t from, int32_t to, char **error) {
    const float *features = specd_head_row(h, slot, from);
    if (to <= from) return SPECD_OK;
    struct llama_batch b = {.n_tokens = to - from, .embd = (float *)features};
    const float *g = llama_encode(h->ctx, b) == 0 ? specd_ext_nextn_rows(h->ctx) : NULL;
    if (!features || !g) {
        specd_set_error(error, "the %s could not encode the target's hidden states of positions %d to %d", h->desc,
                        from, to - 1);
        return SPECD_ERR_DECODE;
    }
    memcpy(h->scratch, g, (size_t)(to - from) * (size_t)h->n_embd * sizeof *h->scratch);
    return SPECD_OK;
}

/* Adds the entries [from, to): token p+1 with g of p (h->scratch holds g from `from` on). With
 * `outputs` each is an output: the decoder's graph outputs every row, and llama.cpp keeps the
 * first n_outputs of them (see head_mtp.c). */
static void add_entries(specd_head *h, int32_t slot, const specd_token *tokens, int32_t from, int32_t to,
                        bool outputs) {
    for (int32_t p = from; p < to; p++)
        specd_head_batch_add(h, tokens[p + 1], h->scratch + (size_t)(p - from) * (size_t)h->n_embd, h->n_embd, p, slot,
                             outputs);
}

static specd_status eagle3_catch_up(specd_engine *e, specd_head *h, int32_t slot, const specd_token *tokens,
                                    int32_t up_to, char **error) {
    (void)e;
    for (int32_t from = h->views[slot].n_kv; from < up_to; from += h->batch_cap) {
        int32_t to = from + h->batch_cap < up_to ? from + h->batch_cap : up_to;
        specd_status st = encode(h, slot, from, to, error);
        if (st == SPECD_OK) add_entries(h, slot, tokens, from, to, false);
        if (st == SPECD_OK) st = specd_head_decode(h, error);
        if (st != SPECD_OK) return st;
        specd_head_confirm(h, slot, tokens, to);
    }
    return SPECD_OK;
}

/* The target holds tokens[0..n): entries [n_kv, n-1) and the root's (root, g of n-1) at n-1, in one
 * decode (a long catch-up goes first). */
static specd_status eagle3_start(specd_engine *e, specd_head *h, int32_t slot, const specd_token *tokens, int32_t n,
                                 specd_token root, const float **logits, char **error) {
    if (n < 1) { /* the root's entry pairs it with the target's last position: none yet */
        *logits = NULL;
        return SPECD_OK;
    }
    int32_t from = n - h->batch_cap;
    specd_status st = from > h->views[slot].n_kv ? eagle3_catch_up(e, h, slot, tokens, from, error) : SPECD_OK;
    int32_t first = h->views[slot].n_kv;
    if (st == SPECD_OK) st = encode(h, slot, first, n, error);
    if (st != SPECD_OK) return st;
    add_entries(h, slot, tokens, first, n - 1, true);
    int32_t last = h->batch.n_tokens;
    specd_head_batch_add(h, root, h->scratch + (size_t)(n - 1 - first) * (size_t)h->n_embd, h->n_embd, n - 1, slot,
                         true);
    st = specd_head_decode(h, error);
    if (st != SPECD_OK) return st;
    /* the root's entry holds confirmed inputs only: it stays (the tokens through the root) */
    specd_head_confirm(h, slot, tokens, n);
    return specd_head_keep_prev(h, last, h->n_embd, logits, error);
}

static specd_status eagle3_next(specd_engine *e, specd_head *h, int32_t slot, specd_token token, const float **logits,
                                char **error) {
    (void)e;
    specd_head_view *v = &h->views[slot];
    specd_head_batch_add(h, token, h->prev, h->n_embd, v->n_kv + v->n_draft, slot, true);
    specd_status st = specd_head_decode(h, error);
    if (st != SPECD_OK) return st;
    v->n_draft++;
    return specd_head_keep_prev(h, 0, h->n_embd, logits, error);
}

const specd_head_ops specd_head_eagle3_ops = {
    .lookahead = 1,
    .row_lag = 0,
    .catch_up = eagle3_catch_up,
    .start = eagle3_start,
    .next = eagle3_next,
};
