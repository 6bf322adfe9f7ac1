/* test_invariance.c - batch-invariant verification (src/engine/invariance.h), tested directly: a
 * token's target logits computed alone equal, bit for bit, the same token's logits inside passes
 * of 2 to 16 tokens, beside other slots (their drafts, their rejected drafts, a 70-token prompt
 * chunk, a cache past 512 cells) and across compactions, for every KV cache type and attention
 * setting the engine marks invariant. The negative control: with batch_invariant off the same
 * comparison finds differences (so the check can fail).
 *
 *   test_invariance MODELS_DIR
 * MODELS_DIR holds target.gguf (F32 weights, head size 8), target-h64.gguf (head size 64: the
 * quantized caches need it, and flash attention's tiled path only runs on it) and
 * target-h64-q8.gguf (the same in Q8_0), and draft-h64.gguf (target-h64 plus noise). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "engine/engine_internal.h"
#include "specd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_TOKENS 40
#define N_SLOTS 4
#define SLOT_CTX 704 /* one slot's history past 512 cells, with room for the others' */

static char h8_path[1024], h64_path[1024], q8_path[1024], draft_h64_path[1024];
/* One thread, but two where flash attention's split path must be able to run (a busy machine makes
 * ggml's spinning threads slow, so only there). */
static int32_t n_threads = 1;

typedef struct attention_case {
    specd_flash_attn fa;
    specd_cache_type k, v;
} attention_case;

static specd_engine *open_invariant(const char *model, attention_case c, int32_t n_parallel, int32_t slot_ctx,
                                    bool invariant) {
    specd_engine_params p = specd_engine_default_params();
    p.target_path = model;
    p.n_ctx_per_slot = slot_ctx;
    p.n_parallel = n_parallel;
    p.n_threads = n_threads;
    p.flash_attn = c.fa;
    p.cache_type_k = c.k;
    p.cache_type_v = c.v;
    p.batch_invariant = invariant;
    specd_engine *e = NULL;
    char *err = NULL;
    if (specd_engine_new(&p, &e, &err) != SPECD_OK) fail_msg("engine (%s %s/%s): %s", model,
                                                             specd_cache_type_name(c.k), specd_cache_type_name(c.v), err);
    return e;
}

/* A fixed token sequence per stream, away from the special tokens. */
static specd_token token_of(int32_t stream, int32_t i, int32_t n_vocab) {
    return (specd_token)(3 + ((uint32_t)(i + 1000 * stream) * 7919u) % (uint32_t)(n_vocab - 3));
}

/* A chain of n tokens of `stream` at the end of slot `slot`, every one with logits. */
typedef struct chain {
    int32_t slot, stream, n;
    specd_tree_token tokens[128];
} chain;

static chain chain_at(specd_engine *e, int32_t slot, int32_t stream, int32_t n) {
    chain c = {slot, stream, n, {{0}}};
    int32_t from = specd_engine_target_view(e, slot)->n_kv;
    for (int32_t i = 0; i < n; i++) c.tokens[i] = (specd_tree_token){token_of(stream, from + i, e->n_vocab), i, 1u};
    return c;
}

/* One target pass over the chains (each slot at most once); the logits of chain `mine`'s tokens go
 * to out[first..]. */
static void pass_of(specd_engine *e, chain *chains, int32_t n_chains, int32_t mine, float **out, int32_t first) {
    specd_tree_pass passes[N_SLOTS + 1];
    for (int32_t i = 0; i < n_chains; i++) {
        specd_model_slot *v = specd_engine_target_view(e, chains[i].slot);
        passes[i] = (specd_tree_pass){v, chains[i].tokens, chains[i].n, 1, v->n_kv, false, false, 0};
    }
    char *err = NULL;
    if (specd_slots_decode_trees(e, passes, n_chains, NULL, &err) != SPECD_OK) fail_msg("pass: %s", err);
    for (int32_t i = 0; out && i < chains[mine].n; i++)
        memcpy(out[first + i], specd_slot_logits(passes[mine].slot, i), (size_t)e->n_vocab * sizeof(float));
}

static void pass(specd_engine *e, chain *chains, int32_t n_chains, float **out, int32_t first) {
    pass_of(e, chains, n_chains, 0, out, first);
}

static float **logits_table(int32_t n_vocab) {
    float **t = calloc(N_TOKENS, sizeof *t);
    for (int32_t i = 0; i < N_TOKENS; i++) t[i] = calloc((size_t)n_vocab, sizeof **t);
    return t;
}

static void free_table(float **t) {
    for (int32_t i = 0; i < N_TOKENS; i++) free(t[i]);
    free(t);
}

/* Tokens whose logits differ in any bit. */
static int32_t differing(float **a, float **b, int32_t n_vocab) {
    int32_t n = 0;
    for (int32_t i = 0; i < N_TOKENS; i++) n += memcmp(a[i], b[i], (size_t)n_vocab * sizeof(float)) != 0;
    return n;
}

