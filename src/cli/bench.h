/* bench.h - `specd bench`: specd against llama.cpp's own tools on the same models, prompts,
 * token count and threads. bench.c drives the runs, bench_proc.c starts a tool and reads what it
 * printed, bench_report.c writes the tables and plots. */
#ifndef SPECD_CLI_BENCH_H
#define SPECD_CLI_BENCH_H

#include <stdbool.h>
#include <stddef.h>

#define BENCH_MAX_POS 32

/* What one run of one tool on one prompt measured. Fields a tool does not report are < 0. */
typedef struct bench_sample {
    bool ok;
    double tokens_per_s;
    double acceptance;        /* accepted / drafted */
    double accepted_per_step;
    double max_rss_mb;        /* peak resident memory of the process */
    /* specd only: the cost model and acceptance counts by draft position */
    double verify_ms[BENCH_MAX_POS];
    double draft_token_ms;
    long drafted_at[BENCH_MAX_POS], accepted_at[BENCH_MAX_POS];
    /* specd only: graph computes and reuses of the generation (--json's graphs), target and draft */
    long target_passes, target_reused, draft_passes, draft_reused;
    char error[256];
} bench_sample;

typedef enum bench_tool {
    TOOL_LLAMA_COMPLETION,
    TOOL_LLAMA_SPEC_SIMPLE,
    TOOL_LLAMA_SPEC,
    TOOL_LLAMA_NGRAM, /* llama-speculative-simple with a model-free --spec-type, no draft model */
    TOOL_SPECD,
} bench_tool;

/* One configuration: a tool with its settings, measured on every prompt. */
typedef struct bench_config {
    char name[96];
    bench_tool tool;
    int draft_max;            /* llama tools and specd fixed: draft length; 0 = none/adaptive */
    const char *specd_args;   /* extra specd run flags, e.g. "--spec none" */
    const char *spec_type;    /* TOOL_LLAMA_NGRAM, and a head's TOOL_LLAMA_SPEC_SIMPLE: llama.cpp's --spec-type */
    bool probe;               /* specd drafting a fixed 8 tokens: the chain limit's acceptance by position */
    bool no_draft;            /* run without the pair's draft model */
    /* specd's calibration cache: given as --calibration-cache (NULL: none given, the tool's own
     * default); cache_from, when set, is copied over it before each run (every run starts from it) */
    const char *cache, *cache_from;
    bench_sample *samples;    /* one per prompt */
    int n_samples;
} bench_config;

typedef struct bench_settings {
    const char *specd;        /* path of this program */
    const char *llama_bin;    /* folder with llama-completion, llama-speculative(-simple) */
    int n_predict, n_ctx, n_threads, seed;
    bool with_llama;
    /* Where the layers go, given to specd and llama.cpp's tools alike (their flags are the same):
     * -ngl, --device, --rpc for every tool; -ngld, --device-draft where a draft model runs.
     * NULL: not given (each tool's default). */
    const char *n_gpu_layers, *device, *rpc, *n_gpu_layers_draft, *device_draft;
    /* KV cache types, given to every tool (-ctk, -ctv) and with a draft model (-ctkd, -ctvd), and
     * specd's --batch-invariant; NULL: not given (each tool's default). */
    const char *cache_type_k, *cache_type_v, *cache_type_k_draft, *cache_type_v_draft, *batch_invariant;
} bench_settings;

/* bench_proc.c */
bool bench_run_config(const bench_settings *s, const bench_config *c, const char *target,
                      const char *draft, const char *prompt, double temp, bench_sample *out);
/* The target's pass costs, one line from tools/pass_costs --short (beside the specd program) with
 * the settings' threads and GPU layers, or why there is none. */
void bench_pass_costs(const bench_settings *s, const char *target, char *line, size_t size);
/* Runs specd on the pair once, with every core kept busy by spinning processes, writing its
 * calibration cache to `path`: the file a run on a busy machine leaves. */
bool bench_learn_under_load(const bench_settings *s, const char *target, const char *draft, const char *prompt,
                            double temp, const char *path);
/* bench_report.c: mkdir -p: a results folder and its parents; false when it cannot be made or
 * written. */
bool bench_make_dirs(const char *path);
/* Whether an executable file `name` is in one of PATH's folders. */
bool bench_tool_in_path(const char *name);
/* Runs `tool` (looked up in PATH, output dropped) with `input` on its stdin and waits for it.
 * False with a message in err when it cannot start, stops reading, or exits non-zero. */
bool bench_feed_tool(const char *tool, const char *input, size_t len, char *err, size_t err_size);

/* bench_report.c */
typedef struct bench_group {
    char pair[256];
    char target[1024], draft[1024]; /* draft: a draft model, a head's GGUF, or "" (MTP: the target's own) */
    const char *head;                /* a drafting head's type (mtp, eagle3, dflash, dspark), or NULL */
    char pass_costs[512]; /* the target's, from bench_pass_costs */
    /* the group's calibration caches: shared by its runs, the one learnt under load, and the copy
     * of it each run starts from */
    char cache_dir[1100], busy_cache[1100], busy_copy[1100];
    double temp;
    bench_config *configs;
    int n_configs;
} bench_group;

double bench_median_tokens_per_s(const bench_config *c);
/* The best tokens/s any fixed-length chain of drafts could reach, from the specd probe's measured
 * acceptance by position and cost model; 0 when unknown. */
double bench_chain_limit(const bench_config *probe, int *best_k);
bool bench_write_report(const char *out_dir, const bench_group *groups, int n_groups,
                        const bench_settings *s, int n_prompts, char *err, size_t err_size);

#endif
