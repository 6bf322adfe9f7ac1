/* invariance.c - batch-invariant target passes: the plan for the loaded models and settings, the
 * padding token, the trash sequence and compaction (invariance.h says why each is needed). */
#include "invariance.h"
#include "engine_internal.h"

#include "../util/util.h"

#include "ggml-cpu.h"
#include "gguf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Flash attention's CPU kernel (ggml-cpu/ops.cpp): its tiled path takes passes of this many
 * query rows or more, and its split path one-row passes over at least SPLIT_CELLS cells (the
 * cache's view grows in steps of 256 cells, so it starts once more than 256 cells are used). */
#define FLASH_TILE_ROWS 64
#define FLASH_SPLIT_CELLS 256
/* Spare cells for the trash: at least this many, and a quarter of the context more. */
#define TRASH_MIN_CELLS 256
/* The least trash compacted before the cache is full: the window a pass attends grows in steps of
 * 256 cells, and a compaction copies every slot's cells out and back. */
#define EARLY_COMPACTION_CELLS 512
/* llama.cpp's LLAMA_MAX_SEQ (src/llama-cparams.h): the most sequences a context may have. */
#define MAX_SEQUENCES 256

static void set_note(specd_invariance *inv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_note(specd_invariance *inv, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(inv->note, sizeof inv->note, fmt, ap);
    va_end(ap);
    inv->attention = SPECD_INVARIANT_NONE;
}

/* Weight types whose products give the same bits for one row as for several on this CPU: Q8_0
 * (llamafile's Q8_0 GEMM and ggml's dot product sum the same way: test_invariance on a Q8_0 model),
 * and types that neither llamafile nor ggml's repacking handle on x86, so that every row count
 * takes ggml's dot product (ggml-cpu/llamafile/sgemm.cpp, repack.cpp, iqp.cpp). Elsewhere (ARM's
 * kernels switch at other row counts) none is assumed. */
static bool rows_agree(enum ggml_type t) {
    if (!ggml_cpu_has_avx2()) return false;
    switch (t) {
    case GGML_TYPE_Q8_0:
    case GGML_TYPE_Q4_1:
    case GGML_TYPE_Q5_1:
    case GGML_TYPE_Q3_K:
    case GGML_TYPE_Q5_K:
    case GGML_TYPE_Q6_K: return true;
    default: return false;
    }
}

/* Whether every matrix the model multiplies by (2-D weights; the token embeddings are looked up,
 * unless the output reuses them) gives the same bits for one row as for several. A file that
 * cannot be read again is taken as not. */
static bool weights_agree_across_rows(const char *path) {
    struct gguf_init_params gp = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *g = gguf_init_from_file(path, gp);
    if (!g) return false;
    bool tied_output = gguf_find_tensor(g, "output.weight") < 0;
    bool agree = true;
    for (int64_t i = 0; agree && i < gguf_get_n_tensors(g); i++) {
        const int64_t *ne = gguf_get_tensor_ne(g, i);
        bool matrix = ne[1] > 1;
        bool looked_up = !strcmp(gguf_get_tensor_name(g, i), "token_embd.weight") && !tied_output;
        if (matrix && !looked_up && !rows_agree(gguf_get_tensor_type(g, i))) agree = false;
    }
    gguf_free(g);
    return agree;
}

bool specd_invariance_weights_agree(specd_engine *e) {
    if (e->rows_agree == 0) { /* the files are read once: the default attention and the plan both ask */
        bool agree = weights_agree_across_rows(e->target_path);
        for (int32_t i = 0; agree && i < e->lora.n; i++) agree = weights_agree_across_rows(e->lora.paths[i]);
        e->rows_agree = agree ? 1 : -1;
    }
    return e->rows_agree > 0;
}

static bool f16_class(enum ggml_type t) { return t == GGML_TYPE_F16 || t == GGML_TYPE_F32; }

/* Why the target cannot be made invariant, or "" when nothing in the models stands in the way. */
static void check_models(const specd_engine *e, specd_invariance *inv) {
    const struct llama_model *m = e->target.model;
    if (e->target.placement.n_layers_offloaded > 0) {
        set_note(inv, "the target runs on %s: GPU kernels are not verified batch-invariant (a token's logits "
                 "may depend on the size of its pass; docs/performance.md)", e->target.placement.names);
    } else if (!e->target.can_drop_tail) {
        set_note(inv, "the %s keeps a recurrent state: its passes are not made batch-invariant", e->target.desc);
    } else if (llama_model_n_swa(m) > 0) {
        set_note(inv, "the target uses sliding-window attention, whose cache reuses cells out of order: its "
                 "passes are not made batch-invariant");
    } else if ((int64_t)e->n_parallel * SPECD_TREE_MAX_BRANCHES + 2 > MAX_SEQUENCES) {
        set_note(inv, "%d slots use all of llama.cpp's %d sequences, none is left for the padding and trash "
                 "sequences: use at most %d slots", e->n_parallel, MAX_SEQUENCES,
                 (MAX_SEQUENCES - 2) / SPECD_TREE_MAX_BRANCHES);
    }
}

/* The attention kernel and its limits. */
static void plan_attention(specd_engine *e, specd_invariance *inv, bool flash, enum ggml_type k, enum ggml_type v) {
    if (!flash && e->n_parallel > 1) {
        set_note(inv, "flash attention is off with %d slots: plain attention sums every slot's cells in an order "
                 "set by where they sit, so a token's logits depend on the other slots; use -fa on (or auto)",
                 e->n_parallel);
        return;
    }
    inv->attention = flash ? SPECD_INVARIANT_FLASH : SPECD_INVARIANT_PLAIN;
    inv->split_cells = flash && f16_class(k) && f16_class(v);
    inv->max_pass = inv->split_cells ? FLASH_TILE_ROWS - 1 : 0;
    if (inv->max_pass > 0 && e->params.draft_max + 2 > inv->max_pass)
        set_note(inv, "draft_max %d makes passes of %d tokens: with flash attention and an f16/f32 cache a pass "
                 "must stay under %d tokens to be batch-invariant; lower --draft-max to %d, or use -ctk/-ctv "
                 "bf16 or q8_0", e->params.draft_max, e->params.draft_max + 2, FLASH_TILE_ROWS, FLASH_TILE_ROWS - 3);
}

static void describe(const specd_engine *e, specd_invariance *inv, enum ggml_type k, enum ggml_type v) {
    char pass[64] = "any size";
    if (inv->max_pass > 0) snprintf(pass, sizeof pass, "at most %d tokens", inv->max_pass);
    if (inv->attention == SPECD_INVARIANT_FLASH && !inv->pad_rows && !inv->split_cells)
        snprintf(inv->setting, sizeof inv->setting, "flash attention, per-row kernel; K %s, V %s; passes as they come "
                 "(none padded: the weights agree across rows), %s; dropped cells kept until the cache is compacted",
                 ggml_type_name(k), ggml_type_name(v), pass);
    else if (inv->attention == SPECD_INVARIANT_FLASH)
        snprintf(inv->setting, sizeof inv->setting, "flash attention, per-row kernel; K %s, V %s; passes of 2 tokens "
                 "or more (padded%s), %s; dropped cells kept until the cache is compacted", ggml_type_name(k),
                 ggml_type_name(v), inv->pad_rows ? "" : " past 256 cells", pass);
    else if (inv->attention == SPECD_INVARIANT_PLAIN)
        snprintf(inv->setting, sizeof inv->setting, "plain attention, one slot, cells contiguous; K %s, V %s; passes "
                 "of 2 tokens or more (padded)", ggml_type_name(k), ggml_type_name(v));
    else
        snprintf(inv->setting, sizeof inv->setting, "%s attention; K %s, V %s; passes as they come",
                 e->params.flash_attn == SPECD_FLASH_ATTN_OFF ? "plain" : "flash", ggml_type_name(k),
                 ggml_type_name(v));
}

specd_status specd_invariance_plan(specd_engine *e, char **error) {
    specd_invariance *inv = &e->inv;
    memset(inv, 0, sizeof *inv);
    inv->requested = e->params.batch_invariant;
    inv->pad_seq = inv->trash_seq = -1;
    enum ggml_type k = specd_ggml_cache_type(&e->params, false, false);
    enum ggml_type v = specd_ggml_cache_type(&e->params, true, false);
    bool flash = e->params.flash_attn != SPECD_FLASH_ATTN_OFF;
    if (!flash && ggml_is_quantized(v)) {
        specd_set_error(error, "a quantized V cache (-ctv %s) needs flash attention: add -fa on", ggml_type_name(v));
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    inv->attention = SPECD_INVARIANT_NONE;
    if (!inv->requested) {
        set_note(inv, "batch invariance is off (--batch-invariant off): a token's logits may move in the last bits "
                 "with the size of its pass, so output can part from the request alone at near ties");
    } else {
        check_models(e, inv);
        if (!inv->note[0]) plan_attention(e, inv, flash, k, v);
    }
    if (inv->attention != SPECD_INVARIANT_NONE) {
        /* an adapter's products run beside the weights': its matrices count too */
        inv->pad_rows = inv->attention == SPECD_INVARIANT_PLAIN || !specd_invariance_weights_agree(e);
        inv->pad_seq = e->n_parallel * SPECD_TREE_MAX_BRANCHES;
        if (inv->attention == SPECD_INVARIANT_FLASH) inv->trash_seq = inv->pad_seq + 1;
        /* Room for the padding token in every batch. */
        int32_t cap = inv->max_pass > 0 ? inv->max_pass - 1 : e->n_batch;
        if (e->n_batch > cap) e->n_batch = cap;
    }
    describe(e, inv, k, v);
    return SPECD_OK;
}

void specd_invariance_context_params(const specd_invariance *inv, struct llama_context_params *cp) {
    if (inv->attention == SPECD_INVARIANT_NONE) return;
    cp->n_seq_max += inv->trash_seq >= 0 ? 2 : 1;
    cp->n_batch += 1;
    cp->n_ubatch += 1;
    /* llama.cpp reserves a row of logits per sequence whatever the batch (engine.c's create_context). */
    cp->n_outputs_max = cp->n_batch > cp->n_seq_max ? cp->n_batch : cp->n_seq_max;
    /* The padding token's cell; under FLASH the trash's spare cells. */
    uint32_t spare = 1;
    if (inv->trash_seq >= 0) spare = cp->n_ctx / 4 > TRASH_MIN_CELLS ? cp->n_ctx / 4 : TRASH_MIN_CELLS;
    cp->n_ctx += spare;
}

static int32_t count_outputs(const struct llama_batch *b) {
    int32_t n = 0;
    for (int32_t i = 0; i < b->n_tokens; i++) n += b->logits[i] != 0;
    return n;
}

/* One row would take another product kernel than several: a pass of one token (every product),
 * or of one output row (the last layer's feed-forward and the output run on the output rows). */
static bool needs_padding(const specd_invariance *inv, const struct llama_batch *b) {
    int32_t outputs = count_outputs(b);
    if (b->n_tokens == 1) {
        bool split = inv->split_cells && inv->cells_used + 1 > FLASH_SPLIT_CELLS;
        return inv->pad_rows || split;
    }
    return outputs == 1 && inv->pad_rows;
}

/* Under PLAIN a one-token pass (a step without drafts) takes its padding token in its own sequence,
 * one position on: the pass then has the shape of a step that drafted one token (two tokens, one
 * sequence, two output rows), so llama.cpp reuses the graph between the two (model-free drafting
 * alternates them) and a GPU would replay it. The token's own row is the same either way: its mask
 * ends at its cell, and the products take the same kernel for two rows. The cell is the last one
 * written (one slot, contiguous cells), so dropping it keeps the cells contiguous. Elsewhere (FLASH,
 * several slots) a dropped cell would go to the trash: the padding keeps a sequence of its own. */
static bool pads_in_own_sequence(const specd_invariance *inv, const struct llama_batch *b) {
    return inv->attention == SPECD_INVARIANT_PLAIN && b->n_tokens == 1 && b->n_seq_id[0] == 1;
}

bool specd_invariance_pad(specd_invariance *inv, struct llama_batch *b) {
    if (!inv || inv->attention == SPECD_INVARIANT_NONE || b->n_tokens == 0 || !needs_padding(inv, b)) return false;
    bool one_output = count_outputs(b) == 1, own = pads_in_own_sequence(inv, b);
    int32_t i = b->n_tokens++;
    b->token[i] = own ? b->token[0] : 0;
    b->pos[i] = own ? b->pos[0] + 1 : 0; /* in a sequence of its own it attends itself only */
    b->n_seq_id[i] = 1;
    b->seq_id[i][0] = own ? b->seq_id[0][0] : inv->pad_seq;
    b->logits[i] = one_output; /* two output rows, or none */
    return true;
}

void specd_invariance_after_decode(specd_invariance *inv, struct llama_context *ctx, const struct llama_batch *b,
                                   bool padded, int32_t rc) {
    if (!inv || inv->attention == SPECD_INVARIANT_NONE) return;
    if (padded) {
        /* The padding token's cell is the pass's last: under PLAIN freeing it leaves the cells contiguous. */
        int32_t last = b->n_tokens - 1;
        llama_seq_id seq = b->seq_id[last][0];
        if (rc == 0 && inv->trash_seq >= 0)
            llama_memory_seq_cp(llama_get_memory(ctx), inv->pad_seq, inv->trash_seq, -1, -1);
        llama_memory_seq_rm(llama_get_memory(ctx), seq, seq == inv->pad_seq ? -1 : b->pos[last], -1);
    }
    if (rc == 0) inv->cells_used += b->n_tokens;
}

bool specd_invariance_seq_rm(const specd_invariance *inv, struct llama_context *ctx, llama_seq_id seq,
                             llama_pos p0, llama_pos p1) {
    llama_memory_t mem = llama_get_memory(ctx);
    if (inv && inv->trash_seq >= 0) llama_memory_seq_cp(mem, seq, inv->trash_seq, p0, p1);
    return llama_memory_seq_rm(mem, seq, p0, p1);
}

/* Slot i's target view (views.c's specd_engine_target_view, which this file cannot call: views.c
 * reaches kv.c, which calls here). */
static specd_model_slot *target_view(specd_engine *e, int32_t i) {
    return i == e->active_slot ? &e->target : &e->target_views[i];
}

/* The cells the slots hold in the target's cache. */
static int64_t live_cells(specd_engine *e) {
    int64_t live = 0;
    for (int32_t i = 0; i < e->n_parallel; i++) live += target_view(e, i)->n_kv;
    return live;
}

bool specd_invariance_needs_compaction(specd_engine *e, const specd_invariance *inv,
                                       const struct llama_context *ctx, int32_t n_tokens) {
    if (!inv || inv->trash_seq < 0) return false;
    if (inv->cells_used + n_tokens > (int64_t)llama_n_ctx(ctx)) return true;
    int64_t live = live_cells(e), trash = inv->cells_used - live;
    return trash >= EARLY_COMPACTION_CELLS && trash >= live;
}

/* One slot's cells, saved before the cache is cleared. */
typedef struct saved_slot {
    uint8_t *data;
    size_t size;
} saved_slot;

static void forget_slot(specd_model_slot *v) {
    v->n_kv = 0;
    specd_slot_forget_checkpoints(v, -1);
}

specd_status specd_invariance_compact(specd_engine *e, char **error) {
    struct llama_context *ctx = e->target.ctx;
    saved_slot *saved = calloc((size_t)e->n_parallel, sizeof *saved);
    if (!saved) {
        specd_set_error(error, "out of memory for compacting the target's cache");
        return SPECD_ERR_NO_MEMORY;
    }
    for (int32_t i = 0; i < e->n_parallel; i++) {
        specd_model_slot *v = target_view(e, i);
        if (v->n_kv == 0) continue;
        size_t size = llama_state_seq_get_size_ext(ctx, v->seq, 0);
        saved[i].data = size > 0 ? malloc(size) : NULL;
        if (saved[i].data && llama_state_seq_get_data_ext(ctx, saved[i].data, size, v->seq, 0) == size)
            saved[i].size = size;
    }
    llama_memory_clear(llama_get_memory(ctx), false);
    e->inv.cells_used = 0;
    for (int32_t i = 0; i < e->n_parallel; i++) {
        specd_model_slot *v = target_view(e, i);
        bool back = saved[i].size > 0 &&
                    llama_state_seq_set_data_ext(ctx, saved[i].data, saved[i].size, v->seq, 0) == saved[i].size;
        if (back) e->inv.cells_used += v->n_kv;
        else forget_slot(v); /* its next sync decodes the history again */
        free(saved[i].data);
    }
    free(saved);
    e->inv.n_compactions++;
    return SPECD_OK;
}