/* Slot 0's N_TOKENS decoded alone, one token per pass, on an engine of one slot. */
static float **alone(const char *model, attention_case c, bool invariant) {
    specd_engine *e = open_invariant(model, c, 1, SLOT_CTX, invariant);
    float **ref = logits_table(e->n_vocab);
    for (int32_t i = 0; i < N_TOKENS; i++) {
        chain one = chain_at(e, 0, 0, 1);
        pass(e, &one, 1, ref, i);
    }
    specd_engine_free(e);
    return ref;
}

/* Slot 0's tokens in passes of `size`, alone in the pass: how many differ from ref. */
static int32_t in_passes_of(const char *model, attention_case c, bool invariant, int32_t size, float **ref) {
    specd_engine *e = open_invariant(model, c, 1, SLOT_CTX, invariant);
    float **got = logits_table(e->n_vocab);
    for (int32_t i = 0; i < N_TOKENS; i += size) {
        chain ch = chain_at(e, 0, 0, i + size <= N_TOKENS ? size : N_TOKENS - i);
        pass(e, &ch, 1, got, i);
    }
    int32_t n = differing(ref, got, e->n_vocab);
    free_table(got);
    specd_engine_free(e);
    return n;
}

/* Slot 0's tokens in passes of 1 to 5 tokens beside three other slots, or one token alone in a
 * pass (every third): slot 1 drafts 4 and keeps 1 (it comes first in the pass, so its rejected cells lie below
 * slot 0's next ones), slot 2 ingests a prompt chunk of up to 70 tokens now and then (as many as
 * the batch leaves), slot 3 grows to 600 tokens in passes between them (the cache past 512 cells,
 * slot 0's cells spread over it). How many differ from ref. */
static int32_t beside_slots(const char *model, attention_case c, bool invariant, float **ref) {
    specd_engine *e = open_invariant(model, c, N_SLOTS, SLOT_CTX, invariant);
    float **got = logits_table(e->n_vocab);
    for (int32_t i = 0, round = 0; i < N_TOKENS; round++) {
        if (specd_engine_target_view(e, 3)->n_kv < 600) { /* between slot 0's cells, so a split cuts them */
            chain fill = chain_at(e, 3, 3, 60);
            pass(e, &fill, 1, NULL, 0);
        }
        bool by_itself = round % 3 == 1; /* one token alone in the pass, over the whole cache */
        int32_t size = by_itself ? 1 : 1 + round % 5;
        if (i + size > N_TOKENS) size = N_TOKENS - i;
        int32_t chunk = e->batch_cap - 9 < 70 ? e->batch_cap - 9 : 70;
        chain chains[3] = {chain_at(e, 1, 1, 4), chain_at(e, 0, 0, size), chain_at(e, 2, 2, chunk)};
        if (by_itself) {
            pass_of(e, &chains[1], 1, 0, got, i);
        } else {
            int32_t n_chains = round % 3 == 2 && specd_engine_target_view(e, 2)->n_kv < 400 ? 3 : 2;
            pass_of(e, chains, n_chains, 1, got, i);
            specd_model_slot *drafts = specd_engine_target_view(e, 1);
            specd_slot_truncate(drafts, drafts->n_kv - 3);
        }
        i += size;
    }
    int32_t n = differing(ref, got, e->n_vocab);
    free_table(got);
    specd_engine_free(e);
    return n;
}

/* Slot 0's tokens beside a slot that drafts 20 and keeps 1 every pass, in a small cache: the
 * trash fills it again and again. How many differ from ref; *compactions: how often it was
 * compacted. */
static int32_t across_compactions(const char *model, attention_case c, float **ref, int64_t *compactions) {
    specd_engine *e = open_invariant(model, c, 2, 64, true);
    float **got = logits_table(e->n_vocab);
    for (int32_t i = 0; i < N_TOKENS; i++) {
        specd_model_slot *other = specd_engine_target_view(e, 1);
        if (other->n_kv > 50) specd_slot_truncate(other, 0); /* a new request in the other slot */
        chain chains[2] = {chain_at(e, 1, 1, 20), chain_at(e, 0, 0, 1)};
        pass_of(e, chains, 2, 1, got, i);
        specd_slot_truncate(specd_engine_target_view(e, 1), specd_engine_target_view(e, 1)->n_kv - 19);
    }
    *compactions = e->inv.n_compactions;
    int32_t n = differing(ref, got, e->n_vocab);
    free_table(got);
    specd_engine_free(e);
    return n;
}

static const char *case_name(attention_case c, char *buf, size_t size) {
    snprintf(buf, size, "%s, K %s, V %s", c.fa == SPECD_FLASH_ATTN_OFF ? "plain" : "flash",
             specd_cache_type_name(c.k), specd_cache_type_name(c.v));
    return buf;
}

