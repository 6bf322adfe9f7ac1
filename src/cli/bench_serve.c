/* bench_serve.c - `specd bench --serve`: specd serve against llama-server with C concurrent clients
 * over HTTP (issue: serving several clients). The measurement itself is bench/serve_bench.py,
 * embedded in this program at build time (cmake/embed.cmake) and run with python3: streaming
 * clients, percentiles and the plot are a few lines there, and the same script stays usable on
 * its own. This file turns `specd bench` flags into the script's, checks the set-up first (models,
 * prompts, python3, llama-server) so that a long run never fails on something known at the start,
 * and writes the script where python3 can read it. */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"
#include "cli.h"
#include "util/args.h"

#include <spawn.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
extern const unsigned char specd_serve_bench_py[];
extern const size_t specd_serve_bench_py_size;

#define MAX_SCRIPT_ARGS 64

typedef struct serve_options {
    const char *target, *draft, *prompts, *clients, *temps, *llama_bin, *out_dir;
    const char *fixed; /* --fixed: draft lengths every request of a specd server asks for, or NULL */
    const char *target_name; /* --target: a file, or a name in the models folder */
    char models_dir[1024];
    char target_buf[1024], draft_buf[1024];
    int64_t n_predict, n_threads, n_ctx, n_parallel, requests, draft_max;
    int64_t gpu_layers, gpu_layers_draft; /* -ngl / -ngld for every server; -1: not given (none offloaded) */
    bool with_llama;
} serve_options;

static void serve_usage(FILE *out) {
    fputs("usage: specd bench --serve [options]\n"
          "  specd serve against llama-server (with and without the draft model), C concurrent clients\n"
          "  each sending streaming /completion requests; aggregate and per-request tokens/s, time to\n"
          "  first token p50/p99, acceptance, peak RSS. Needs python3; llama-server from make bench-deps.\n"
          "  --models DIR              benchmark pair folder with target.gguf and draft.gguf\n"
          "                            (default ~/.cache/specd-bench: make bench-models)\n"
          "  --pair TARGET DRAFT       the models instead\n"
          "  --target FILE             the target: a file, or a name in the models folder (default\n"
          "                            target.gguf; target-f32.gguf: the memory-bound pair)\n"
          "  --prompts FILE            one prompt per line (default ../shared/bench/prompts.txt)\n"
          "  --clients LIST            concurrent clients (default 1,2,4,8)\n"
          "  --temps LIST              temperatures (default 0,0.8: llama.cpp's default sampling)\n"
          "  --requests N              requests per client, sent in turn (default 2)\n"
          "  -n N                      tokens per request (default 128)\n"
          "  -np N                     slots of every server (default 4)\n"
          "  -c N, -t N                context of every server (default 4096), threads (default 2)\n"
          "  -ngl N, -ngld N           layers of the target and of the draft on the GPU, for every\n"
          "                            server alike (default: none)\n"
          "  --spec-draft-n-max N      llama-server's draft length with -md (default 3: its best on\n"
          "                            the benchmark pair)\n"
          "  --fixed LIST              also specd with every request asking for exactly k drafts, for\n"
          "                            each k of the list (e.g. 1,3): the best fixed length at each load,\n"
          "                            beside the default (its own table in the report)\n"
          "  --llama-bin DIR           where llama-server is (default deps/llama/build-tools/bin)\n"
          "  --no-llama                measure specd alone\n"
          "  --out DIR                 results folder (default results/bench-serve): serve.md, and\n"
          "                            serve.svg when gnuplot is installed\n",
          out);
}

/* 1: the flag was one of ours, 0: not, -1: a bad value (a->error says why). */
static int parse_serve_flag(cli_args *a, const char *f, serve_options *o) {
    bool ok = true;
    if (!strcmp(f, "--serve")) return 1;
    if (!strcmp(f, "--models")) {
        const char *dir = cli_value(a, f);
        ok = dir != NULL;
        if (ok) {
            snprintf(o->models_dir, sizeof o->models_dir, "%s", dir);
            snprintf(o->target_buf, sizeof o->target_buf, "%s/target.gguf", dir);
            snprintf(o->draft_buf, sizeof o->draft_buf, "%s/draft.gguf", dir);
        }
    } else if (!strcmp(f, "--pair")) ok = (o->target = cli_value(a, f)) && (o->draft = cli_value(a, f));
    else if (!strcmp(f, "--target")) ok = (o->target_name = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--prompts")) ok = (o->prompts = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--clients")) ok = (o->clients = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--temps")) ok = (o->temps = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--requests")) ok = cli_int(a, f, 1, 1000, &o->requests);
    else if (!strcmp(f, "-n")) ok = cli_int(a, f, 1, 100000, &o->n_predict);
    else if (!strcmp(f, "-np") || !strcmp(f, "--parallel")) ok = cli_int(a, f, 1, 64, &o->n_parallel);
    else if (!strcmp(f, "-c")) ok = cli_int(a, f, 64, 1 << 20, &o->n_ctx);
    else if (!strcmp(f, "-t")) ok = cli_int(a, f, 1, 1024, &o->n_threads);
    else if (!strcmp(f, "--spec-draft-n-max")) ok = cli_int(a, f, 1, 64, &o->draft_max);
    else if (!strcmp(f, "-ngl") || !strcmp(f, "--gpu-layers")) ok = cli_int(a, f, 0, 100000, &o->gpu_layers);
    else if (!strcmp(f, "-ngld") || !strcmp(f, "--gpu-layers-draft")) ok = cli_int(a, f, 0, 100000, &o->gpu_layers_draft);
    else if (!strcmp(f, "--fixed")) ok = (o->fixed = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--llama-bin")) ok = (o->llama_bin = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--no-llama")) o->with_llama = false;
    else if (!strcmp(f, "--out")) ok = (o->out_dir = cli_value(a, f)) != NULL;
    else return 0;
    return ok ? 1 : -1;
}

