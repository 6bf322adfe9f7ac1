/* bench.c - `specd bench`: runs llama.cpp's tools and specd on the same pairs, prompts, token
 * count and threads, at each temperature, and writes the report (bench_report.c).
 *
 * Runs are interleaved prompt by prompt (every configuration on prompt 1, then on prompt 2, ...),
 * so a machine that gets slower or faster during the benchmark affects all configurations alike. */
#define _DEFAULT_SOURCE
#include "../draft/drafter_registry.h"
#include "../util/args.h"
#include "../util/flag_names.h"
#include "bench.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PAIRS 8
#define MAX_PROMPTS 64
#define MAX_TEMPS 4
#define MAX_SWEEP 8

typedef struct bench_options {
    bench_settings s;
    const char *models_dir;
    const char *pairs[MAX_PAIRS][2];
    const char *heads[MAX_PAIRS]; /* a pair's drafting head type (--head), or NULL */
    int n_pairs;
    const char *prompts_file;
    int n_prompts;
    double temps[MAX_TEMPS];
    int n_temps;
    int sweep[MAX_SWEEP];
    int n_sweep;
    const char *out_dir;
    bool ngram;               /* compare model-free drafters instead of draft models */
    bool list_devices;        /* --list-devices: print them and exit */
} bench_options;

static void bench_usage(FILE *out) {
    fputs("usage: specd bench [options]\n"
          "  --models DIR          benchmark pair folder (default ~/.cache/specd-bench): target.gguf +\n"
          "                        draft.gguf (compute-bound on a small CPU) and target-f32.gguf + draft.gguf\n"
          "                        (memory-bound, as large models and GPUs), those that exist\n"
          "  --pair TARGET DRAFT   a pair to measure instead (repeatable; e.g. target-easy.gguf)\n"
          "  --head TYPE TARGET HEAD  a drafting head instead of a draft model (repeatable): TYPE mtp\n"
          "                        (HEAD -: the target's own layers), eagle3, dflash or dspark (HEAD its\n"
          "                        GGUF), against llama-speculative-simple --spec-type draft-TYPE; the\n"
          "                        report gives each draft token's cost beside the draft model's\n"
          "  --prompts FILE        one prompt per line (default ../shared/bench/prompts.txt)\n"
          "  --n-prompts N         first N prompts (default 6)   --quick   3 prompts\n"
          "  -n N                  tokens per prompt (default 128)\n"
          "  -c N, -t N            context (default 512), threads (default 2)\n"
          "  --temps LIST          temperatures (default 0,1)\n"
          "  --sweep LIST          draft lengths for llama.cpp's tools (default 2,3,4,5,6,8)\n"
          "  --llama-bin DIR       llama.cpp tools (default deps/llama/build-tools/bin)\n"
          "  --no-llama            measure specd only\n"
          "  --ngram               model-free drafters: llama.cpp's ngram-simple, ngram-map-k, ngram-mod\n"
          "                        against specd's ngram-simple, suffix and their list (no draft model)\n"
          "  --out DIR             results folder (default results/bench)\n"
          "  -ngl N, -ngld N, --device LIST, --device-draft LIST, --rpc HOST:PORT,...\n"
          "                        where the layers go, given to specd and llama.cpp's tools alike\n"
          "                        (e.g. -ngl 99 -ngld 99 on a GPU build: make GPU=cuda)\n"
          "  -ctk T, -ctv T, -ctkd T, -ctvd T\n"
          "                        KV cache types, given to specd and llama.cpp's tools alike\n"
          "  --batch-invariant on|off  specd's (default on)\n"
          "  --list-devices        list the devices and exit\n"
          "  --serve               specd serve against llama-server with concurrent clients instead\n"
          "                        (specd bench --serve --help)\n",
          out);
}

static bool parse_list(cli_args *a, const char *flag, double *out, int max, int *n) {
    const char *v = cli_value(a, flag);
    if (!v) return false;
    *n = 0;
    for (const char *p = v; *p && *n < max;) {
        char *end = NULL;
        out[(*n)++] = strtod(p, &end);
        if (end == p) return cli_fail(a, "%s expects numbers separated by commas, got '%s'", flag, v);
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return cli_fail(a, "%s expects numbers separated by commas, got '%s'", flag, v);
    }
    return *n > 0 || cli_fail(a, "%s is empty", flag);
}