/* Every check for one model and setting, which the engine must mark invariant. */
static void check_invariant(const char *model, attention_case c, bool several_slots) {
    char name[96];
    case_name(c, name, sizeof name);
    specd_engine *probe = open_invariant(model, c, several_slots ? N_SLOTS : 1, SLOT_CTX, true);
    specd_invariance_info info = specd_engine_invariance(probe);
    if (!info.invariant) fail_msg("%s: not marked invariant: %s", name, info.note);
    specd_engine_free(probe);
    float **ref = alone(model, c, true);
    const int32_t sizes[] = {2, 3, 4, 5, 8, 16};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int32_t bad = in_passes_of(model, c, true, sizes[s], ref);
        if (bad) fail_msg("%s: %d of %d tokens' logits differ in passes of %d", name, bad, N_TOKENS, sizes[s]);
    }
    if (several_slots) {
        int32_t bad = beside_slots(model, c, true, ref);
        if (bad) fail_msg("%s: %d of %d tokens' logits differ beside other slots", name, bad, N_TOKENS);
        int64_t compactions = 0;
        bad = across_compactions(model, c, ref, &compactions);
        if (bad) fail_msg("%s: %d of %d tokens' logits differ across compactions", name, bad, N_TOKENS);
        assert_true(compactions > 0);
    }
    print_message("%s: bit for bit in passes of 2..16%s\n", name, several_slots ? ", beside slots, compacted" : "");
    free_table(ref);
}

static const specd_cache_type all_types[] = {
    SPECD_CACHE_TYPE_F16,  SPECD_CACHE_TYPE_F32,    SPECD_CACHE_TYPE_BF16, SPECD_CACHE_TYPE_Q8_0, SPECD_CACHE_TYPE_Q4_0,
    SPECD_CACHE_TYPE_Q4_1, SPECD_CACHE_TYPE_IQ4_NL, SPECD_CACHE_TYPE_Q5_0, SPECD_CACHE_TYPE_Q5_1,
};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

/* Flash attention (serve's default with several slots): every K type with every V type of its
 * own, and f16 K beside each V. */
static void test_flash_attention_is_invariant_for_every_cache_type(void **state) {
    (void)state;
    for (size_t t = 0; t < N_TYPES; t++) {
        check_invariant(h64_path, (attention_case){SPECD_FLASH_ATTN_ON, all_types[t], all_types[t]}, true);
        if (all_types[t] != SPECD_CACHE_TYPE_F16)
            check_invariant(h64_path, (attention_case){SPECD_FLASH_ATTN_ON, SPECD_CACHE_TYPE_F16, all_types[t]}, true);
    }
    /* The defaults on the small heads, where flash attention's tiled path never runs. */
    check_invariant(h8_path, (attention_case){SPECD_FLASH_ATTN_AUTO, SPECD_CACHE_TYPE_DEFAULT, SPECD_CACHE_TYPE_DEFAULT},
                    true);
}

/* Q8_0 weights: one row takes the same product kernel as several, so no pass is padded for them;
 * but a one-token pass over more than 512 cells, with two threads, has flash attention split the
 * cells between the threads and sum the parts in another order, unless it is padded. */
static void test_q8_0_weights_and_one_token_passes_past_512_cells(void **state) {
    (void)state;
    attention_case c = {SPECD_FLASH_ATTN_ON, SPECD_CACHE_TYPE_F16, SPECD_CACHE_TYPE_F16};
    specd_engine *e = open_invariant(q8_path, c, 1, SLOT_CTX, true);
    assert_false(e->inv.pad_rows);
    assert_true(e->inv.split_cells);
    specd_engine_free(e);
    check_invariant(q8_path, c, true);
    n_threads = 2;
    float **ref = alone(q8_path, c, true);
    int32_t bad = beside_slots(q8_path, c, true, ref);
    if (bad) fail_msg("%d of %d tokens' logits differ beside a slot of 600 tokens, two threads", bad, N_TOKENS);
    free_table(ref);
    n_threads = 1;
}

/* Plain attention (specd run's default: one slot): the V types it takes (a quantized V needs
 * flash attention), with f16 and quantized K. */
static void test_plain_attention_is_invariant_with_one_slot(void **state) {
    (void)state;
    const specd_cache_type v_types[] = {SPECD_CACHE_TYPE_F32, SPECD_CACHE_TYPE_F16, SPECD_CACHE_TYPE_BF16};
    for (size_t t = 0; t < 3; t++) {
        check_invariant(h64_path, (attention_case){SPECD_FLASH_ATTN_OFF, SPECD_CACHE_TYPE_F16, v_types[t]}, false);
        check_invariant(h64_path, (attention_case){SPECD_FLASH_ATTN_OFF, SPECD_CACHE_TYPE_Q8_0, v_types[t]}, false);
    }
    check_invariant(h8_path, (attention_case){SPECD_FLASH_ATTN_OFF, SPECD_CACHE_TYPE_DEFAULT, SPECD_CACHE_TYPE_DEFAULT},
                    false);
}

