/* tiny_heads.c - make_tiny_model's drafting heads, in the shapes the pinned llama.cpp loads:
 *
 *  - glm4moe: a GLM-4.5-style target (dense layers: leading_dense_block_count covers them all) with
 *    one nextn layer (MTP: eh_proj, enorm, hnorm, attention and a two-expert MoE). Its eh_proj passes
 *    the token's normed embedding through and mixes in --hidden-mix of the target's hidden state, and
 *    the head shares the target's output norm and projection: it predicts what the target predicts
 *    from the current token, shifted by what the hidden state adds.
 *  - eagle3: one decoder layer reading three target layers through fc, sharing the target's token
 *    embeddings and output (ctx_other). Its attention looks at the position itself (q = k = the
 *    token's normed embedding, scaled) and copies the token's embedding (v), so its output is the
 *    token's embedding plus the normed features: the target's next token again.
 *  - dflash: one block-diffusion layer with its own copies of the target's embeddings and output (the
 *    mask token's embedding zeroed). A mask's query and key are then zero, attention is uniform and
 *    the only value that is not zero (or nearly: the features' --hidden-mix) is the anchor's, so
 *    after the final norm the first drafted token is the target's next token.
 *  - dspark: dflash plus the Markov head (markov_w1 = the normed embeddings, markov_w2 = the target's
 *    output): its bias is the target's own next-token logits for the previous token, so the block
 *    follows the target token after token.
 *
 * Together with a target of small --layer-scale (its next token depends mostly on the current one)
 * the heads agree with it often but not always: tests see drafts accepted and rejected. */
#include "tiny_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GLM4MOE_EXPERTS 2
/* EAGLE-3: how sharply attention picks the position itself, and how much the copied token embedding
 * outweighs the normed features in the residual. */
#define EAGLE3_SELF_ATTENTION 3.0
#define EAGLE3_TOKEN_GAIN 8.0
/* DFlash: the feed-forward stays far below the attention output (about one value in the context). */
#define DFLASH_FFN_SCALE 1e-4
/* DSpark: the Markov bias outweighs the block's own logits. */
#define DSPARK_MARKOV_GAIN 3.0
#define MASK_TOKEN_ID 0

bool tiny_heads_handles(model_arch arch) {
    return arch == ARCH_GLM4MOE || arch == ARCH_QWEN35 || arch == ARCH_EAGLE3 || arch == ARCH_DFLASH || arch == ARCH_DSPARK;
}

const char *tiny_heads_arch_name(model_arch arch) {
    switch (arch) {
    case ARCH_GLM4MOE: return "glm4moe";
    case ARCH_QWEN35: return "qwen35";
    case ARCH_EAGLE3: return "eagle3";
    case ARCH_DFLASH:
    case ARCH_DSPARK: return "dflash";
    default: return "llama";
    }
}

void tiny_heads_validate(const model_options *opts) {
    if (opts->arch == ARCH_GLM4MOE) {
        if (opts->n_ff % GLM4MOE_EXPERTS != 0) {
            fail("glm4moe: --n-ff (%d) must be a multiple of %d (its experts)", opts->n_ff, GLM4MOE_EXPERTS);
        }
        return;
    }
    if (opts->arch == ARCH_QWEN35) return;
    if (!opts->target_path) {
        fail("--arch %s needs --target FILE (the target it drafts for)", tiny_heads_arch_name(opts->arch));
    }
    if (opts->n_target_layers < 1 || (opts->arch == ARCH_EAGLE3 && opts->n_target_layers != 3)) {
        fail("--arch %s needs --target-layers (%s)", tiny_heads_arch_name(opts->arch),
             opts->arch == ARCH_EAGLE3 ? "exactly 3" : "at least 1");
    }
    if (opts->n_head_kv != opts->n_head) {
        fail("heads are written with --n-head-kv equal to --n-head");
    }
}

/* ---- the target GGUF a draft head reads ---------------------------------------------------- */

typedef struct target_file {
    struct gguf_context *gguf;
    struct ggml_context *tensors;
    int n_embd, n_layer;
} target_file;

static uint32_t target_u32(const target_file *t, const char *arch, const char *key) {
    char name[128];
    snprintf(name, sizeof name, "%s.%s", arch, key);
    int64_t id = gguf_find_key(t->gguf, name);
    if (id < 0 || gguf_get_kv_type(t->gguf, id) != GGUF_TYPE_UINT32) {
        fail("the target has no %s", name);
    }
    return gguf_get_val_u32(t->gguf, id);
}

