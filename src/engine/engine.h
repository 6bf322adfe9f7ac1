/* engine.h - what the engine offers the layers above it (sample, verify, draft, session): views of
 * its two contexts, one per slot (opaque), kept in step with a token history; tree passes and
 * draft branches decoded; checkpoints of recurrent states; context shift; the grammar engine
 * (grammar_engine.h); and a place for what the drafters learn across requests. No llama.cpp type
 * appears here: llama.h is included by src/engine/ alone (engine_internal.h), so the layers above
 * reach llama.cpp only through these functions and the public specd.h. */
#ifndef SPECD_ENGINE_H
#define SPECD_ENGINE_H

#include "specd.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A llama context plus the tokens one of its sequences (a slot's) holds (engine_internal.h). */
typedef struct specd_model_slot specd_model_slot;

/* Before a step's drafts (rejected drafts), and after the prompt (the prompt cache). */
typedef enum { SPECD_CHECKPOINT_STEP, SPECD_CHECKPOINT_PROMPT, SPECD_CHECKPOINT_KINDS } specd_checkpoint_kind;

/* ---- the engine ------------------------------------------------------------------------------ */

/* The active slot's views of the target and the draft context (specd_engine_use_slot); the draft
 * view holds no context without a draft model (specd_engine_has_draft). */
specd_model_slot *specd_engine_target(const specd_engine *e);
specd_model_slot *specd_engine_draft(const specd_engine *e);
/* The most tokens one decode holds (a target pass's tree, prompt chunks, joint drafts). */
int32_t specd_engine_batch_cap(const specd_engine *e);
/* Whether trees drafted where they pay (SPECD_DRAFT_TREE_AUTO) may be trees with this engine, or
 * are drafted as chains: chains under plain attention with invariance (invariance.h: a token's
 * cell index sets its sums there, and a side branch's tokens sit past the cells of their
 * positions, so trees would not be bit for bit), and with the target's layers on a GPU, where
 * trees were measured to lose to chains (docs/benchmarks-gpu.md: a pass's cost steps up at 9
 * rows, and passes of changing size replay no CUDA graph). A forced tree is drafted wherever the
 * contexts keep several sequences (not specd_engine_one_sequence). */
bool specd_engine_auto_trees(const specd_engine *e);
/* Whether the engine's contexts keep one sequence each (one slot, the target on a GPU: engine.c
 * says why): trees are then drafted as chains, forced or not. */
bool specd_engine_one_sequence(const specd_engine *e);
/* Whether `token` is a position of an image the engine holds (images.h; negative tokens). */
bool specd_engine_image_known(const specd_engine *e, specd_token token);
/* specd_engine_request_stop calls so far: a session began before the latest is to stop. */
unsigned specd_engine_stop_count(const specd_engine *e);

/* What the calibration cache keys its file on (draft/calibrate.c), as the engine runs. */
typedef struct specd_engine_setup {
    const char *target_path, *draft_path;   /* the engine's copies (draft NULL: none) */
    const char *calibration_cache;          /* the engine's copy of params.calibration_cache, or NULL */
    int32_t n_threads, n_batch;
    int32_t n_threads_batch;                /* 0: n_threads */
    specd_flash_attn flash_attn;
    specd_cache_type cache_type_v;          /* as the engine resolved it (never DEFAULT) */
    specd_draft_hold draft_hold;
    char placement[400];                    /* "target=CUDA0:33/33;draft=..." when a layer of either
                                             * model is offloaded, else "" */
} specd_engine_setup;
void specd_engine_setup_of(const specd_engine *e, specd_engine_setup *out);
/* llama.cpp's system info (its backends and CPU features): what the cache's backend hash is of. */
const char *specd_engine_backend_info(void);

/* The target model's shape, for what the cache fill costs a pass (draft/learned.c). */
typedef struct specd_model_shape {
    double n_params;
    int32_t n_layer, n_embd;
    bool recurrent;   /* recurrent or hybrid: no cells to read */
    bool offloaded;   /* some layer runs off the CPU */
    bool remote;      /* offloaded to llama.cpp's rpc-servers alone (whose devices, CPU or GPU, are not known) */
} specd_model_shape;
specd_model_shape specd_engine_target_shape(const specd_engine *e);

/* What the layers above learn across requests (draft/learned.h), which the engine holds without
 * knowing its type, and frees with `free_learned` (set with it). NULL until kept. */
struct specd_learned;
struct specd_learned *specd_engine_learned(const specd_engine *e);
void specd_engine_keep_learned(specd_engine *e, struct specd_learned *learned,
                               void (*free_learned)(struct specd_learned *learned));

/* ---- a view's state -------------------------------------------------------------------------- */

/* Tokens the view's sequence holds. */
int32_t specd_slot_n_kv(const specd_model_slot *slot);
/* Tree branches the view may decode (1: chains only). */
int32_t specd_slot_n_seq_max(const specd_model_slot *slot);
/* False for recurrent and hybrid models: llama.cpp cannot drop the last tokens of their state,
 * so the view keeps checkpoints (state.c) and goes back to one, or starts over. */
bool specd_slot_can_drop_tail(const specd_model_slot *slot);
/* "target model (mamba, recurrent)", for messages. */
const char *specd_slot_desc(const specd_model_slot *slot);
/* What the view has spent on its recurrent state so far (checkpoints, restores, re-decodes), ms. */
double specd_slot_state_ms(const specd_model_slot *slot);

