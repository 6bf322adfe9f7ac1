/* pass_costs.c - what a target pass costs as the KV cache fills: the data behind the cost model
 * (draft_length.h). Not a benchmark of specd: it times llama_decode alone, in a context made as
 * specd makes its target's (unified KV, one sequence per slot, flash attention off as specd's
 * default, or as asked).
 *
 *   pass_costs MODEL [THREADS] [REPEATS] [off|on|auto] [--short] [-ngl N]
 *
 * For 1 and 4 filled sequences and fills of 0..1000 tokens each, it times passes of n tokens: all
 * in sequence 0 ("own"), or spread over the filled sequences ("spread"), and prints one line per
 * case: sequences, fill per sequence, n, kind, the least and the median ms of REPEATS passes, and
 * the attention work of the pass two ways: the sum over its tokens of their own sequence's cells
 * ("work_own") and n x every used cell ("work_all"). Which of the two the cost follows says how a
 * multi-slot pass should be priced.
 *
 * --short prints only the cost shape, one line: T(n) for n = 1..16 on an empty cache, one sequence,
 * and T(n)/T(1) for n = 2, 4, 8, 16. That is the line printed beside every benchmark table
 * (specd bench runs it for each target): a reader can tell a compute-bound machine (T(4) 2x T(1))
 * from a memory-bound one (T(4) about T(1)). -ngl N offloads N layers (default 0: the CPU; as
 * llama.cpp, -1 or all: every layer). */
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

/* The cost shape on an empty cache: "T(1..16) ms: a b c ...; T(n)/T(1): 2 x, 4 x, 8 x, 16 x". */
static int print_shape(struct llama_context *ctx, int32_t repeats, int32_t n_vocab) {
    double t[17];
    if (fill_sequences(ctx, 1, 0, n_vocab) != 0) return -1;
    for (int32_t n = 1; n <= 16; n++) {
        double ms[MAX_REPEATS];
        timed_pass(ctx, n, 1, 0, n_vocab); /* warm-up: the graph of this shape */
        for (int32_t r = 0; r < repeats; r++)
            if ((ms[r] = timed_pass(ctx, n, 1, 0, n_vocab)) < 0.0) return -1;
        qsort(ms, (size_t)repeats, sizeof ms[0], compare_doubles);
        t[n] = ms[0];
    }
    printf("T(1..16) ms, least of %d:", repeats);
    for (int32_t n = 1; n <= 16; n++) printf(" %.2f", t[n]);
    printf("; T(n)/T(1): 2 %.2fx, 4 %.2fx, 8 %.2fx, 16 %.2fx\n", t[2] / t[1], t[4] / t[1], t[8] / t[1], t[16] / t[1]);
    fflush(stdout);
    return 0;
}

static int print_table(struct llama_context *ctx, int32_t repeats, int32_t n_vocab) {
    static const int32_t fills[] = {0, 100, 300, 600, 1000}, sizes[] = {1, 2, 4, 8, 16};
    int rc = 0;
    printf("seqs fill n kind min_ms median_ms work_own work_all\n");
    for (int32_t n_seqs = 1; rc == 0 && n_seqs <= MAX_SEQS; n_seqs += MAX_SEQS - 1)
        for (size_t f = 0; rc == 0 && f < sizeof fills / sizeof fills[0]; f++) {
            if (fill_sequences(ctx, n_seqs, fills[f], n_vocab) != 0) rc = -1;
            for (size_t k = 0; rc == 0 && k < sizeof sizes / sizeof sizes[0]; k++) {
                rc = measure(ctx, n_seqs, fills[f], sizes[k], 1, repeats, n_vocab);
                if (rc == 0 && n_seqs > 1 && sizes[k] >= n_seqs)
                    rc = measure(ctx, n_seqs, fills[f], sizes[k], n_seqs, repeats, n_vocab);
            }
        }
    return rc;
}

typedef struct options {
    const char *model, *fa;
    int32_t threads, repeats, n_gpu_layers;
    int short_form;
} options;

/* Flags anywhere, then the positional MODEL [THREADS] [REPEATS] [off|on|auto]. */
static int parse_options(int argc, char **argv, options *o) {
    *o = (options){.fa = "off", .threads = 2, .repeats = 7, .n_gpu_layers = 0};
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--short")) o->short_form = 1;
        else if (!strcmp(argv[i], "-ngl") && i + 1 < argc) {
            const char *v = argv[++i];
            o->n_gpu_layers = (!strcmp(v, "all") || !strcmp(v, "auto")) ? -1 : atoi(v);
        } else if (n_pos == 0) o->model = argv[i], n_pos++;
        else if (n_pos == 1) o->threads = atoi(argv[i]), n_pos++;
        else if (n_pos == 2) o->repeats = atoi(argv[i]), n_pos++;
        else if (n_pos == 3) o->fa = argv[i], n_pos++;
        else return -1;
    }
    if (!o->model || o->threads < 1 || o->repeats < 1 || o->repeats > MAX_REPEATS ||
        (strcmp(o->fa, "off") && strcmp(o->fa, "on") && strcmp(o->fa, "auto")))
        return -1;
    return 0;
}

int main(int argc, char **argv) {
    options o;
    if (parse_options(argc, argv, &o) != 0) {
        fprintf(stderr, "usage: %s MODEL [THREADS] [REPEATS] [off|on|auto] [--short] [-ngl N|all]\n"
                        "  THREADS >= 1, REPEATS 1..%d, flash attention off, on or auto\n", argv[0], MAX_REPEATS);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = o.n_gpu_layers < 0 ? 999 : o.n_gpu_layers;
    struct llama_model *model = llama_model_load_from_file(o.model, mp);
    if (!model) {
        fprintf(stderr, "pass_costs: cannot load the model '%s'\n", o.model);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 4608;
    cp.n_batch = cp.n_ubatch = 1024;
    cp.n_seq_max = MAX_SEQS;
    cp.kv_unified = true;
    cp.n_threads = cp.n_threads_batch = o.threads;
    cp.flash_attn_type = !strcmp(o.fa, "on")    ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                         : !strcmp(o.fa, "off") ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                                : LLAMA_FLASH_ATTN_TYPE_AUTO;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    int rc = !ctx                ? 1
             : o.short_form ? print_shape(ctx, o.repeats, n_vocab)
                                 : print_table(ctx, o.repeats, n_vocab);
    if (rc) fprintf(stderr, "pass_costs: %s\n", ctx ? "a decode failed" : "cannot make a context for the model");
    if (ctx) llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc ? 1 : 0;
}
