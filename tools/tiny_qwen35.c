/* tiny_qwen35.c - make_tiny_model's Qwen3.5-style hybrid target (--arch qwen35), in the shapes the
 * pinned llama.cpp's src/models/qwen35.cpp loads: trunk layers that are gated delta-net linear
 * attention with a recurrent state (convolution and SSM state), every QWEN35_ATTENTION_EVERY-th one
 * full attention with a gated query, each with a SwiGLU feed-forward; then --nextn-layers MTP layers
 * (eh_proj, enorm, hnorm, one full-attention block) that share the target's embeddings, output norm
 * and output (qwen35.cpp falls back to them when the nextn layer has no embed_tokens,
 * shared_head_norm or shared_head_head).
 *
 * As in the GLM-4.5-style target of tiny_heads.c, every matrix that writes into the residual stream
 * is scaled by --layer-scale, so the target's next token depends mostly on the current one, and the
 * MTP layer's eh_proj passes the token's normed embedding through (mixing in --hidden-mix of the
 * target's hidden state): the head predicts what the target predicts after the token it is given,
 * often but not always what the target then says. */
#include "tiny_model.h"

#include <stdio.h>

/* Every second trunk layer attends (layers 1, 3, ...), the others are linear attention. */
#define QWEN35_ATTENTION_EVERY 2
/* The delta net's sizes: key heads (groups) and value heads of the head size, a kernel of 4. */
#define QWEN35_K_HEADS 2
#define QWEN35_V_HEADS 4
#define QWEN35_CONV_KERNEL 4

static bool is_attention(int layer) { return (layer + 1) % QWEN35_ATTENTION_EVERY == 0; }

static int64_t head_size(const model_options *opts) { return opts->n_embd / opts->n_head; }

/* The delta net's channels: keys and queries (K heads each), values (V heads). */
static int64_t key_dim(const model_options *opts) { return head_size(opts) * QWEN35_K_HEADS; }
static int64_t value_dim(const model_options *opts) { return head_size(opts) * QWEN35_V_HEADS; }

size_t tiny_qwen35_tensor_count(const model_options *opts) {
    /* the largest layer: an MTP layer's 11 + 3 nextn tensors */
    return 3 + 14 * (size_t)(opts->n_layer + opts->n_nextn);
}

size_t tiny_qwen35_float_count(const model_options *opts, int n_vocab) {
    size_t n = (size_t)opts->n_embd, n_ff = (size_t)opts->n_ff, head = (size_t)head_size(opts);
    size_t conv = (size_t)(2 * key_dim(opts) + value_dim(opts));
    size_t attention = 2 * n * n + 2 * n * head * (size_t)opts->n_head_kv + n * n + 2 * head;
    size_t delta_net = n * conv + 2 * n * (size_t)value_dim(opts) + QWEN35_CONV_KERNEL * conv + 2 * n * QWEN35_V_HEADS;
    size_t per_layer = 2 * n * n /* eh_proj */ + attention + delta_net + 3 * n * n_ff + 8 * n + 64;
    return 2 * n * (size_t)n_vocab + n + (size_t)(opts->n_layer + opts->n_nextn) * per_layer;
}

static void add_layer_matrix(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source, int layer,
                             const char *suffix, int64_t n_in, int64_t n_out, double scale) {
    char name[GGML_MAX_NAME];
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, suffix), n_in, n_out, scale);
}

static void add_layer_norm(struct gguf_context *gguf, struct ggml_context *ctx, int layer, const char *suffix,
                           int64_t size) {
    char name[GGML_MAX_NAME];
    add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, suffix), size);
}

/* Full attention: q holds the query and its gate (two head sizes per head), q and k are normed. */
static void add_attention(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                          const model_options *opts, int layer) {
    int64_t n = opts->n_embd, head = head_size(opts), n_kv = head * opts->n_head_kv;
    add_layer_matrix(gguf, ctx, source, layer, "attn_q.weight", n, 2 * head * opts->n_head, fan_in_scale(n));
    add_layer_matrix(gguf, ctx, source, layer, "attn_k.weight", n, n_kv, fan_in_scale(n));
    add_layer_matrix(gguf, ctx, source, layer, "attn_v.weight", n, n_kv, fan_in_scale(n));
    add_layer_matrix(gguf, ctx, source, layer, "attn_output.weight", head * opts->n_head, n,
                     opts->layer_scale * fan_in_scale(head * opts->n_head));
    add_layer_norm(gguf, ctx, layer, "attn_q_norm.weight", head);
    add_layer_norm(gguf, ctx, layer, "attn_k_norm.weight", head);
}

/* ssm_a holds -exp(A_log): each value head forgets at its own rate. */
static void add_decay(struct gguf_context *gguf, struct ggml_context *ctx, int layer) {
    char name[GGML_MAX_NAME];
    snprintf(name, sizeof name, "blk.%d.ssm_a", layer);
    struct ggml_tensor *tensor = new_named_tensor(ctx, name, QWEN35_V_HEADS, 0);
    float *data = (float *)tensor->data;
    for (int i = 0; i < QWEN35_V_HEADS; i++) data[i] = -0.25f * (float)(i + 1);
    gguf_add_tensor(gguf, tensor);
}

/* Gated delta net: the joint q/k/v projection and its gate z, the convolution over them, the
 * per-head step (alpha, dt bias, A) and write strength (beta), the gated norm and the output. */