/* An -ngl value, checked here (so a typo fails before the run) and passed on as given. */
static const char *gpu_layers(cli_args *a, const char *flag) {
    const char *v = cli_value(a, flag);
    int32_t n;
    if (v && !specd_gpu_layers_parse(v, &n)) {
        cli_fail(a, "%s expects a layer count, -1 or all, got '%s'", flag, v);
        return NULL;
    }
    return v;
}

/* The drafter registry's kind for a --head name: one that runs a head (NULL otherwise). */
static const specd_drafter_kind *head_kind(const char *name) {
    const specd_drafter_kind *kind = specd_drafter_kind_named(name);
    return kind && kind->head != SPECD_HEAD_NONE ? kind : NULL;
}

/* The heads' names, for --head's message: "mtp, eagle3, dflash or dspark". */
static const char *head_names(void) {
    static char list[128];
    int32_t n = 0, n_heads = 0, k = 0;
    const specd_drafter_kind *kinds = specd_drafter_kinds(&n);
    for (int32_t i = 0; i < n; i++) n_heads += kinds[i].head != SPECD_HEAD_NONE;
    size_t len = 0;
    list[0] = '\0';
    for (int32_t i = 0; i < n && len < sizeof list; i++) {
        if (kinds[i].head == SPECD_HEAD_NONE) continue;
        const char *sep = k == 0 ? "" : k == n_heads - 1 ? " or " : ", ";
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", sep, kinds[i].name);
        k++;
    }
    return list;
}

static int parse_bench_flag(cli_args *a, const char *f, bench_options *o) {
    int64_t i = 0;
    bool ok = true;
    if (!strcmp(f, "--models")) ok = (o->models_dir = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--pair")) {
        if (o->n_pairs == MAX_PAIRS) return cli_fail(a, "at most %d pairs", MAX_PAIRS) ? 1 : -1;
        ok = (o->pairs[o->n_pairs][0] = cli_value(a, f)) && (o->pairs[o->n_pairs][1] = cli_value(a, f));
        o->n_pairs += ok;
    } else if (!strcmp(f, "--head")) {
        if (o->n_pairs == MAX_PAIRS) return cli_fail(a, "at most %d pairs", MAX_PAIRS) ? 1 : -1;
        const char *type = cli_value(a, f);
        const specd_drafter_kind *kind = type ? head_kind(type) : NULL;
        if (type && !kind) return cli_fail(a, "--head expects %s, got '%s'", head_names(), type) ? 1 : -1;
        ok = type && (o->pairs[o->n_pairs][0] = cli_value(a, f)) && (o->pairs[o->n_pairs][1] = cli_value(a, f));
        if (ok) o->heads[o->n_pairs++] = kind->name;
    } else if (!strcmp(f, "--prompts")) ok = (o->prompts_file = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--n-prompts")) { ok = cli_int(a, f, 1, MAX_PROMPTS, &i); o->n_prompts = (int)i; }
    else if (!strcmp(f, "--quick")) o->n_prompts = 3;
    else if (!strcmp(f, "-n")) { ok = cli_int(a, f, 1, 100000, &i); o->s.n_predict = (int)i; }
    else if (!strcmp(f, "-c")) { ok = cli_int(a, f, 16, 1 << 20, &i); o->s.n_ctx = (int)i; }
    else if (!strcmp(f, "-t")) { ok = cli_int(a, f, 1, 1024, &i); o->s.n_threads = (int)i; }
    else if (!strcmp(f, "--temps")) ok = parse_list(a, f, o->temps, MAX_TEMPS, &o->n_temps);
    else if (!strcmp(f, "--sweep")) {
        double v[MAX_SWEEP];
        ok = parse_list(a, f, v, MAX_SWEEP, &o->n_sweep);
        for (int k = 0; ok && k < o->n_sweep; k++) o->sweep[k] = (int)v[k];
    } else if (!strcmp(f, "--llama-bin")) ok = (o->s.llama_bin = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--no-llama")) o->s.with_llama = false;
    else if (!strcmp(f, "--ngram")) o->ngram = true;
    else if (!strcmp(f, "--out")) ok = (o->out_dir = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "-ngl") || !strcmp(f, "--n-gpu-layers")) ok = (o->s.n_gpu_layers = gpu_layers(a, f)) != NULL;
    else if (!strcmp(f, "-ngld") || !strcmp(f, "--n-gpu-layers-draft"))
        ok = (o->s.n_gpu_layers_draft = gpu_layers(a, f)) != NULL;
    else if (!strcmp(f, "-dev") || !strcmp(f, "--device")) ok = (o->s.device = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "-devd") || !strcmp(f, "--device-draft")) ok = (o->s.device_draft = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--rpc")) ok = (o->s.rpc = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "-ctk") || !strcmp(f, "--cache-type-k")) ok = (o->s.cache_type_k = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "-ctv") || !strcmp(f, "--cache-type-v")) ok = (o->s.cache_type_v = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "-ctkd") || !strcmp(f, "--cache-type-k-draft"))
        ok = (o->s.cache_type_k_draft = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "-ctvd") || !strcmp(f, "--cache-type-v-draft"))
        ok = (o->s.cache_type_v_draft = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--batch-invariant")) ok = (o->s.batch_invariant = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--list-devices")) o->list_devices = true;
    else return 0;
    return ok ? 1 : -1;
}

