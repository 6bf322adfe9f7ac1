/* make_tiny_mmproj - writes a tiny deterministic vision projector GGUF (llama.cpp's CLIP format,
 * LLaVA's "mlp" projector) for a tiny text model, so the tests can run images through llama.cpp's
 * multimodal library (mtmd) in milliseconds.
 *
 * The simplest layout clip.cpp loads: a patch embedding (a convolution of patch x patch pixels),
 * position embeddings, one encoder block that LLaVA's graph skips (it reads the features before
 * the last block, and there is only one) and the two-layer projector mm.0 -> GELU -> mm.2 into the
 * text model's embedding width. An image of image_size^2 pixels becomes (image_size / patch)^2
 * embeddings, each a function of its patch's pixels and place: a different image gives different
 * embeddings.
 *
 *   make_tiny_mmproj --out FILE --target MODEL.gguf [--image-size 32] [--patch 8] [--seed 1]
 *
 * --target: the text model the projector feeds (its embedding width is read from it). */
#include "ggml.h"
#include "gguf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_EMBD_VISION 32
#define N_FF_VISION 64

static void die(const char *message, const char *detail) {
    fprintf(stderr, "make_tiny_mmproj: %s%s\n", message, detail ? detail : "");
    exit(2);
}

/* xorshift64*: the same bytes on every machine (no libm, no rand()). */
static double next_weight(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    uint64_t r = *state * 2685821657736338717ULL;
    return (double)(r >> 11) / (double)(1ULL << 53) * 2.0 - 1.0; /* uniform in [-1, 1) */
}

/* The text model's embedding width: "<arch>.embedding_length" of its GGUF. */
static int64_t target_n_embd(const char *path) {
    struct gguf_init_params ip = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *g = gguf_init_from_file(path, ip);
    if (!g) die("cannot read the target model ", path);
    int64_t arch_key = gguf_find_key(g, "general.architecture");
    if (arch_key < 0) die("no general.architecture in ", path);
    char key[128];
    snprintf(key, sizeof key, "%s.embedding_length", gguf_get_val_str(g, arch_key));
    int64_t k = gguf_find_key(g, key);
    if (k < 0) die("no embedding_length in ", path);
    int64_t n = (int64_t)gguf_get_val_u32(g, k);
    gguf_free(g);
    return n;
}

/* A tensor of ne0 x ne1 x ne2 x ne3 values drawn with spread `scale`, added to the file. */
static void add_tensor(struct gguf_context *gguf, struct ggml_context *ctx, uint64_t *state, const char *name,
                       int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, double scale) {
    struct ggml_tensor *t = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, ne0, ne1, ne2, ne3);
    ggml_set_name(t, name);
    float *v = (float *)t->data;
    for (int64_t i = 0; i < ggml_nelements(t); i++) v[i] = (float)(scale * next_weight(state));
    gguf_add_tensor(gguf, t);
}

typedef struct {
    const char *out, *target;
    int64_t image_size, patch;
    uint64_t seed;
} options;

static options parse(int argc, char **argv) {
    options o = {NULL, NULL, 32, 8, 1};
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) die("a value is missing after ", argv[i]);
        const char *flag = argv[i], *value = argv[++i];
        if (strcmp(flag, "--out") == 0) o.out = value;
        else if (strcmp(flag, "--target") == 0) o.target = value;
        else if (strcmp(flag, "--image-size") == 0) o.image_size = atoll(value);
        else if (strcmp(flag, "--patch") == 0) o.patch = atoll(value);
        else if (strcmp(flag, "--seed") == 0) o.seed = strtoull(value, NULL, 10);
        else die("unknown flag ", flag);
    }
    if (!o.out || !o.target) die("usage: make_tiny_mmproj --out FILE --target MODEL.gguf [--image-size 32] "
                                 "[--patch 8] [--seed 1]", NULL);
    if (o.patch < 1 || o.image_size < o.patch || o.image_size > 1024 || o.image_size % o.patch != 0)
        die("--image-size must be a multiple of --patch, at most 1024", NULL);
    return o;
}

