/* bench_report.c - turns benchmark samples into the Markdown report, a raw TSV and PNG plots
 * (drawn by gnuplot when it is installed). */
#define _DEFAULT_SOURCE
#include "bench.h"

#include "specd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median, min and max of the successful samples' tokens/s; returns how many there were. */
static int tokens_per_s_stats(const bench_config *c, double *median, double *min, double *max) {
    double v[256];
    int n = 0;
    for (int i = 0; i < c->n_samples && n < 256; i++)
        if (c->samples[i].ok) v[n++] = c->samples[i].tokens_per_s;
    *median = *min = *max = 0.0;
    if (n == 0) return 0;
    qsort(v, (size_t)n, sizeof *v, compare_double);
    *median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    *min = v[0];
    *max = v[n - 1];
    return n;
}

double bench_median_tokens_per_s(const bench_config *c) {
    double med, lo, hi;
    tokens_per_s_stats(c, &med, &lo, &hi);
    return med;
}

/* Mean of a per-sample field over successful samples that report it (>= 0); -1 when none do. */
static double mean_field(const bench_config *c, size_t offset) {
    double sum = 0.0;
    int n = 0;
    for (int i = 0; i < c->n_samples; i++) {
        const bench_sample *s = &c->samples[i];
        double v = *(const double *)((const char *)s + offset);
        if (s->ok && v >= 0.0) sum += v, n++;
    }
    return n ? sum / n : -1.0;
}

static double max_rss(const bench_config *c) {
    double m = 0.0;
    for (int i = 0; i < c->n_samples; i++)
        if (c->samples[i].max_rss_mb > m) m = c->samples[i].max_rss_mb;
    return m;
}

/* ---- the chain limit --------------------------------------------------------------------------
 * With a_i the chance that draft token i is accepted given that tokens 1..i-1 were, a chain of k
 * drafts yields E(k) = 1 + sum_{i<=k} prod_{j<=i} a_j tokens per step and costs T(k+1) + k * d
 * (one target pass over k+1 tokens, k draft tokens). The best of E(k) / cost(k) over k is the most
 * any fixed-length chain can reach with this pair on this machine. a_i come from the probe (specd
 * drafting a fixed 8 tokens, so every position is measured without selection); T and d are
 * specd's cost estimates at the end of each probe run (the calibrated shape of T at the level its
 * passes measured), means over prompts. */
double bench_chain_limit(const bench_config *probe, int *best_k) {
    long drafted[BENCH_MAX_POS] = {0}, accepted[BENCH_MAX_POS] = {0};
    double verify[BENCH_MAX_POS] = {0}, draft = 0.0;
    int n_ok = 0;
    for (int i = 0; i < probe->n_samples; i++) {
        const bench_sample *s = &probe->samples[i];
        if (!s->ok) continue;
        n_ok++;
        for (int p = 0; p < BENCH_MAX_POS; p++) drafted[p] += s->drafted_at[p], accepted[p] += s->accepted_at[p];
        for (int p = 0; p < BENCH_MAX_POS; p++) verify[p] += s->verify_ms[p];
        draft += s->draft_token_ms;
    }
    *best_k = 0;
    if (n_ok == 0 || verify[0] <= 0.0) return 0.0;
    double best = 1000.0 / (verify[0] / n_ok), expected = 1.0, p_all = 1.0;
    for (int k = 1; k < BENCH_MAX_POS && drafted[k - 1] > 0 && verify[k] > 0.0; k++) {
        p_all *= (double)accepted[k - 1] / (double)drafted[k - 1];
        expected += p_all;
        double cost = verify[k] / n_ok + k * draft / n_ok;
        if (1000.0 * expected / cost > best) best = 1000.0 * expected / cost, *best_k = k;
    }
    return best;
}

/* ---- Markdown --------------------------------------------------------------------------------- */

static void print_ratio(FILE *f, double x, double base) {
    if (base > 0.0 && x > 0.0) fprintf(f, " %.2fx |", x / base);
    else fputs(" – |", f);
}