/* The target's passes since `before`: `passes` of them, and all but `rebuilds` reused the graph of
 * the pass before (llama.cpp's counter: specd_engine_graph_counts). */
static void assert_graph_reused(const specd_engine *e, specd_graph_info before, int32_t passes, int64_t rebuilds,
                                const char *what) {
    specd_graph_info after = specd_engine_graph_counts(e);
    int64_t n = after.target.passes - before.target.passes, reused = after.target.reused - before.target.reused;
    assert_int_equal(n, passes);
    if (reused < n - rebuilds) fail_msg("%lld of %lld %s passes reused the graph", (long long)reused, (long long)n, what);
}

/* Steps without drafts and steps of one draft alternate under model-free drafting: with PLAIN
 * invariance a one-token pass is padded in its own sequence, so both are passes of two tokens in one
 * sequence with two output rows, and llama.cpp reuses the graph from one to the next (a padding
 * token in a sequence of its own made every change a rebuild). The logits stay those of the
 * tokens decoded one a pass. */
static void test_plain_one_token_passes_have_the_shape_of_one_draft(void **state) {
    (void)state;
    attention_case plain = {SPECD_FLASH_ATTN_OFF, SPECD_CACHE_TYPE_DEFAULT, SPECD_CACHE_TYPE_DEFAULT};
    float **ref = alone(h64_path, plain, true);
    specd_engine *e = open_invariant(h64_path, plain, 1, SLOT_CTX, true);
    float **got = logits_table(e->n_vocab);
    specd_graph_info before = specd_engine_graph_counts(e);
    int32_t passes = 0;
    for (int32_t i = 0; i < N_TOKENS; passes++) {
        int32_t size = passes % 2 == 0 || i + 2 > N_TOKENS ? 1 : 2;
        chain ch = chain_at(e, 0, 0, size);
        pass(e, &ch, 1, got, i);
        i += size;
    }
    /* all but the first, and one rebuild each time the cache's window grows by 256 cells */
    assert_graph_reused(e, before, passes, (N_TOKENS + 255) / 256, "alternating");
    assert_int_equal(differing(ref, got, e->n_vocab), 0);
    free_table(got);
    free_table(ref);
    specd_engine_free(e);
}

/* Chains padded to the size of the pass before (specd_tree_pass.n_padding, where a change of size
 * costs more than the padding: a GPU): passes of 1 to 4 tokens, each padded to 4, keep one shape, so
 * llama.cpp reuses the graph; every real token's logits are those of its pass unpadded, bit for bit
 * (under plain attention with F32 weights and under flash attention with f16 caches), and the
 * padding leaves nothing in the cache. */
static void check_padded_chains(attention_case c) {
    enum { WIDTH = 4 };
    float **ref = alone(h64_path, c, true);
    specd_engine *e = open_invariant(h64_path, c, 1, SLOT_CTX, true);
    float **got = logits_table(e->n_vocab);
    specd_graph_info before = specd_engine_graph_counts(e);
    int32_t passes = 0;
    for (int32_t i = 0; i < N_TOKENS; passes++) {
        int32_t size = 1 + passes % WIDTH;
        if (i + size > N_TOKENS) size = N_TOKENS - i;
        chain ch = chain_at(e, 0, 0, size);
        specd_model_slot *v = specd_engine_target_view(e, 0);
        specd_tree_pass t = {v, ch.tokens, size, 1, v->n_kv, false, false, WIDTH - size};
        char *err = NULL;
        if (specd_slots_decode_trees(e, &t, 1, NULL, &err) != SPECD_OK) fail_msg("pass: %s", err);
        for (int32_t k = 0; k < size; k++)
            memcpy(got[i + k], specd_slot_logits(v, k), (size_t)e->n_vocab * sizeof(float));
        i += size;
        assert_int_equal(v->n_kv, i);
        assert_int_equal(llama_memory_seq_pos_max(llama_get_memory(v->ctx), v->seq), i - 1);
    }
    /* all but the first, and one rebuild each time the cache's window grows */
    assert_graph_reused(e, before, passes, (N_TOKENS + WIDTH + 255) / 256 + 1, "padded");
    assert_int_equal(differing(ref, got, e->n_vocab), 0);
    free_table(got);
    free_table(ref);
    specd_engine_free(e);
}

static void test_padded_chains_keep_one_shape_and_their_logits(void **state) {
    (void)state;
    check_padded_chains((attention_case){SPECD_FLASH_ATTN_OFF, SPECD_CACHE_TYPE_DEFAULT, SPECD_CACHE_TYPE_DEFAULT});
    check_padded_chains((attention_case){SPECD_FLASH_ATTN_ON, SPECD_CACHE_TYPE_F16, SPECD_CACHE_TYPE_F16});
}

