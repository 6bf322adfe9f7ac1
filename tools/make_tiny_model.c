/*
 * make_tiny_model: writes a tiny llama-architecture GGUF model with
 * deterministic random F32 weights and a small SentencePiece-style
 * vocabulary, so unit tests can load a real model through llama.cpp in
 * milliseconds without shipping any weights.
 *
 * The same arguments always produce a byte-identical file. Two models that
 * share --seed but differ in --noise act as a "target" and a "draft" whose
 * predictions agree more often the smaller the noise is; --vocab different
 * produces a model whose vocabulary has the same size and the same
 * special/byte/character tokens but a different order of word pieces, for
 * vocabulary-compatibility tests; --vocab split one with the same pieces at
 * the same ids but two (split_word_pieces), for drafts of another vocabulary.
 *
 * --arch mamba writes a recurrent model instead (llama.cpp's Mamba-1: per
 * layer a norm and a selective state-space block, no attention), and
 * --arch lfm2 a hybrid one (llama.cpp's LFM2: even layers a short gated
 * convolution with a recurrent state, odd layers attention, each with a
 * SwiGLU feed-forward), with the same vocabulary, so either can be the
 * target or the draft of a llama model.
 *
 * The drafting heads' models (tiny_heads.c): --arch glm4moe writes a target
 * with one nextn (multi-token prediction) layer as GLM-4.5 ships it,
 * --arch qwen35 a hybrid Qwen3.5-style target (gated delta-net layers with
 * a recurrent state, every second layer full attention) with its nextn
 * layer (tiny_qwen35.c), and
 * --arch eagle3, dflash and dspark write a draft head for the target GGUF
 * named by --target, reading its --target-layers. With --layer-scale below 1
 * the target's next token depends mostly on the current one, and the heads
 * are built to see the current token (tied to the target's embeddings and
 * output), so they agree with the target often: drafts get accepted.
 *
 * Usage:
 *   make_tiny_model --out FILE [--arch llama|mamba|lfm2|glm4moe|qwen35|eagle3|dflash|dspark|qwen3]
 *       [--vocab normal|different|split] [--n-embd 32]
 *       [--n-layer 2] [--n-head 4] [--n-head-kv 4] [--n-ff 64] [--n-ctx 256]
 *       [--seed 1] [--noise 0] [--noise-seed 7] [--logit-scale 1.0] [--layer-scale 1.0]
 *       [--name NAME] [--chat-template NAME_OR_TEXT] [--weight-type f32|q8_0]
 *       [--hidden-mix 0.5] [--target FILE] [--target-layers A,B,C] [--target-hidden-size N]
 *       [--block-size 8] [--lora-rank R] [--nextn-layers 1] [--fim on|off] [--text TEXT] [--text-miss N]
 *       [--pooling none|mean|cls|last|rank] [--rerank-template T]
 *
 *   --arch A          llama (attention, the default), mamba (recurrent:
 *                     d_inner = 2 n_embd, state size 8, conv kernel 4,
 *                     time-step rank n_embd/16 rounded up; --n-head,
 *                     --n-head-kv and --n-ff do not apply) or lfm2
 *                     (hybrid: convolution cache of 3, the attention
 *                     layers as llama's).
 *   --noise EPS       adds EPS times an independent approx-normal value (from
 *                     --noise-seed) to every element of every weight matrix,
 *                     in units of that matrix's own weight spread, so EPS is a
 *                     relative perturbation; norm gains are left at 1.
 *   --logit-scale S   multiplies output.weight; logits have roughly unit
 *                     spread at S = 1, so larger S gives peakier
 *                     distributions without changing the greedy choice.
 *   --layer-scale S   multiplies the matrices that write into the residual
 *                     stream (attention output, feed-forward down).
 *   --hidden-mix M    heads: weight of the target's hidden state against the
 *                     token's embedding in the head's input.
 *   --target FILE     eagle3, dflash, dspark: the target they draft for (its
 *                     hidden size; DFlash copies its embeddings and output).
 *   --target-layers L eagle3 (3 layers), dflash, dspark: the target layers
 *                     whose inputs the head reads.
 *   --target-hidden-size N  the target hidden size an EAGLE-3 claims (default
 *                     the target's; another value makes a mismatched head).
 *   --block-size B    dflash, dspark: the block drafted per pass.
 *   --nextn-layers N  glm4moe, qwen35: the nextn layers after the trunk's
 *                     (1 to 4; DeepSeek-V3 and GLM ship 1, some models more).
 *   --weight-type T   stores the weight matrices as f32 (the default) or
 *                     q8_0 (ggml's quantization of the same values; every
 *                     row size must be a multiple of 32), e.g. to test what
 *                     a quantized model computes differently.
 *   --lora-rank R     writes a LoRA adapter for the llama model of the same
 *                     options instead of a model (llama.cpp's adapter format:
 *                     general.type adapter, adapter.type lora,
 *                     adapter.lora.alpha R, so its scale is 1): rank-R pairs
 *                     <name>.lora_a {n_in, R} and <name>.lora_b {R, n_out}
 *                     for every layer's attn_q and ffn_up and for output,
 *                     drawn from --seed, large enough to change the greedy
 *                     text.
 *   --chat-template T stores T as tokenizer.chat_template, as a real model
 *                     carries its Jinja template: either the template text
 *                     or a name llama.cpp knows ("chatml", "llama3", ...),
 *                     which llama_chat_apply_template accepts as well.
 *                     Without it the model has no chat template.
 *   --text TEXT       writes a model that, greedily, writes TEXT after its
 *                     first word and then ends (tiny_text.c): each piece of
 *                     the text leads to the next through the embeddings and
 *                     the output matrix; the layers (--layer-scale small)
 *                     only add cost. --n-embd must exceed the text's pieces.
 *   --text-miss N     with --text: a draft for that model, wrong at every Nth
 *                     piece (it skips one there), right everywhere else.
 *   --fim on          names fill-in-the-middle tokens (tokenizer.ggml.fim_pre,
 *                     fim_suf, fim_mid: the byte tokens <0x01>, <0x02>,
 *                     <0x03>, which text never holds), for /infill's tests.
 *   --pooling P       states the pooling of an embedding model (none, mean,
 *                     cls, last or rank; <arch>.pooling_type), which
 *                     llama.cpp takes as its default pooling. rank needs
 *                     --arch qwen3 and adds the reranker's classifier head
 *                     as Qwen3-Reranker conversions carry it: cls.output.weight
 *                     {n_embd, 2} and qwen3.classifier.output_labels
 *                     ["yes", "no"] (llama.cpp's rank pooling takes the last
 *                     token's hidden state through cls_out and a softmax: the
 *                     score is the first label's probability).
 *   --rerank-template T  stores T as tokenizer.chat_template.rerank, the
 *                     prompt a reranker builds from "{query}" and
 *                     "{document}" (without it: BOS query [EOS] doc).
 *   --arch qwen3      llama's layers plus per-head RMS norms of q and k
 *                     (llama.cpp's Qwen3), for the reranker above.
 *
 * On success one summary line goes to stderr. Errors are reported as one
 * line on stderr and exit status 2.
 */

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "gguf.h"
#include "tiny_model.h"


/* The vocabulary is built in fixed-size storage; the built-in word lists
 * stay far below these limits, and vocab_append checks them anyway. */
#define MAX_VOCAB 1024
#define MAX_PIECE_BYTES TINY_MAX_PIECE_BYTES

