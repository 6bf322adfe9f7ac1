/* engine_internal.h - the engine's state, shared by the engine, drafter and session code.
 * Nothing outside src/ sees it; nothing in it knows about JSON. */
#ifndef SPECD_ENGINE_INTERNAL_H
#define SPECD_ENGINE_INTERNAL_H

#include "llama.h"
#include "placement.h"
#include "specd.h"

#include <stdatomic.h>

/* A saved state of a slot's sequence (state.c): the state after its first `pos` tokens. */
typedef struct specd_state_checkpoint {
    uint8_t *data;
    size_t size, cap;
    int32_t pos; /* -1: none */
} specd_state_checkpoint;

/* Before a step's drafts (rejected drafts), and after the prompt (the prompt cache). */
typedef enum { SPECD_CHECKPOINT_STEP, SPECD_CHECKPOINT_PROMPT, SPECD_CHECKPOINT_KINDS } specd_checkpoint_kind;

/* A llama context plus the tokens one of its sequences (`seq`, a slot's) holds, position by
 * position. Knowing the exact contents lets every step reuse the longest common prefix instead of
 * re-decoding. Several of these views share one context, one per slot; a tree's branches other
 * than the first use the slot's scratch sequences from branch_base on (keep_branch clears them),
 * so the trees of every slot can be decoded in one pass. */
typedef struct specd_model_slot {
    struct llama_model *model;
    struct llama_context *ctx;
    specd_token *kv_tokens;
    int32_t n_kv;
    int32_t cap;        /* = the slot's n_ctx */
    int32_t n_seq_max;  /* tree branches this view may decode */
    int32_t seq;        /* the slot's sequence id */
    int32_t branch_base; /* sequence id of branch 1 (each slot has its own scratch sequences) */
    int32_t logits_offset; /* where the slot's tokens start in the last decode's batch */
    /* false for recurrent and hybrid models: llama.cpp cannot drop the last tokens of their
     * state, so the slot keeps checkpoints (saved before tokens it may have to drop) and goes
     * back to one, or starts over where it has none. */
    bool can_drop_tail;
    specd_state_checkpoint ckpt[SPECD_CHECKPOINT_KINDS];
    char desc[96];      /* "target model (mamba, recurrent)", for messages */
    /* Per-token rollback (llama.cpp's n_rs_seq snapshots, on the architectures that have it): the
     * state after each of the last n_rs_seq tokens of the latest decode is kept, so dropping up to
     * min(n_rs_seq, last_decode_n - 1) tokens needs no checkpoint. 0: none. */
    int32_t n_rs_seq;
    int32_t last_decode_n; /* tokens in the latest decode (one ubatch); 0 after a rollback */
    /* What checkpoints cost (the cost model counts them per step). */
    int64_t n_checkpoints, n_restores, n_rollbacks;
    double checkpoint_ms, restore_ms, redecode_ms; /* redecode: tokens decoded again after going back */
    int32_t lost_until; /* positions before it that going back dropped and the next sync decodes again */
    specd_placement placement; /* where its layers are (placement.h) */
    /* Target views with a drafting head: the target's hidden states the head reads, by position
     * (features.h; the head owns them). NULL otherwise. */
    struct specd_features *features;
} specd_model_slot;

struct specd_engine {
    specd_engine_params params;
    /* The caller's calibration_cache, copied: the file is opened at the first request, when
     * the caller's string may be gone (JSON-RPC init frees its flags after the load). */
    char *calibration_cache;
    char *target_path;
    char *draft_path;
    specd_model_slot target;
    specd_model_slot draft;   /* ctx == NULL without a draft model */
    /* A drafting head's companion context (head.h): the target's MTP layers, or an EAGLE-3 or
     * DFlash model given as the draft. NULL without one. */
    struct specd_head *head;
    /* Slots: views of the two contexts, one per slot. e->target and e->draft hold the active
     * slot's views (every caller uses them); specd_engine_use_slot swaps another in. */
    int32_t n_parallel;
    int32_t active_slot;
    specd_model_slot *target_views;
    specd_model_slot *draft_views;
    const struct llama_vocab *vocab;
    int32_t n_vocab;
    int32_t n_ctx;
    int32_t n_batch;
    struct llama_batch batch; /* one batch, reused for every decode */
    int32_t batch_cap;
    atomic_uint stop_requests; /* specd_engine_request_stop calls so far: sessions older than one stop */
    int64_t draft_decodes;     /* llama_decode calls on the draft context so far (kv.c; tests count them) */
    /* What the layers above learn across requests (costs, drafters' memory: draft/learned.h),
     * created by them on first use and freed through free_learned: the engine does not know its
     * type, so it stays below them. NULL until used. */
    struct specd_learned *learned;
    void (*free_learned)(struct specd_learned *learned);
};

