/* head.c - a drafting head's companion context: checks and creation (with the target's taps), the
 * slots' sequences kept in step with the target, and the drafters' calls (head.h). The kinds'
 * own inputs are in head_mtp.c, head_eagle3.c and head_dflash.c. */
#include "head_internal.h"

#include "llama_ext.h"
#include "llama_log.h"

#include "../util/util.h"

#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const specd_target_observer head_observer; /* the target's decodes (kv.c), at the end */

/* Architectures of the pinned llama.cpp whose graph has an MTP (LLM_GRAPH_TYPE_DECODER_MTP) head
 * and outputs the hidden state it reads (src/models/: graph_mtp and t_h_nextn). */
static const char *const mtp_archs[] = {"bailingmoe3", "cohere2moe", "deepseek2", "deepseek32", "deepseek4",
                                        "glm-dsa", "glm4moe", "hy_v3", "mimo2", "nemotron_h_moe",
                                        "qwen35", "qwen35moe", "qwen3next", "step35"};
/* Of those, the architectures whose MTP graph takes any of several nextn layers (llama.cpp's
 * nextn_layer_offset); every other one asserts exactly one, and aborts the process otherwise. */
static const char *const multi_nextn_archs[] = {"deepseek32", "deepseek4", "step35"};
/* Architectures whose graph outputs its layers' inputs (t_layer_inp), what EAGLE-3 and DFlash read;
 * on any other llama.cpp aborts the process when asked for them. */
static const char *const layer_input_archs[] = {
    "bailingmoe3", "deepseek4", "gemma4", "gpt-oss", "hunyuan_vl", "lfm2", "llama", "minimax-01", "minimax-m2",
    "muse-glimmer", "nanbeige", "nemotron_h", "qwen3", "qwen35", "qwen35moe", "qwen3moe", "qwen3next", "qwen4exp"};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static bool in_list(const char *arch, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(arch, list[i])) return true;
    return false;
}

static void arch_of(const struct llama_model *m, char *buf, size_t size) {
    if (llama_model_meta_val_str(m, "general.architecture", buf, size) < 0) snprintf(buf, size, "unknown");
}

bool specd_head_is_head_model(const struct llama_model *model) {
    char arch[48];
    arch_of(model, arch, sizeof arch);
    return !strcmp(arch, "eagle3") || !strcmp(arch, "dflash");
}

specd_head_kind specd_engine_head(const specd_engine *e) { return e && e->head ? e->head->kind : SPECD_HEAD_NONE; }

const char *specd_engine_head_desc(const specd_engine *e) { return e && e->head ? e->head->desc : ""; }

/* ---- checks: does the head fit the target? --------------------------------------------------- */

static specd_status check_mtp(const specd_engine *e, char **error) {
    char arch[48];
    arch_of(e->target.model, arch, sizeof arch);
    if (llama_model_n_layer_nextn(e->target.model) < 1) {
        specd_set_error(error, "the target model '%s' (%s) has no multi-token-prediction (nextn) layers: 'mtp' needs a "
                        "model that ships them (GLM-4.5 to 4.7, Qwen3.5, DeepSeek-V3 style)", e->target_path, arch);
        return SPECD_ERR_MODEL_LOAD;
    }
    if (!in_list(arch, mtp_archs, ARRAY_LEN(mtp_archs))) {
        specd_set_error(error, "the target model '%s' has nextn layers, but llama.cpp has no MTP graph for its "
                        "architecture (%s): 'mtp' cannot run them", e->target_path, arch);
        return SPECD_ERR_MODEL_LOAD;
    }
    int32_t n_nextn = llama_model_n_layer_nextn(e->target.model);
    if (n_nextn > 1 && !in_list(arch, multi_nextn_archs, ARRAY_LEN(multi_nextn_archs))) {
        specd_set_error(error, "the target model '%s' (%s) has %d nextn layers, but llama.cpp's MTP graph for %s "
                        "runs exactly one: 'mtp' cannot draft with it (a GGUF converted with its first nextn "
                        "layer only would do)", e->target_path, arch, n_nextn, arch);
        return SPECD_ERR_MODEL_LOAD;
    }
    return SPECD_OK;
}

/* The target layers a head reads as taps: each below the target's layer count (its input), or equal
 * to it (the hidden state before the output, on architectures that output it). */