static bool file_exists(const char *path) { return access(path, R_OK) == 0; }

/* The default pairs from the make_pairs.sh folder, those that exist. */
static void default_pairs(bench_options *o, char paths[][2][1024]) {
    static const char *names[][2] = {{"target.gguf", "draft.gguf"}, {"target-f32.gguf", "draft.gguf"}};
    for (int i = 0; i < 2; i++) {
        snprintf(paths[i][0], 1024, "%s/%s", o->models_dir, names[i][0]);
        snprintf(paths[i][1], 1024, "%s/%s", o->models_dir, names[i][1]);
        if (file_exists(paths[i][0]) && file_exists(paths[i][1])) {
            o->pairs[o->n_pairs][0] = paths[i][0];
            o->pairs[o->n_pairs][1] = paths[i][1];
            o->n_pairs++;
        }
    }
}

static int read_prompts(const char *path, char prompts[][1024], int max) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    for (char line[1024]; n < max && fgets(line, sizeof line, f);) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0]) snprintf(prompts[n++], 1024, "%s", line);
    }
    fclose(f);
    return n;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Model-free drafting: llama.cpp's n-gram types against specd's, no draft model anywhere. */
static int make_ngram_configs(const bench_options *o, bench_config *c) {
    /* llama.cpp's spellings of them, from the drafter registry */
    static const specd_spec_type llama_types[] = {SPECD_SPEC_NGRAM_SIMPLE, SPECD_SPEC_NGRAM_MAP, SPECD_SPEC_NGRAM_MOD};
    int n = 0;
    if (o->s.with_llama) {
        c[n++] = (bench_config){.name = "llama-completion (no speculation)", .tool = TOOL_LLAMA_COMPLETION};
        for (int i = 0; i < 3; i++) {
            const char *type = specd_drafter_kind_of(llama_types[i])->llama_name;
            c[n] = (bench_config){.tool = TOOL_LLAMA_NGRAM, .spec_type = type};
            snprintf(c[n++].name, sizeof c->name, "llama-speculative-simple, %s", type);
        }
    }
    c[n++] = (bench_config){.name = "specd, speculation off", .tool = TOOL_SPECD, .specd_args = "--spec none", .no_draft = true};
    c[n++] = (bench_config){.name = "specd ngram-simple", .tool = TOOL_SPECD, .specd_args = "--spec ngram-simple", .no_draft = true};
    c[n++] = (bench_config){.name = "specd suffix", .tool = TOOL_SPECD, .specd_args = "--spec suffix", .no_draft = true};
    c[n++] = (bench_config){.name = "specd ngram-simple,ngram-map,ngram-cache,suffix", .tool = TOOL_SPECD,
                            .specd_args = "--spec ngram-simple,ngram-map,ngram-cache,suffix", .no_draft = true};
    return n;
}

/* A drafting head: llama-speculative-simple with the same head at each length of the sweep, against
 * specd's default and its probe (drafting a fixed 8). */