/* engine.c: installs specd's llama.cpp logger and initializes the backends, once per process. */
void specd_llama_init(void);

/* engine.c: flash attention and the V cache type of both contexts, from the engine's params
 * (tests give their reference contexts the same, so logits compare exactly). */
void specd_apply_attention_settings(const specd_engine_params *p, struct llama_context_params *cp);

/* engine.c: makes slot `slot`'s views the active ones (e->target, e->draft). */
void specd_engine_use_slot(specd_engine *e, int32_t slot);

/* compat.c: llama.cpp's draft/target vocabulary compatibility rules. */
specd_status specd_check_vocab_compatible(const struct llama_model *target,
                                          const struct llama_model *draft, char **error);

/* kv.c: keeping slot contents in step with the token history. */

/* Makes the slot hold exactly tokens[0..n): keeps the longest common prefix (its length goes to
 * *n_reused when not NULL), decodes the rest in chunks. With want_logits the last token's logits
 * are available at batch index *logits_idx. */
specd_status specd_slot_sync(specd_engine *e, specd_model_slot *slot, const specd_token *tokens,
                             int32_t n, bool want_logits, int32_t *logits_idx, int32_t *n_reused,
                             char **error);
/* The target's outputs (a head's rows, head.h) for its cached positions [from, to) again: an
 * attention cache decodes them in the slot's scratch sequence over a copy of its cells before
 * `from`, leaving its own sequence as it was; a recurrent state drops them and decodes them again. */
specd_status specd_slot_redecode(specd_engine *e, specd_model_slot *slot, const specd_token *tokens, int32_t from,
                                 int32_t to, char **error);
/* Drops everything from position `n` on (of the slot's own sequence). A recurrent state that cannot
 * drop them goes back to its checkpoint, or is cleared: the slot may then hold fewer than n tokens
 * (n_kv says how many; the next sync decodes the rest again). */
void specd_slot_truncate(specd_model_slot *slot, int32_t n);
/* state.c: saves the state of a slot that cannot drop tokens (no-op for attention caches) as its
 * checkpoint of that kind, so a later truncate can come back to the current n_kv. An error names
 * the model when llama.cpp cannot save it. */
specd_status specd_slot_checkpoint(specd_model_slot *slot, specd_checkpoint_kind kind, char **error);
/* Forgets the checkpoints after position n (n < 0: all). */
void specd_slot_forget_checkpoints(specd_model_slot *slot, int32_t n);
/* Goes back to the latest checkpoint at or before position n (n_kv becomes its position); false
 * when there is none or llama.cpp cannot restore it (the caller then clears the slot). */
bool specd_slot_restore_checkpoint(specd_model_slot *slot, int32_t n);
void specd_slot_free_checkpoints(specd_model_slot *slot);
/* specd_slot_sync with logits for n_views views of one context (n different slots) at once: each
 * keeps its longest common prefix with its tokens, and what all of them miss goes in ONE decode
 * (a catch-up longer than the batch, or a recurrent state's, goes first in chunks of its own, the
 * last tokens still together), so several slots' drafts cost one catch-up pass, not one each.
 * View i's last token has logits at batch index logits_idx[i]. On failure what the decode wrote
 * is forgotten (the next sync decodes it again). */
specd_status specd_slots_sync(specd_engine *e, specd_model_slot *const *views, const specd_token *const *tokens,
                              const int32_t *n, int32_t n_views, int32_t *logits_idx, char **error);
