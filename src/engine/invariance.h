/* invariance.h - batch-invariant target passes (specd_engine_params.batch_invariant): a token's
 * logits come out of the target the same, bit for bit, whatever else shares its pass (drafts,
 * other slots, prompt chunks), so exact verification is exact at near ties too.
 *
 * On llama.cpp's CPU backend three things make a token's logits depend on its pass (found in
 * ggml-cpu's kernels, tested in tests/unit/test_invariance.c):
 *  - Matrix products switch kernels with the rows of the pass: one row goes through ggml's dot
 *    product, two or more through llamafile's tiled GEMM, which sums in another order (f32, f16
 *    and bf16 weights, and plain attention's products; Q8_0 weights agree). A pass of one token,
 *    or of one output row, gets a padding token: under plain attention a one-token pass takes it in
 *    its own sequence, one position on, so that it has the shape of a pass with one draft and
 *    llama.cpp reuses the graph between the two; elsewhere in a sequence of its own.
 *  - Flash attention computes each query row alone, visiting the cells in index order, except two
 *    paths taken only with f16/f32 K and V (llama.cpp casts f32 to f16 for it): a tiled GEMM for
 *    passes of 64 rows or more, and a split over the cells for one row past 511 cells. With such
 *    caches passes stay under 64 tokens and one-token passes past 256 cells are padded.
 *  - The cell order. Flash attention sums a sequence's cells in index order, so a cell freed below
 *    a slot's last one and given to its next token changes the order of its sums: cells a slot
 *    drops go to a trash sequence instead of being freed, and when the cache is full every slot
 *    is written back from the first cell on, in order (compaction). Plain attention sums every
 *    cell in SIMD lanes chosen by the cell's index: invariant only for one slot whose cells stay
 *    contiguous from cell 0. A draft tree's side branches sit past the cells of their positions,
 *    so their logits are not invariant: trees are drafted there only when forced (engine.h:
 *    specd_engine_auto_trees), with the main branch laid in place (kv.c).
 * A GPU, a recurrent state, sliding-window attention, or plain attention with several slots is not
 * made invariant: the engine says so (specd_engine_invariance) and runs as asked. */
#ifndef SPECD_INVARIANCE_H
#define SPECD_INVARIANCE_H

#include "llama.h"
#include "specd.h"

#include <stdbool.h>
#include <stdint.h>

struct specd_engine;

/* How the target's passes are shaped. */
typedef enum specd_invariant_attention {
    SPECD_INVARIANT_NONE = 0,  /* as they come: not batch-invariant */
    SPECD_INVARIANT_PLAIN = 1, /* flash attention off, one slot, cells contiguous */
    SPECD_INVARIANT_FLASH = 2, /* flash attention's per-row kernel, dropped cells kept until compaction */
} specd_invariant_attention;

typedef struct specd_invariance {
    bool requested;                      /* specd_engine_params.batch_invariant */
    specd_invariant_attention attention; /* NONE: not invariant (note says why) */
    bool pad_rows;      /* the weights' products differ between one row and several: pad one-row passes */
    bool split_cells;   /* flash attention with f16/f32 caches: one-token passes past 256 cells split */
    int32_t max_pass;   /* most tokens of a target pass, its padding included (0: no limit) */
    llama_seq_id pad_seq;   /* the padding token's sequence (-1: none) */
    llama_seq_id trash_seq; /* where dropped cells wait for compaction (-1: none) */
    int64_t cells_used;     /* FLASH: cells written since the last compaction (none are freed between) */
    int64_t n_compactions;
    char setting[256];      /* what runs */
    char note[384];         /* why it is not invariant; "" when it is */
} specd_invariance;

/* Whether every matrix of the target's weights and adapters gives the same bits for one row as for
 * several on this CPU (then flash attention needs no padding at all); the files are read on the
 * first call only (the engine's rows_agree). */
bool specd_invariance_weights_agree(struct specd_engine *e);

/* Decides what makes the target's passes invariant for the loaded models and the engine's params
 * (after the target is loaded and the engine sized, before the contexts exist): fills e->inv, and
 * caps e->n_batch where passes must stay short. An impossible combination the user asked for (a
 * quantized V cache with flash attention off) is an error naming the flags. */
specd_status specd_invariance_plan(struct specd_engine *e, char **error);

/* The target context's params the plan needs: two more sequences, room in the batch for the
 * padding token, spare cells for the trash. */
void specd_invariance_context_params(const specd_invariance *inv, struct llama_context_params *cp);

/* Before a target decode: appends the padding token when the pass needs one (see above). Returns
 * whether it did; the batch must have room for one more token. */
bool specd_invariance_pad(specd_invariance *inv, struct llama_batch *b);

/* After the decode (rc: llama_decode's result): drops the padding token, counts the cells used. */
void specd_invariance_after_decode(specd_invariance *inv, struct llama_context *ctx, const struct llama_batch *b,
                                   bool padded, int32_t rc);

/* Removes positions [p0, p1) of sequence `seq` from the target context (inv NULL: another context):
 * under FLASH the cells stay, owned by the trash sequence, so no later token takes a cell below
 * the cells of its own sequence. Returns llama_memory_seq_rm's result. */
bool specd_invariance_seq_rm(const specd_invariance *inv, struct llama_context *ctx, llama_seq_id seq,
                             llama_pos p0, llama_pos p1);

/* FLASH: whether the trash must go before a pass of n_tokens more into `ctx` (slot's inv; NULL:
 * another context): the pass would not fit the cache, or the trash outnumbers the cells the slots
 * hold (every pass attends every cell up to the last used one, the trash's too: serving 8 clients
 * without drafts that cost 5% of each pass on the benchmark pair). */
bool specd_invariance_needs_compaction(struct specd_engine *e, const specd_invariance *inv,
                                       const struct llama_context *ctx, int32_t n_tokens);

/* FLASH: writes every slot's cells back from the first cell on, in slot order, and frees the
 * trash. A slot llama.cpp cannot write back is emptied (its next sync decodes its history again). */
specd_status specd_invariance_compact(struct specd_engine *e, char **error);

#endif