static target_file open_target(const char *path) {
    target_file t = {0};
    struct gguf_init_params params = {.no_alloc = false, .ctx = &t.tensors};
    t.gguf = gguf_init_from_file(path, params);
    if (!t.gguf) {
        fail("cannot read the target '%s' as GGUF", path);
    }
    int64_t id = gguf_find_key(t.gguf, "general.architecture");
    if (id < 0) {
        fail("the target '%s' has no general.architecture", path);
    }
    const char *arch = gguf_get_val_str(t.gguf, id);
    t.n_embd = (int)target_u32(&t, arch, "embedding_length");
    t.n_layer = (int)target_u32(&t, arch, "block_count");
    return t;
}

static const float *target_tensor(const target_file *t, const char *name, int64_t ne0, int64_t ne1) {
    struct ggml_tensor *tensor = ggml_get_tensor(t->tensors, name);
    if (!tensor || tensor->type != GGML_TYPE_F32 || tensor->ne[0] != ne0 || tensor->ne[1] != ne1) {
        fail("the target has no F32 tensor %s of %lld x %lld", name, (long long)ne0, (long long)ne1);
    }
    return (const float *)tensor->data;
}

static void close_target(target_file *t) {
    gguf_free(t->gguf);
    ggml_free(t->tensors);
}

/* ---- glm4moe: a target with a nextn layer ------------------------------------------------------ */

static void glm4moe_attention(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                              const model_options *opts, int layer) {
    int64_t n = opts->n_embd, n_kv = (int64_t)(opts->n_embd / opts->n_head) * opts->n_head_kv;
    char name[GGML_MAX_NAME];
    add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "attn_norm.weight"), n);
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "attn_q.weight"), n, n, fan_in_scale(n));
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "attn_k.weight"), n, n_kv, fan_in_scale(n));
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "attn_v.weight"), n, n_kv, fan_in_scale(n));
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "attn_output.weight"), n, n,
               opts->layer_scale * fan_in_scale(n));
    add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "post_attention_norm.weight"), n);
}

/* A dense layer (GLM-4.5's leading ones): the post-attention norm is the feed-forward's input norm. */
static void glm4moe_dense_layer(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                                const model_options *opts, int layer) {
    int64_t n = opts->n_embd, n_ff = opts->n_ff;
    char name[GGML_MAX_NAME];
    glm4moe_attention(gguf, ctx, source, opts, layer);
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ffn_gate.weight"), n, n_ff, fan_in_scale(n));
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ffn_up.weight"), n, n_ff, fan_in_scale(n));
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ffn_down.weight"), n_ff, n,
               opts->layer_scale * fan_in_scale(n_ff));
}

/* The nextn layer: attention, a two-expert MoE with a shared expert, and the MTP projections. */
static void glm4moe_nextn_layer(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                                const model_options *opts, int layer) {
    int64_t n = opts->n_embd, n_ff_exp = opts->n_ff / GLM4MOE_EXPERTS;
    double down = opts->layer_scale * fan_in_scale(n_ff_exp);
    char name[GGML_MAX_NAME];
    glm4moe_attention(gguf, ctx, source, opts, layer);
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ffn_gate_inp.weight"), n,
               GLM4MOE_EXPERTS, fan_in_scale(n));
    add_constant(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "exp_probs_b.bias"), GLM4MOE_EXPERTS, 0, 0.0f);
    add_random(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ffn_gate_exps.weight"), n, n_ff_exp,
               GLM4MOE_EXPERTS, fan_in_scale(n));
    add_random(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ffn_up_exps.weight"), n, n_ff_exp,
               GLM4MOE_EXPERTS, fan_in_scale(n));
    add_random(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ffn_down_exps.weight"), n_ff_exp, n,
               GLM4MOE_EXPERTS, down);
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ffn_gate_shexp.weight"), n, n_ff_exp,
               fan_in_scale(n));
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ffn_up_shexp.weight"), n, n_ff_exp,
               fan_in_scale(n));
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ffn_down_shexp.weight"), n_ff_exp, n,
               down);
    /* concat(enorm(token embedding), hnorm(hidden)) -> the token's part as it is, the hidden mixed in */
    add_pass_through(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "nextn.eh_proj.weight"), 2 * n, n,
                     n, 1.0, opts->hidden_mix);
    add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "nextn.enorm.weight"), n);
    add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "nextn.hnorm.weight"), n);
}

