/* output.c - how `specd run` reports: human statistics and the --json object. */
#include "cli.h"
#include "../draft/drafter_registry.h"
#include "../api/invariance_json.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static void print_draft_lengths(FILE *out, const specd_stats *s) {
    fputs("draft lengths:", out);
    for (int k = 0; k < SPECD_STATS_MAX_DRAFT; k++)
        if (s->draft_len_hist[k]) fprintf(out, " %d:%d", k, s->draft_len_hist[k]);
    fputs("\nacceptance by position:", out);
    for (int i = 0; i < SPECD_STATS_MAX_DRAFT && s->drafted_at[i]; i++)
        fprintf(out, " %.2f", (double)s->accepted_at[i] / s->drafted_at[i]);
    fputc('\n', out);
}

void cli_print_drafters(FILE *out) {
    int32_t n = 0;
    const specd_drafter_kind *kinds = specd_drafter_kinds(&n);
    fputs("\ndrafters (--spec; llama-server's --spec-type name, where it differs, in brackets):\n", out);
    for (int32_t i = 0; i < n; i++) {
        char names[48];
        bool other = kinds[i].llama_name && strcmp(kinds[i].llama_name, kinds[i].name) != 0;
        snprintf(names, sizeof names, "%s%s%s%s", kinds[i].name, other ? " [" : "", other ? kinds[i].llama_name : "",
                 other ? "]" : "");
        fprintf(out, "  %-24s %s\n", names, kinds[i].help);
    }
}

/* One line per drafter of a chain. */
static void print_drafters(FILE *out, const specd_stats *s) {
    for (int32_t i = 0; i < s->n_drafters; i++) {
        const specd_drafter_stats *d = &s->drafters[i];
        fprintf(out, "drafter %s: calls %d, chosen %d, drafted %d, accepted %d (%.1f%%), %.1f ms\n",
                specd_spec_type_name(d->type), d->n_calls, d->n_chosen, d->n_drafted, d->n_accepted,
                d->n_drafted ? 100.0 * d->n_accepted / d->n_drafted : 0.0, d->draft_ms);
    }
}

static const char *calibration_source_name(specd_calibration_source source) {
    switch (source) {
    case SPECD_CALIBRATION_LOADED: return "loaded";
    case SPECD_CALIBRATION_LEARNT: return "learnt";
    default: return "off";
    }
}

/* Where the costs of the cost model came from, in words. */
static const char *calibration_words(specd_calibration_source source) {
    switch (source) {
    case SPECD_CALIBRATION_LOADED: return "costs from the cache file";
    case SPECD_CALIBRATION_LEARNT: return "costs learnt from the passes, saved";
    default: return "costs learnt from the passes, no cache file";
    }
}

/* "placement: target CUDA0 (33/33 layers offloaded), draft CPU", only when a layer is offloaded
 * (on the CPU there is nothing to say). */
static void print_placement(FILE *out, const cli_startup *st) {
    if (st->target.n_layers_offloaded == 0 && st->draft.n_layers_offloaded == 0) return;
    const specd_placement_info *models[] = {&st->target, &st->draft};
    fputs("placement:", out);
    for (int i = 0; i < 2; i++) {
        const specd_placement_info *p = models[i];
        if (!p->devices) continue;
        fprintf(out, "%s %s %s", i ? "," : "", i ? "draft" : "target", p->devices);
        if (p->n_layers_offloaded > 0) fprintf(out, " (%d/%d layers offloaded)", p->n_layers_offloaded, p->n_layers + 1);
    }
    fputc('\n', out);
}

static double reuse_percent(specd_graph_counts c) { return c.passes > 0 ? 100.0 * c.reused / c.passes : 0.0; }

/* "graphs: target reused on 97 of 100 passes (97.0%), draft on ...": on a GPU only a reused graph
 * replays its CUDA graph, so this is what decides speed there (docs/performance.md). */
static void print_graphs(FILE *out, const specd_graph_info *g) {
    fprintf(out, "graphs: target reused on %lld of %lld passes (%.1f%%)", (long long)g->target.reused,
            (long long)g->target.passes, reuse_percent(g->target));
    if (g->draft.passes > 0)
        fprintf(out, ", draft on %lld of %lld (%.1f%%)", (long long)g->draft.reused, (long long)g->draft.passes,
                reuse_percent(g->draft));
    fputc('\n', out);
}