/* The default attention follows the weights: a Q8_0 target (its products give the same bits for one
 * row as for several) gets flash attention with bf16 caches and no padding at all, so plain
 * decoding costs what llama.cpp's does (a padded one-token pass of the Q8_0 benchmark target took
 * 2.48x an unpadded one on an AMD EPYC); an F32 target keeps plain attention, padded. An explicit
 * setting is kept. */
static void test_the_default_attention_pads_nothing_where_the_weights_agree(void **state) {
    (void)state;
    specd_engine_params p = specd_engine_default_params();
    assert_int_equal(p.flash_attn, SPECD_FLASH_ATTN_DEFAULT);
    p.target_path = q8_path;
    p.n_threads = n_threads;
    specd_engine *e = NULL;
    char *err = NULL;
    if (specd_engine_new(&p, &e, &err) != SPECD_OK) fail_msg("engine: %s", err);
    specd_invariance_info q8 = specd_engine_invariance(e);
    assert_true(q8.invariant);
    assert_non_null(strstr(q8.setting, "flash attention, per-row kernel; K bf16, V bf16; passes as they come"));
    assert_false(e->inv.pad_rows);
    assert_false(e->inv.split_cells);
    specd_engine_free(e);
    p.target_path = h64_path; /* F32 weights */
    if (specd_engine_new(&p, &e, &err) != SPECD_OK) fail_msg("engine: %s", err);
    assert_non_null(strstr(specd_engine_invariance(e).setting, "plain attention, one slot"));
    assert_true(e->inv.pad_rows);
    specd_engine_free(e);
    p.target_path = q8_path;
    p.flash_attn = SPECD_FLASH_ATTN_OFF; /* asked for: kept */
    if (specd_engine_new(&p, &e, &err) != SPECD_OK) fail_msg("engine: %s", err);
    assert_non_null(strstr(specd_engine_invariance(e).setting, "plain attention, one slot"));
    specd_engine_free(e);
}

/* The negative control: without invariance the same comparisons find differences, in passes of
 * several tokens (the products' kernels) and beside other slots (flash attention's tiled and
 * split paths, the cell order); and what cannot be invariant is said. */
static void test_without_invariance_logits_move_with_the_pass(void **state) {
    (void)state;
    attention_case flash = {SPECD_FLASH_ATTN_ON, SPECD_CACHE_TYPE_F16, SPECD_CACHE_TYPE_F16};
    float **ref = alone(h64_path, flash, false);
    int32_t in_passes = in_passes_of(h64_path, flash, false, 4, ref);
    int32_t beside = beside_slots(h64_path, flash, false, ref);
    print_message("without invariance: %d and %d of %d tokens differ (passes of 4, beside slots)\n", in_passes,
                  beside, N_TOKENS);
    assert_true(in_passes > 0 && beside > 0);
    free_table(ref);

    specd_engine *off = open_invariant(h64_path, flash, N_SLOTS, SLOT_CTX, false);
    specd_invariance_info info = specd_engine_invariance(off);
    assert_false(info.invariant);
    assert_false(info.requested);
    assert_non_null(strstr(info.note, "--batch-invariant off"));
    specd_engine_free(off);
    attention_case plain = {SPECD_FLASH_ATTN_OFF, SPECD_CACHE_TYPE_F16, SPECD_CACHE_TYPE_F32};
    specd_engine *slots = open_invariant(h64_path, plain, N_SLOTS, SLOT_CTX, true);
    info = specd_engine_invariance(slots);
    assert_false(info.invariant);
    assert_true(info.requested);
    assert_non_null(strstr(info.note, "flash attention is off with 4 slots"));
    specd_engine_free(slots);
}

/* A quantized V cache needs flash attention, as in llama.cpp: refused with the flags to change. */
static void test_quantized_v_without_flash_attention_is_refused(void **state) {
    (void)state;
    specd_engine_params p = specd_engine_default_params();
    p.target_path = h64_path;
    p.n_ctx = 128;
    p.cache_type_v = SPECD_CACHE_TYPE_Q8_0;
    specd_engine *e = NULL;
    char *err = NULL;
    assert_int_equal(specd_engine_new(&p, &e, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "-ctv q8_0"));
    assert_non_null(strstr(err, "-fa on"));
    specd_free(err);
}

/* ---- eight concurrent greedy requests ----------------------------------------------------- */

static const char *requests[8] = {
    "the little girl saw a big red ball", "one day the dog ran to the park with his mom", "she was happy",
    "once upon a time there was a cat", "the boy and the bird", "a big tree in the garden",
    "mom said the sun was hot", "he wanted to play with the toy",
};

static specd_generation_params greedy(bool speculate) {
    specd_generation_params g = specd_generation_default_params();
    g.n_predict = 24;
    g.ignore_eos = true;
    g.sampling.temperature = 0.0f;
    g.n_probs = 3; /* the target's probabilities: compared bit for bit */
    g.speculative.type = speculate ? SPECD_SPEC_DRAFT : SPECD_SPEC_NONE;
    g.speculative.draft_max = 4;
    return g;
}