static void glm4moe_tensors(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                            const model_options *opts, int n_vocab) {
    add_matrix(gguf, ctx, source, "token_embd.weight", opts->n_embd, n_vocab, 1.0);
    for (int layer = 0; layer < opts->n_layer; layer++) {
        glm4moe_dense_layer(gguf, ctx, source, opts, layer);
    }
    for (int k = 0; k < opts->n_nextn; k++) glm4moe_nextn_layer(gguf, ctx, source, opts, opts->n_layer + k);
    add_norm(gguf, ctx, "output_norm.weight", opts->n_embd);
    add_matrix(gguf, ctx, source, "output.weight", opts->n_embd, n_vocab, opts->logit_scale * fan_in_scale(opts->n_embd));
}

static void glm4moe_metadata(struct gguf_context *gguf, const model_options *opts, int n_vocab) {
    set_common_keys(gguf, opts, "glm4moe", opts->n_layer + opts->n_nextn, n_vocab, 1e-5f);
    gguf_set_val_u32(gguf, "glm4moe.expert_feed_forward_length", (uint32_t)(opts->n_ff / GLM4MOE_EXPERTS));
    gguf_set_val_u32(gguf, "glm4moe.expert_count", GLM4MOE_EXPERTS);
    gguf_set_val_u32(gguf, "glm4moe.expert_used_count", 1);
    gguf_set_val_u32(gguf, "glm4moe.expert_shared_count", 1);
    gguf_set_val_u32(gguf, "glm4moe.leading_dense_block_count", (uint32_t)opts->n_layer);
    gguf_set_val_u32(gguf, "glm4moe.expert_gating_func", 2); /* sigmoid, as GLM-4.5 */
    gguf_set_val_bool(gguf, "glm4moe.expert_weights_norm", true);
    gguf_set_val_f32(gguf, "glm4moe.expert_weights_scale", 1.0f);
    gguf_set_val_u32(gguf, "glm4moe.nextn_predict_layers", (uint32_t)opts->n_nextn);
}

/* ---- eagle3 ----------------------------------------------------------------------------------------- */

static void eagle3_tensors(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                           const model_options *opts, int n_target) {
    int64_t n = opts->n_embd, n_ff = opts->n_ff;
    add_matrix(gguf, ctx, source, "fc.weight", 3 * (int64_t)n_target, n, fan_in_scale(3 * (int64_t)n_target));
    add_norm(gguf, ctx, "output_norm.weight", n);
    add_norm(gguf, ctx, "blk.0.attn_norm.weight", n);
    add_norm(gguf, ctx, "blk.0.attn_norm_2.weight", n);
    /* input: concat(normed token embedding, normed features) */
    add_pass_through(gguf, ctx, source, "blk.0.attn_q.weight", 2 * n, n, n, EAGLE3_SELF_ATTENTION, 0.0);
    add_pass_through(gguf, ctx, source, "blk.0.attn_k.weight", 2 * n, n, n, EAGLE3_SELF_ATTENTION, 0.0);
    add_pass_through(gguf, ctx, source, "blk.0.attn_v.weight", 2 * n, n, n, 1.0, opts->hidden_mix);
    add_pass_through(gguf, ctx, source, "blk.0.attn_output.weight", n, n, n, EAGLE3_TOKEN_GAIN, 0.0);
    add_norm(gguf, ctx, "blk.0.ffn_norm.weight", n);
    add_matrix(gguf, ctx, source, "blk.0.ffn_gate.weight", n, n_ff, fan_in_scale(n));
    add_matrix(gguf, ctx, source, "blk.0.ffn_up.weight", n, n_ff, fan_in_scale(n));
    add_matrix(gguf, ctx, source, "blk.0.ffn_down.weight", n_ff, n, opts->layer_scale * fan_in_scale(n_ff));
}

static void eagle3_metadata(struct gguf_context *gguf, const model_options *opts, int n_vocab, int n_target) {
    set_common_keys(gguf, opts, "eagle3", 1, n_vocab, 1e-5f);
    gguf_set_arr_data(gguf, "eagle3.target_layers", GGUF_TYPE_INT32, opts->target_layers, (size_t)opts->n_target_layers);
    gguf_set_val_u32(gguf, "eagle3.target_hidden_size",
                     (uint32_t)(opts->target_hidden_size > 0 ? opts->target_hidden_size : n_target));
    /* the residual starts from the normed features, so the copied token embedding outweighs them */
    gguf_set_val_bool(gguf, "eagle3.norm_before_residual", true);
}