/* Where the layers were (the flags every tool got) and the devices there are, as llama.cpp lists
 * them: GPU figures mean little without the card's name. */
static void write_placement(FILE *f, const bench_settings *s) {
    const char *flags[][2] = {{"-ngl", s->n_gpu_layers}, {"-ngld", s->n_gpu_layers_draft}, {"--device", s->device},
                              {"--device-draft", s->device_draft}, {"--rpc", s->rpc}};
    fputs("Placement (given to every tool):", f);
    bool any = false;
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        if (flags[i][1]) fprintf(f, " %s %s", flags[i][0], flags[i][1]), any = true;
    fputs(any ? "" : " each tool's default", f);
    char *error = NULL, *devices = specd_devices_describe(NULL, &error);
    fputs(". ", f);
    if (devices) {
        for (char *p = devices; *p; p++) /* one line: "Available devices: A; B" */
            if (*p == '\n') *p = p[1] ? ';' : '\0';
        fprintf(f, "%s.\n\n", devices);
    } else {
        fprintf(f, "Devices: unknown (%s).\n\n", error ? error : "out of memory");
    }
    specd_free(devices);
    specd_free(error);
}

/* fmt has one double conversion; the checked fprintf call sits with each caller's literal. */
#define print_optional(f, fmt, v)                                                                             \
    do {                                                                                                      \
        double v_ = (v);                                                                                      \
        if (v_ >= 0.0) fprintf((f), fmt, v_);                                                                 \
        else fputs(" – |", (f));                                                                              \
    } while (0)

static void write_machine(FILE *f, const bench_settings *s, int n_prompts) {
    struct utsname u;
    uname(&u);
    char model[512] = "unknown CPU";
    FILE *ci = fopen("/proc/cpuinfo", "r");
    for (char line[512]; ci && fgets(line, sizeof line, ci);) {
        if (strncmp(line, "model name", 10) == 0) {
            const char *v = strchr(line, ':');
            snprintf(model, sizeof model, "%.*s", 500, v ? v + 2 : line);
            model[strcspn(model, "\n")] = '\0';
            break;
        }
    }
    if (ci) fclose(ci);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    fprintf(f, "Machine: %s, %ld cores online, %.0f GiB memory, %s %s. Settings: %d threads, context %d, "
               "%d tokens per prompt (end-of-text ignored so every tool generates them all), seed %d, "
               "%d prompts; medians over prompts.\n\n",
            model, sysconf(_SC_NPROCESSORS_ONLN), (double)pages * page / (1 << 30), u.sysname, u.release,
            s->n_threads, s->n_ctx, s->n_predict, s->seed, n_prompts);
    write_placement(f, s);
}

/* Which configurations a "best of" looks at; `tool` is the one asked for, where that matters. */
typedef bool (*config_filter)(const bench_config *c, bench_tool tool);

static bool is_tool(const bench_config *c, bench_tool tool) { return c->tool == tool; }

/* Any llama.cpp tool, with or without speculation. */
static bool is_llama(const bench_config *c, bench_tool tool) {
    (void)tool;
    return c->tool != TOOL_SPECD;
}

/* llama.cpp with speculation: its draft-model tools and n-gram types. */
static bool is_llama_speculative(const bench_config *c, bench_tool tool) {
    (void)tool;
    return c->tool != TOOL_LLAMA_COMPLETION && c->tool != TOOL_SPECD;
}

/* specd at default settings with speculation: not speculation off, not the fixed-length probe. */
static bool is_specd_default(const bench_config *c, bench_tool tool) {
    (void)tool;
    return c->tool == TOOL_SPECD && !strstr(c->name, "speculation off") && !strstr(c->name, "fixed");
}

/* The fastest configuration (median tokens/s) that `keep` accepts, or NULL. */
static const bench_config *best_where(const bench_group *g, config_filter keep, bench_tool tool) {
    const bench_config *best = NULL;
    for (int i = 0; i < g->n_configs; i++) {
        const bench_config *c = &g->configs[i];
        if (keep(c, tool) && (!best || bench_median_tokens_per_s(c) > bench_median_tokens_per_s(best))) best = c;
    }
    return best;
}

