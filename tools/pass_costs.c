/* pass_costs.c - what a target pass costs as the KV cache fills: the data behind the cost model
 * (draft_length.h). Not a benchmark of specd: it times llama_decode alone, in a context made as
 * specd makes its target's (unified KV, one sequence per slot, flash attention off as specd's
 * default, or as asked).
 *
 *   pass_costs MODEL [THREADS] [REPEATS] [off|on|auto]
 *
 * For 1 and 4 filled sequences and fills of 0..1000 tokens each, it times passes of n tokens: all
 * in sequence 0 ("own"), or spread over the filled sequences ("spread"), and prints one line per
 * case: sequences, fill per sequence, n, kind, the least and the median ms of REPEATS passes, and
 * the attention work of the pass two ways: the sum over its tokens of their own sequence's cells
 * ("work_own") and n x every used cell ("work_all"). Which of the two the cost follows says how a
 * multi-slot pass should be priced. */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SEQS 4
#define MAX_REPEATS 64

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)level, (void)text, (void)user;
}

static llama_token token_at(int32_t i, int32_t n_vocab) { return (llama_token)(3 + (i * 7919) % (n_vocab - 3)); }

/* Fills sequences 0..n_seqs-1 with `fill` tokens each (from an empty cache). */
static int fill_sequences(struct llama_context *ctx, int32_t n_seqs, int32_t fill, int32_t n_vocab) {
    llama_memory_clear(llama_get_memory(ctx), true);
    struct llama_batch b = llama_batch_init(fill > 0 ? fill : 1, 0, 1);
    for (int32_t s = 0; s < n_seqs && fill > 0; s++) {
        b.n_tokens = 0;
        for (int32_t i = 0; i < fill; i++) {
            b.token[i] = token_at(i + 1000 * s, n_vocab);
            b.pos[i] = i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = s;
            b.logits[i] = i == fill - 1;
            b.n_tokens++;
        }
        if (llama_decode(ctx, b) != 0) {
            llama_batch_free(b);
            return -1;
        }
    }
    llama_batch_free(b);
    return 0;
}

/* One timed pass of n tokens over `spread` sequences (1: all in sequence 0), then they are
 * removed so that the next pass sees the same cache. */
static double timed_pass(struct llama_context *ctx, int32_t n, int32_t spread, int32_t fill, int32_t n_vocab) {
    struct llama_batch b = llama_batch_init(n, 0, 1);
    int32_t per_seq[MAX_SEQS] = {0};
    for (int32_t i = 0; i < n; i++) {
        int32_t s = i % spread;
        b.token[i] = token_at(5000 + i, n_vocab);
        b.pos[i] = fill + per_seq[s]++;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = s;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    double t0 = now_ms();
    int rc = llama_decode(ctx, b);
    llama_synchronize(ctx);
    double ms = now_ms() - t0;
    llama_batch_free(b);
    for (int32_t s = 0; s < spread; s++) llama_memory_seq_rm(llama_get_memory(ctx), s, fill, -1);
    return rc == 0 ? ms : -1.0;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int measure(struct llama_context *ctx, int32_t n_seqs, int32_t fill, int32_t n, int32_t spread,
                   int32_t repeats, int32_t n_vocab) {
    double ms[MAX_REPEATS];
    timed_pass(ctx, n, spread, fill, n_vocab); /* warm-up: the graph of this shape */
    for (int32_t r = 0; r < repeats; r++)
        if ((ms[r] = timed_pass(ctx, n, spread, fill, n_vocab)) < 0.0) return -1;
    qsort(ms, (size_t)repeats, sizeof ms[0], compare_doubles);
    long work_own = 0;
    for (int32_t i = 0; i < n; i++) work_own += fill + i / spread + 1;
    long work_all = (long)n * (n_seqs * fill + n);
    printf("%d %d %d %s %.3f %.3f %ld %ld\n", n_seqs, fill, n, spread > 1 ? "spread" : "own", ms[0],
           ms[repeats / 2], work_own, work_all);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [THREADS] [REPEATS] [off|on|auto]\n", argv[0]);
        return 2;
    }
    int32_t threads = argc > 2 ? atoi(argv[2]) : 2, repeats = argc > 3 ? atoi(argv[3]) : 7;
    const char *fa = argc > 4 ? argv[4] : "off";
    if (threads < 1 || repeats < 1 || repeats > MAX_REPEATS ||
        (strcmp(fa, "off") && strcmp(fa, "on") && strcmp(fa, "auto"))) {
        fprintf(stderr, "pass_costs: THREADS must be >= 1, REPEATS 1..%d, flash attention off, on or auto\n",
                MAX_REPEATS);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) {
        fprintf(stderr, "pass_costs: cannot load the model '%s'\n", argv[1]);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 4608;
    cp.n_batch = cp.n_ubatch = 1024;
    cp.n_seq_max = MAX_SEQS;
    cp.kv_unified = true;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.flash_attn_type = !strcmp(fa, "on")    ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                         : !strcmp(fa, "off") ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                              : LLAMA_FLASH_ATTN_TYPE_AUTO;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    static const int32_t fills[] = {0, 100, 300, 600, 1000}, sizes[] = {1, 2, 4, 8, 16};
    int rc = ctx ? 0 : 1;
    printf("seqs fill n kind min_ms median_ms work_own work_all\n");
    for (int32_t n_seqs = 1; rc == 0 && n_seqs <= MAX_SEQS; n_seqs += MAX_SEQS - 1)
        for (size_t f = 0; rc == 0 && f < sizeof fills / sizeof fills[0]; f++) {
            if (fill_sequences(ctx, n_seqs, fills[f], n_vocab) != 0) rc = 1;
            for (size_t k = 0; rc == 0 && k < sizeof sizes / sizeof sizes[0]; k++) {
                rc = measure(ctx, n_seqs, fills[f], sizes[k], 1, repeats, n_vocab);
                if (rc == 0 && n_seqs > 1 && sizes[k] >= n_seqs)
                    rc = measure(ctx, n_seqs, fills[f], sizes[k], n_seqs, repeats, n_vocab);
            }
        }
    if (rc) fprintf(stderr, "pass_costs: a decode failed\n");
    if (ctx) llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
