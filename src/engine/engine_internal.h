/* engine_internal.h - the engine's state and what its files share with llama.cpp's types: the
 * files of src/engine/ only (and tests of the engine's pieces); the layers above use engine.h. */
#ifndef SPECD_ENGINE_INTERNAL_H
#define SPECD_ENGINE_INTERNAL_H

#include "engine.h"
#include "invariance.h"
#include "llama.h"
#include "placement.h"

#include <stdatomic.h>

/* The largest tree pass whose first branch kv.c lays in place (larger ones are decoded again). */
#define SPECD_TREE_ROWS_MAX 128

/* A saved state of a slot's sequence (state.c): the state after its first `pos` tokens. */
typedef struct specd_state_checkpoint {
    uint8_t *data;
    size_t size, cap;
    int32_t pos; /* -1: none */
} specd_state_checkpoint;

/* A llama context plus the tokens one of its sequences (`seq`, a slot's) holds, position by
 * position. Knowing the exact contents lets every step reuse the longest common prefix instead of
 * re-decoding. Several of these views share one context, one per slot; a tree's branches other
 * than the first use the slot's scratch sequences from branch_base on (keep_branch clears them),
 * so the trees of every slot can be decoded in one pass. */
struct specd_model_slot {
    struct llama_model *model;
    struct llama_context *ctx;
    specd_token *kv_tokens;
    int32_t n_kv;
    int32_t cap;        /* = the slot's n_ctx */
    int32_t n_seq_max;  /* tree branches this view may decode */
    int32_t seq;        /* the slot's sequence id */
    int32_t branch_base; /* sequence id of branch 1 (each slot has its own scratch sequences) */
    int32_t logits_offset; /* where the slot's tokens start in the last decode's batch */
    /* Plain invariant attention (kv.c, main_branch_first): the last tree pass put its first
     * branch's tokens first, so token i's logits are at row tree_rows[i]; in_place holds that
     * branch's tokens, one per depth, whose cells follow the slot's in position order. Only one
     * slot runs under plain invariance, so views never swap these. */
    bool rows_reordered;
    int16_t tree_rows[SPECD_TREE_ROWS_MAX];
    specd_token in_place[SPECD_TREE_ROWS_MAX];
    int32_t n_in_place;
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
    /* Catch-ups of a few tokens go in passes of one token, each with its logits: every pass then
     * has the shape of a draft decode, so llama.cpp reuses its graph and a GPU backend replays its
     * captured CUDA graph; a two-token catch-up between one-token drafts rebuilt both each step
     * (H200: llama-speculative, whose draft passes are all one token, lost 37% without CUDA graphs;
     * specd's draft reused its graph in 125 of 230 passes). Set for every draft: on the CPU it
     * costs nothing measurable (2026-12-08: 0.995-1.051x on both pairs at t 0 and 1) and the
     * draft's graph is reused on 97-99% of its passes on the F32 pair (65-91% before). */
    bool one_token_passes;
    /* Passes of several slots padded to one shape (kv.c: pads_joint_passes), for the same reason.
     * Set for a draft with layers on a GPU: on the CPU, where a rebuild costs next to nothing, 4
     * clients on the Q8_0 benchmark pair served 0.85x as fast with it (F32 1.0x). */
    bool pads_joint_passes;
    /* Target views with a drafting head: the target's hidden states the head reads, by position
     * (features.h; the head owns them). NULL otherwise. */
    struct specd_features *features;
    /* The engine's batch invariance (invariance.h) for the target's views; NULL for the draft's. */
    specd_invariance *inv;
    /* The LoRA scales the slot's cache was computed with (the target's adapters, lora.c). */
    float lora_scales[SPECD_MAX_LORA];
};

/* One model's LoRA adapters (lora.c). */
typedef struct specd_lora_set {
    int32_t n;
    struct llama_adapter_lora *adapters[SPECD_MAX_LORA];
    char *paths[SPECD_MAX_LORA];
    float scales[SPECD_MAX_LORA]; /* the defaults (the target's) or the ones set (the draft's) */
} specd_lora_set;

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
    /* What the target's decodes tell the head (head.c sets it with e->head; NULL without one).
     * kv.c calls through it rather than into head.c, because the head decodes the target itself
     * (kv.c) when it lacks rows: a direct call each way would be a circle. */
    const struct specd_target_observer *observer;
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
    int64_t target_decodes;    /* the same on the target's */
    int8_t rows_agree;         /* specd_invariance_weights_agree, once read: 1 yes, -1 no, 0 not read yet */
    /* What the layers above learn across requests (costs, drafters' memory: draft/learned.h),
     * created by them on first use and freed through free_learned: the engine does not know its
     * type, so it stays below them. NULL until used. */
    struct specd_learned *learned;
    void (*free_learned)(struct specd_learned *learned);
    specd_invariance inv; /* how the target's passes stay batch-invariant (invariance.h) */
    bool one_sequence;    /* each context keeps one sequence, not unified (engine.c, one_sequence_contexts) */
    /* The draft model tokenizes text its own way (engine.c, check_pair): its views hold tokens of
     * its vocabulary, never the target's, and its drafts go through text (draft/vocab_bridge.h). */
    bool draft_vocab_differs;
    specd_lora_set lora;       /* the target's LoRA adapters */
    specd_lora_set lora_draft; /* the draft's */
    struct specd_images *images; /* the target's vision projector and the latest images (images.h); NULL: none */
    /* The embedding context (embed.c; specd_engine_params.embedding), NULL without one. */
    struct specd_embedder *embedder;
};