/* The best configuration of a llama.cpp tool (over its draft-length sweep), or NULL. */
static const bench_config *best_of(const bench_group *g, bench_tool tool) { return best_where(g, is_tool, tool); }

static const bench_config *find_probe(const bench_group *g) {
    for (int i = 0; i < g->n_configs; i++)
        if (g->configs[i].probe) return &g->configs[i];
    return NULL;
}

static const bench_config *find_specd(const bench_group *g, const char *name) {
    for (int i = 0; i < g->n_configs; i++)
        if (g->configs[i].tool == TOOL_SPECD && strcmp(g->configs[i].name, name) == 0) return &g->configs[i];
    return NULL;
}

/* "97% / 88%": the share of passes that reused llama.cpp's graph over the configuration's runs,
 * the target's and the draft's (on a GPU only those replay a CUDA graph); "–" for llama.cpp's
 * tools, which do not report it. */
static void print_graph_reuse(FILE *f, const bench_config *c) {
    long tp = 0, tr = 0, dp = 0, dr = 0;
    for (int i = 0; c->tool == TOOL_SPECD && i < c->n_samples; i++) {
        const bench_sample *x = &c->samples[i];
        if (!x->ok) continue;
        tp += x->target_passes, tr += x->target_reused, dp += x->draft_passes, dr += x->draft_reused;
    }
    if (tp == 0) {
        fputs(" – |", f);
        return;
    }
    fprintf(f, " %.0f%%", 100.0 * (double)tr / (double)tp);
    if (dp > 0) fprintf(f, " / %.0f%%", 100.0 * (double)dr / (double)dp);
    fputs(" |", f);
}

static void write_row(FILE *f, const bench_config *c, double base, double llama_best, double limit) {
    double med, lo, hi;
    if (!c || tokens_per_s_stats(c, &med, &lo, &hi) == 0) {
        if (c) fprintf(f, "| %s | failed | | | | | | | | | |\n", c->name);
        return;
    }
    fprintf(f, "| %s | %.1f | %.1f–%.1f |", c->name, med, lo, hi);
    double acc = mean_field(c, offsetof(bench_sample, acceptance));
    print_optional(f, " %.0f%% |", acc >= 0.0 ? 100.0 * acc : -1.0);
    print_optional(f, " %.2f |", mean_field(c, offsetof(bench_sample, accepted_per_step)));
    print_ratio(f, med, base);
    print_ratio(f, med, llama_best);
    if (limit > 0.0) fprintf(f, " %.0f%% |", 100.0 * med / limit);
    else fputs(" – |", f);
    double draft_ms = c->tool == TOOL_SPECD ? mean_field(c, offsetof(bench_sample, draft_token_ms)) : -1.0;
    print_optional(f, " %.3f |", draft_ms > 0.0 ? draft_ms : -1.0);
    print_graph_reuse(f, c);
    fprintf(f, " %.0f |\n", max_rss(c));
}

static void write_sweep(FILE *f, const bench_group *g) {
    fputs("\nDraft-length sweep of llama.cpp's tools (median tokens/s): ", f);
    for (int i = 0; i < g->n_configs; i++) {
        const bench_config *c = &g->configs[i];
        if (c->tool == TOOL_LLAMA_SPEC || c->tool == TOOL_LLAMA_SPEC_SIMPLE)
            fprintf(f, "%s %.1f; ", c->name, bench_median_tokens_per_s(c));
    }
    fputs("\n", f);
}

/* llama.cpp's speculative tools whose output is the target's at any temperature: not
 * llama-speculative above temperature 0 (the report's head says why). */
static bool is_llama_exact_speculative(const bench_config *c, bench_tool tool) {
    return is_llama_speculative(c, tool) && c->tool != TOOL_LLAMA_SPEC;
}