void cli_print_stats(FILE *out, const specd_stats *s, specd_stop_reason reason, const char *spec,
                     const cli_startup *startup) {
    fprintf(out, "\n--- specd: speculation %s, stopped: %s\n", spec,
            specd_stop_reason_name(reason));
    fprintf(out, "startup: load %.1f ms, warm-up %.1f ms, calibration %.1f ms (%s), prompt %.1f ms; total %.1f ms\n",
            startup->load_ms, startup->warmup_ms, startup->calibration.ms, calibration_words(startup->calibration.source), s->prompt_ms,
            startup->total_ms);
    print_placement(out, startup);
    fprintf(out, "prompt: %d tokens (%d cached) in %.1f ms\n", s->n_prompt, s->n_prompt_cached, s->prompt_ms);
    fprintf(out, "decode: %d tokens in %.1f ms, %.2f tokens/s\n", s->n_predicted, s->decode_ms,
            specd_stats_decode_tokens_per_s(s));
    fprintf(out, "steps: %d, drafted: %d, accepted: %d (%.1f%%), mean accepted per step: %.2f\n",
            s->n_steps, s->n_drafted, s->n_accepted, 100.0 * specd_stats_acceptance_rate(s),
            specd_stats_mean_accepted_per_step(s));
    if (s->n_tree_steps > 0)
        fprintf(out, "tree steps: %d, drafted: %d, accepted: %d, mean accepted per tree step: %.2f\n",
                s->n_tree_steps, s->n_tree_drafted, s->n_tree_accepted, (double)s->n_tree_accepted / s->n_tree_steps);
    fprintf(out, "time: drafting %.1f ms, verifying %.1f ms, sampling %.1f ms\n", s->draft_ms,
            s->verify_ms, s->sample_ms);
    print_graphs(out, &startup->graphs);
    if (strcmp(spec, "none") != 0) print_draft_lengths(out, s);
    print_drafters(out, s);
}

static json_t *int_array(const int32_t *v, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

/* Acceptance by draft position, up to the last position ever drafted. */
static json_t *acceptance_by_position(const specd_stats *s) {
    json_t *a = json_array();
    for (int i = 0; a && i < SPECD_STATS_MAX_DRAFT && s->drafted_at[i]; i++)
        json_array_append_new(a, json_real((double)s->accepted_at[i] / s->drafted_at[i]));
    return a;
}

static int hist_len(const specd_stats *s) {
    int n = SPECD_STATS_MAX_DRAFT;
    while (n > 0 && s->draft_len_hist[n - 1] == 0) n--;
    return n;
}

/* The cost model: target pass times by size (index n-1) up to the last measured one. */
static json_t *costs_json(const specd_stats *s) {
    int n = SPECD_STATS_MAX_DRAFT;
    while (n > 0 && s->verify_cost_ms[n - 1] <= 0.0) n--;
    json_t *verify = json_array();
    for (int i = 0; verify && i < n; i++) json_array_append_new(verify, json_real(s->verify_cost_ms[i]));
    return json_pack("{s:o, s:f, s:f, s:i}", "verify_ms", verify, "draft_token_ms", s->draft_token_ms, "resize_ms",
                     s->resize_ms, "held_draft_length", s->held_draft_length);
}

static json_t *drafters_json(const specd_stats *s) {
    json_t *a = json_array();
    for (int32_t i = 0; a && i < s->n_drafters; i++) {
        const specd_drafter_stats *d = &s->drafters[i];
        json_array_append_new(a, json_pack("{s:s, s:i, s:i, s:i, s:i, s:f, s:f}",
                                           "type", specd_spec_type_name(d->type),
                                           "n_calls", d->n_calls,
                                           "n_chosen", d->n_chosen,
                                           "n_drafted", d->n_drafted,
                                           "n_accepted", d->n_accepted,
                                           "acceptance_rate", d->n_drafted ? (double)d->n_accepted / d->n_drafted : 0.0,
                                           "draft_ms", d->draft_ms));
    }
    return a;
}

static json_t *speculative_json(const specd_stats *s, const char *spec) {
    int n_pos = 0;
    while (n_pos < SPECD_STATS_MAX_DRAFT && s->drafted_at[n_pos]) n_pos++;
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:f, s:i, s:i, s:f, s:f, s:o, s:o, s:o, s:o, s:o, s:o}",
                     "type", spec,
                     "n_steps", s->n_steps,
                     "n_tree_steps", s->n_tree_steps,
                     "n_tree_drafted", s->n_tree_drafted,
                     "n_tree_accepted", s->n_tree_accepted,
                     "mean_accepted_per_tree_step",
                     s->n_tree_steps ? (double)s->n_tree_accepted / s->n_tree_steps : 0.0,
                     "n_drafted", s->n_drafted,
                     "n_accepted", s->n_accepted,
                     "acceptance_rate", specd_stats_acceptance_rate(s),
                     "mean_accepted_per_step", specd_stats_mean_accepted_per_step(s),
                     "draft_lengths", int_array(s->draft_len_hist, hist_len(s)),
                     "acceptance_by_position", acceptance_by_position(s),
                     "drafted_at", int_array(s->drafted_at, n_pos),
                     "accepted_at", int_array(s->accepted_at, n_pos),
                     "costs", costs_json(s),
                     "drafters", drafters_json(s));
}

