/* build_ngram_cache.c - builds the static n-gram cache that `specd run --spec ngram-cache
 * --spec-ngram-cache FILE` reads: how often each token followed each n-gram (1..4 tokens) in a
 * corpus of text files, tokenized with the target model's own tokenizer (only its vocabulary is
 * loaded, not its weights).
 *
 *   build_ngram_cache -m MODEL.gguf -o CACHE.ngc FILE...
 */
#include "draft/ngram_cache.h"
#include "draft/ngram_cache_file.h"
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet_log(enum ggml_log_level level, const char *text, void *user_data) {
    (void)user_data;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (cap - n - 1 == 0) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    *len = n;
    return buf;
}

/* Tokens of `text` (heap, *n of them), or NULL. */
static llama_token *tokenize(const struct llama_vocab *vocab, const char *text, size_t len, int32_t *n) {
    if (len > INT32_MAX / 2) return NULL;
    int32_t cap = (int32_t)len + 8;
    llama_token *tokens = malloc((size_t)cap * sizeof *tokens);
    if (!tokens) return NULL;
    *n = llama_tokenize(vocab, text, (int32_t)len, tokens, cap, false, false);
    if (*n < 0) {
        free(tokens);
        return NULL;
    }
    return tokens;
}

static bool count_ngrams(specd_ngram_counts *counts, const llama_token *t, int32_t n_tokens) {
    for (int32_t e = 1; e < n_tokens; e++)
        for (int32_t n = 1; n <= SPECD_NGRAM_CACHE_MAX_N && n <= e; n++)
            if (!specd_ngram_counts_add(counts, specd_hash_tokens(t + e - n, n), t[e], 1)) return false;
    return true;
}

static int usage(void) {
    fprintf(stderr, "usage: build_ngram_cache -m MODEL.gguf -o CACHE.ngc FILE...\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *out_path = NULL;
    int first_file = argc;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) model_path = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) out_path = argv[++i];
        else if (argv[i][0] == '-') return usage();
        else {
            first_file = i;
            break;
        }
    }
    if (!model_path || !out_path || first_file >= argc) return usage();
    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) {
        fprintf(stderr, "build_ngram_cache: error: cannot load the vocabulary of '%s': not a GGUF model?\n", model_path);
        return 2;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    specd_ngram_counts counts;
    specd_ngram_counts_init(&counts, 0);
    int rc = 0;
    long total = 0;
    for (int i = first_file; i < argc && rc == 0; i++) {
        size_t len = 0;
        char *text = read_text(argv[i], &len);
        int32_t n = 0;
        llama_token *tokens = text ? tokenize(vocab, text, len, &n) : NULL;
        if (!text) fprintf(stderr, "build_ngram_cache: error: cannot read '%s'\n", argv[i]), rc = 2;
        else if (!tokens) fprintf(stderr, "build_ngram_cache: error: cannot tokenize '%s'\n", argv[i]), rc = 2;
        else if (!count_ngrams(&counts, tokens, n)) fprintf(stderr, "build_ngram_cache: error: out of memory\n"), rc = 1;
        total += n;
        free(tokens);
        free(text);
    }
    char *error = NULL;
    if (rc == 0 && specd_ngram_cache_save(&counts, llama_vocab_n_tokens(vocab), SPECD_NGRAM_CACHE_MAX_N, out_path,
                                          &error) != SPECD_OK) {
        fprintf(stderr, "build_ngram_cache: error: %s\n", error);
        free(error);
        rc = 2;
    }
    if (rc == 0) printf("%s: %ld tokens, %d n-gram continuations\n", out_path, total, counts.n_pairs);
    specd_ngram_counts_free(&counts);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