/* Decodes one token at the end of the slot, with logits (batch index 0). */
specd_status specd_slot_push(specd_engine *e, specd_model_slot *slot, specd_token token, char **error);
/* One token of a tree pass: its depth under the root and the branches (sequence ids) through it. */
typedef struct specd_tree_token {
    specd_token token;
    int32_t depth;       /* 0 = the root, at position pos_root */
    uint32_t seq_mask;   /* bit s: in branch s (sequence s of the context) */
} specd_tree_token;

/* One pass over a token tree under the root at pos_root (the slot holds positions before it):
 * branches other than 0 share the history through their own sequence ids, every token gets
 * logits (batch index i = token i, read with specd_slot_logits). On failure the tree's positions
 * are dropped again. *ms: the time of the decode itself. */
specd_status specd_slot_decode_tree(specd_engine *e, specd_model_slot *slot, const specd_tree_token *tokens,
                                    int32_t n_tokens, int32_t n_branches, int32_t pos_root, double *ms,
                                    char **error);
/* One slot's part of a joint pass (specd_slots_decode_trees). */
typedef struct specd_tree_pass {
    specd_model_slot *slot; /* the slot's view (the active one or one of the engine's stored views) */
    const specd_tree_token *tokens;
    int32_t n_tokens, n_branches, pos_root;
    /* A chunk of the slot's prompt instead of a tree: a chain (depths 0..n-1, branch 0) at the end
     * of the slot's cache, no logits; once decoded it is kept in the slot's token list. */
    bool prompt_chunk;
    /* A prompt chunk that ends with the root of the session's first step: that last token alone
     * gets logits (the slot's logits start there), so the first token is verified in this pass. */
    bool ends_at_root;
} specd_tree_pass;
/* The trees of several slots in ONE llama_decode (their tokens together at most the engine's
 * batch); each slot's logits are then read with specd_slot_logits on its view as after a pass of
 * its own. On failure every tree's positions are dropped again. *ms: the time of the decode. */
specd_status specd_slots_decode_trees(specd_engine *e, const specd_tree_pass *passes, int32_t n_passes, double *ms,
                                      char **error);
/* The view of slot `slot`: e->target when it is the active one, else the stored one. */
specd_model_slot *specd_engine_target_view(specd_engine *e, int32_t slot);
/* The target context's used cells, every slot's (idle slots keep their prompt caches): each costs
 * a pass's tokens a little even where masked out (draft_length.h, the cache fill). */
int64_t specd_engine_target_cells(specd_engine *e);
/* The same for the draft context (NULL without a draft model). */
specd_model_slot *specd_engine_draft_view(specd_engine *e, int32_t slot);
/* One token at the end of each of n views of one context (n different slots), all in ONE decode,
 * each with logits (batch index i = views[i]'s token). *ms: the decode's time. */
specd_status specd_slots_push(specd_engine *e, specd_model_slot *const *views, const specd_token *tokens, int32_t n,
                              double *ms, char **error);

/* After a tree pass: keeps branch `keep`'s path through `path` (the root's token then the accepted
 * ones, n_path in all) as sequence 0 and drops every other branch. A recurrent slot may end up
 * holding only the tokens before the root (see specd_slot_truncate). */
void specd_slot_keep_branch(specd_model_slot *slot, int32_t keep, int32_t n_branches, int32_t pos_root,
                            const specd_token *path, int32_t n_path);
/* The logits of batch index i of the slot's last decode. */
const float *specd_slot_logits(const specd_model_slot *slot, int32_t i);

/* tokens.c: whether `token` ends a generation (llama_vocab_is_eog). */
bool specd_token_is_eog(const specd_engine *e, specd_token token);

/* Whether the slot's KV cache can move positions (llama_memory_can_shift), never for a recurrent
 * or hybrid model (their state cannot drop tokens in the middle). */
bool specd_slot_can_shift(const specd_model_slot *slot);
/* Context shift: drops positions [n_keep, n_keep + n_discard) and moves those after them back
 * by n_discard (RoPE shift, nothing re-evaluated), so the slot holds the history with those
 * tokens cut out. A slot that cannot shift is truncated to n_keep instead (the next sync
 * re-decodes the rest). */
void specd_slot_shift(specd_model_slot *slot, int32_t n_keep, int32_t n_discard);

#endif
