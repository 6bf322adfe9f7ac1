/* tiny_model.h - what make_tiny_model's writers share: the options, the deterministic weight
 * streams and the tensor helpers (tiny_tensors.c). make_tiny_model.c writes the plain models (llama,
 * mamba, lfm2) and the vocabulary; tiny_heads.c the drafting heads' models (a GLM-4.5-style target
 * with a nextn layer, EAGLE-3, DFlash and DSpark drafts); tiny_qwen35.c a Qwen3.5-style target;
 * tiny_text.c the embeddings and output of a model that writes a given text (--text). */
#ifndef TINY_MODEL_H
#define TINY_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ggml.h"
#include "gguf.h"

#define PROGRAM_NAME "make_tiny_model"
#define EXIT_USAGE_ERROR 2

/* Dimension limits keep every size product well inside size_t and int64_t;
 * a unit-test model never needs more. */
#define MAX_DIMENSION 8192L
#define MAX_LAYERS 64L
#define MAX_CONTEXT 1048576L
/* Target layers an EAGLE-3 or DFlash draft reads. */
#define MAX_TARGET_LAYERS 8

typedef enum {
    ARCH_LLAMA,
    ARCH_MAMBA,
    ARCH_LFM2,
    ARCH_GLM4MOE,
    ARCH_QWEN35,
    ARCH_EAGLE3,
    ARCH_DFLASH,
    ARCH_DSPARK,
    ARCH_QWEN3
} model_arch;

typedef struct {
    const char *out_path;
    const char *name;
    model_arch arch;
    bool different_vocab;
    bool split_vocab; /* --vocab split: a few word pieces replaced by pieces the normal one lacks */
    int n_embd;
    int n_layer;
    int n_head;
    int n_head_kv;
    int n_ff;
    int n_ctx;
    uint64_t seed;
    uint64_t noise_seed;
    double noise;
    double logit_scale;
    const char *chat_template; /* NULL: none */
    bool fim;                  /* --fim on: fill-in-the-middle tokens (the bytes 0x01..0x03) */
    /* Scale of the matrices that write into the residual stream (attention output, feed-forward
     * down): below 1 the next token depends mostly on the current one, so a head that sees the
     * current token can agree with the target. 1 keeps the plain models as they were. */
    double layer_scale;
    /* Heads: how much of the target's hidden state enters the head's prediction (relative to the
     * token's own embedding), so the target features matter without drowning the token. */
    double hidden_mix;
    /* glm4moe, qwen35: how many nextn (MTP) layers follow the trunk's. */
    int n_nextn;
    /* EAGLE-3, DFlash, DSpark: the target GGUF they draft for, the target layers they read, the
     * target hidden size they claim (0: the target's), and DFlash's block size. */
    const char *target_path;
    int32_t target_layers[MAX_TARGET_LAYERS];
    int n_target_layers;
    int target_hidden_size;
    int block_size;
    enum ggml_type weight_type; /* of the plain models' matrices: GGML_TYPE_F32 or GGML_TYPE_Q8_0 */
    int lora_rank;              /* > 0: write a LoRA adapter of this rank instead of a model */
    const char *text;           /* --text: a model that writes this text (tiny_text.c); NULL: none */
    int text_miss;              /* --text-miss N: every Nth link of the text skips a piece (a draft) */
    /* --pooling: the <arch>.pooling_type an embedding model states (llama.cpp's numbers: none 0,
     * mean 1, cls 2, last 3, rank 4); -1: none stated. rank on qwen3 adds the classifier head
     * (cls_out, two labels) that llama.cpp's rank pooling reads. */
    int pooling;
    const char *rerank_template; /* --rerank-template: tokenizer.chat_template.rerank; NULL: none */
} model_options;

typedef struct {
    uint64_t state;
} prng;

/* Weights are drawn from one stream and the draft perturbation from another,
 * so changing --noise never changes the underlying target weights. */
typedef struct {
    prng weights;
    prng noise;
    double noise_eps;
    enum ggml_type matrix_type; /* the matrices' type in the file (F32, the zero value, or Q8_0) */
} weight_source;

/* ---- tiny_tensors.c: what every writer shares ---- */

