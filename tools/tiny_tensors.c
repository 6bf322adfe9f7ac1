/* tiny_tensors.c - what every writer of make_tiny_model shares (tiny_model.h): the error exit, the
 * deterministic weight streams, and the helpers that add a tensor or the common keys to a file.
 * make_tiny_model.c (the plain models, the vocabulary, the command line), tiny_heads.c and
 * tiny_qwen35.c use them; this file uses none of theirs. */
#include "tiny_model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- errors -------------------------------------------------------------------------------------- */

void fail(const char *format, ...) {
    va_list args;
    va_start(args, format);
    fprintf(stderr, PROGRAM_NAME ": error: ");
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    exit(EXIT_USAGE_ERROR);
}

/* ---- deterministic random numbers -------------------------------------------------------------- */

/* splitmix64: tiny, well-mixed, and identical on every platform. */
static uint64_t prng_next(prng *rng) {
    rng->state += 0x9E3779B97F4A7C15ULL;
    uint64_t z = rng->state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) from the top 53 bits, exactly representable in double. */
static double prng_uniform(prng *rng) {
    return (double)(prng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
}

/* Sum of four uniforms (Irwin-Hall) rescaled to mean 0, variance 1. Avoids
 * log/cos so the output does not depend on the libm implementation, which
 * keeps files byte-identical across machines. */
double prng_approx_normal(prng *rng) {
    double sum = 0.0;
    for (int i = 0; i < 4; i++) {
        sum += prng_uniform(rng);
    }
    /* Four uniforms have variance 4/12; sqrt(3) restores unit variance. */
    return (sum - 2.0) * 1.7320508075688772;
}

/* ---- tensors -------------------------------------------------------------------------------------- */

struct ggml_tensor *new_named_tensor(struct ggml_context *ctx, const char *name,
                                            int64_t ne0, int64_t ne1) {
    struct ggml_tensor *tensor = ne1 > 0 ? ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne0, ne1)
                                         : ggml_new_tensor_1d(ctx, GGML_TYPE_F32, ne0);
    ggml_set_name(tensor, name);
    return tensor;
}

/* RMS-norm gains of 1 leave the normalised activations unscaled, which is
 * what a freshly initialised llama has. */
void add_norm(struct gguf_context *gguf, struct ggml_context *ctx, const char *name,
                     int64_t size) {
    struct ggml_tensor *tensor = new_named_tensor(ctx, name, size, 0);
    float *data = (float *)tensor->data;
    for (int64_t i = 0; i < size; i++) {
        data[i] = 1.0f;
    }
    gguf_add_tensor(gguf, tensor);
}

/* Every matrix element consumes exactly one value from each stream (when
 * noise is on), so the draft's noise pattern is independent of --seed and
 * --noise 0 reproduces the target bit for bit. The noise is relative: it is
 * scaled like the weights, so --noise 0.3 is a 30% perturbation regardless
 * of the layer's fan-in. */
void add_matrix(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                       const char *name, int64_t ne0, int64_t ne1, double scale) {
    struct ggml_tensor *tensor = new_named_tensor(ctx, name, ne0, ne1);
    float *data = (float *)tensor->data;
    int64_t count = ne0 * ne1;
    for (int64_t i = 0; i < count; i++) {
        double value = prng_approx_normal(&source->weights);
        if (source->noise_eps != 0.0) {
            value += source->noise_eps * prng_approx_normal(&source->noise);
        }
        data[i] = (float)(scale * value);
    }
    if (source->matrix_type != GGML_TYPE_F32) {
        /* The same values, quantized; the f32 tensor stays behind in the context, unwritten. */
        struct ggml_tensor *quantized = ggml_new_tensor_2d(ctx, source->matrix_type, ne0, ne1);
        ggml_quantize_chunk(source->matrix_type, data, quantized->data, 0, ne1, ne0, NULL);
        ggml_set_name(quantized, name);
        tensor = quantized;
    }
    gguf_add_tensor(gguf, tensor);
}