static json_t *timings_json(const specd_stats *s) {
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}",
                     "prompt_ms", s->prompt_ms,
                     "decode_ms", s->decode_ms,
                     "decode_tokens_per_s", specd_stats_decode_tokens_per_s(s),
                     "draft_ms", s->draft_ms,
                     "verify_ms", s->verify_ms,
                     "sample_ms", s->sample_ms);
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when it is not valid. */
static size_t utf8_sequence_length(const unsigned char *s) {
    size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 2 && s[0] < 0xC2) return 0; /* overlong */
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return n;
}

/* JSON strings must be UTF-8: a token cut inside a character (the generation stopped there)
 * becomes U+FFFD instead of making the whole output unprintable. */
static char *valid_utf8(const char *text) {
    size_t len = strlen(text), o = 0;
    char *out = malloc(len * 3 + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_sequence_length((const unsigned char *)text + i);
        if (n == 0) {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
            continue;
        }
        memcpy(out + o, text + i, n);
        o += n;
        i += n;
    }
    out[o] = '\0';
    return out;
}

/* Where the time before the first generated token went. */
static json_t *startup_json(const cli_startup *st, const specd_stats *s) {
    const specd_calibration_info *c = &st->calibration;
    return json_pack("{s:f, s:f, s:f, s:s, s:s?, s:s?, s:i, s:f, s:f}",
                     "load_ms", st->load_ms,
                     "warmup_ms", st->warmup_ms,
                     "calibration_ms", c->ms,
                     "calibration", calibration_source_name(c->source),
                     "calibration_cache", c->path,
                     "calibration_note", c->note,
                     "calibration_sizes_known", c->n_sizes_known,
                     "prompt_ms", s->prompt_ms,
                     "total_ms", st->total_ms);
}

static json_t *placement_json(const specd_placement_info *p) {
    if (!p->devices) return json_null();
    return json_pack("{s:s, s:i, s:i}", "devices", p->devices, "n_layers", p->n_layers, "n_layers_offloaded",
                     p->n_layers_offloaded);
}

static json_t *graph_counts_json(specd_graph_counts c) {
    return json_pack("{s:I, s:I}", "passes", (json_int_t)c.passes, "reused", (json_int_t)c.reused);
}

/* "graphs": how often llama.cpp reused each context's graph during the generation (specd.h). */
static json_t *graphs_json(const specd_graph_info *g) {
    return json_pack("{s:o, s:o}", "target", graph_counts_json(g->target), "draft", graph_counts_json(g->draft));
}

void cli_print_invariance_note(FILE *out, const specd_engine *engine) {
    specd_invariance_info inv = specd_engine_invariance(engine);
    if (!inv.invariant) fprintf(out, "specd: note: verification is not batch-invariant: %s\n", inv.note);
}

bool cli_print_json(FILE *out, const char *raw_text, const specd_result *r, const char *spec,
                    const cli_startup *startup, const specd_engine *engine) {
    const specd_stats *s = &r->stats;
    char *text = valid_utf8(raw_text);
    if (!text) return false;
    json_t *root = json_pack("{s:s, s:i, s:i, s:i, s:s, s:{s:i, s:i}, s:o, s:o, s:o, s:{s:o, s:o}, s:o, s:o}",
                             "text", text,
                             "n_prompt", s->n_prompt,
                             "n_prompt_cached", s->n_prompt_cached,
                             "n_predicted", s->n_predicted,
                             "stop_reason", specd_stop_reason_name(r->stop_reason),
                             "context_shift", "n_shifts", s->n_context_shifts, "n_discarded",
                             s->n_context_discarded,
                             "speculative", speculative_json(s, spec),
                             "timings", timings_json(s),
                             "startup", startup_json(startup, s),
                             "placement", "target", placement_json(&startup->target), "draft",
                             placement_json(&startup->draft),
                             "batch_invariant", api_invariance_json(engine),
                             "graphs", graphs_json(&startup->graphs));
    free(text);
    if (!root) return false;
    int rc = json_dumpf(root, out, JSON_COMPACT | JSON_ENSURE_ASCII);
    fputc('\n', out);
    json_decref(root);
    return rc == 0;
}