static void set_metadata(struct gguf_context *gguf, const options *o, int64_t n_text) {
    gguf_set_val_str(gguf, "general.architecture", "clip");
    gguf_set_val_str(gguf, "general.name", "specd tiny mmproj");
    gguf_set_val_u32(gguf, "general.file_type", 0); /* all F32 */
    gguf_set_val_str(gguf, "clip.projector_type", "mlp");
    gguf_set_val_bool(gguf, "clip.has_vision_encoder", true);
    gguf_set_val_bool(gguf, "clip.use_gelu", true);
    gguf_set_val_u32(gguf, "clip.vision.image_size", (uint32_t)o->image_size);
    gguf_set_val_u32(gguf, "clip.vision.patch_size", (uint32_t)o->patch);
    gguf_set_val_u32(gguf, "clip.vision.embedding_length", N_EMBD_VISION);
    gguf_set_val_u32(gguf, "clip.vision.feed_forward_length", N_FF_VISION);
    gguf_set_val_u32(gguf, "clip.vision.block_count", 1);
    gguf_set_val_u32(gguf, "clip.vision.projection_dim", (uint32_t)n_text);
    gguf_set_val_u32(gguf, "clip.vision.attention.head_count", 2);
    gguf_set_val_f32(gguf, "clip.vision.attention.layer_norm_epsilon", 1e-5f);
    static const float mean[3] = {0.5f, 0.5f, 0.5f}, std[3] = {0.25f, 0.25f, 0.25f};
    gguf_set_arr_data(gguf, "clip.vision.image_mean", GGUF_TYPE_FLOAT32, mean, 3);
    gguf_set_arr_data(gguf, "clip.vision.image_std", GGUF_TYPE_FLOAT32, std, 3);
}

int main(int argc, char **argv) {
    options o = parse(argc, argv);
    int64_t n_text = target_n_embd(o.target), n_patches = (o.image_size / o.patch) * (o.image_size / o.patch);
    int64_t e = N_EMBD_VISION, f = N_FF_VISION, p = o.patch;
    size_t floats = (size_t)(p * p * 3 * e + e * n_patches + e * e + 2 * e * f + e * n_text + n_text * n_text + 2 * n_text);
    struct ggml_init_params ip = {.mem_size = floats * sizeof(float) + 16 * ggml_tensor_overhead(), .mem_buffer = NULL,
                                  .no_alloc = false};
    struct ggml_context *ctx = ggml_init(ip);
    struct gguf_context *gguf = gguf_init_empty();
    if (!ctx || !gguf) die("out of memory", NULL);
    set_metadata(gguf, &o, n_text);
    uint64_t state = 0x9E3779B97F4A7C15ULL ^ (o.seed * 0xD1B54A32D192ED03ULL);
    if (!state) state = 1;
    /* spreads of about 1/sqrt(fan-in), so each stage's output stays near unit size */
    add_tensor(gguf, ctx, &state, "v.patch_embd.weight", p, p, 3, e, 1.0 / (double)p);
    add_tensor(gguf, ctx, &state, "v.position_embd.weight", e, n_patches, 1, 1, 0.5);
    add_tensor(gguf, ctx, &state, "v.blk.0.attn_out.weight", e, e, 1, 1, 0.2);
    add_tensor(gguf, ctx, &state, "v.blk.0.ffn_up.weight", e, f, 1, 1, 0.2);
    add_tensor(gguf, ctx, &state, "v.blk.0.ffn_down.weight", f, e, 1, 1, 0.2);
    add_tensor(gguf, ctx, &state, "mm.0.weight", e, n_text, 1, 1, 0.3);
    add_tensor(gguf, ctx, &state, "mm.0.bias", n_text, 1, 1, 1, 0.1);
    add_tensor(gguf, ctx, &state, "mm.2.weight", n_text, n_text, 1, 1, 0.3);
    add_tensor(gguf, ctx, &state, "mm.2.bias", n_text, 1, 1, 1, 0.1);
    if (!gguf_write_to_file(gguf, o.out, false)) die("cannot write ", o.out);
    gguf_free(gguf);
    ggml_free(ctx);
    return 0;
}