static void add_delta_net(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                          const model_options *opts, int layer) {
    int64_t n = opts->n_embd, conv = 2 * key_dim(opts) + value_dim(opts);
    char name[GGML_MAX_NAME];
    add_layer_matrix(gguf, ctx, source, layer, "attn_qkv.weight", n, conv, fan_in_scale(n));
    add_layer_matrix(gguf, ctx, source, layer, "attn_gate.weight", n, value_dim(opts), fan_in_scale(n));
    add_layer_matrix(gguf, ctx, source, layer, "ssm_conv1d.weight", QWEN35_CONV_KERNEL, conv,
                     fan_in_scale(QWEN35_CONV_KERNEL));
    add_constant(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "ssm_dt.bias"), QWEN35_V_HEADS, 0, 0.0f);
    add_decay(gguf, ctx, layer);
    add_layer_matrix(gguf, ctx, source, layer, "ssm_beta.weight", n, QWEN35_V_HEADS, fan_in_scale(n));
    add_layer_matrix(gguf, ctx, source, layer, "ssm_alpha.weight", n, QWEN35_V_HEADS, fan_in_scale(n));
    add_layer_norm(gguf, ctx, layer, "ssm_norm.weight", head_size(opts));
    add_layer_matrix(gguf, ctx, source, layer, "ssm_out.weight", value_dim(opts), n,
                     opts->layer_scale * fan_in_scale(value_dim(opts)));
}

static void add_ffn(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                    const model_options *opts, int layer) {
    int64_t n = opts->n_embd, n_ff = opts->n_ff;
    add_layer_matrix(gguf, ctx, source, layer, "ffn_gate.weight", n, n_ff, fan_in_scale(n));
    add_layer_matrix(gguf, ctx, source, layer, "ffn_up.weight", n, n_ff, fan_in_scale(n));
    add_layer_matrix(gguf, ctx, source, layer, "ffn_down.weight", n_ff, n, opts->layer_scale * fan_in_scale(n_ff));
}

static void add_trunk_layer(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                            const model_options *opts, int layer) {
    add_layer_norm(gguf, ctx, layer, "attn_norm.weight", opts->n_embd);
    add_layer_norm(gguf, ctx, layer, "post_attention_norm.weight", opts->n_embd);
    if (is_attention(layer)) add_attention(gguf, ctx, source, opts, layer);
    else add_delta_net(gguf, ctx, source, opts, layer);
    add_ffn(gguf, ctx, source, opts, layer);
}

/* An MTP layer: a full-attention block behind concat(enorm(token embedding), hnorm(hidden)) ->
 * eh_proj, which passes the token's part through and mixes the hidden state in. */
static void add_nextn_layer(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                            const model_options *opts, int layer) {
    int64_t n = opts->n_embd;
    char name[GGML_MAX_NAME];
    add_layer_norm(gguf, ctx, layer, "attn_norm.weight", n);
    add_layer_norm(gguf, ctx, layer, "post_attention_norm.weight", n);
    add_attention(gguf, ctx, source, opts, layer);
    add_ffn(gguf, ctx, source, opts, layer);
    add_pass_through(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "nextn.eh_proj.weight"), 2 * n,
                     n, n, 1.0, opts->hidden_mix);
    add_layer_norm(gguf, ctx, layer, "nextn.enorm.weight", n);
    add_layer_norm(gguf, ctx, layer, "nextn.hnorm.weight", n);
}

void tiny_qwen35_add_tensors(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                             const model_options *opts, int n_vocab) {
    add_matrix(gguf, ctx, source, "token_embd.weight", opts->n_embd, n_vocab, 1.0);
    for (int layer = 0; layer < opts->n_layer; layer++) add_trunk_layer(gguf, ctx, source, opts, layer);
    for (int k = 0; k < opts->n_nextn; k++) add_nextn_layer(gguf, ctx, source, opts, opts->n_layer + k);
    add_norm(gguf, ctx, "output_norm.weight", opts->n_embd);
    add_matrix(gguf, ctx, source, "output.weight", opts->n_embd, n_vocab,
               opts->logit_scale * fan_in_scale(opts->n_embd));
}

void tiny_qwen35_set_metadata(struct gguf_context *gguf, const model_options *opts, int n_vocab) {
    int64_t head = head_size(opts);
    set_common_keys(gguf, opts, "qwen35", opts->n_layer + opts->n_nextn, n_vocab, 1e-6f);
    gguf_set_val_u32(gguf, "qwen35.nextn_predict_layers", (uint32_t)opts->n_nextn);
    gguf_set_val_u32(gguf, "qwen35.full_attention_interval", QWEN35_ATTENTION_EVERY);
    gguf_set_val_u32(gguf, "qwen35.ssm.conv_kernel", QWEN35_CONV_KERNEL);
    gguf_set_val_u32(gguf, "qwen35.ssm.inner_size", (uint32_t)value_dim(opts));
    gguf_set_val_u32(gguf, "qwen35.ssm.state_size", (uint32_t)head);
    gguf_set_val_u32(gguf, "qwen35.ssm.time_step_rank", QWEN35_V_HEADS);
    gguf_set_val_u32(gguf, "qwen35.ssm.group_count", QWEN35_K_HEADS);
    /* interleaved M-RoPE over text positions: the sections split the head's rotated pairs */
    int32_t sections[4] = {(int32_t)(head / 4), (int32_t)(head / 8), (int32_t)(head / 2 - head / 4 - head / 8), 0};
    gguf_set_arr_data(gguf, "qwen35.rope.dimension_sections", GGUF_TYPE_INT32, sections, 4);
}