/* Each of specd's default runs against `llama`, after `lead`; false when there is none. */
static bool write_defaults_against(FILE *f, const bench_group *g, const bench_config *llama, const char *lead) {
    bool first = true;
    for (int i = 0; llama && i < g->n_configs; i++) {
        const bench_config *c = &g->configs[i];
        if (!is_specd_default(c, TOOL_SPECD)) continue;
        fprintf(f, "%s%s %.2fx", first ? lead : ", ", c->name + strlen("specd "),
                bench_median_tokens_per_s(c) / bench_median_tokens_per_s(llama));
        first = false;
    }
    if (!first) fprintf(f, " (llama.cpp's best: %s, %.1f tokens/s).", llama->name, bench_median_tokens_per_s(llama));
    return !first;
}

/* The comparisons the targets are stated in: each of specd's default runs (first run, after
 * earlier runs, from a cache learnt under load) against llama.cpp's best speculative tool, and
 * above temperature 0 against its best exact one too; plain decoding against plain decoding. */
static void write_summary(FILE *f, const bench_group *g, const bench_config *completion) {
    const bench_config *off = find_specd(g, "specd, speculation off");
    bool any = write_defaults_against(f, g, best_where(g, is_llama_speculative, TOOL_SPECD),
                                      "\nspecd's defaults against llama.cpp's best speculative tool: ");
    if (any && g->temp > 0.0)
        write_defaults_against(f, g, best_where(g, is_llama_exact_speculative, TOOL_SPECD),
                               " Against its best exact one: ");
    if (off && completion)
        fprintf(f, " specd without speculation is %.2fx llama-completion.",
                bench_median_tokens_per_s(off) / bench_median_tokens_per_s(completion));
    fputs("\n", f);
}

/* plot_prefix: the group's plot files, or NULL when no plots are drawn. */
static void write_group(FILE *f, const bench_group *g, const char *plot_prefix) {
    const bench_config *completion = best_of(g, TOOL_LLAMA_COMPLETION);
    const bench_config *simple = best_of(g, TOOL_LLAMA_SPEC_SIMPLE), *spec = best_of(g, TOOL_LLAMA_SPEC);
    const bench_config *llama = best_where(g, is_llama, TOOL_SPECD);
    double base = completion ? bench_median_tokens_per_s(completion) : 0.0;
    double llama_best = llama ? bench_median_tokens_per_s(llama) : 0.0;
    const bench_config *probe = find_probe(g);
    int best_k = 0;
    double limit = probe ? bench_chain_limit(probe, &best_k) : 0.0;
    fprintf(f, "\n### %s, temperature %g\n\n", g->pair, g->temp);
    if (g->pass_costs[0])
        fprintf(f, "Pass costs of the target (`tools/pass_costs --short`, flash attention off, empty cache): %s\n\n",
                g->pass_costs);
    fputs("| configuration | tokens/s | min–max | acceptance | accepted/step | vs no speculation | vs llama.cpp best | of chain limit | draft ms/token | graphs reused, target / draft | peak RSS MB |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|\n", f);
    write_row(f, completion, base, llama_best, limit);
    write_row(f, simple, base, llama_best, limit);
    write_row(f, spec, base, llama_best, limit);
    for (int i = 0; i < g->n_configs; i++)
        if (g->configs[i].tool == TOOL_LLAMA_NGRAM) write_row(f, &g->configs[i], base, llama_best, limit);
    for (int i = 0; i < g->n_configs; i++)
        if (g->configs[i].tool == TOOL_SPECD) write_row(f, &g->configs[i], base, llama_best, limit);
    if (limit > 0.0)
        fprintf(f, "\nChain limit: %.1f tokens/s (best fixed chain: %d drafts), from specd's measured acceptance "
                   "by position and pass costs.\n", limit, best_k);
    write_summary(f, g, completion);
    write_sweep(f, g);
    if (plot_prefix)
        fprintf(f, "\n![tokens/s](%s-tps.png) ![acceptance by position](%s-accept.png)\n", plot_prefix, plot_prefix);
    else
        fputs("\n(Plots skipped: gnuplot not found; `make bench-deps` installs it.)\n", f);
}