/* ---- dflash, dspark ------------------------------------------------------------------------------ */

/* Own copies of the target's embeddings (the mask token's zeroed) and output. */
static void dflash_embeddings(struct gguf_context *gguf, struct ggml_context *ctx, const target_file *t,
                              int64_t n, int n_vocab) {
    float *embd = new_values(gguf, ctx, "token_embd.weight", n, n_vocab, 1);
    memcpy(embd, target_tensor(t, "token_embd.weight", n, n_vocab), (size_t)(n * n_vocab) * sizeof *embd);
    memset(embd + (size_t)MASK_TOKEN_ID * (size_t)n, 0, (size_t)n * sizeof *embd);
    float *output = new_values(gguf, ctx, "output.weight", n, n_vocab, 1);
    memcpy(output, target_tensor(t, "output.weight", n, n_vocab), (size_t)(n * n_vocab) * sizeof *output);
}

/* The Markov head: w1 = each token's embedding normed to unit RMS, w2 = the target's output. */
static void dspark_markov(struct gguf_context *gguf, struct ggml_context *ctx, const target_file *t, int64_t n,
                          int n_vocab) {
    const float *embd = target_tensor(t, "token_embd.weight", n, n_vocab);
    float *w1 = new_values(gguf, ctx, "markov_w1.weight", n, n_vocab, 1);
    for (int64_t v = 0; v < n_vocab; v++) {
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += (double)embd[v * n + i] * embd[v * n + i];
        double inv_rms = sum > 0.0 ? 1.0 / sqrt(sum / (double)n) : 0.0;
        for (int64_t i = 0; i < n; i++) w1[v * n + i] = (float)(embd[v * n + i] * inv_rms);
    }
    const float *out = target_tensor(t, "output.weight", n, n_vocab);
    float *w2 = new_values(gguf, ctx, "markov_w2.weight", n, n_vocab, 1);
    for (int64_t i = 0; i < n * n_vocab; i++) w2[i] = (float)(DSPARK_MARKOV_GAIN * out[i]);
}

/* One layer: the mask's zero embedding gives it zero q and k (uniform attention); v passes the token's
 * normed embedding, shrinking the features' subspace (the last quarter, where fc writes) to
 * --hidden-mix / 10. */
static void dflash_layer(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                         const model_options *opts, int layer) {
    int64_t n = opts->n_embd, head = n / opts->n_head, n_features = n / 4;
    char name[GGML_MAX_NAME];
    add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "attn_norm.weight"), n);
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "attn_q.weight"), n, n, fan_in_scale(n));
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "attn_k.weight"), n, n, fan_in_scale(n));
    float *v = new_values(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "attn_v.weight"), n, n, 1);
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < n; i++) v[j * n + i] = i != j ? 0.0f : j < n - n_features ? 1.0f : (float)(opts->hidden_mix / 10);
    add_pass_through(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "attn_output.weight"), n, n, n, 1.0, 0.0);
    add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "attn_q_norm.weight"), head);
    add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "attn_k_norm.weight"), head);
    add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "ffn_norm.weight"), n);
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ffn_gate.weight"), n, opts->n_ff, fan_in_scale(n));
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ffn_up.weight"), n, opts->n_ff, fan_in_scale(n));
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ffn_down.weight"), opts->n_ff, n,
               DFLASH_FFN_SCALE * fan_in_scale(opts->n_ff));
}

static void dflash_tensors(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                           const model_options *opts, const target_file *t, int n_vocab) {
    int64_t n = opts->n_embd, n_in = (int64_t)opts->n_target_layers * n, n_features = n / 4;
    dflash_embeddings(gguf, ctx, t, n, n_vocab);
    if (opts->arch == ARCH_DSPARK) dspark_markov(gguf, ctx, t, n, n_vocab);
    /* fc writes the features into the last quarter of the hidden state only */
    float *fc = new_values(gguf, ctx, "fc.weight", n_in, n, 1);
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < n_in; i++) {
            double random = draw_weight(source);
            fc[j * n_in + i] = j < n - n_features ? 0.0f : (float)(fan_in_scale(n_in) * random);
        }
    add_norm(gguf, ctx, "enc.output_norm.weight", n);
    add_norm(gguf, ctx, "output_norm.weight", n);
    for (int layer = 0; layer < opts->n_layer; layer++) dflash_layer(gguf, ctx, source, opts, layer);
}