/* Whether a comma list holds only numbers from min to max, whole ones where `whole` (read as
 * integers: "3.0" is not one): the script would fail on anything else, late. */
static bool number_list(const char *v, bool whole, double min, double max) {
    if (!v || !*v) return false;
    for (const char *p = v; *p;) {
        char *end = NULL;
        double x = whole ? (double)strtol(p, &end, 10) : strtod(p, &end);
        if (end == p || (*end && *end != ',') || x < min || x > max) return false;
        p = *end ? end + 1 : end;
    }
    return true;
}

/* Everything a run needs, checked before it starts; false with a message saying what to do. */
static bool check_serve_setup(serve_options *o, char *llama_server, size_t size) {
    const char *missing = access(o->target, R_OK) ? o->target : access(o->draft, R_OK) ? o->draft : NULL;
    if (missing) {
        fprintf(stderr, "specd: error: cannot read the model '%s' (make bench-models makes the benchmark pair, "
                        "or give --pair TARGET DRAFT)\n", missing);
        return false;
    }
    if (access(o->prompts, R_OK)) {
        fprintf(stderr, "specd: error: cannot read the prompts file '%s' (--prompts FILE)\n", o->prompts);
        return false;
    }
    if (!number_list(o->clients, false, -HUGE_VAL, HUGE_VAL) || !number_list(o->temps, false, -HUGE_VAL, HUGE_VAL)) {
        fprintf(stderr, "specd: error: --clients and --temps take numbers separated by commas (got '%s', '%s')\n",
                o->clients, o->temps);
        return false;
    }
    if (o->fixed && !number_list(o->fixed, true, 1, 64)) {
        fprintf(stderr, "specd: error: --fixed takes draft lengths from 1 to 64 separated by commas (got '%s')\n",
                o->fixed);
        return false;
    }
    if (!bench_tool_in_path("python3")) {
        fprintf(stderr, "specd: error: specd bench --serve runs its clients with python3, which is not in PATH "
                        "(apt install python3)\n");
        return false;
    }
    llama_server[0] = '\0';
    if (o->with_llama) {
        snprintf(llama_server, size, "%s/llama-server", o->llama_bin);
        if (access(llama_server, X_OK)) {
            fprintf(stderr, "specd bench: llama-server not found in '%s': measuring specd alone (make bench-deps "
                            "builds it; --no-llama says so)\n", o->llama_bin);
            llama_server[0] = '\0';
        }
    }
    return true;
}

/* The embedded script into a private temporary file; its path in `path` (unlink it after). */
static bool write_script(char *path, size_t size) {
    const char *tmp = getenv("TMPDIR");
    snprintf(path, size, "%s/specd-serve-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) {
        fprintf(stderr, "specd: error: cannot create a temporary file in '%s' for the benchmark script (TMPDIR)\n",
                tmp && *tmp ? tmp : "/tmp");
        return false;
    }
    FILE *f = fdopen(fd, "w");
    bool ok = f && fwrite(specd_serve_bench_py, 1, specd_serve_bench_py_size, f) == specd_serve_bench_py_size;
    ok = f && fclose(f) == 0 && ok;
    if (!f) close(fd);
    if (!ok) {
        fprintf(stderr, "specd: error: cannot write the benchmark script to '%s' (disk full?)\n", path);
        unlink(path);
    }
    return ok;
}