static specd_status target_taps(const specd_engine *e, const specd_head *h, const char *path, char **error,
                                specd_taps *taps) {
    const int32_t *ids = NULL;
    int32_t n = specd_ext_target_layers(h->model, &ids), n_layer = llama_model_n_layer(e->target.model);
    char arch[48];
    arch_of(e->target.model, arch, sizeof arch);
    if (n < 1 || n > SPECD_MAX_TAPS) {
        specd_set_error(error, "the head '%s' names %d target layers (1 to %d are supported)", path, n, SPECD_MAX_TAPS);
        return SPECD_ERR_MODEL_LOAD;
    }
    bool nextn_ok = in_list(arch, mtp_archs, ARRAY_LEN(mtp_archs));
    if (!in_list(arch, layer_input_archs, ARRAY_LEN(layer_input_archs))) {
        specd_set_error(error, "the head '%s' reads the target's layers, but llama.cpp does not output them for the "
                        "target's architecture (%s)", path, arch);
        return SPECD_ERR_MODEL_LOAD;
    }
    taps->n = n;
    taps->n_embd = llama_model_n_embd(e->target.model);
    for (int32_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] > n_layer || (ids[i] == n_layer && !nextn_ok)) {
            specd_set_error(error, "the head '%s' reads target layer %d, but the target model '%s' has %d layers "
                            "(0 to %d): it was made for another target", path, ids[i], e->target_path, n_layer,
                            n_layer - 1);
            return SPECD_ERR_MODEL_LOAD;
        }
        taps->layer[i] = ids[i] == n_layer ? SPECD_TAP_NEXTN : ids[i];
    }
    return SPECD_OK;
}

/* The hidden size a head was trained on must be the target's. */
static specd_status check_hidden_size(const specd_engine *e, const specd_head *h, const char *path, char **error) {
    int32_t target = llama_model_n_embd(e->target.model), claimed = llama_model_n_embd(h->model);
    char buf[32];
    if (h->kind == SPECD_HEAD_EAGLE3 && llama_model_meta_val_str(h->model, "eagle3.target_hidden_size", buf, sizeof buf) >= 0)
        claimed = atoi(buf);
    if (claimed == target) return SPECD_OK;
    specd_set_error(error, "the head '%s' was made for a target of hidden size %d, but the target model '%s' has %d: "
                    "use the head trained for this target", path, claimed, e->target_path, target);
    return SPECD_ERR_MODEL_LOAD;
}

static specd_status check_vocab(const specd_engine *e, const specd_head *h, const char *path, char **error) {
    char *why = NULL;
    specd_status st = specd_check_vocab_compatible(e->target.model, h->model, error ? &why : NULL);
    if (st != SPECD_OK)
        specd_set_error(error, "the head '%s' cannot draft for the target model '%s': %s", path, e->target_path,
                        why ? why : "their vocabularies differ");
    free(why);
    return st;
}

/* DFlash: its block and mask token; DFlash2 (a selector) is not supported. */
static specd_status dflash_settings(specd_head *h, const char *path, char **error) {
    char buf[32];
    h->block_size = llama_model_meta_val_str(h->model, "dflash.block_size", buf, sizeof buf) >= 0 ? atoi(buf) : 16;
    h->drafts_anchor = h->kind == SPECD_HEAD_DSPARK &&
                       (llama_model_meta_val_str(h->model, "dflash.sample_from_anchor", buf, sizeof buf) < 0 ||
                        !strcmp(buf, "true"));
    h->mask = llama_vocab_mask(llama_model_get_vocab(h->model));
    const char *why = specd_ext_dflash_selector_top_k(h->model) > 0 ? "is a DFlash2 model (a selector lattice): specd "
                                                                      "drafts with DFlash and DSpark heads only"
                      : h->mask < 0 ? "names no mask token (tokenizer.ggml.mask_token_id)"
                      : h->block_size < 2 || h->block_size > 256 ? "has a block size outside 2 to 256"
                                                                 : NULL;
    if (why) {
        specd_set_error(error, "the head '%s' %s", path, why);
        return SPECD_ERR_MODEL_LOAD;
    }
    bool causal = llama_model_meta_val_str(h->model, "dflash.attention.causal", buf, sizeof buf) >= 0 && !strcmp(buf, "true");
    llama_set_causal_attn(h->ctx, causal);
    return SPECD_OK;
}

