/* head_internal.h - the engine's side of a drafting head (head.h): the companion context, its
 * slots' sequences, the target's rows, and what differs between the kinds. Only src/engine sees it. */
#ifndef SPECD_HEAD_INTERNAL_H
#define SPECD_HEAD_INTERNAL_H

#include "engine_internal.h"
#include "features.h"
#include "head.h"


/* One slot's sequence in the companion context. */
typedef struct specd_head_view {
    specd_token *tokens; /* the target tokens its entries depend on: [0, n_kv + lookahead) */
    int32_t n_kv;        /* positions [0, n_kv) hold entries the target confirmed */
    int32_t n_draft;     /* after them, this draft's entries */
} specd_head_view;

struct specd_head;

/* What differs between the kinds (head_mtp.c, head_eagle3.c, head_dflash.c). */
typedef struct specd_head_ops {
    /* Entry p depends on target tokens up to p + lookahead (EAGLE-3 pairs position p with token p+1). */
    int32_t lookahead;
    /* Rows an entry at p reads start at p - row_lag (MTP pairs token p with the hidden state of p-1). */
    int32_t row_lag;
    /* Decodes the entries [view->n_kv, up_to) from the slot's rows and the target's tokens. */
    specd_status (*catch_up)(specd_engine *e, struct specd_head *h, int32_t slot, const specd_token *tokens,
                             int32_t up_to, char **error);
    /* Chains: catches up to the target's end n and decodes the root after it; *logits after the root. */
    specd_status (*start)(specd_engine *e, struct specd_head *h, int32_t slot, const specd_token *tokens, int32_t n,
                          specd_token root, const float **logits, char **error);
    /* Chains: one drafted token after the last; *logits after it. */
    specd_status (*next)(specd_engine *e, struct specd_head *h, int32_t slot, specd_token token, const float **logits,
                         char **error);
} specd_head_ops;

typedef struct specd_head {
    specd_head_kind kind;
    const specd_head_ops *ops;
    struct llama_model *model;   /* the head's: the target's for MTP (not owned), else owned */
    struct llama_context *ctx;   /* the companion context */
    specd_head_view *views;      /* one per slot */
    specd_features *features;    /* the target's rows, one store per slot */
    specd_taps taps;
    struct llama_batch batch;    /* tokens and embedding rows together */
    int32_t batch_cap, batch_width;
    float *prev;                 /* chains: the hidden state the next draft token is paired with */
    float *zeros;                /* MTP: the hidden state before the first token */
    float *scratch;              /* EAGLE-3: the encoder's rows */
    int32_t n_embd;              /* the head's hidden size */
    int32_t block_size;          /* DFlash: the trained block */
    bool drafts_anchor;          /* DSpark: the anchor's position drafts too */
    specd_token mask;            /* DFlash: the mask token */
    bool busy;                   /* inside a head call: the target's decodes do not catch it up again */
    char desc[160];              /* "EAGLE-3 head 'x.gguf'", for messages */
} specd_head;

/* Engine load (engine.c): the head of the draft model file when its architecture is a head's
 * (eagle3, dflash: *is_head true, the model then belongs to the head), or MTP on the target when
 * `mtp`. Loading is engine.c's; this checks the head against the target and makes the context. */
bool specd_head_is_head_model(const struct llama_model *model);
specd_status specd_head_new(specd_engine *e, struct llama_model *head_model, const char *path, bool mtp,
                            char **error);
void specd_head_free(specd_engine *e);

/* The first position whose row the slot needs (MTP's first entry reads none: zeros). */
static inline int32_t specd_head_first_row(const specd_head *h, int32_t slot) {
    int32_t p = h->views[slot].n_kv - h->ops->row_lag;
    return p > 0 ? p : 0;
}

/* ---- for the kinds (head_*.c): head_batch.c ------------------------------------------------------- */

/* Appends one entry to the head's batch: a token (or -1: none), an embedding row (or NULL: none). */
void specd_head_batch_add(specd_head *h, specd_token token, const float *row, int32_t width, int32_t pos, int32_t seq,
                          bool logits);
/* Chains: output i's logits, and its hidden state (width floats) kept as the next draft token's
 * partner (h->prev). */
specd_status specd_head_keep_prev(specd_head *h, int32_t i, int32_t width, const float **logits, char **error);
/* Decodes the head's batch; an error names the head. */
specd_status specd_head_decode(specd_head *h, char **error);
/* The target's row of position pos in slot's store (NULL when missing). */
const float *specd_head_row(const specd_head *h, int32_t slot, int32_t pos);
/* The entries [from, to) are in: the view holds them, their tokens (up to to + lookahead) recorded. */
void specd_head_confirm(specd_head *h, int32_t slot, const specd_token *tokens, int32_t to);

extern const specd_head_ops specd_head_mtp_ops;
extern const specd_head_ops specd_head_eagle3_ops;
extern const specd_head_ops specd_head_dflash_ops;

#endif