/* 1/sqrt(fan_in) keeps each projection's output at roughly unit variance, so
 * activations neither explode nor vanish across layers. (sqrt is correctly
 * rounded by IEEE 754, so this does not endanger byte-identical output.) */
double fan_in_scale(int64_t fan_in) {
    return 1.0 / sqrt((double)fan_in);
}

const char *layer_tensor_name(char *buffer, size_t size, int layer, const char *suffix) {
    snprintf(buffer, size, "blk.%d.%s", layer, suffix);
    return buffer;
}

/* A tensor of `count` values all equal to `value` (biases, Mamba's D). */
void add_constant(struct gguf_context *gguf, struct ggml_context *ctx, const char *name,
                         int64_t ne0, int64_t ne1, float value) {
    struct ggml_tensor *tensor = new_named_tensor(ctx, name, ne0, ne1);
    float *data = (float *)tensor->data;
    for (int64_t i = 0; i < ne0 * (ne1 > 0 ? ne1 : 1); i++) {
        data[i] = value;
    }
    gguf_add_tensor(gguf, tensor);
}

/* A tensor whose values the caller fills; added to the file. */
float *new_values(struct gguf_context *gguf, struct ggml_context *ctx, const char *name, int64_t ne0,
                         int64_t ne1, int64_t ne2) {
    struct ggml_tensor *tensor = ne2 > 1 ? ggml_new_tensor_3d(ctx, GGML_TYPE_F32, ne0, ne1, ne2)
                                         : new_named_tensor(ctx, name, ne0, ne1);
    ggml_set_name(tensor, name);
    gguf_add_tensor(gguf, tensor);
    return (float *)tensor->data;
}

/* One weight of the stream (and its noise). */
double draw_weight(weight_source *source) {
    double value = prng_approx_normal(&source->weights);
    if (source->noise_eps != 0.0) {
        value += source->noise_eps * prng_approx_normal(&source->noise);
    }
    return value;
}

void add_random(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source, const char *name,
                       int64_t ne0, int64_t ne1, int64_t ne2, double scale) {
    float *data = new_values(gguf, ctx, name, ne0, ne1, ne2);
    for (int64_t i = 0; i < ne0 * ne1 * ne2; i++) {
        data[i] = (float)(scale * draw_weight(source));
    }
}

void add_pass_through(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source, const char *name,
                      int64_t n_in, int64_t n_out, int64_t n_pass, double gain, double mix) {
    float *data = new_values(gguf, ctx, name, n_in, n_out, 1);
    double mix_scale = n_in > n_pass ? mix * fan_in_scale(n_in - n_pass) : 0.0;
    for (int64_t j = 0; j < n_out; j++) {
        for (int64_t i = 0; i < n_in; i++) {
            double random = draw_weight(source);
            data[j * n_in + i] = (float)(i < n_pass ? (i == j ? gain : 0.0) : mix_scale * random);
        }
    }
}

/* ---- metadata ------------------------------------------------------------------------------------- */

void set_common_keys(struct gguf_context *gguf, const model_options *opts, const char *arch, int n_layer,
                     int n_vocab, float rms_eps) {
    char key[96];
#define SET_U32(suffix, value)                                  \
    snprintf(key, sizeof key, "%s.%s", arch, suffix);            \
    gguf_set_val_u32(gguf, key, (uint32_t)(value))
    gguf_set_val_str(gguf, "general.architecture", arch);
    gguf_set_val_str(gguf, "general.name", opts->name);
    SET_U32("context_length", opts->n_ctx);
    SET_U32("embedding_length", opts->n_embd);
    SET_U32("block_count", n_layer);
    SET_U32("feed_forward_length", opts->n_ff);
    SET_U32("attention.head_count", opts->n_head);
    SET_U32("attention.head_count_kv", opts->n_head_kv);
    SET_U32("rope.dimension_count", opts->n_embd / opts->n_head);
    SET_U32("vocab_size", n_vocab);
#undef SET_U32
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    gguf_set_val_f32(gguf, key, rms_eps);
}