/* SentencePiece marks a word boundary with U+2581 LOWER ONE EIGHTH BLOCK. */
#define SPM_SPACE "\xE2\x96\x81"

/* Token types as llama.cpp's llama_token_type enum numbers them. */
enum token_type {
    TOKEN_TYPE_NORMAL = 1,
    TOKEN_TYPE_UNKNOWN = 2,
    TOKEN_TYPE_CONTROL = 3,
    TOKEN_TYPE_BYTE = 6,
};

enum { TOKEN_ID_UNK = 0, TOKEN_ID_BOS = 1, TOKEN_ID_EOS = 2 };

/* LFM2's convolution cache length (its kernel size): the reference models' 3. */
enum { LFM2_L_CACHE = 3 };

/* Mamba's fixed state-space sizes: small, and what llama.cpp's loader accepts. */
enum { MAMBA_D_STATE = 8, MAMBA_D_CONV = 4 };

struct tiny_vocab {
    char text[MAX_VOCAB][MAX_PIECE_BYTES];
    float score[MAX_VOCAB];
    int32_t type[MAX_VOCAB];
    int count;
    int first_word_id;
};

static void print_usage(FILE *stream) {
    fprintf(stream,
            "usage: " PROGRAM_NAME " --out FILE [--arch llama|mamba|lfm2|glm4moe|qwen35|eagle3|dflash|dspark|qwen3]"
            " [--vocab normal|different|split] [--n-embd 32] [--n-layer 2] [--n-head 4] [--n-head-kv 4]"
            " [--n-ff 64] [--n-ctx 256] [--seed 1] [--noise 0]"
            " [--noise-seed 7] [--logit-scale 1.0] [--layer-scale 1.0] [--name NAME]"
            " [--chat-template NAME_OR_TEXT] [--weight-type f32|q8_0] [--hidden-mix 0.5] [--target FILE]"
            " [--target-layers A,B,C] [--target-hidden-size N] [--block-size 8] [--lora-rank R]"
            " [--nextn-layers 1] [--fim on|off] [--text TEXT] [--text-miss N]"
            " [--pooling none|mean|cls|last|rank] [--rerank-template T]\n");
}

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

static long parse_long_in_range(const char *flag, const char *text, long min, long max) {
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < min || value > max) {
        fail("%s expects an integer in [%ld, %ld], got '%s'", flag, min, max, text);
    }
    return value;
}

static uint64_t parse_seed(const char *flag, const char *text) {
    char *end = NULL;
    errno = 0;
    /* strtoull silently wraps negative input, so reject a sign up front. */
    unsigned long long value = strtoull(text, &end, 10);
    if (text[0] == '-' || errno != 0 || end == text || *end != '\0') {
        fail("%s expects a non-negative integer, got '%s'", flag, text);
    }
    return (uint64_t)value;
}

static double parse_double(const char *flag, const char *text) {
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || isnan(value)) {
        fail("%s expects a number, got '%s'", flag, text);
    }
    return value;
}

static void parse_vocab_kind(const char *text, model_options *opts) {
    opts->different_vocab = strcmp(text, "different") == 0;
    opts->split_vocab = strcmp(text, "split") == 0;
    if (!opts->different_vocab && !opts->split_vocab && strcmp(text, "normal") != 0) {
        fail("--vocab expects 'normal', 'different' or 'split', got '%s'", text);
    }
}

static model_arch parse_arch(const char *text) {
    static const struct {
        const char *name;
        model_arch arch;
    } names[] = {{"llama", ARCH_LLAMA},   {"mamba", ARCH_MAMBA},   {"lfm2", ARCH_LFM2},
                 {"glm4moe", ARCH_GLM4MOE}, {"qwen35", ARCH_QWEN35}, {"eagle3", ARCH_EAGLE3},
                 {"dflash", ARCH_DFLASH},   {"dspark", ARCH_DSPARK}, {"qwen3", ARCH_QWEN3}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(text, names[i].name) == 0) {
            return names[i].arch;
        }
    }
    fail("--arch expects llama, mamba, lfm2, glm4moe, qwen35, eagle3, dflash, dspark or qwen3, got '%s'", text);
}

/* llama.cpp's pooling numbers (enum llama_pooling_type), in order. */
static int parse_pooling(const char *text) {
    static const char *const names[] = {"none", "mean", "cls", "last", "rank"};
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++) {
        if (strcmp(text, names[i]) == 0) {
            return i;
        }
    }
    fail("--pooling expects none, mean, cls, last or rank, got '%s'", text);
}

enum { POOLING_RANK = 4 };

/* "0,1,2": the target layers a head reads. */
static void parse_target_layers(model_options *opts, const char *text) {
    opts->n_target_layers = 0;
    for (const char *p = text; *p;) {
        char *end = NULL;
        errno = 0;
        long id = strtol(p, &end, 10);
        if (errno != 0 || end == p || id < 0 || id >= MAX_LAYERS || (*end != ',' && *end != '\0') ||
            opts->n_target_layers == MAX_TARGET_LAYERS) {
            fail("--target-layers expects up to %d layer numbers in [0, %ld] separated by commas, got '%s'",
                 MAX_TARGET_LAYERS, MAX_LAYERS - 1, text);
        }
        opts->target_layers[opts->n_target_layers++] = (int32_t)id;
        p = *end == ',' ? end + 1 : end;
    }
}

static model_options default_options(void) {
    model_options opts = {
        .out_path = NULL,
        .name = NULL, /* tiny-<arch> */
        .arch = ARCH_LLAMA,
        .different_vocab = false,
        .n_embd = 32,
        .n_layer = 2,
        .n_head = 4,
        .n_head_kv = 4,
        .n_ff = 64,
        .n_ctx = 256,
        .seed = 1,
        .noise_seed = 7,
        .noise = 0.0,
        .logit_scale = 1.0,
        .chat_template = NULL,
        .layer_scale = 1.0,
        .hidden_mix = 0.5,
        .n_nextn = 1,
        .block_size = 8,
        .weight_type = GGML_TYPE_F32,
        .pooling = -1,
    };
    return opts;
}

static int parse_dimension(const char *flag, const char *value) {
    return (int)parse_long_in_range(flag, value, 1, MAX_DIMENSION);
}