/* A drafting head's side of the target's decodes (kv.c calls it after each one, head.c fills it). */
typedef struct specd_target_observer {
    /* Batch indices [b0, b0 + n) were the view's positions [pos, pos + n): their hidden states. */
    specd_status (*decoded)(specd_engine *e, specd_model_slot *view, int32_t b0, int32_t pos, int32_t n,
                            char **error);
    /* A prompt's rows pile up: the companion may take them in now. */
    specd_status (*keep_up)(specd_engine *e, specd_model_slot *view, char **error);
} specd_target_observer;

/* lora.c: loads both models' adapters (p: the caller's params; after the models, before the
 * contexts); frees them. */
specd_status specd_lora_load(specd_engine *e, const specd_engine_params *p, char **error);
void specd_lora_free(specd_engine *e);
/* Sets the target's adapters at their default scales on ctx (the embedding context), once. */
void specd_lora_apply_defaults(specd_engine *e, struct llama_context *ctx);
/* Sets the draft's adapters on its context, once. */
void specd_lora_apply_draft(specd_engine *e);
/* Before a target decode of `view`: its scales on the context (nothing for the draft's views). */
void specd_lora_apply(specd_engine *e, const specd_model_slot *view);

/* embed.c: the embedding context, made once the target's is (p: the caller's params, whose
 * attention settings it takes as given), and freed. */
specd_status specd_embedder_new(specd_engine *e, const specd_engine_params *p, char **error);
void specd_embedder_free(specd_engine *e);

/* attention.c: flash attention and the cache types of the target's context (and a head's), from the engine's params
 * (tests give their reference contexts the same, so logits compare exactly). */
void specd_apply_attention_settings(const specd_engine_params *p, struct llama_context_params *cp);

/* attention.c: the same for the target's (draft false) or the draft's context, with the K cache's
 * type too (a draft's own -ctkd/-ctvd). */
void specd_apply_context_settings(const specd_engine_params *p, bool draft, struct llama_context_params *cp);

/* attention.c: the ggml type of a cache: the V cache (v) or the K cache, of the draft or the target,
 * from the engine's params with their defaults resolved. */
enum ggml_type specd_ggml_cache_type(const specd_engine_params *p, bool v, bool draft);
/* Once the target's placement is known: a DEFAULT V cache becomes f16 when the target's layers run
 * on a GPU, where f32 would buy no invariance (attention.c). */
void specd_settle_default_v_cache(specd_engine_params *p, bool target_on_gpu);
/* Whether plain attention runs: off, or the default not settled yet (as settled where weights differ). */
bool specd_plain_attention(const specd_engine_params *p);
/* SPECD_FLASH_ATTN_DEFAULT made a setting, once the target is loaded (specd.h says which): rows_agree
 * says the target's weights (and adapters) give the same bits for one row as for several. */
void specd_settle_default_attention(specd_engine_params *p, bool target_on_gpu, bool rows_agree);

/* dry.c: specd_dry_new (dry.h) for a vocabulary (tests give their own models'); n_ctx: how far
 * dry_penalty_last_n -1 looks back. */
struct specd_dry *specd_dry_new_vocab(const struct llama_vocab *vocab, const specd_sampling_params *p, int32_t n_ctx,
                                      int32_t n_vocab, bool *failed, char **error);

/* compat.c: llama.cpp's draft/target vocabulary compatibility rules. */
specd_status specd_check_vocab_compatible(const struct llama_model *target,
                                          const struct llama_model *draft, char **error);

/* kv.c: the target's outputs (a head's rows, head.h) for its cached positions [from, to) again: an
 * attention cache decodes them in the slot's scratch sequence over a copy of its cells before
 * `from`, leaving its own sequence as it was; a recurrent state drops them and decodes them again. */
specd_status specd_slot_redecode(specd_engine *e, specd_model_slot *slot, const specd_token *tokens, int32_t from,
                                 int32_t to, char **error);

#endif