/* ---- creation ------------------------------------------------------------------------------------ */

static specd_status make_context(specd_engine *e, specd_head *h, char **error) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)e->n_ctx * (uint32_t)e->n_parallel;
    cp.n_batch = cp.n_ubatch = (uint32_t)e->n_batch;
    cp.n_seq_max = (uint32_t)e->n_parallel;
    cp.n_outputs_max = (uint32_t)e->n_batch;
    /* one slot, one stream: a unified cache costs each decode a check of all 256 x 256 sequence
     * pairs (engine.c, one_sequence_contexts); several slots share one cache's cells */
    cp.kv_unified = e->n_parallel > 1;
    cp.n_threads = cp.n_threads_batch = e->params.n_threads;
    cp.no_perf = true;
    cp.ctx_other = e->target.ctx; /* the head's missing tensors (embeddings, output) are the target's */
    if (h->kind == SPECD_HEAD_MTP) cp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
    specd_apply_attention_settings(&e->params, &cp);
    specd_log_capture capture;
    specd_log_capture_begin(&capture);
    h->ctx = llama_init_from_model(h->model, cp);
    const char *reason = specd_log_capture_end(&capture);
    if (!h->ctx) {
        char what[sizeof h->desc + 32];
        snprintf(what, sizeof what, "context of the %s", h->desc);
        return specd_context_failed(error, what, cp.n_ctx, reason);
    }
    return SPECD_OK;
}

/* The batch: tokens and embedding rows together (llama_batch_init makes one or the other). */
static bool make_batch(specd_head *h, int32_t cap, int32_t width) {
    h->batch = llama_batch_init(cap, width, 1);
    h->batch.token = malloc((size_t)cap * sizeof *h->batch.token);
    h->batch_cap = cap;
    h->batch_width = width;
    return h->batch.token && h->batch.pos;
}

static specd_status make_slots(specd_engine *e, specd_head *h, char **error) {
    int32_t width = h->kind == SPECD_HEAD_MTP ? llama_model_n_embd_out(e->target.model) : h->n_embd;
    h->views = calloc((size_t)e->n_parallel, sizeof *h->views);
    h->features = calloc((size_t)e->n_parallel, sizeof *h->features);
    h->prev = calloc((size_t)width, sizeof *h->prev);
    h->zeros = calloc((size_t)width, sizeof *h->zeros);
    h->scratch = calloc((size_t)e->n_batch * (size_t)h->n_embd, sizeof *h->scratch);
    bool ok = h->views && h->features && h->prev && h->zeros && h->scratch && make_batch(h, e->n_batch, width);
    for (int32_t i = 0; ok && i < e->n_parallel; i++) {
        h->views[i].tokens = specd_alloc_array((size_t)e->n_ctx + 2, sizeof *h->views[i].tokens);
        ok = h->views[i].tokens != NULL;
        h->features[i].width = specd_taps_width(&h->taps);
        specd_engine_target_view(e, i)->features = &h->features[i];
    }
    if (!ok) specd_set_error(error, "out of memory for the %s's slots", h->desc);
    return ok ? SPECD_OK : SPECD_ERR_NO_MEMORY;
}

/* Whether the GGUF file holds a tensor of this name (read without loading anything). */
static bool file_has_tensor(const char *path, const char *name) {
    struct gguf_init_params params = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *g = gguf_init_from_file(path, params);
    bool found = g && gguf_find_tensor(g, name) >= 0;
    if (g) gguf_free(g);
    return found;
}

static specd_head_kind kind_of(struct llama_model *head_model, const char *path) {
    if (!head_model) return SPECD_HEAD_MTP;
    char arch[48];
    arch_of(head_model, arch, sizeof arch);
    if (!strcmp(arch, "eagle3")) return SPECD_HEAD_EAGLE3;
    /* the Markov head tells DSpark from DFlash, as llama.cpp's common_speculative_types_from_gguf */
    return file_has_tensor(path, "markov_w1.weight") ? SPECD_HEAD_DSPARK : SPECD_HEAD_DFLASH;
}