/* Applies one "--flag value" pair; returns false when the flag is unknown. */
static bool apply_option(model_options *opts, const char *flag, const char *value) {
    if (strcmp(flag, "--out") == 0) {
        opts->out_path = value;
    } else if (strcmp(flag, "--name") == 0) {
        opts->name = value;
    } else if (strcmp(flag, "--arch") == 0) {
        opts->arch = parse_arch(value);
    } else if (strcmp(flag, "--vocab") == 0) {
        parse_vocab_kind(value, opts);
    } else if (strcmp(flag, "--n-embd") == 0) {
        opts->n_embd = parse_dimension(flag, value);
    } else if (strcmp(flag, "--n-layer") == 0) {
        opts->n_layer = (int)parse_long_in_range(flag, value, 1, MAX_LAYERS);
    } else if (strcmp(flag, "--n-head") == 0) {
        opts->n_head = parse_dimension(flag, value);
    } else if (strcmp(flag, "--n-head-kv") == 0) {
        opts->n_head_kv = parse_dimension(flag, value);
    } else if (strcmp(flag, "--n-ff") == 0) {
        opts->n_ff = parse_dimension(flag, value);
    } else if (strcmp(flag, "--n-ctx") == 0) {
        opts->n_ctx = (int)parse_long_in_range(flag, value, 1, MAX_CONTEXT);
    } else if (strcmp(flag, "--seed") == 0) {
        opts->seed = parse_seed(flag, value);
    } else if (strcmp(flag, "--noise-seed") == 0) {
        opts->noise_seed = parse_seed(flag, value);
    } else if (strcmp(flag, "--noise") == 0) {
        opts->noise = parse_double(flag, value);
    } else if (strcmp(flag, "--logit-scale") == 0) {
        opts->logit_scale = parse_double(flag, value);
    } else if (strcmp(flag, "--chat-template") == 0) {
        opts->chat_template = value;
    } else if (strcmp(flag, "--fim") == 0) {
        if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0) fail("--fim expects 'on' or 'off', got '%s'", value);
        opts->fim = strcmp(value, "on") == 0;
    } else if (strcmp(flag, "--pooling") == 0) {
        opts->pooling = parse_pooling(value);
    } else if (strcmp(flag, "--rerank-template") == 0) {
        opts->rerank_template = value;
    } else if (strcmp(flag, "--layer-scale") == 0) {
        opts->layer_scale = parse_double(flag, value);
    } else if (strcmp(flag, "--hidden-mix") == 0) {
        opts->hidden_mix = parse_double(flag, value);
    } else if (strcmp(flag, "--nextn-layers") == 0) {
        opts->n_nextn = (int)parse_long_in_range(flag, value, 1, 4);
    } else if (strcmp(flag, "--target") == 0) {
        opts->target_path = value;
    } else if (strcmp(flag, "--target-layers") == 0) {
        parse_target_layers(opts, value);
    } else if (strcmp(flag, "--target-hidden-size") == 0) {
        opts->target_hidden_size = parse_dimension(flag, value);
    } else if (strcmp(flag, "--block-size") == 0) {
        opts->block_size = (int)parse_long_in_range(flag, value, 2, 64);
    } else if (strcmp(flag, "--text") == 0) {
        opts->text = value;
    } else if (strcmp(flag, "--text-miss") == 0) {
        opts->text_miss = (int)parse_long_in_range(flag, value, 0, 1000);
    } else if (strcmp(flag, "--lora-rank") == 0) {
        opts->lora_rank = (int)parse_long_in_range(flag, value, 1, 64);
    } else if (strcmp(flag, "--weight-type") == 0) {
        if (strcmp(value, "f32") != 0 && strcmp(value, "q8_0") != 0) fail("--weight-type must be f32 or q8_0, got '%s'", value);
        opts->weight_type = strcmp(value, "q8_0") == 0 ? GGML_TYPE_Q8_0 : GGML_TYPE_F32;
    } else {
        return false;
    }
    return true;
}

/* Rejects combinations llama.cpp would refuse or mis-handle at load time. */
static void validate_options(model_options *opts) {
    if (opts->out_path == NULL || opts->out_path[0] == '\0') {
        fail("--out FILE is required");
    }
    if (opts->name == NULL) {
        opts->name = opts->arch == ARCH_MAMBA ? "tiny-mamba" : opts->arch == ARCH_LFM2 ? "tiny-lfm2"
                     : opts->arch == ARCH_QWEN3 ? "tiny-qwen3"
                     : tiny_heads_handles(opts->arch) ? tiny_heads_arch_name(opts->arch) : "tiny-llama";
    }
    if (opts->name[0] == '\0') {
        fail("--name must not be empty");
    }
    if (opts->chat_template != NULL && opts->chat_template[0] == '\0') {
        fail("--chat-template must not be empty (leave it out for a model without one)");
    }
    if (opts->n_embd % opts->n_head != 0) {
        fail("--n-embd (%d) must be a multiple of --n-head (%d)", opts->n_embd, opts->n_head);
    }
    if ((opts->n_embd / opts->n_head) % 2 != 0) {
        /* RoPE rotates pairs of values, so the head size must be even. */
        fail("head size n_embd/n_head (%d) must be even", opts->n_embd / opts->n_head);
    }
    if (opts->n_head_kv > opts->n_head || opts->n_head % opts->n_head_kv != 0) {
        fail("--n-head (%d) must be a multiple of --n-head-kv (%d)", opts->n_head, opts->n_head_kv);
    }
    if (opts->lora_rank > 0 && (opts->arch != ARCH_LLAMA || opts->weight_type != GGML_TYPE_F32)) {
        fail("--lora-rank writes an f32 adapter for --arch llama");
    }
    if (opts->weight_type == GGML_TYPE_Q8_0 &&
        (opts->arch != ARCH_LLAMA || opts->n_embd % 32 != 0 || opts->n_ff % 32 != 0)) {
        fail("--weight-type q8_0 needs --arch llama and --n-embd and --n-ff multiples of 32");
    }
    if (!(opts->noise >= 0.0 && opts->noise <= 1e6)) {
        fail("--noise must be in [0, 1e6], got %g", opts->noise);
    }
    if (!(opts->logit_scale > 0.0 && opts->logit_scale <= 1e6)) {
        fail("--logit-scale must be in (0, 1e6], got %g", opts->logit_scale);
    }
    if (!(opts->layer_scale >= 0.0 && opts->layer_scale <= 1e3) || !(opts->hidden_mix >= 0.0 && opts->hidden_mix <= 1e3)) {
        fail("--layer-scale and --hidden-mix must be in [0, 1000], got %g and %g", opts->layer_scale, opts->hidden_mix);
    }
    if (opts->pooling >= 0 && opts->arch != ARCH_LLAMA && opts->arch != ARCH_QWEN3) {
        fail("--pooling applies to --arch llama and qwen3");
    }
    if (opts->pooling == POOLING_RANK && opts->arch != ARCH_QWEN3) {
        fail("--pooling rank needs --arch qwen3 (the llama architecture loads no classifier head)");
    }
    if (opts->arch == ARCH_QWEN3 && (opts->weight_type != GGML_TYPE_F32 || opts->lora_rank > 0)) {
        fail("--arch qwen3 writes f32 models only");
    }
    if (opts->n_nextn != 1 && opts->arch != ARCH_GLM4MOE && opts->arch != ARCH_QWEN35) {
        fail("--nextn-layers applies to --arch glm4moe and qwen35 only");
    }
    if (opts->text != NULL && (opts->arch != ARCH_LLAMA || opts->lora_rank > 0 || opts->different_vocab)) {
        fail("--text writes a model of --arch llama with the normal vocabulary");
    }
    if (opts->text_miss > 0 && opts->text == NULL) {
        fail("--text-miss needs --text");
    }
    if (tiny_heads_handles(opts->arch)) {
        tiny_heads_validate(opts);
    }
}

static model_options parse_command_line(int argc, char **argv) {
    model_options opts = default_options();
    for (int i = 1; i < argc; i += 2) {
        const char *flag = argv[i];
        if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
            print_usage(stdout);
            exit(0);
        }
        if (i + 1 >= argc) {
            fail("%s needs a value (see --help)", flag);
        }
        if (!apply_option(&opts, flag, argv[i + 1])) {
            fail("unknown option '%s' (see --help)", flag);
        }
    }
    validate_options(&opts);
    return opts;
}

/* ------------------------------------------------------------------------ */
/* Vocabulary                                                                */
/* ------------------------------------------------------------------------ */