/* ---- keeping views in step ------------------------------------------------------------------- */

/* engine.c: makes slot `slot`'s views the active ones (specd_engine_target, specd_engine_draft). */
void specd_engine_use_slot(specd_engine *e, int32_t slot);

/* kv.c: keeping slot contents in step with the token history. */

/* Makes the slot hold exactly tokens[0..n): keeps the longest common prefix (its length goes to
 * *n_reused when not NULL), decodes the rest in chunks. With want_logits the last token's logits
 * are available at batch index *logits_idx. */
specd_status specd_slot_sync(specd_engine *e, specd_model_slot *slot, const specd_token *tokens,
                             int32_t n, bool want_logits, int32_t *logits_idx, int32_t *n_reused,
                             char **error);
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
    /* Tokens after a chain (one branch, not a prompt chunk) that only keep the pass at the size of
     * the one before, so llama.cpp reuses its graph and a GPU replays it (the session pads where a
     * change of size costs more than the padding: costs.h, specd_costs_padding): the chain's last
     * token again at the next positions, with logits, dropped from the cache after the pass. They
     * change no other token's logits where the passes are batch-invariant (invariance.h); where the
     * slot's context has no room for them, or a head reads the pass, there is none. */
    int32_t n_padding;
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
/* tokens.c: whether the model adds a BOS token and `token` is it (a shift keeps it). */
bool specd_token_is_added_bos(const specd_engine *e, specd_token token);

/* Whether the slot's KV cache can move positions (llama_memory_can_shift), never for a recurrent
 * or hybrid model (their state cannot drop tokens in the middle). */
bool specd_slot_can_shift(const specd_model_slot *slot);
/* Context shift: drops positions [n_keep, n_keep + n_discard) and moves those after them back
 * by n_discard (RoPE shift, nothing re-evaluated), so the slot holds the history with those
 * tokens cut out. A slot that cannot shift is truncated to n_keep instead (the next sync
 * re-decodes the rest). */
void specd_slot_shift(specd_model_slot *slot, int32_t n_keep, int32_t n_discard);

/* ---- draft branches (draft/draft_tree.c) ----------------------------------------------------- */

/* One token of a branch pass: at position `pos` of branch `branch` (0: the view's own sequence). */
typedef struct specd_branch_token {
    specd_token token;
    int32_t pos;
    int32_t branch;
} specd_branch_token;

/* Branch `to` starts as a copy of branch `from` (what it held is dropped first). */
void specd_slot_copy_branch(specd_model_slot *slot, int32_t from, int32_t to);
/* One decode of n tokens on the view's branches, every token with logits (batch index i = token i,
 * read with specd_slot_logits). */
specd_status specd_slot_decode_branches(specd_engine *e, specd_model_slot *slot, const specd_branch_token *tokens,
                                        int32_t n, char **error);

/* ---- the two vocabularies (vocab_pair.c) ------------------------------------------------------ */

/* Which model's vocabulary: the target's (the tokens every session emits) or the draft's. */
typedef enum { SPECD_VOCAB_TARGET, SPECD_VOCAB_DRAFT } specd_vocab_side;

/* Whether the draft model tokenizes text its own way: its views then hold tokens of its vocabulary,
 * and drafts go through text (draft/vocab_bridge.h). False without a draft model. */
bool specd_engine_draft_vocab_differs(const specd_engine *e);
/* The side's vocabulary size (0 for the draft without a draft model). */
int32_t specd_vocab_n_tokens(const specd_engine *e, specd_vocab_side side);
/* Tokens of text[0..len) in the side's vocabulary, as plain text (no BOS/EOS added, special-token
 * text not parsed; a tokenizer that prefixes a space still does): the count, or minus the count
 * needed when cap is too small. */
int32_t specd_vocab_tokenize(const specd_engine *e, specd_vocab_side side, const char *text, int32_t len,
                             specd_token *out, int32_t cap);
/* The text of one token (control tokens: none): its length, or minus the length needed. */
int32_t specd_vocab_piece(const specd_engine *e, specd_vocab_side side, specd_token token, char *buf, int32_t cap);
/* Whether the token ends a generation in the side's vocabulary. */
bool specd_vocab_is_eog(const specd_engine *e, specd_vocab_side side, specd_token token);
/* The BOS token the side's tokenizer puts before a prompt, or -1 when it adds none. */
specd_token specd_vocab_added_bos(const specd_engine *e, specd_vocab_side side);
/* The side's end-of-sequence token, or -1. */
specd_token specd_vocab_eos(const specd_engine *e, specd_vocab_side side);

/* ---- LoRA adapters (lora.c) ------------------------------------------------------------------- */

/* The slot will decode with `scales` (specd_engine_n_lora of them): when its cache was computed
 * with others, it is emptied first. */
void specd_slot_use_lora(specd_engine *e, specd_model_slot *view, const float *scales);
/* A generation's lora_scales: NULL (the engine's) or one finite scale per adapter. */
specd_status specd_lora_validate(const specd_engine *e, const float *scales, int32_t n, char **error);
/* The scales a generation decodes with: its own, or NULL's, the engine's defaults. */
const float *specd_lora_scales_of(const specd_engine *e, const float *scales);

#endif
