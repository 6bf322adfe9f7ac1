/* head.h - a drafting head's companion context, owned by the engine.
 *
 * A head drafts from the target's own hidden states: MTP (the target's nextn layer, in an
 * LLAMA_CONTEXT_TYPE_MTP context on the target model), EAGLE-3 (a one-layer draft fed three target
 * layers) and DFlash / DSpark (a block-diffusion draft whose KV cache holds the target's features).
 * The companion context has one sequence per slot that follows the target's history: after each
 * target decode the engine keeps the hidden states the head reads (features.h), and the head takes
 * them in when it catches up, which it does before each draft (in the same decode as the draft's
 * first token where it can) or as soon as they pile up (a long prompt: chunk by chunk). What the
 * target drops, the companion drops (it keeps the longest prefix it shares with the target's tokens);
 * what it lacks rows for (a tree pass, a shift), the target decodes again.
 *
 * How each kind is driven follows the pinned llama.cpp's common/speculative.cpp (head_mtp.c,
 * head_eagle3.c, head_dflash.c). The drafter (src/draft/head_drafter.c) uses only the functions
 * below: it sees logits, never llama.cpp. Every call works on the engine's active slot. */
#ifndef SPECD_HEAD_H
#define SPECD_HEAD_H

#include "specd.h"

#include <stdbool.h>

struct specd_engine;

typedef enum specd_head_kind {
    SPECD_HEAD_NONE = 0,
    SPECD_HEAD_MTP,    /* the target's nextn layer */
    SPECD_HEAD_EAGLE3, /* -md an eagle3 GGUF */
    SPECD_HEAD_DFLASH, /* -md a dflash GGUF without a Markov head */
    SPECD_HEAD_DSPARK, /* -md a dflash GGUF with one (markov_w1) */
} specd_head_kind;

/* ---- for the drafters ------------------------------------------------------------------------ */

specd_head_kind specd_engine_head(const struct specd_engine *e);
/* The head's description for messages ("MTP layers of the target 'x.gguf'"); "" without a head. */
const char *specd_engine_head_desc(const struct specd_engine *e);
/* After a prompt: the companion takes in the target's rows of tokens[0..n) (the target's) now. */
specd_status specd_head_catch_up(struct specd_engine *e, const specd_token *tokens, int32_t n, char **error);
/* Chains (MTP, EAGLE-3): the target holds history[0..n-1); the companion catches up with it and
 * decodes the root history[n-1]: *logits are the head's prediction after the root (NULL when the
 * head cannot draft yet: EAGLE-3 before the target holds a token). */
specd_status specd_head_start(struct specd_engine *e, const specd_token *history, int32_t n, const float **logits,
                              char **error);
/* Chains: *logits after one more drafted token. */
specd_status specd_head_next(struct specd_engine *e, specd_token token, const float **logits, char **error);
/* Blocks (DFlash, DSpark): catches up and decodes the root history[n-1] and n_block - 1 masks
 * after it in one pass; specd_head_block_logits(e, i) is block position i's prediction. */
specd_status specd_head_block(struct specd_engine *e, const specd_token *history, int32_t n, int32_t n_block, char **error);
const float *specd_head_block_logits(struct specd_engine *e, int32_t i);
int32_t specd_head_block_size(const struct specd_engine *e);
bool specd_head_drafts_anchor(const struct specd_engine *e);
/* The draft is over: its entries leave the companion (it keeps what the target confirmed). */
void specd_head_end(struct specd_engine *e);
/* A context shift of the active slot (the target's cache moved the same way). */
void specd_head_shift(struct specd_engine *e, int32_t n_keep, int32_t n_discard);
/* The slot starts over (specd_engine_slot_forget). */
void specd_head_forget_slot(struct specd_engine *e, int32_t slot);

#endif