/* Words the tokenizer can build as single tokens. The list is fixed so the
 * vocabulary, and therefore every token id, is stable across runs and
 * versions of this tool; appending words changes ids, so prefer not to. */
static const char *const WORDS[] = {
    "the",  "a",     "and",  "was",  "little", "girl",  "boy",  "dog",
    "cat",  "ran",   "saw",  "big",  "red",    "ball",  "park", "one",
    "day",  "she",   "he",   "to",   "play",   "with",  "her",  "his",
    "mom",  "happy", "sun",  "tree", "once",   "upon",  "time", "there",
    "in",   "is",    "it",   "of",   "went",   "home",  "said", "you",
    "we",   "they",  "not",  "but",  "so",     "then",  "at",   "very",
    "good", "run",   "fun",  "on",   "sky",    "blue",  "bird", "toy",
    "Once", "The",   "She",  "He",
};

/* Frequent English letter pairs, so words outside WORDS still merge into a
 * few pieces instead of one token per letter. */
static const char *const LETTER_BIGRAMS[] = {
    "th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es",
    "or", "te", "ed", "is", "it", "al", "ar", "st", "ng", "ou", "le", "ve",
};

static const char PUNCTUATION[] = ".,!?'\"-:;";

#define ARRAY_LENGTH(array) (sizeof(array) / sizeof((array)[0]))

static bool vocab_contains(const tiny_vocab *vocab, const char *text) {
    for (int i = 0; i < vocab->count; i++) {
        if (strcmp(vocab->text[i], text) == 0) {
            return true;
        }
    }
    return false;
}

/* Duplicates are a bug in the fixed regions: llama.cpp maps text to a single
 * id, so a repeated piece would make one of the ids unreachable. */
static void vocab_append(tiny_vocab *vocab, const char *text, float score, int32_t type) {
    if (vocab->count >= MAX_VOCAB) {
        fail("vocabulary exceeds %d entries", MAX_VOCAB);
    }
    if (strlen(text) >= MAX_PIECE_BYTES) {
        fail("vocabulary piece '%s' is too long", text);
    }
    if (vocab_contains(vocab, text)) {
        fail("duplicate vocabulary piece '%s'", text);
    }
    strcpy(vocab->text[vocab->count], text);
    vocab->score[vocab->count] = score;
    vocab->type[vocab->count] = type;
    vocab->count++;
}

static int count_utf8_characters(const char *text) {
    int count = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
        if ((*p & 0xC0) != 0x80) {
            count++;
        }
    }
    return count;
}

/* SPM merges the adjacent pair whose concatenation has the highest score, so
 * scoring longer pieces higher keeps extending a piece once it has started.
 * Word-start pieces get a small bonus over letter pairs of equal length so a
 * known word is always assembled from its left edge ("▁t" -> "▁th" -> "▁the")
 * rather than being split by an inner pair such as "he". */
static float piece_score(const char *text) {
    int length = count_utf8_characters(text);
    bool starts_word = strncmp(text, SPM_SPACE, strlen(SPM_SPACE)) == 0;
    return (float)length + (starts_word && length > 1 ? 0.5f : 0.0f);
}

static void vocab_append_normal_if_new(tiny_vocab *vocab, const char *text) {
    if (!vocab_contains(vocab, text)) {
        vocab_append(vocab, text, piece_score(text), TOKEN_TYPE_NORMAL);
    }
}

int32_t tiny_vocab_find(const tiny_vocab *vocab, const char *text) {
    for (int i = 0; i < vocab->count; i++)
        if (strcmp(vocab->text[i], text) == 0) return i;
    return -1;
}

int32_t tiny_vocab_add(tiny_vocab *vocab, const char *text) {
    vocab_append_normal_if_new(vocab, text);
    return tiny_vocab_find(vocab, text);
}

static void add_special_tokens(tiny_vocab *vocab) {
    vocab_append(vocab, "<unk>", 0.0f, TOKEN_TYPE_UNKNOWN);
    vocab_append(vocab, "<s>", 0.0f, TOKEN_TYPE_CONTROL);
    vocab_append(vocab, "</s>", 0.0f, TOKEN_TYPE_CONTROL);
}

/* Byte tokens let SPM encode any text, so round-trips never lose characters
 * that the small vocabulary lacks. */
static void add_byte_tokens(tiny_vocab *vocab) {
    for (int byte = 0; byte < 256; byte++) {
        char text[8];
        snprintf(text, sizeof text, "<0x%02X>", byte);
        vocab_append(vocab, text, 0.0f, TOKEN_TYPE_BYTE);
    }
}

static void add_single_character(tiny_vocab *vocab, char c) {
    char text[2] = {c, '\0'};
    vocab_append(vocab, text, piece_score(text), TOKEN_TYPE_NORMAL);
}

static void add_character_tokens(tiny_vocab *vocab) {
    vocab_append(vocab, SPM_SPACE, piece_score(SPM_SPACE), TOKEN_TYPE_NORMAL);
    for (char c = 'a'; c <= 'z'; c++) {
        add_single_character(vocab, c);
    }
    for (char c = 'A'; c <= 'Z'; c++) {
        add_single_character(vocab, c);
    }
    for (char c = '0'; c <= '9'; c++) {
        add_single_character(vocab, c);
    }
    for (const char *p = PUNCTUATION; *p != '\0'; p++) {
        add_single_character(vocab, *p);
    }
}

/* SPM only merges two pieces when their concatenation is itself a token, so
 * "▁little" is reachable only if "▁l", "▁li", ... "▁littl" exist too. */
static void add_word_with_prefixes(tiny_vocab *vocab, const char *word) {
    char piece[MAX_PIECE_BYTES];
    size_t word_length = strlen(word);
    if (strlen(SPM_SPACE) + word_length >= sizeof piece) {
        fail("built-in word '%s' is too long", word);
    }
    for (size_t prefix_length = 1; prefix_length <= word_length; prefix_length++) {
        snprintf(piece, sizeof piece, "%s%.*s", SPM_SPACE, (int)prefix_length, word);
        vocab_append_normal_if_new(vocab, piece);
    }
}

static void add_word_tokens(tiny_vocab *vocab) {
    for (size_t i = 0; i < ARRAY_LENGTH(WORDS); i++) {
        add_word_with_prefixes(vocab, WORDS[i]);
    }
    for (size_t i = 0; i < ARRAY_LENGTH(LETTER_BIGRAMS); i++) {
        vocab_append_normal_if_new(vocab, LETTER_BIGRAMS[i]);
    }
}

static void swap_vocab_entries(tiny_vocab *vocab, int a, int b) {
    char text[MAX_PIECE_BYTES];
    memcpy(text, vocab->text[a], sizeof text);
    memcpy(vocab->text[a], vocab->text[b], sizeof text);
    memcpy(vocab->text[b], text, sizeof text);

    float score = vocab->score[a];
    vocab->score[a] = vocab->score[b];
    vocab->score[b] = score;

    int32_t type = vocab->type[a];
    vocab->type[a] = vocab->type[b];
    vocab->type[b] = type;
}

/* Reversing the word region keeps the same set of pieces (hence the same
 * size and the same tokenization of any text) while giving every word piece
 * a different id; since pieces are unique, the first word id always differs. */