/* One line on stderr, exit status 2. */
void fail(const char *format, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Sum of four uniforms rescaled to mean 0, variance 1 (no libm: byte-identical everywhere). */
double prng_approx_normal(prng *rng);

struct ggml_tensor *new_named_tensor(struct ggml_context *ctx, const char *name, int64_t ne0, int64_t ne1);
/* A norm gain of ones. */
void add_norm(struct gguf_context *gguf, struct ggml_context *ctx, const char *name, int64_t size);
/* A matrix of scale x (approx-normal + noise), one value of each stream per element. */
void add_matrix(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source, const char *name,
                int64_t ne0, int64_t ne1, double scale);
/* A tensor of `value` everywhere (ne1 0: a vector). */
void add_constant(struct gguf_context *gguf, struct ggml_context *ctx, const char *name, int64_t ne0, int64_t ne1,
                  float value);
/* 1/sqrt(fan_in): each projection's output at roughly unit variance. */
double fan_in_scale(int64_t fan_in);
/* "blk.LAYER.SUFFIX" in buffer. */
const char *layer_tensor_name(char *buffer, size_t size, int layer, const char *suffix);

/* A tensor whose values the caller fills (ne2 > 1: three dimensions); added to the file. */
float *new_values(struct gguf_context *gguf, struct ggml_context *ctx, const char *name, int64_t ne0, int64_t ne1,
                  int64_t ne2);
/* One weight of the stream (and its noise). */
double draw_weight(weight_source *source);
/* ne0 x ne1 x ne2 random values of spread `scale`. */
void add_random(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source, const char *name,
                int64_t ne0, int64_t ne1, int64_t ne2, double scale);
/* A projection from n_in inputs to n_out outputs: output j takes `gain` x input j (j below n_pass),
 * the inputs from n_pass on mixed in with random weights of spread `mix` / sqrt(their count). */
void add_pass_through(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source, const char *name,
                      int64_t n_in, int64_t n_out, int64_t n_pass, double gain, double mix);
/* general.*, ARCH.context_length ... vocab_size and the RMS epsilon, as every writer sets them. */
void set_common_keys(struct gguf_context *gguf, const model_options *opts, const char *arch, int n_layer,
                     int n_vocab, float rms_eps);

/* ---- tiny_heads.c: the heads' architectures ---- */
bool tiny_heads_handles(model_arch arch);
const char *tiny_heads_arch_name(model_arch arch);
void tiny_heads_validate(const model_options *opts);
size_t tiny_heads_tensor_count(const model_options *opts);
size_t tiny_heads_float_count(const model_options *opts, int n_vocab);
void tiny_heads_add_tensors(struct gguf_context *gguf, struct ggml_context *ctx, const model_options *opts,
                            int n_vocab);
void tiny_heads_set_metadata(struct gguf_context *gguf, const model_options *opts, int n_vocab);

/* ---- tiny_qwen35.c: a Qwen3.5-style hybrid target (gated delta-net and attention layers) with nextn
 * layers. */
size_t tiny_qwen35_tensor_count(const model_options *opts);
size_t tiny_qwen35_float_count(const model_options *opts, int n_vocab);
void tiny_qwen35_add_tensors(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                             const model_options *opts, int n_vocab);
void tiny_qwen35_set_metadata(struct gguf_context *gguf, const model_options *opts, int n_vocab);

/* ---- the vocabulary (make_tiny_model.c), as tiny_text.c extends it ---- */

/* The longest piece, in bytes with its terminator. */
#define TINY_MAX_PIECE_BYTES 160
typedef struct tiny_vocab tiny_vocab;
/* The id of piece `text`, or -1. */
int32_t tiny_vocab_find(const tiny_vocab *vocab, const char *text);
/* The id of piece `text`, appended as a normal piece when it is new. */
int32_t tiny_vocab_add(tiny_vocab *vocab, const char *text);

/* ---- tiny_text.c: --text, a model that writes a given text greedily ---- */

#define TINY_TEXT_MAX_PIECES 512
typedef struct {
    int32_t ids[TINY_TEXT_MAX_PIECES]; /* the text's pieces in order, each once */
    int n;
} tiny_text_chain;
/* Cuts `text` into pieces that each appear once, adds them (and the first one's prefixes) to the
 * vocabulary, and lists them in *chain. */
void tiny_text_build(const char *text, tiny_vocab *vocab, tiny_text_chain *chain);
/* token_embd and output for the chain (in place of the random ones); eos: the end-of-text token. */
void tiny_text_add_embeddings(struct gguf_context *gguf, struct ggml_context *ctx, const model_options *opts,
                              const tiny_text_chain *chain, int n_vocab);
void tiny_text_add_output(struct gguf_context *gguf, struct ggml_context *ctx, const model_options *opts,
                          const tiny_text_chain *chain, int n_vocab, int32_t eos);

#endif