static specd_session *begin(specd_engine *e, int32_t slot, const char *text, const specd_generation_params *g) {
    specd_token *tokens = NULL;
    int32_t n = 0;
    assert_int_equal(specd_tokenize(e, text, true, &tokens, &n, NULL), SPECD_OK);
    specd_session *s = NULL;
    char *err = NULL;
    if (specd_session_begin_in_slot(e, slot, tokens, n, g, &s, &err) != SPECD_OK) fail_msg("slot %d: %s", slot, err);
    specd_free(tokens);
    return s;
}

/* One round as specd serve runs it (src/rpc/completion.c): the sessions still going draft
 * together, then ONE target pass holds every tree and the chunks of prompts still coming in, then
 * each that was not ingesting accepts. */
static void round_of(specd_session **s, int32_t n) {
    specd_session *live[8];
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (s[i] && !specd_session_done(s[i])) live[m++] = s[i];
    char *errs[8] = {0};
    if (specd_sessions_draft(live, m, NULL, errs) != SPECD_OK) fail_msg("draft: %s", errs[0]);
    int32_t k = 0;
    bool ingesting[8];
    for (int32_t i = 0; i < m; i++)
        if (!specd_session_done(live[i])) {
            ingesting[k] = specd_session_pending_prompt(live[i]) > 0; /* adds a prompt chunk: nothing to accept */
            live[k++] = live[i];
        }
    if (specd_sessions_verify(live, k, NULL, NULL, errs) != SPECD_OK) fail_msg("pass: %s", errs[0]);
    for (int32_t i = 0; i < k; i++) {
        char *err = NULL;
        if (!ingesting[i] && specd_session_accept(live[i], NULL, &err) != SPECD_OK) fail_msg("accept: %s", err);
    }
}

static specd_result run_with(specd_engine *e, const char *text, const specd_generation_params *params) {
    specd_generation_params g = *params;
    specd_session *s = begin(e, 0, text, &g);
    for (int steps = 0; !specd_session_done(s); steps++) {
        assert_true(steps < 1000);
        round_of(&s, 1);
    }
    specd_result r;
    specd_session_take_result(s, &r);
    specd_session_free(s);
    return r;
}

static specd_result run_alone(specd_engine *e, const char *text, bool speculate) {
    specd_generation_params g = greedy(speculate);
    return run_with(e, text, &g);
}

/* Whether two greedy runs agree, tokens and probabilities, bit for bit. */
static bool same_bits(const specd_result *a, const specd_result *b) {
    if (a->n_tokens != b->n_tokens || memcmp(a->tokens, b->tokens, (size_t)a->n_tokens * sizeof *a->tokens)) return false;
    return !memcmp(a->probs, b->probs, (size_t)(a->n_tokens * a->n_probs) * sizeof *a->probs);
}

static void assert_same_bits(const specd_result *got, const specd_result *want, const char *what) {
    if (got->n_tokens != want->n_tokens) fail_msg("%s: %d tokens vs %d", what, got->n_tokens, want->n_tokens);
    for (int32_t i = 0; i < got->n_tokens; i++)
        if (got->tokens[i] != want->tokens[i]) fail_msg("%s: token %d is %d, alone %d", what, i, got->tokens[i], want->tokens[i]);
    assert_int_equal(got->n_probs, want->n_probs);
    for (int32_t i = 0; i < got->n_tokens * got->n_probs; i++)
        if (got->probs[i].token != want->probs[i].token ||
            memcmp(&got->probs[i].prob, &want->probs[i].prob, sizeof(float)) != 0)
            fail_msg("%s: probability %d of token %d is %.9g, alone %.9g", what, i % got->n_probs, i / got->n_probs,
                     (double)got->probs[i].prob, (double)want->probs[i].prob);
}

/* specd serve's default engine (8 slots here, flash attention auto): 8 greedy requests started
 * together, half of them a round later, give exactly what each gives alone on that engine, with
 * speculation and without: the same tokens and the same probabilities, bit for bit. */
static specd_engine_params serve_engine(void) {
    specd_engine_params p = specd_engine_default_params();
    p.target_path = h64_path;
    p.draft_path = draft_h64_path;
    p.n_parallel = 8;
    p.n_ctx_per_slot = 128;
    p.n_threads = 1;
    p.flash_attn = SPECD_FLASH_ATTN_AUTO; /* as specd serve with several slots */
    return p;
}