static int make_head_configs(const bench_options *o, const bench_group *g, bench_config *c) {
    static char llama_types[MAX_PAIRS * MAX_TEMPS][32], specd_args[MAX_PAIRS * MAX_TEMPS][2][96];
    static int next;
    int at = next++ % (MAX_PAIRS * MAX_TEMPS), n = 0;
    const specd_drafter_kind *kind = specd_drafter_kind_named(g->head); /* llama.cpp's name for it */
    snprintf(llama_types[at], sizeof llama_types[at], "%s", kind && kind->llama_name ? kind->llama_name : g->head);
    snprintf(specd_args[at][0], sizeof specd_args[at][0], "--spec %s", g->head);
    snprintf(specd_args[at][1], sizeof specd_args[at][1], "--spec %s --draft-fixed --draft-max 8", g->head);
    if (o->s.with_llama) {
        c[n++] = (bench_config){.name = "llama-completion (no speculation)", .tool = TOOL_LLAMA_COMPLETION};
        for (int k = 0; k < o->n_sweep; k++) {
            c[n] = (bench_config){.tool = TOOL_LLAMA_SPEC_SIMPLE, .draft_max = o->sweep[k], .spec_type = llama_types[at]};
            snprintf(c[n++].name, sizeof c->name, "llama-speculative-simple %s, draft %d", g->head, o->sweep[k]);
        }
    }
    c[n++] = (bench_config){.name = "specd, speculation off", .tool = TOOL_SPECD, .specd_args = "--spec none",
                            .cache = "off"};
    c[n] = (bench_config){.tool = TOOL_SPECD, .specd_args = specd_args[at][0], .cache = "off"};
    snprintf(c[n++].name, sizeof c->name, "specd %s (default, first run)", g->head);
    c[n] = (bench_config){.tool = TOOL_SPECD, .specd_args = specd_args[at][1], .cache = "off", .probe = true};
    snprintf(c[n++].name, sizeof c->name, "specd %s, fixed 8", g->head);
    return n;
}

/* The configurations measured for one pair and temperature. */
static int make_configs(const bench_options *o, const bench_group *g, bench_config *c, int n_prompts) {
    int n = 0;
    if (o->ngram || g->head) {
        n = g->head ? make_head_configs(o, g, c) : make_ngram_configs(o, c);
        for (int i = 0; i < n; i++) {
            c[i].samples = calloc((size_t)n_prompts, sizeof *c[i].samples);
            c[i].n_samples = n_prompts;
        }
        return n;
    }
    if (o->s.with_llama) {
        c[n++] = (bench_config){.name = "llama-completion (no speculation)", .tool = TOOL_LLAMA_COMPLETION};
        for (int k = 0; k < o->n_sweep; k++) {
            c[n] = (bench_config){.tool = TOOL_LLAMA_SPEC_SIMPLE, .draft_max = o->sweep[k]};
            snprintf(c[n++].name, sizeof c->name, "llama-speculative-simple, draft %d", o->sweep[k]);
            c[n] = (bench_config){.tool = TOOL_LLAMA_SPEC, .draft_max = o->sweep[k]};
            snprintf(c[n++].name, sizeof c->name, "llama-speculative, draft %d", o->sweep[k]);
        }
    }
    c[n++] = (bench_config){.name = "specd, speculation off", .tool = TOOL_SPECD, .specd_args = "--spec none",
                            .cache = "off"};
    /* The default three ways: a first run (no calibration cache), a run after the earlier ones
     * (the group's own cache, which each run updates), and a run from the file a run on a busy
     * machine left (copied afresh before each run). */
    c[n++] = (bench_config){.name = "specd draft (default, first run)", .tool = TOOL_SPECD, .cache = "off"};
    c[n++] = (bench_config){.name = "specd draft (default, cache of earlier runs)", .tool = TOOL_SPECD,
                            .cache = g->cache_dir};
    if (g->busy_cache[0])
        c[n++] = (bench_config){.name = "specd draft (default, cache learnt under load)", .tool = TOOL_SPECD,
                                .cache = g->busy_copy, .cache_from = g->busy_cache};
    c[n++] = (bench_config){.name = "specd draft, fixed 8", .tool = TOOL_SPECD, .specd_args = "--draft-fixed --draft-max 8",
                            .cache = "off", .probe = true};
    for (int i = 0; i < n; i++) {
        c[i].samples = calloc((size_t)n_prompts, sizeof *c[i].samples);
        c[i].n_samples = n_prompts;
    }
    return n;
}