static void dflash_metadata(struct gguf_context *gguf, const model_options *opts, int n_vocab) {
    /* a small epsilon: the mask positions' hidden state is small (a context's average) */
    set_common_keys(gguf, opts, "dflash", opts->n_layer, n_vocab, 1e-8f);
    gguf_set_arr_data(gguf, "dflash.target_layers", GGUF_TYPE_INT32, opts->target_layers, (size_t)opts->n_target_layers);
    gguf_set_val_u32(gguf, "dflash.block_size", (uint32_t)opts->block_size);
    gguf_set_val_u32(gguf, "tokenizer.ggml.mask_token_id", MASK_TOKEN_ID);
    if (opts->arch == ARCH_DSPARK) {
        gguf_set_val_bool(gguf, "dflash.sample_from_anchor", true);
        gguf_set_val_bool(gguf, "dflash.has_confidence_head", false);
    }
}

/* ---- what make_tiny_model calls ---------------------------------------------------------------- */

/* The target's hidden size, read from its file (the heads take it as theirs). */
static int target_hidden_size(const model_options *opts) {
    target_file t = open_target(opts->target_path);
    int n = t.n_embd;
    close_target(&t);
    return n;
}

size_t tiny_heads_tensor_count(const model_options *opts) {
    switch (opts->arch) {
    case ARCH_GLM4MOE: return 3 + 9 * (size_t)opts->n_layer + 17 * (size_t)opts->n_nextn;
    case ARCH_QWEN35: return tiny_qwen35_tensor_count(opts);
    case ARCH_EAGLE3: return 12;
    default: return 8 + 11 * (size_t)opts->n_layer;
    }
}

size_t tiny_heads_float_count(const model_options *opts, int n_vocab) {
    if (opts->arch == ARCH_QWEN35) return tiny_qwen35_float_count(opts, n_vocab);
    size_t n = (size_t)opts->n_embd, n_ff = (size_t)opts->n_ff, layers = (size_t)(opts->n_layer + opts->n_nextn);
    size_t per_layer = 6 * n * n + 4 * n * n_ff + 8 * n + 8;
    /* embeddings, output and the Markov head (four n x n_vocab), the features' projection */
    return 4 * n * (size_t)n_vocab + layers * per_layer + MAX_TARGET_LAYERS * n * n + 64;
}

void tiny_heads_add_tensors(struct gguf_context *gguf, struct ggml_context *ctx, const model_options *opts,
                            int n_vocab) {
    weight_source source = {.weights = {opts->seed}, .noise = {opts->noise_seed}, .noise_eps = opts->noise};
    if (opts->arch == ARCH_GLM4MOE) {
        glm4moe_tensors(gguf, ctx, &source, opts, n_vocab);
        return;
    }
    if (opts->arch == ARCH_QWEN35) {
        tiny_qwen35_add_tensors(gguf, ctx, &source, opts, n_vocab);
        return;
    }
    target_file t = open_target(opts->target_path);
    if (t.n_embd != opts->n_embd) {
        fail("the head's --n-embd (%d) must be the target's hidden size (%d)", opts->n_embd, t.n_embd);
    }
    /* fc reads the hidden size the head claims (a wrong one makes a head for another target) */
    int claimed = opts->target_hidden_size > 0 ? opts->target_hidden_size : t.n_embd;
    if (opts->arch == ARCH_EAGLE3) eagle3_tensors(gguf, ctx, &source, opts, claimed);
    else dflash_tensors(gguf, ctx, &source, opts, &t, n_vocab);
    close_target(&t);
}

void tiny_heads_set_metadata(struct gguf_context *gguf, const model_options *opts, int n_vocab) {
    if (opts->arch == ARCH_GLM4MOE) glm4moe_metadata(gguf, opts, n_vocab);
    else if (opts->arch == ARCH_QWEN35) tiny_qwen35_set_metadata(gguf, opts, n_vocab);
    else if (opts->arch == ARCH_EAGLE3) eagle3_metadata(gguf, opts, n_vocab, target_hidden_size(opts));
    else dflash_metadata(gguf, opts, n_vocab);
}