static void test_eight_concurrent_greedy_requests_equal_their_runs_alone(void **state) {
    (void)state;
    specd_engine_params p = serve_engine();
    specd_engine *e = NULL;
    char *err = NULL;
    if (specd_engine_new(&p, &e, &err) != SPECD_OK) fail_msg("engine: %s", err);
    assert_true(specd_engine_invariance(e).invariant);
    specd_result alone[8], plain[8];
    for (int i = 0; i < 8; i++) {
        alone[i] = run_alone(e, requests[i], true);
        plain[i] = run_alone(e, requests[i], false);
        assert_same_bits(&alone[i], &plain[i], requests[i]);
    }
    for (int i = 0; i < 8; i++) specd_engine_slot_forget(e, i); /* every prompt decoded again */
    specd_session *s[8] = {0};
    /* even slots draft as the engine's policy chooses (on this tiny pair, often not at all); odd
     * slots ask for drafts of 4 every step, so every round's pass holds drafts */
    specd_generation_params g = greedy(true), fixed = g;
    fixed.speculative.adaptive = false;
    for (int i = 0; i < 4; i++) s[i] = begin(e, i, requests[i], i % 2 ? &fixed : &g);
    int64_t drafted = 0;
    for (int rounds = 0, busy = 1; busy; rounds++) {
        assert_true(rounds < 1000);
        if (rounds == 1)
            for (int i = 4; i < 8; i++) s[i] = begin(e, i, requests[i], i % 2 ? &fixed : &g);
        round_of(s, 8);
        busy = 0;
        for (int i = 0; i < 8; i++) busy |= s[i] == NULL || !specd_session_done(s[i]);
    }
    for (int i = 0; i < 8; i++) {
        specd_result r;
        specd_session_take_result(s[i], &r);
        char what[96];
        snprintf(what, sizeof what, "request %d of 8 at once", i);
        assert_same_bits(&r, &alone[i], what);
        drafted += r.stats.n_drafted;
        specd_result_clear(&r);
        specd_result_clear(&alone[i]);
        specd_result_clear(&plain[i]);
        specd_session_free(s[i]);
    }
    assert_true(drafted >= 4 * 20);
    specd_engine_free(e);

    /* The negative control: without batch invariance the same requests alone give other
     * probabilities with speculation than without (the passes differ). */
    p.batch_invariant = false;
    if (specd_engine_new(&p, &e, &err) != SPECD_OK) fail_msg("engine: %s", err);
    int differ = 0;
    for (int i = 0; i < 8; i++) {
        specd_result with = run_alone(e, requests[i], true), without = run_alone(e, requests[i], false);
        differ += !same_bits(&with, &without);
        specd_result_clear(&with);
        specd_result_clear(&without);
    }
    print_message("without batch invariance %d of 8 requests differ with speculation and without\n", differ);
    assert_true(differ > 0);
    specd_engine_free(e);
}

/* One slot, greedy: trees (forced: every split the draft offers, or where they pay) give the
 * tokens and probabilities of the run without speculation, bit for bit, on eight requests;
 * returns the tree steps. */
static int64_t trees_bit_for_bit(specd_flash_attn fa, specd_draft_tree_mode tree) {
    specd_engine_params p = serve_engine();
    p.n_parallel = 1;
    p.n_ctx_per_slot = 256;
    p.flash_attn = fa;
    specd_engine *e = NULL;
    char *err = NULL;
    if (specd_engine_new(&p, &e, &err) != SPECD_OK) fail_msg("engine: %s", err);
    assert_int_equal(e->inv.attention, fa == SPECD_FLASH_ATTN_ON ? SPECD_INVARIANT_FLASH : SPECD_INVARIANT_PLAIN);
    specd_generation_params trees = greedy(true);
    trees.n_predict = 48;
    trees.speculative.tree = tree;
    if (tree == SPECD_DRAFT_TREE_ON) {
        trees.speculative.adaptive = false;
        trees.speculative.draft_min = trees.speculative.draft_max;
        trees.speculative.draft_p_split = 0.0f; /* branch wherever the draft has a second choice */
    }
    specd_generation_params plain = greedy(false);
    plain.n_predict = trees.n_predict;
    int64_t tree_steps = 0;
    for (int i = 0; i < 8; i++) {
        specd_result with = run_with(e, requests[i], &trees), without = run_with(e, requests[i], &plain);
        assert_same_bits(&with, &without, requests[i]);
        tree_steps += with.stats.n_tree_steps;
        specd_result_clear(&with);
        specd_result_clear(&without);
    }
    specd_engine_free(e);
    return tree_steps;
}

/* The cells a slot drops wait in the trash for a compaction, and every pass attends them (masked)
 * up to the last used cell: they are compacted away once they outnumber the slots' own cells,
 * not only when the cache is full (serving 8 clients without drafts, the trash of finished
 * requests cost 5% of each pass on the benchmark pair). Requests alternating in one slot of the
 * serve engine (1024 cells) keep the cache well below full, and each still gives, bit for bit,
 * what it gave first. */