static void run_group(const bench_options *o, bench_group *g, char prompts[][1024], int n_prompts, int *done, int total) {
    for (int p = 0; p < n_prompts; p++) {
        for (int i = 0; i < g->n_configs; i++) {
            bench_config *c = &g->configs[i];
            bench_sample *s = &c->samples[p];
            bench_run_config(&o->s, c, g->target, g->draft, prompts[p], g->temp, s);
            ++*done;
            if (s->ok) fprintf(stderr, "[%d/%d] %s t=%g prompt %d %s: %.1f tokens/s\n", *done, total, g->pair, g->temp, p + 1, c->name, s->tokens_per_s);
            else fprintf(stderr, "[%d/%d] %s t=%g prompt %d %s: FAILED: %s\n", *done, total, g->pair, g->temp, p + 1, c->name, s->error);
        }
    }
}

/* The calibration cache a run on a busy machine leaves, learnt once per group (a warning when it
 * cannot be: the group then goes without that configuration). */
static void prepare_busy_cache(const bench_options *o, bench_group *g, int index, const char *prompt) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%.1000s/calibration", o->out_dir);
    snprintf(g->busy_cache, sizeof g->busy_cache, "%s/g%d-busy.txt", dir, index);
    snprintf(g->busy_copy, sizeof g->busy_copy, "%s/g%d-busy-run.txt", dir, index);
    fprintf(stderr, "%s t=%g: learning a calibration cache with every core busy\n", g->pair, g->temp);
    if (!bench_make_dirs(dir) ||
        !bench_learn_under_load(&o->s, g->target, g->draft, prompt, g->temp, g->busy_cache)) {
        fprintf(stderr, "specd bench: warning: no calibration cache could be learnt under load for %s\n", g->pair);
        g->busy_cache[0] = '\0';
    }
}

static int run_benchmark(bench_options *o) {
    char prompts[MAX_PROMPTS][1024];
    int n_prompts = read_prompts(o->prompts_file, prompts, o->n_prompts);
    if (n_prompts <= 0) {
        fprintf(stderr, "specd: error: no prompts in '%s' (give --prompts FILE)\n", o->prompts_file);
        return CLI_EXIT_USAGE;
    }
    bench_group groups[MAX_PAIRS * MAX_TEMPS];
    int n_groups = 0, total = 0, done = 0;
    for (int p = 0; p < o->n_pairs; p++)
        for (int t = 0; t < o->n_temps; t++) {
            bench_group *g = &groups[n_groups++];
            memset(g, 0, sizeof *g);
            snprintf(g->target, sizeof g->target, "%s", o->pairs[p][0]);
            g->head = o->heads[p];
            bool own = g->head && !strcmp(o->pairs[p][1], "-"); /* MTP: the target's own layers */
            snprintf(g->draft, sizeof g->draft, "%s", own ? "" : o->pairs[p][1]);
            if (g->head)
                snprintf(g->pair, sizeof g->pair, "%s + %s (%s head)", base_name(g->target),
                         own ? "its MTP layers" : base_name(g->draft), g->head);
            else
                snprintf(g->pair, sizeof g->pair, "%s + %s", base_name(g->target), base_name(g->draft));
            g->temp = o->temps[t];
            g->configs = calloc(64, sizeof *g->configs);
            snprintf(g->cache_dir, sizeof g->cache_dir, "%s/calibration/g%d/", o->out_dir, n_groups - 1);
            if (!o->ngram && !g->head) prepare_busy_cache(o, g, n_groups - 1, prompts[0]);
            g->n_configs = make_configs(o, g, g->configs, n_prompts);
            total += g->n_configs * n_prompts;
        }
    for (int i = 0; i < n_groups; i++) {
        /* each target's pass costs once, beside its tables: the shape decides what drafting can gain */
        if (i > 0 && strcmp(groups[i].target, groups[i - 1].target) == 0)
            memcpy(groups[i].pass_costs, groups[i - 1].pass_costs, sizeof groups[i].pass_costs);
        else
            bench_pass_costs(&o->s, groups[i].target, groups[i].pass_costs, sizeof groups[i].pass_costs);
        fprintf(stderr, "%s pass costs: %s\n", base_name(groups[i].target), groups[i].pass_costs);
        run_group(o, &groups[i], prompts, n_prompts, &done, total);
    }
    char err[512];
    bool ok = bench_write_report(o->out_dir, groups, n_groups, &o->s, n_prompts, err, sizeof err);
    for (int i = 0; i < n_groups; i++) {
        for (int c = 0; c < groups[i].n_configs; c++) free(groups[i].configs[c].samples);
        free(groups[i].configs);
    }
    if (!ok) {
        fprintf(stderr, "specd: error: %s\n", err);
        return CLI_EXIT_RUNTIME;
    }
    fprintf(stderr, "specd bench: report in %s/benchmarks.md\n", o->out_dir);
    return 0;
}