/* python3 SCRIPT with the options; returns the script's exit status (1 when it could not run). */
static int run_script(const serve_options *o, const char *script, const char *specd, const char *llama_server) {
    char n[5][32], md[1200], svg[1200];
    snprintf(n[0], sizeof n[0], "%lld", (long long)o->requests);
    snprintf(n[1], sizeof n[1], "%lld", (long long)o->n_predict);
    snprintf(n[2], sizeof n[2], "%lld", (long long)o->n_threads);
    snprintf(n[3], sizeof n[3], "%lld", (long long)o->n_parallel);
    snprintf(n[4], sizeof n[4], "%lld", (long long)o->n_ctx);
    char draft_max[32];
    snprintf(draft_max, sizeof draft_max, "%lld", (long long)o->draft_max);
    snprintf(md, sizeof md, "%s/serve.md", o->out_dir);
    snprintf(svg, sizeof svg, "%s/serve.svg", o->out_dir);
    const char *argv[MAX_SCRIPT_ARGS] = {"python3", script, "--specd", specd, "--target", o->target, "--draft",
                                         o->draft, "--prompts", o->prompts, "--clients", o->clients, "--temps",
                                         o->temps, "--requests", n[0], "-n", n[1], "--threads", n[2], "--parallel",
                                         n[3], "--ctx", n[4], "--draft-max", draft_max, "--out", md, "--plot", svg};
    int argc = 30;
    char ngl[2][32];
    snprintf(ngl[0], sizeof ngl[0], "%lld", (long long)o->gpu_layers);
    snprintf(ngl[1], sizeof ngl[1], "%lld", (long long)o->gpu_layers_draft);
    if (o->gpu_layers >= 0) argv[argc++] = "--gpu-layers", argv[argc++] = ngl[0];
    if (o->gpu_layers_draft >= 0) argv[argc++] = "--gpu-layers-draft", argv[argc++] = ngl[1];
    if (o->fixed) argv[argc++] = "--fixed", argv[argc++] = o->fixed;
    if (llama_server[0]) argv[argc++] = "--llama-server", argv[argc++] = llama_server;
    else argv[argc++] = "--servers", argv[argc++] = "specd";
    argv[argc] = NULL;
    pid_t pid;
    int rc = posix_spawnp(&pid, "python3", NULL, NULL, (char *const *)argv, environ);
    if (rc != 0) {
        fprintf(stderr, "specd: error: cannot start python3 (%s)\n", strerror(rc));
        return 1;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {}
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        fprintf(stderr, "specd bench: report in %s\n", md);
        return 0;
    }
    fprintf(stderr, "specd: error: the benchmark script failed (%s %d): see its messages above\n",
            WIFEXITED(status) ? "exit status" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return 1;
}

int cli_bench_serve(int argc, char **argv, const char *self) {
    static char models_target[1024], models_draft[1024];
    const char *home = getenv("HOME");
    snprintf(models_target, sizeof models_target, "%s/.cache/specd-bench/target.gguf", home ? home : ".");
    snprintf(models_draft, sizeof models_draft, "%s/.cache/specd-bench/draft.gguf", home ? home : ".");
    serve_options o = {.prompts = "../shared/bench/prompts.txt", .clients = "1,2,4,8", .temps = "0,0.8",
                       .llama_bin = "deps/llama/build-tools/bin", .out_dir = "results/bench-serve",
                       .n_predict = 128, .n_threads = 2, .n_ctx = 4096, .n_parallel = 4, .requests = 2,
                       .draft_max = 3, .gpu_layers = -1, .gpu_layers_draft = -1, .with_llama = true};
    cli_args a = {.argc = argc, .argv = argv};
    while (a.i < a.argc) {
        const char *f = a.argv[a.i++];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            serve_usage(stdout);
            return 0;
        }
        int r = parse_serve_flag(&a, f, &o);
        if (r == 0) cli_fail(&a, "unknown option '%s' for specd bench --serve (see specd bench --serve --help)", f);
        if (r <= 0) {
            fprintf(stderr, "specd: error: %s\n", a.error);
            return CLI_EXIT_USAGE;
        }
    }
    if (!o.target) o.target = o.target_buf[0] ? o.target_buf : models_target;
    if (!o.draft) o.draft = o.draft_buf[0] ? o.draft_buf : models_draft;
    static char named_target[2048];
    if (o.target_name && strchr(o.target_name, '/')) o.target = o.target_name;
    else if (o.target_name) {
        const char *dir = o.models_dir[0] ? o.models_dir : NULL;
        if (dir) snprintf(named_target, sizeof named_target, "%s/%s", dir, o.target_name);
        else snprintf(named_target, sizeof named_target, "%s/.cache/specd-bench/%s", home ? home : ".", o.target_name);
        o.target = named_target;
    }
    char llama_server[1100], script[1024];
    if (!check_serve_setup(&o, llama_server, sizeof llama_server)) return CLI_EXIT_USAGE;
    if (!bench_make_dirs(o.out_dir)) {
        fprintf(stderr, "specd: error: cannot create the results folder '%s'\n", o.out_dir);
        return CLI_EXIT_USAGE;
    }
    if (!write_script(script, sizeof script)) return 1;
    int rc = run_script(&o, script, self, llama_server);
    unlink(script);
    return rc;
}