static void describe(specd_head *h, const specd_engine *e, const char *path) {
    static const char *const names[] = {"", "MTP layers", "EAGLE-3 head", "DFlash head", "DSpark head"};
    if (h->kind == SPECD_HEAD_MTP) snprintf(h->desc, sizeof h->desc, "MTP layers of the target '%s'", e->target_path);
    else snprintf(h->desc, sizeof h->desc, "%s '%s'", names[h->kind], path);
}

static const specd_head_ops *ops_of(specd_head_kind kind) {
    switch (kind) {
    case SPECD_HEAD_MTP: return &specd_head_mtp_ops;
    case SPECD_HEAD_EAGLE3: return &specd_head_eagle3_ops;
    default: return &specd_head_dflash_ops;
    }
}

/* The checks that need only the models, before any context is made. */
static specd_status check_head(specd_engine *e, specd_head *h, const char *path, char **error) {
    if (h->kind == SPECD_HEAD_MTP) return check_mtp(e, error);
    specd_status st = check_vocab(e, h, path, error);
    if (st == SPECD_OK) st = check_hidden_size(e, h, path, error);
    if (st == SPECD_OK) st = target_taps(e, h, path, error, &h->taps);
    return st;
}

specd_status specd_head_new(specd_engine *e, struct llama_model *head_model, const char *path, bool mtp,
                            char **error) {
    if (head_model && mtp) {
        llama_model_free(head_model);
        specd_set_error(error, "'mtp' and the head '%s' both want the draft's place: load one head at a time", path);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    specd_head *h = calloc(1, sizeof *h);
    if (!h) {
        if (head_model) llama_model_free(head_model);
        specd_set_error(error, "out of memory for the drafting head");
        return SPECD_ERR_NO_MEMORY;
    }
    e->head = h;
    e->observer = &head_observer;
    h->kind = kind_of(head_model, path);
    h->ops = ops_of(h->kind);
    h->model = head_model ? head_model : e->target.model;
    h->n_embd = llama_model_n_embd(h->model);
    describe(h, e, path);
    if (h->kind == SPECD_HEAD_MTP) h->taps = (specd_taps){1, {SPECD_TAP_NEXTN}, llama_model_n_embd_out(e->target.model)};
    specd_status st = check_head(e, h, path, error);
    if (st == SPECD_OK) st = make_context(e, h, error);
    if (st == SPECD_OK && (h->kind == SPECD_HEAD_DFLASH || h->kind == SPECD_HEAD_DSPARK))
        st = dflash_settings(h, path, error);
    /* the head reads its own hidden state after each drafted token (MTP, EAGLE-3), the target its taps */
    bool chain = h->kind == SPECD_HEAD_MTP || h->kind == SPECD_HEAD_EAGLE3;
    if (st == SPECD_OK && ((chain && !specd_ext_output_nextn(h->ctx, true, true)) ||
                           !specd_taps_enable(&h->taps, e->target.ctx))) {
        specd_set_error(error, "llama.cpp cannot output the hidden states the %s reads", h->desc);
        st = SPECD_ERR_MODEL_LOAD;
    }
    if (st == SPECD_OK) st = make_slots(e, h, error);
    return st;
}

void specd_head_free(specd_engine *e) {
    specd_head *h = e->head;
    if (!h) return;
    for (int32_t i = 0; h->views && i < e->n_parallel; i++) free(h->views[i].tokens);
    for (int32_t i = 0; h->features && i < e->n_parallel; i++) specd_features_free(&h->features[i]);
    if (h->ctx) llama_free(h->ctx);
    if (h->model && h->model != e->target.model) llama_model_free(h->model);
    if (h->batch_cap) llama_batch_free(h->batch);
    free(h->views);
    free(h->features);
    free(h->prev);
    free(h->zeros);
    free(h->scratch);
    free(h);
    e->head = NULL;
    e->observer = NULL;
}

/* ---- keeping a slot's sequence in step with the target ------------------------------------------- */

/* Drops the slot's entries from position `n` on. */
static void truncate_view(specd_head *h, int32_t slot, int32_t n) {
    specd_head_view *v = &h->views[slot];
    llama_memory_seq_rm(llama_get_memory(h->ctx), slot, n, -1);
    if (n < v->n_kv) v->n_kv = n;
    v->n_draft = 0;
}

/* Keeps the entries whose tokens the target still has: its tokens[0..n) and `ahead` confirmed
 * tokens after them (the root). */
static void keep_common(specd_head *h, int32_t slot, const specd_token *tokens, int32_t n) {
    specd_head_view *v = &h->views[slot];
    int32_t covered = v->n_kv > 0 ? v->n_kv + h->ops->lookahead : 0, common = 0;
    while (common < covered && common < n && v->tokens[common] == tokens[common]) common++;
    int32_t keep = common - h->ops->lookahead;
    truncate_view(h, slot, keep < 0 ? 0 : keep < v->n_kv ? keep : v->n_kv);
}

/* The target decodes again the cached positions whose rows the head lacks: those before the held
 * ones (a prompt found in the cache: its last row, the one before the common prefix's end), those
 * after them (a tree pass of another drafter, whose branches shared positions), or all. */
static specd_status redecode_target(specd_engine *e, specd_head *h, int32_t slot, const specd_token *tokens,
                                    int32_t n, char **error) {
    const specd_features *f = &h->features[slot];
    int32_t from = specd_head_first_row(h, slot), to = n;
    if (f->lo <= from && f->hi > from) from = f->hi; /* only the end is missing */
    else if (f->lo > from && f->lo < n && f->hi >= n) to = f->lo; /* only the start */
    specd_status st = specd_slot_redecode(e, specd_engine_target_view(e, slot), tokens, from, to, error);
    if (st == SPECD_OK && !specd_features_hold(f, specd_head_first_row(h, slot), n)) {
        specd_set_error(error, "the target's hidden states for the %s are missing after decoding them again", h->desc);
        st = SPECD_ERR_DECODE;
    }
    return st;
}

/* Makes the slot's sequence a prefix of the target's tokens[0..n) with the rows to reach n. */
static specd_status align(specd_engine *e, specd_head *h, int32_t slot, const specd_token *tokens, int32_t n,
                          char **error) {
    specd_model_slot *target = specd_engine_target_view(e, slot);
    specd_status st = target->n_kv == n ? SPECD_OK : specd_slot_sync(e, target, tokens, n, false, NULL, NULL, error);
    if (st != SPECD_OK) return st;
    keep_common(h, slot, tokens, n);
    if (!specd_features_hold(&h->features[slot], specd_head_first_row(h, slot), n)) st = redecode_target(e, h, slot, tokens, n, error);
    return st;
}

/* ---- the drafters' calls ----------------------------------------------------------------------- */

static specd_head *active_head(specd_engine *e, int32_t *slot) {
    *slot = e->active_slot;
    return e->head;
}

specd_status specd_head_start(specd_engine *e, const specd_token *history, int32_t n, const float **logits,
                              char **error) {
    int32_t slot;
    specd_head *h = active_head(e, &slot);
    h->busy = true;
    specd_status st = align(e, h, slot, history, n - 1, error);
    if (st == SPECD_OK) st = h->ops->start(e, h, slot, history, n - 1, history[n - 1], logits, error);
    h->busy = false;
    return st;
}

specd_status specd_head_catch_up(specd_engine *e, const specd_token *tokens, int32_t n, char **error) {
    int32_t slot;
    specd_head *h = active_head(e, &slot);
    h->busy = true;
    specd_status st = align(e, h, slot, tokens, n, error);
    int32_t up_to = n - h->ops->lookahead;
    if (st == SPECD_OK && up_to > h->views[slot].n_kv) st = h->ops->catch_up(e, h, slot, tokens, up_to, error);
    h->busy = false;
    return st;
}

specd_status specd_head_next(specd_engine *e, specd_token token, const float **logits, char **error) {
    int32_t slot;
    specd_head *h = active_head(e, &slot);
    specd_head_view *v = &h->views[slot];
    if (v->n_kv + v->n_draft >= e->n_ctx) {
        specd_set_error(error, "the %s's context of %d tokens is full", h->desc, e->n_ctx);
        return SPECD_ERR_CONTEXT;
    }
    return h->ops->next(e, h, slot, token, logits, error);
}

specd_status specd_head_block(specd_engine *e, const specd_token *history, int32_t n, int32_t n_block, char **error) {
    int32_t slot;
    specd_head *h = active_head(e, &slot);
    if (n - 1 + n_block > e->n_ctx || n_block > h->batch_cap) {
        specd_set_error(error, "a block of %d tokens after %d does not fit the %s's context (%d) or batch (%d)", n_block,
                        n - 1, h->desc, e->n_ctx, h->batch_cap);
        return SPECD_ERR_CONTEXT;
    }
    h->busy = true;
    specd_status st = align(e, h, slot, history, n - 1, error);
    if (st == SPECD_OK) st = h->ops->catch_up(e, h, slot, history, n - 1, error);
    struct llama_batch tokens = h->batch; /* a token batch: no embedding rows */
    tokens.embd = NULL;
    tokens.n_tokens = n_block;
    for (int32_t i = 0; i < n_block; i++) {
        tokens.token[i] = i == 0 ? history[n - 1] : h->mask;
        tokens.pos[i] = n - 1 + i;
        tokens.n_seq_id[i] = 1;
        tokens.seq_id[i][0] = slot;
        tokens.logits[i] = true;
    }
    if (st == SPECD_OK && llama_decode(h->ctx, tokens) != 0) {
        specd_set_error(error, "llama_decode failed on a block of %d tokens of the %s", n_block, h->desc);
        st = SPECD_ERR_DECODE;
    }
    h->batch.n_tokens = 0;
    if (st == SPECD_OK) h->views[slot].n_draft = n_block;
    h->busy = false;
    return st;
}

const float *specd_head_block_logits(specd_engine *e, int32_t i) { return llama_get_logits_ith(e->head->ctx, i); }

int32_t specd_head_block_size(const specd_engine *e) { return e->head ? e->head->block_size : 0; }

bool specd_head_drafts_anchor(const specd_engine *e) { return e->head && e->head->drafts_anchor; }

void specd_head_end(specd_engine *e) {
    int32_t slot;
    specd_head *h = active_head(e, &slot);
    specd_head_view *v = &h->views[slot];
    if (v->n_draft > 0) truncate_view(h, slot, v->n_kv);
}

void specd_head_shift(specd_engine *e, int32_t n_keep, int32_t n_discard) {
    int32_t slot;
    specd_head *h = active_head(e, &slot);
    specd_head_view *v = &h->views[slot];
    int32_t end = n_keep + n_discard;
    llama_memory_t mem = llama_get_memory(h->ctx);
    if (v->n_kv <= end || !llama_memory_can_shift(mem) || !llama_memory_seq_rm(mem, slot, n_keep, end)) {
        truncate_view(h, slot, v->n_kv <= n_keep ? v->n_kv : n_keep); /* the next draft decodes the target again */
        return;
    }
    llama_memory_seq_add(mem, slot, end, -1, -n_discard);
    int32_t covered = v->n_kv + h->ops->lookahead;
    memmove(v->tokens + n_keep, v->tokens + end, (size_t)(covered - end) * sizeof *v->tokens);
    v->n_kv -= n_discard;
}

void specd_head_forget_slot(specd_engine *e, int32_t slot) {
    if (!e->head) return;
    truncate_view(e->head, slot, 0);
    specd_features_cut(&e->head->features[slot], 0);
}

/* ---- the target's decodes (kv.c) ----------------------------------------------------------------- */

static specd_status target_decoded(specd_engine *e, specd_model_slot *view, int32_t b0, int32_t pos, int32_t n,
                                   char **error) {
    if (!e->head || !view->features) return SPECD_OK;
    if (specd_features_capture(view->features, &e->head->taps, view->ctx, b0, pos, n)) return SPECD_OK;
    specd_set_error(error, "out of memory for the target's hidden states the %s reads", e->head->desc);
    return SPECD_ERR_NO_MEMORY;
}

static specd_status keep_up(specd_engine *e, specd_model_slot *view, char **error) {
    specd_head *h = e->head;
    if (!h || h->busy || !view->features) return SPECD_OK;
    int32_t slot = view->seq;
    int32_t pending = view->features->hi - specd_head_first_row(h, slot);
    if (pending <= h->batch_cap) return SPECD_OK;
    keep_common(h, slot, view->kv_tokens, view->n_kv);
    int32_t up_to = view->n_kv - h->ops->lookahead;
    if (up_to <= h->views[slot].n_kv || !specd_features_hold(view->features, specd_head_first_row(h, slot), up_to)) return SPECD_OK;
    h->busy = true;
    specd_status st = h->ops->catch_up(e, h, slot, view->kv_tokens, up_to, error);
    h->busy = false;
    return st;
}

static const specd_target_observer head_observer = {target_decoded, keep_up};