/* A model file of --pair or --head as given, or else in the --models folder (the help's
 * "target-easy.gguf"); paths[] holds what it becomes. False, with the message, when neither is. */
static bool find_model(const bench_options *o, const char **file, char *path, char *err, size_t size) {
    if (!strcmp(*file, "-") || file_exists(*file)) return true;
    snprintf(path, 1024, "%s/%s", o->models_dir, *file);
    if (file_exists(path)) {
        *file = path;
        return true;
    }
    snprintf(err, size, "model '%s' not found (nor in the --models folder '%s')", *file, o->models_dir);
    return false;
}

static bool check_setup(bench_options *o, char paths[][2][1024], char *err, size_t size) {
    for (int p = 0; p < o->n_pairs; p++)
        for (int k = 0; k < 2; k++)
            if (paths[p][k] != o->pairs[p][k] && !find_model(o, &o->pairs[p][k], paths[p][k], err, size)) return false;
    if (o->n_pairs == 0) {
        snprintf(err, size, "no model pair: none in '%s' (run ../shared/bench/make_pairs.sh) and no --pair given", o->models_dir);
        return false;
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/llama-speculative", o->s.llama_bin);
    if (o->s.with_llama && !file_exists(path)) {
        snprintf(err, size, "llama.cpp's tools are not in '%s': run `make bench-deps`, pass --llama-bin, or --no-llama", o->s.llama_bin);
        return false;
    }
    return true;
}

int cli_bench(int argc, char **argv, const char *self) {
    static char pair_paths[MAX_PAIRS][2][1024], models[1024];
    const char *home = getenv("HOME");
    snprintf(models, sizeof models, "%s/.cache/specd-bench", home ? home : ".");
    bench_options o = {
        .s = {.specd = self, .llama_bin = "deps/llama/build-tools/bin", .n_predict = 128, .n_ctx = 512,
              .n_threads = 2, .seed = 42, .with_llama = true},
        .models_dir = models, .prompts_file = "../shared/bench/prompts.txt", .n_prompts = 6,
        .temps = {0.0, 1.0}, .n_temps = 2, .sweep = {2, 3, 4, 5, 6, 8}, .n_sweep = 6, .out_dir = "results/bench",
    };
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--serve")) return cli_bench_serve(argc, argv, self); /* bench_serve.c */
    cli_args a = {.argc = argc, .argv = argv};
    while (a.i < a.argc) {
        const char *f = a.argv[a.i++];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            bench_usage(stdout);
            return 0;
        }
        int r = parse_bench_flag(&a, f, &o);
        if (r == 0) cli_fail(&a, "unknown option '%s' (see specd bench --help)", f);
        if (r <= 0) {
            fprintf(stderr, "specd: error: %s\n", a.error);
            return CLI_EXIT_USAGE;
        }
    }
    if (o.list_devices) return cli_list_devices(o.s.rpc);
    if (o.n_pairs == 0) default_pairs(&o, pair_paths);
    char err[512];
    /* The folder is made first: a long run must not end unable to write its report. */
    if (!bench_make_dirs(o.out_dir)) {
        fprintf(stderr, "specd: error: cannot create the results folder '%s'\n", o.out_dir);
        return CLI_EXIT_USAGE;
    }
    if (!check_setup(&o, pair_paths, err, sizeof err)) {
        fprintf(stderr, "specd: error: %s\n", err);
        return CLI_EXIT_USAGE;
    }
    return run_benchmark(&o);
}