static void reverse_word_region(tiny_vocab *vocab) {
    int low = vocab->first_word_id;
    int high = vocab->count - 1;
    while (low < high) {
        swap_vocab_entries(vocab, low, high);
        low++;
        high--;
    }
}

/* --vocab split: the same ids for the same pieces but two, so a model of either vocabulary reads
 * and writes the same text through most of its tokens (a draft of another vocabulary that agrees
 * with the target often). Where the normal vocabulary has "▁little" this one has "ing", a piece
 * the normal one splits ("in" "g"), and so splits " little" itself ("▁littl" "e"); where it has
 * "▁happy", "é", a character the normal one only has as two byte tokens. */
static void split_word_pieces(tiny_vocab *vocab) {
    static const char *const swaps[][2] = {{SPM_SPACE "little", "ing"}, {SPM_SPACE "happy", "\xC3\xA9"}};
    for (size_t s = 0; s < ARRAY_LENGTH(swaps); s++) {
        for (int i = vocab->first_word_id; i < vocab->count; i++) {
            if (strcmp(vocab->text[i], swaps[s][0]) == 0) {
                snprintf(vocab->text[i], MAX_PIECE_BYTES, "%s", swaps[s][1]);
                vocab->score[i] = piece_score(swaps[s][1]);
            }
        }
    }
}

static void build_vocab(tiny_vocab *vocab, bool different, bool split) {
    vocab->count = 0;
    add_special_tokens(vocab);
    add_byte_tokens(vocab);
    add_character_tokens(vocab);
    vocab->first_word_id = vocab->count;
    add_word_tokens(vocab);
    if (different) {
        reverse_word_region(vocab);
    }
    if (split) {
        split_word_pieces(vocab);
    }
}

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

enum {
    TENSORS_PER_LAYER = 9,
    MAMBA_TENSORS_PER_LAYER = 10,
    LFM2_CONV_TENSORS = 8,
    LFM2_ATTENTION_TENSORS = 11,
    GLOBAL_TENSORS = 3
};

/* LFM2: which layers attend (the odd ones); the others are short convolutions. */
static bool lfm2_is_attention(int layer) { return layer % 2 == 1; }

/* A reranker's classifier head: two labels, as Qwen3-Reranker's yes/no. */
enum { CLASSIFIER_LABELS = 2 };
static bool has_classifier(const model_options *opts) { return opts->pooling == POOLING_RANK; }

static size_t tensor_count(const model_options *opts) {
    if (opts->arch == ARCH_LFM2) {
        size_t n = GLOBAL_TENSORS;
        for (int layer = 0; layer < opts->n_layer; layer++) {
            n += lfm2_is_attention(layer) ? LFM2_ATTENTION_TENSORS : LFM2_CONV_TENSORS;
        }
        return n;
    }
    size_t per_layer = opts->arch == ARCH_MAMBA ? MAMBA_TENSORS_PER_LAYER
                       : opts->arch == ARCH_QWEN3 ? TENSORS_PER_LAYER + 2 /* q and k norms */
                                                  : TENSORS_PER_LAYER;
    return GLOBAL_TENSORS + per_layer * (size_t)opts->n_layer + (has_classifier(opts) ? 1 : 0);
}

/* Mamba's sizes from n_embd: llama.cpp supports only an expansion factor of 2, and the
 * time-step rank is ceil(n_embd / 16) as in the reference models. */
static int mamba_d_inner(const model_options *opts) { return 2 * opts->n_embd; }
static int mamba_dt_rank(const model_options *opts) { return (opts->n_embd + 15) / 16; }

static size_t mamba_layer_float_count(const model_options *opts) {
    size_t n_embd = (size_t)opts->n_embd, d_inner = (size_t)mamba_d_inner(opts);
    size_t dt_rank = (size_t)mamba_dt_rank(opts);
    return n_embd                                   /* attn_norm */
           + n_embd * 2 * d_inner                   /* ssm_in */
           + (MAMBA_D_CONV + 1) * d_inner           /* ssm_conv1d weight, bias */
           + d_inner * (dt_rank + 2 * MAMBA_D_STATE) /* ssm_x */
           + (dt_rank + 1) * d_inner                /* ssm_dt weight, bias */
           + (MAMBA_D_STATE + 1) * d_inner          /* ssm_a, ssm_d */
           + d_inner * n_embd;                      /* ssm_out */
}

/* An LFM2 layer is at most a llama layer plus its q/k norms, or a convolution block (in_proj
 * 3 n_embd^2, out_proj n_embd^2, the kernel) with the same feed-forward: the larger of the two. */
static size_t lfm2_layer_float_count(const model_options *opts) {
    size_t n_embd = (size_t)opts->n_embd, n_ff = (size_t)opts->n_ff, head = n_embd / (size_t)opts->n_head;
    size_t n_embd_kv = head * (size_t)opts->n_head_kv;
    size_t common = 2 * n_embd + 3 * n_embd * n_ff;
    size_t attention = 2 * n_embd * n_embd + 2 * n_embd * n_embd_kv + 2 * head;
    size_t conv = 4 * n_embd * n_embd + LFM2_L_CACHE * n_embd;
    return common + (attention > conv ? attention : conv);
}

static size_t layer_float_count(const model_options *opts) {
    if (opts->arch == ARCH_MAMBA) {
        return mamba_layer_float_count(opts);
    }
    if (opts->arch == ARCH_LFM2) {
        return lfm2_layer_float_count(opts);
    }
    size_t n_embd = (size_t)opts->n_embd;
    size_t n_embd_kv = n_embd / (size_t)opts->n_head * (size_t)opts->n_head_kv;
    size_t n_ff = (size_t)opts->n_ff;
    size_t norms = 2 * n_embd;
    size_t attention = 2 * n_embd * n_embd + 2 * n_embd * n_embd_kv;
    size_t feed_forward = 3 * n_embd * n_ff;
    size_t qk_norms = opts->arch == ARCH_QWEN3 ? 2 * n_embd / (size_t)opts->n_head : 0;
    return norms + attention + feed_forward + qk_norms;
}

static size_t model_float_count(const model_options *opts, int n_vocab) {
    size_t n_embd = (size_t)opts->n_embd;
    size_t embeddings_and_output = 2 * n_embd * (size_t)n_vocab + n_embd;
    size_t classifier = has_classifier(opts) ? n_embd * CLASSIFIER_LABELS : 0;
    return embeddings_and_output + classifier + (size_t)opts->n_layer * layer_float_count(opts);
}

/* The ggml context owns all weights until the file is written, because
 * gguf_add_tensor keeps pointers to the data rather than copying it. */
static struct ggml_context *create_weight_context(size_t n_floats, size_t n_tensors, void **buffer_out) {
    size_t per_tensor = ggml_tensor_overhead() + GGML_MEM_ALIGN;
    size_t size = n_floats * sizeof(float) + n_tensors * per_tensor + 4096;
    size = (size + 63) / 64 * 64; /* aligned_alloc needs a multiple of the alignment */
    /* Allocating here, not inside ggml_init, turns an oversized request into a
     * clean error instead of an assertion abort. */
    void *buffer = aligned_alloc(64, size);
    if (buffer == NULL) {
        fail("cannot allocate %zu bytes for the weights", size);
    }
    struct ggml_init_params params = {.mem_size = size, .mem_buffer = buffer, .no_alloc = false};
    struct ggml_context *ctx = ggml_init(params);
    if (ctx == NULL) {
        fail("ggml_init failed");
    }
    *buffer_out = buffer;
    return ctx;
}