static void test_the_trash_is_compacted_once_it_outnumbers_the_live_cells(void **state) {
    (void)state;
    specd_engine_params p = serve_engine();
    specd_engine *e = NULL;
    char *err = NULL;
    if (specd_engine_new(&p, &e, &err) != SPECD_OK) fail_msg("engine: %s", err);
    specd_result first[2];
    int64_t most_used = 0;
    for (int run = 0; run < 40; run++) {
        specd_result r = run_alone(e, requests[run % 2], run % 4 < 2);
        if (run < 2) first[run] = r;
        else assert_same_bits(&r, &first[run % 2], "a request run again after the trash was compacted");
        if (run >= 2) specd_result_clear(&r);
        if (e->inv.cells_used > most_used) most_used = e->inv.cells_used;
    }
    assert_true(e->inv.n_compactions >= 2);
    /* at most 512 cells of trash beside a request's own (under 100 here), and one pass more */
    assert_true(most_used < 700);
    for (int i = 0; i < 2; i++) specd_result_clear(&first[i]);
    specd_engine_free(e);
}

/* Flash attention sums a row's cells in index order, skipping masked ones: a tree's branches are
 * invariant. Plain attention (specd run's default) sums cells in lanes set by their index, so a
 * side branch's tokens, past the cells of their positions, are not: trees are drafted there only
 * when forced (the accepted path's main-branch tokens stay in place, kv.c), never where they pay. */
static void test_trees_are_bit_for_bit_where_they_are_drafted_by_default(void **state) {
    (void)state;
    int64_t flash_forced = trees_bit_for_bit(SPECD_FLASH_ATTN_ON, SPECD_DRAFT_TREE_ON);
    int64_t plain_auto = trees_bit_for_bit(SPECD_FLASH_ATTN_OFF, SPECD_DRAFT_TREE_AUTO);
    print_message("tree steps, all bit for bit: flash attention, forced %lld; plain attention, auto %lld\n",
                  (long long)flash_forced, (long long)plain_auto);
    assert_true(flash_forced > 8);
    assert_int_equal(plain_auto, 0);
}

/* V in f32 is what plain attention needs for invariance on the CPU; with the target on a GPU there
 * is none to keep, and the default V is llama.cpp's f16 (half the V cache), the draft's with it. */
static void test_default_v_cache_is_f32_on_the_cpu_and_f16_on_a_gpu(void **state) {
    (void)state;
    specd_engine_params cpu = specd_engine_default_params(), gpu = cpu, asked = cpu;
    specd_settle_default_v_cache(&cpu, false);
    assert_int_equal(specd_ggml_cache_type(&cpu, true, false), GGML_TYPE_F32);
    assert_int_equal(specd_ggml_cache_type(&cpu, true, true), GGML_TYPE_F32);
    specd_settle_default_v_cache(&gpu, true);
    assert_int_equal(specd_ggml_cache_type(&gpu, true, false), GGML_TYPE_F16);
    assert_int_equal(specd_ggml_cache_type(&gpu, true, true), GGML_TYPE_F16);
    assert_int_equal(specd_ggml_cache_type(&gpu, false, false), GGML_TYPE_F16);
    asked.cache_type_v = SPECD_CACHE_TYPE_F32; /* what the user asks for stays */
    specd_settle_default_v_cache(&asked, true);
    assert_int_equal(specd_ggml_cache_type(&asked, true, false), GGML_TYPE_F32);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODELS_DIR\n", argv[0]);
        return 2;
    }
    snprintf(h8_path, sizeof h8_path, "%s/target.gguf", argv[1]);
    snprintf(h64_path, sizeof h64_path, "%s/target-h64.gguf", argv[1]);
    snprintf(q8_path, sizeof q8_path, "%s/target-h64-q8.gguf", argv[1]);
    snprintf(draft_h64_path, sizeof draft_h64_path, "%s/draft-h64.gguf", argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flash_attention_is_invariant_for_every_cache_type),
        cmocka_unit_test(test_q8_0_weights_and_one_token_passes_past_512_cells),
        cmocka_unit_test(test_plain_attention_is_invariant_with_one_slot),
        cmocka_unit_test(test_plain_one_token_passes_have_the_shape_of_one_draft),
        cmocka_unit_test(test_padded_chains_keep_one_shape_and_their_logits),
        cmocka_unit_test(test_the_default_attention_pads_nothing_where_the_weights_agree),
        cmocka_unit_test(test_without_invariance_logits_move_with_the_pass),
        cmocka_unit_test(test_eight_concurrent_greedy_requests_equal_their_runs_alone),
        cmocka_unit_test(test_the_trash_is_compacted_once_it_outnumbers_the_live_cells),
        cmocka_unit_test(test_trees_are_bit_for_bit_where_they_are_drafted_by_default),
        cmocka_unit_test(test_quantized_v_without_flash_attention_is_refused),
        cmocka_unit_test(test_default_v_cache_is_f32_on_the_cpu_and_f16_on_a_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