/* ---- plots ------------------------------------------------------------------------------------- */

/* The gnuplot script for one group's two plots (tokens/s per configuration, acceptance by draft
 * position). */
static void write_plot_script(FILE *gp, const char *dir, const char *prefix, const bench_group *g) {
    fprintf(gp, "set terminal png size 900,420\nset output '%s/%s-tps.png'\n", dir, prefix);
    fprintf(gp, "set title '%s, temperature %g: median tokens/s'\nset style fill solid 0.6\nset boxwidth 0.7\n"
                "set xtics rotate by -30 font ',8'\nset rmargin 14\nset bmargin 12\nset yrange [0:*]\nunset key\n$d << EOD\n", g->pair, g->temp);
    for (int i = 0; i < g->n_configs; i++)
        fprintf(gp, "\"%s\" %.2f\n", g->configs[i].name, bench_median_tokens_per_s(&g->configs[i]));
    fputs("EOD\nplot $d using 0:2:xtic(1) with boxes\n", gp);
    fprintf(gp, "set output '%s/%s-accept.png'\nset title 'acceptance by draft position (specd)'\n"
                "set xtics norotate font ',10'\nset yrange [0:1]\nset key\nset xlabel 'draft position'\n", dir, prefix);
    fputs("plot ", gp);
    int plotted = 0;
    for (int i = 0; i < g->n_configs; i++) {
        if (g->configs[i].tool != TOOL_SPECD || strstr(g->configs[i].name, "none")) continue;
        fprintf(gp, "%s'-' with linespoints title '%s'", plotted++ ? ", " : "", g->configs[i].name);
    }
    fputs(plotted ? "\n" : "0 notitle\n", gp);
    for (int i = 0; i < g->n_configs && plotted; i++) {
        const bench_config *c = &g->configs[i];
        if (c->tool != TOOL_SPECD || strstr(c->name, "none")) continue;
        for (int p = 0; p < BENCH_MAX_POS; p++) {
            long d = 0, a = 0;
            for (int s = 0; s < c->n_samples; s++) d += c->samples[s].drafted_at[p], a += c->samples[s].accepted_at[p];
            if (d > 0) fprintf(gp, "%d %.3f\n", p + 1, (double)a / d);
        }
        fputs("e\n", gp);
    }
}

/* Draws one group's plots with gnuplot. The script is built in memory first, so gnuplot failing
 * (or missing) is one error after the fact, never a half-written pipe. */
static bool plot_group(const char *dir, const char *prefix, const bench_group *g, char *err, size_t err_size) {
    char *script = NULL;
    size_t len = 0;
    FILE *gp = open_memstream(&script, &len);
    if (!gp) {
        snprintf(err, err_size, "out of memory for the plot script");
        return false;
    }
    write_plot_script(gp, dir, prefix, g);
    bool ok = !ferror(gp);
    ok = (fclose(gp) == 0) && ok;
    if (!ok) snprintf(err, err_size, "out of memory for the plot script");
    ok = ok && bench_feed_tool("gnuplot", script, len, err, err_size);
    free(script);
    return ok;
}

/* Plots every group; a failure is said on stderr. Plots are extras: the report is written first
 * and stays either way. */
static void plot_groups(const char *dir, const bench_group *groups, int n_groups) {
    for (int i = 0; i < n_groups; i++) {
        char prefix[64], err[512];
        snprintf(prefix, sizeof prefix, "g%d", i);
        if (!plot_group(dir, prefix, &groups[i], err, sizeof err)) {
            fprintf(stderr, "specd bench: plots failed: %s\n", err);
            return;
        }
    }
}

/* dir/name opened for writing, its path in `path`; NULL (and why in err) when it cannot be. */
static FILE *open_written(const char *dir, const char *name, char *path, size_t path_size, char *err, size_t err_size) {
    snprintf(path, path_size, "%s/%s", dir, name);
    FILE *f = fopen(path, "we");
    if (!f) snprintf(err, err_size, "cannot write %s: %s", path, strerror(errno));
    return f;
}