/* A layer's feed-forward block (SwiGLU, as llama.cpp's llama and LFM2 loaders name it), drawn from
 * `source` in this order: norm, gate, up, down. */
static void add_ffn(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source, int layer,
                    int64_t n_embd, int64_t n_ff, double layer_scale) {
    char name[GGML_MAX_NAME];
    double embd_scale = fan_in_scale(n_embd);
    add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "ffn_norm.weight"), n_embd);
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ffn_gate.weight"),
               n_embd, n_ff, embd_scale);
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ffn_up.weight"),
               n_embd, n_ff, embd_scale);
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ffn_down.weight"),
               n_ff, n_embd, layer_scale * fan_in_scale(n_ff));
}

static void add_layer(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                      const model_options *opts, int layer) {
    int64_t n_embd = opts->n_embd;
    int64_t n_embd_kv = (int64_t)(opts->n_embd / opts->n_head) * opts->n_head_kv;
    int64_t n_ff = opts->n_ff;
    double embd_scale = fan_in_scale(n_embd);
    char name[GGML_MAX_NAME];

    add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "attn_norm.weight"), n_embd);
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "attn_q.weight"),
               n_embd, n_embd, embd_scale);
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "attn_k.weight"),
               n_embd, n_embd_kv, embd_scale);
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "attn_v.weight"),
               n_embd, n_embd_kv, embd_scale);
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "attn_output.weight"),
               n_embd, n_embd, opts->layer_scale * embd_scale);
    if (opts->arch == ARCH_QWEN3) { /* per-head RMS norms of q and k, after the llama tensors */
        add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "attn_q_norm.weight"), n_embd / opts->n_head);
        add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "attn_k_norm.weight"), n_embd / opts->n_head);
    }
    add_ffn(gguf, ctx, source, layer, n_embd, n_ff, opts->layer_scale);
}

/* Mamba's A as the S4D-real initialisation stores it (A = -exp(A_log) = -(1..d_state) per
 * channel): negative, so the state decays and the recurrence is stable over any length. */
static void add_mamba_a(struct gguf_context *gguf, struct ggml_context *ctx, const char *name,
                        int64_t d_state, int64_t d_inner) {
    struct ggml_tensor *tensor = new_named_tensor(ctx, name, d_state, d_inner);
    float *data = (float *)tensor->data;
    for (int64_t row = 0; row < d_inner; row++) {
        for (int64_t i = 0; i < d_state; i++) {
            data[row * d_state + i] = -(float)(i + 1);
        }
    }
    gguf_add_tensor(gguf, tensor);
}

/* One Mamba-1 layer in the shapes of llama.cpp's LLM_ARCH_MAMBA loader. */
static void add_mamba_layer(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                            const model_options *opts, int layer) {
    int64_t n_embd = opts->n_embd, d_inner = mamba_d_inner(opts), dt_rank = mamba_dt_rank(opts);
    char name[GGML_MAX_NAME];

    add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "attn_norm.weight"), n_embd);
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ssm_in.weight"),
               n_embd, 2 * d_inner, fan_in_scale(n_embd));
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ssm_conv1d.weight"),
               MAMBA_D_CONV, d_inner, fan_in_scale(MAMBA_D_CONV));
    add_constant(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "ssm_conv1d.bias"), d_inner, 0, 0.0f);
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ssm_x.weight"),
               d_inner, dt_rank + 2 * MAMBA_D_STATE, fan_in_scale(d_inner));
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ssm_dt.weight"),
               dt_rank, d_inner, fan_in_scale(dt_rank));
    /* softplus(-2) = 0.13: time steps that let each token move the state noticeably. */
    add_constant(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "ssm_dt.bias"), d_inner, 0, -2.0f);
    add_mamba_a(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "ssm_a"), MAMBA_D_STATE, d_inner);
    add_constant(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "ssm_d"), d_inner, 0, 1.0f);
    add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "ssm_out.weight"),
               d_inner, n_embd, fan_in_scale(d_inner));
}

/* One LFM2 layer in the shapes of llama.cpp's LLM_ARCH_LFM2 loader: a convolution or attention
 * block, then the feed-forward. */
static void add_lfm2_layer(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                           const model_options *opts, int layer) {
    int64_t n_embd = opts->n_embd, n_ff = opts->n_ff, head = opts->n_embd / opts->n_head;
    int64_t n_embd_kv = head * opts->n_head_kv;
    double embd_scale = fan_in_scale(n_embd);
    char name[GGML_MAX_NAME];

    add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "attn_norm.weight"), n_embd);
    if (lfm2_is_attention(layer)) {
        add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "attn_q_norm.weight"), head);
        add_norm(gguf, ctx, layer_tensor_name(name, sizeof name, layer, "attn_k_norm.weight"), head);
        add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "attn_q.weight"),
                   n_embd, n_embd, embd_scale);
        add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "attn_k.weight"),
                   n_embd, n_embd_kv, embd_scale);
        add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "attn_v.weight"),
                   n_embd, n_embd_kv, embd_scale);
        add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "attn_output.weight"),
                   n_embd, n_embd, opts->layer_scale * embd_scale);
    } else {
        add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "shortconv.conv.weight"),
                   LFM2_L_CACHE, n_embd, fan_in_scale(LFM2_L_CACHE));
        add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "shortconv.in_proj.weight"),
                   n_embd, 3 * n_embd, embd_scale);
        add_matrix(gguf, ctx, source, layer_tensor_name(name, sizeof name, layer, "shortconv.out_proj.weight"),
                   n_embd, n_embd, embd_scale);
    }
    add_ffn(gguf, ctx, source, layer, n_embd, n_ff, opts->layer_scale);
}

/* Shapes follow llama.cpp's LLM_ARCH_LLAMA loader, in ggml order {ne0, ne1}
 * where ne0 is the input (row) dimension. */
static void add_all_tensors(struct gguf_context *gguf, struct ggml_context *ctx,
                            const model_options *opts, int n_vocab, const tiny_text_chain *text) {
    weight_source source = {
        .weights = {opts->seed},
        .noise = {opts->noise_seed},
        .noise_eps = opts->noise,
        .matrix_type = opts->weight_type,
    };
    /* Embeddings are unit variance: the first RMS norm rescales them anyway,
     * and unit scale matches the size of the attention/FFN residual updates. */
    if (text) {
        tiny_text_add_embeddings(gguf, ctx, opts, text, n_vocab);
    } else {
        add_matrix(gguf, ctx, &source, "token_embd.weight", opts->n_embd, n_vocab, 1.0);
    }
    for (int layer = 0; layer < opts->n_layer; layer++) {
        if (opts->arch == ARCH_MAMBA) {
            add_mamba_layer(gguf, ctx, &source, opts, layer);
        } else if (opts->arch == ARCH_LFM2) {
            add_lfm2_layer(gguf, ctx, &source, opts, layer);
        } else {
            add_layer(gguf, ctx, &source, opts, layer);
        }
    }
    /* LFM2's final norm has this name in llama.cpp (LLM_TENSOR_OUTPUT_NORM_LFM2). */
    add_norm(gguf, ctx, opts->arch == ARCH_LFM2 ? "token_embd_norm.weight" : "output_norm.weight", opts->n_embd);
    /* Logits have roughly unit spread before --logit-scale, which therefore
     * directly sets how peaked the next-token distribution is. */
    if (text) {
        tiny_text_add_output(gguf, ctx, opts, text, n_vocab, TOKEN_ID_EOS);
    } else {
        add_matrix(gguf, ctx, &source, "output.weight", opts->n_embd, n_vocab,
                   opts->logit_scale * fan_in_scale(opts->n_embd));
    }
    /* The classifier's logits have unit spread, so the softmax's first label moves between
     * documents rather than sitting at 0 or 1. */
    if (has_classifier(opts)) {
        add_matrix(gguf, ctx, &source, "cls.output.weight", opts->n_embd, CLASSIFIER_LABELS, fan_in_scale(opts->n_embd));
    }
}

