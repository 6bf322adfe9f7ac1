/* head_mtp.c - MTP: the target's nextn layer in an LLAMA_CONTEXT_TYPE_MTP context on the target
 * model (llama.cpp's draft-mtp). Its entry at position p pairs token p with the target's hidden state
 * after token p-1 (zeros before the first token): the nextn layer then predicts token p+1. Drafting
 * decodes the root with the target's last hidden state, then each drafted token with the hidden
 * state the layer itself output for the token before it. */
#include "head_internal.h"

#include "../util/util.h"

#include <string.h>

static int32_t row_width(const specd_head *h) { return h->batch_width; }

/* Adds the entries [from, to) of the slot: token p with the target's row of p-1. With `outputs`
 * each is an output (see mtp_start). */
static void add_entries(specd_head *h, int32_t slot, const specd_token *tokens, int32_t from, int32_t to,
                        bool outputs) {
    for (int32_t p = from; p < to; p++)
        specd_head_batch_add(h, tokens[p], specd_head_row(h, slot, p - 1), row_width(h), p, slot, outputs);
}

static specd_status mtp_catch_up(specd_engine *e, specd_head *h, int32_t slot, const specd_token *tokens,
                                 int32_t up_to, char **error) {
    (void)e;
    for (int32_t from = h->views[slot].n_kv; from < up_to; from += h->batch_cap) {
        int32_t to = from + h->batch_cap < up_to ? from + h->batch_cap : up_to;
        add_entries(h, slot, tokens, from, to, false);
        specd_status st = specd_head_decode(h, error);
        if (st != SPECD_OK) return st;
        specd_head_confirm(h, slot, tokens, to);
    }
    return SPECD_OK;
}

/* The entries the target confirmed and the root in one decode (a long catch-up goes first). Every
 * entry of it is an output: llama.cpp reads the hidden states of a decode's first outputs (the
 * graph's rows, not the outputs'), so the root's would be another token's if only it were one (the
 * pinned common/speculative.cpp decodes the root alone instead; one decode is cheaper). */
static specd_status mtp_start(specd_engine *e, specd_head *h, int32_t slot, const specd_token *tokens, int32_t n,
                              specd_token root, const float **logits, char **error) {
    int32_t from = n - (h->batch_cap - 1);
    specd_status st = from > h->views[slot].n_kv ? mtp_catch_up(e, h, slot, tokens, from, error) : SPECD_OK;
    if (st != SPECD_OK) return st;
    add_entries(h, slot, tokens, h->views[slot].n_kv, n, true);
    int32_t last = h->batch.n_tokens;
    specd_head_batch_add(h, root, specd_head_row(h, slot, n - 1), row_width(h), n, slot, true);
    st = specd_head_decode(h, error);
    if (st != SPECD_OK) return st;
    /* the root's entry holds confirmed inputs only (the root and the target's row): it stays */
    specd_head_confirm(h, slot, tokens, n + 1);
    return specd_head_keep_prev(h, last, row_width(h), logits, error);
}

static specd_status mtp_next(specd_engine *e, specd_head *h, int32_t slot, specd_token token, const float **logits,
                             char **error) {
    (void)e;
    specd_head_view *v = &h->views[slot];
    specd_head_batch_add(h, token, h->prev, row_width(h), v->n_kv + v->n_draft, slot, true);
    specd_status st = specd_head_decode(h, error);
    if (st != SPECD_OK) return st;
    v->n_draft++;
    return specd_head_keep_prev(h, 0, row_width(h), logits, error);
}

const specd_head_ops specd_head_mtp_ops = {
    .lookahead = 0,
    .row_lag = 1,
    .catch_up = mtp_catch_up,
    .start = mtp_start,
    .next = mtp_next,
};