/* Closes a file we wrote, reporting a failed write (disk full, I/O error) as what it is. */
static bool close_written(FILE *f, const char *path, char *err, size_t err_size) {
    bool ok = !ferror(f);
    int close_errno = 0;
    if (fclose(f) != 0) ok = false, close_errno = errno;
    if (!ok) snprintf(err, err_size, "cannot write %s: %s", path, close_errno ? strerror(close_errno) : "write error");
    return ok;
}

static bool write_raw(const char *dir, const bench_group *groups, int n_groups, char *err, size_t err_size) {
    char path[1200];
    FILE *f = open_written(dir, "raw.tsv", path, sizeof path, err, err_size);
    if (!f) return false;
    fputs("pair\ttemperature\tconfiguration\tprompt\tok\ttokens_per_s\tacceptance\taccepted_per_step\tmax_rss_mb\n", f);
    for (int gi = 0; gi < n_groups; gi++)
        for (int ci = 0; ci < groups[gi].n_configs; ci++)
            for (int s = 0; s < groups[gi].configs[ci].n_samples; s++) {
                const bench_sample *x = &groups[gi].configs[ci].samples[s];
                fprintf(f, "%s\t%g\t%s\t%d\t%d\t%.2f\t%.3f\t%.3f\t%.0f\n", groups[gi].pair, groups[gi].temp,
                        groups[gi].configs[ci].name, s, x->ok, x->tokens_per_s, x->acceptance,
                        x->accepted_per_step, x->max_rss_mb);
            }
    return close_written(f, path, err, err_size);
}

bool bench_write_report(const char *dir, const bench_group *groups, int n_groups, const bench_settings *s,
                        int n_prompts, char *err, size_t err_size) {
    char path[1200];
    FILE *f = open_written(dir, "benchmarks.md", path, sizeof path, err, err_size);
    if (!f) return false;
    fputs("# specd benchmarks\n\nWritten by `specd bench` (`make bench`). Tools: llama-completion (no speculation), "
          "llama-speculative-simple (llama-server's sample-and-match verification) and llama-speculative (rejection "
          "sampling of the draft's most likely tokens: exact at temperature 0 only), built from the same "
          "llama.cpp release as specd, each at its best draft length of the sweep; specd with speculation off, with its defaults (the adaptive draft length) three ways "
          "(a first run, with no calibration cache; after the earlier runs, with a cache they updated; from a cache "
          "learnt while every core was busy), and drafting a fixed 8 tokens (the probe that measures acceptance by "
          "position for the chain limit).\n\n"
          "At temperature > 0 llama-speculative is not exact: it drafts the draft model's most likely token but "
          "accepts it with probability p/q as if it had been sampled from q (examples/speculative/speculative.cpp), "
          "so its acceptance is higher than exact rejection sampling allows and its output distribution is not the "
          "target's. specd samples drafts from q, and its output distribution is the target's (chi-square tests in "
          "tests/unit/test_engine.c). Where the time goes, and why chains cannot go much faster on this pair: "
          "docs/performance.md.\n\n", f);
    write_machine(f, s, n_prompts);
    /* Checked first: without gnuplot the report says so instead of linking to missing images. */
    bool with_plots = bench_tool_in_path("gnuplot");
    if (!with_plots) fputs("specd bench: plots skipped: gnuplot not found (make bench-deps installs it)\n", stderr);
    for (int i = 0; i < n_groups; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "g%d", i);
        write_group(f, &groups[i], with_plots ? prefix : NULL);
    }
    /* The report and the raw data are on disk before gnuplot runs. */
    if (!close_written(f, path, err, err_size) || !write_raw(dir, groups, n_groups, err, err_size)) return false;
    if (with_plots) plot_groups(dir, groups, n_groups);
    return true;
}

bool bench_make_dirs(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && access(buf, W_OK) != 0) return false;
        *p = '/';
    }
    return (mkdir(buf, 0755) == 0 || access(buf, W_OK) == 0);
}