/* ------------------------------------------------------------------------ */
/* Metadata                                                                  */
/* ------------------------------------------------------------------------ */

static void set_mamba_metadata(struct gguf_context *gguf, const model_options *opts, int n_vocab) {
    gguf_set_val_str(gguf, "general.architecture", "mamba");
    gguf_set_val_str(gguf, "general.name", opts->name);
    gguf_set_val_u32(gguf, "mamba.context_length", (uint32_t)opts->n_ctx);
    gguf_set_val_u32(gguf, "mamba.embedding_length", (uint32_t)opts->n_embd);
    gguf_set_val_u32(gguf, "mamba.block_count", (uint32_t)opts->n_layer);
    gguf_set_val_u32(gguf, "mamba.feed_forward_length", 0);
    gguf_set_val_u32(gguf, "mamba.attention.head_count", 0);
    gguf_set_val_u32(gguf, "mamba.ssm.conv_kernel", MAMBA_D_CONV);
    gguf_set_val_u32(gguf, "mamba.ssm.inner_size", (uint32_t)mamba_d_inner(opts));
    gguf_set_val_u32(gguf, "mamba.ssm.state_size", MAMBA_D_STATE);
    gguf_set_val_u32(gguf, "mamba.ssm.time_step_rank", (uint32_t)mamba_dt_rank(opts));
    gguf_set_val_f32(gguf, "mamba.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_set_val_u32(gguf, "mamba.vocab_size", (uint32_t)n_vocab);
}

static void set_lfm2_metadata(struct gguf_context *gguf, const model_options *opts, int n_vocab) {
    gguf_set_val_str(gguf, "general.architecture", "lfm2");
    gguf_set_val_str(gguf, "general.name", opts->name);
    gguf_set_val_u32(gguf, "lfm2.context_length", (uint32_t)opts->n_ctx);
    gguf_set_val_u32(gguf, "lfm2.embedding_length", (uint32_t)opts->n_embd);
    gguf_set_val_u32(gguf, "lfm2.block_count", (uint32_t)opts->n_layer);
    gguf_set_val_u32(gguf, "lfm2.feed_forward_length", (uint32_t)opts->n_ff);
    gguf_set_val_u32(gguf, "lfm2.attention.head_count", (uint32_t)opts->n_head);
    /* Per layer: 0 marks a convolution layer (llama.cpp reads it so). */
    uint32_t head_count_kv[MAX_LAYERS];
    for (int layer = 0; layer < opts->n_layer; layer++) {
        head_count_kv[layer] = lfm2_is_attention(layer) ? (uint32_t)opts->n_head_kv : 0;
    }
    gguf_set_arr_data(gguf, "lfm2.attention.head_count_kv", GGUF_TYPE_UINT32, head_count_kv, (size_t)opts->n_layer);
    gguf_set_val_u32(gguf, "lfm2.rope.dimension_count", (uint32_t)(opts->n_embd / opts->n_head));
    gguf_set_val_f32(gguf, "lfm2.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_set_val_u32(gguf, "lfm2.shortconv.l_cache", LFM2_L_CACHE);
    gguf_set_val_u32(gguf, "lfm2.vocab_size", (uint32_t)n_vocab);
}

static void set_model_metadata(struct gguf_context *gguf, const model_options *opts, int n_vocab) {
    if (opts->arch == ARCH_MAMBA) {
        set_mamba_metadata(gguf, opts, n_vocab);
        return;
    }
    if (opts->arch == ARCH_LFM2) {
        set_lfm2_metadata(gguf, opts, n_vocab);
        return;
    }
    const char *arch = opts->arch == ARCH_QWEN3 ? "qwen3" : "llama";
    char key[96];
#define ARCH_KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    gguf_set_val_str(gguf, "general.architecture", arch);
    gguf_set_val_str(gguf, "general.name", opts->name);
    gguf_set_val_u32(gguf, ARCH_KEY("context_length"), (uint32_t)opts->n_ctx);
    gguf_set_val_u32(gguf, ARCH_KEY("embedding_length"), (uint32_t)opts->n_embd);
    gguf_set_val_u32(gguf, ARCH_KEY("block_count"), (uint32_t)opts->n_layer);
    gguf_set_val_u32(gguf, ARCH_KEY("feed_forward_length"), (uint32_t)opts->n_ff);
    gguf_set_val_u32(gguf, ARCH_KEY("attention.head_count"), (uint32_t)opts->n_head);
    gguf_set_val_u32(gguf, ARCH_KEY("attention.head_count_kv"), (uint32_t)opts->n_head_kv);
    gguf_set_val_u32(gguf, ARCH_KEY("rope.dimension_count"), (uint32_t)(opts->n_embd / opts->n_head));
    gguf_set_val_f32(gguf, ARCH_KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
    gguf_set_val_u32(gguf, ARCH_KEY("vocab_size"), (uint32_t)n_vocab);
    if (opts->pooling >= 0) {
        gguf_set_val_u32(gguf, ARCH_KEY("pooling_type"), (uint32_t)opts->pooling);
    }
    if (has_classifier(opts)) {
        const char *labels[CLASSIFIER_LABELS] = {"yes", "no"};
        gguf_set_arr_str(gguf, ARCH_KEY("classifier.output_labels"), labels, CLASSIFIER_LABELS);
    }
#undef ARCH_KEY
}

static int32_t vocab_index(const tiny_vocab *vocab, const char *text) {
    for (int i = 0; i < vocab->count; i++)
        if (strcmp(vocab->text[i], text) == 0) return i;
    fail("no vocabulary piece '%s'", text);
    return -1;
}

static void set_tokenizer_metadata(struct gguf_context *gguf, const tiny_vocab *vocab,
                                   const char *chat_template, bool fim, const char *rerank_template) {
    const char *texts[MAX_VOCAB];
    for (int i = 0; i < vocab->count; i++) {
        texts[i] = vocab->text[i];
    }
    size_t n = (size_t)vocab->count;
    /* "llama" selects llama.cpp's SentencePiece (SPM) tokenizer. */
    gguf_set_val_str(gguf, "tokenizer.ggml.model", "llama");
    gguf_set_arr_str(gguf, "tokenizer.ggml.tokens", texts, n);
    gguf_set_arr_data(gguf, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, vocab->score, n);
    gguf_set_arr_data(gguf, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, vocab->type, n);
    gguf_set_val_u32(gguf, "tokenizer.ggml.bos_token_id", TOKEN_ID_BOS);
    gguf_set_val_u32(gguf, "tokenizer.ggml.eos_token_id", TOKEN_ID_EOS);
    gguf_set_val_u32(gguf, "tokenizer.ggml.unknown_token_id", TOKEN_ID_UNK);
    gguf_set_val_bool(gguf, "tokenizer.ggml.add_bos_token", true);
    gguf_set_val_bool(gguf, "tokenizer.ggml.add_eos_token", false);
    gguf_set_val_bool(gguf, "tokenizer.ggml.add_space_prefix", true);
    if (chat_template != NULL) {
        gguf_set_val_str(gguf, "tokenizer.chat_template", chat_template);
    }
    if (rerank_template != NULL) { /* llama_model_chat_template(model, "rerank") reads it */
        gguf_set_val_str(gguf, "tokenizer.chat_template.rerank", rerank_template);
    }
    if (fim) {
        gguf_set_val_u32(gguf, "tokenizer.ggml.fim_pre_token_id", (uint32_t)vocab_index(vocab, "<0x01>"));
        gguf_set_val_u32(gguf, "tokenizer.ggml.fim_suf_token_id", (uint32_t)vocab_index(vocab, "<0x02>"));
        gguf_set_val_u32(gguf, "tokenizer.ggml.fim_mid_token_id", (uint32_t)vocab_index(vocab, "<0x03>"));
    }
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */
/* ------------------------------------------------------------------------ */

/* Opening the file here (rather than gguf_write_to_file) lets the error
 * message say why the file could not be created. */
static void write_gguf_file(const struct gguf_context *gguf, const char *path) {
    FILE *file = fopen(path, "wb");
    if (file == NULL) {
        fail("cannot open '%s' for writing: %s", path, strerror(errno));
    }
    bool written = gguf_write_to_file_ptr(gguf, file, false);
    if (fclose(file) != 0 || !written) {
        fail("failed to write '%s'", path);
    }
}

/* ------------------------------------------------------------------------ */
/* LoRA adapter                                                              */
/* ------------------------------------------------------------------------ */

/* One rank-r pair for the model tensor `base` {n_in, n_out}: lora_a {n_in, r}, lora_b {r, n_out},
 * so that B A x adds to W x about half of W x's own spread. */
static void add_lora_pair(struct gguf_context *gguf, struct ggml_context *ctx, weight_source *source,
                          const char *base, int64_t n_in, int64_t n_out, int r) {
    char name[GGML_MAX_NAME + 8]; /* the names here are short; a longer one fails loudly below */
    if (snprintf(name, sizeof name, "%s.lora_a", base) >= GGML_MAX_NAME) fail("tensor name '%s' too long", base);
    add_matrix(gguf, ctx, source, name, n_in, r, fan_in_scale(n_in));
    snprintf(name, sizeof name, "%s.lora_b", base);
    add_matrix(gguf, ctx, source, name, r, n_out, 0.5 * fan_in_scale(r));
}

static size_t lora_float_count(const model_options *opts, int n_vocab) {
    size_t e = (size_t)opts->n_embd, f = (size_t)opts->n_ff, r = (size_t)opts->lora_rank;
    return (size_t)opts->n_layer * r * (2 * e + e + f) + r * (e + (size_t)n_vocab);
}

static void write_lora(const model_options *opts, int n_vocab) {
    size_t size = lora_float_count(opts, n_vocab) * sizeof(float) +
                  (4 * (size_t)opts->n_layer + 2) * (ggml_tensor_overhead() + GGML_MEM_ALIGN) + 4096;
    size = (size + 63) / 64 * 64;
    void *buffer = aligned_alloc(64, size);
    if (buffer == NULL) fail("cannot allocate %zu bytes for the adapter", size);
    struct ggml_init_params params = {.mem_size = size, .mem_buffer = buffer, .no_alloc = false};
    struct ggml_context *ctx = ggml_init(params);
    struct gguf_context *gguf = gguf_init_empty();
    if (ctx == NULL || gguf == NULL) fail("ggml_init failed");
    gguf_set_val_str(gguf, "general.type", "adapter");
    gguf_set_val_str(gguf, "general.architecture", "llama");
    gguf_set_val_str(gguf, "general.name", opts->name);
    gguf_set_val_str(gguf, "adapter.type", "lora");
    gguf_set_val_f32(gguf, "adapter.lora.alpha", (float)opts->lora_rank);
    weight_source source = {.weights = {opts->seed}, .noise = {opts->noise_seed}, .noise_eps = 0.0,
                            .matrix_type = GGML_TYPE_F32};
    char base[GGML_MAX_NAME];
    for (int layer = 0; layer < opts->n_layer; layer++) {
        add_lora_pair(gguf, ctx, &source, layer_tensor_name(base, sizeof base, layer, "attn_q.weight"), opts->n_embd,
                      opts->n_embd, opts->lora_rank);
        add_lora_pair(gguf, ctx, &source, layer_tensor_name(base, sizeof base, layer, "ffn_up.weight"), opts->n_embd,
                      opts->n_ff, opts->lora_rank);
    }
    add_lora_pair(gguf, ctx, &source, "output.weight", opts->n_embd, n_vocab, opts->lora_rank);
    write_gguf_file(gguf, opts->out_path);
    fprintf(stderr, PROGRAM_NAME ": wrote %s (LoRA adapter, rank %d)\n", opts->out_path, opts->lora_rank);
    gguf_free(gguf);
    ggml_free(ctx);
    free(buffer);
}

int main(int argc, char **argv) {
    model_options opts = parse_command_line(argc, argv);

    tiny_vocab *vocab = calloc(1, sizeof *vocab);
    if (vocab == NULL) {
        fail("cannot allocate the vocabulary");
    }
    build_vocab(vocab, opts.different_vocab, opts.split_vocab);
    tiny_text_chain *text = NULL;
    if (opts.text) {
        if ((text = calloc(1, sizeof *text)) == NULL) fail("cannot allocate the text's pieces");
        tiny_text_build(opts.text, vocab, text);
    }
    if (opts.lora_rank > 0) {
        write_lora(&opts, vocab->count);
        free(vocab);
        return 0;
    }

    bool head = tiny_heads_handles(opts.arch);
    size_t n_tensors = head ? tiny_heads_tensor_count(&opts) : tensor_count(&opts);
    size_t n_floats = head ? tiny_heads_float_count(&opts, vocab->count) : model_float_count(&opts, vocab->count);
    if (opts.weight_type != GGML_TYPE_F32) { /* quantized matrices are made beside their f32 values */
        n_floats *= 2;
        n_tensors *= 2;
    }
    void *weight_buffer = NULL;
    struct ggml_context *ctx = create_weight_context(n_floats, n_tensors, &weight_buffer);
    struct gguf_context *gguf = gguf_init_empty();
    if (head) {
        tiny_heads_set_metadata(gguf, &opts, vocab->count);
    } else {
        set_model_metadata(gguf, &opts, vocab->count);
    }
    set_tokenizer_metadata(gguf, vocab, opts.chat_template, opts.fim, opts.rerank_template);
    if (head) {
        tiny_heads_add_tensors(gguf, ctx, &opts, vocab->count);
    } else {
        add_all_tensors(gguf, ctx, &opts, vocab->count, text);
    }
    write_gguf_file(gguf, opts.out_path);

    fprintf(stderr, PROGRAM_NAME ": wrote %s (n_vocab=%d, first_word_id=%d, tensors=%zu)\n",
            opts.out_path, vocab->count, vocab->first_word_id, n_tensors);

    gguf_free(gguf);
    ggml_free(ctx);
    free(weight_buffer);
    free(vocab);
    free(text);
    return 0;
}
