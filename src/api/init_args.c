/* init_args.c - the settings of `init`: a llama.cpp-style command line ("-m model.gguf -c 2048"),
 * an argument list, or a JSON object, all strictly checked into engine parameters; and the model
 * paths of a caller confined to a models directory. */
#define _XOPEN_SOURCE 700 /* strdup */
#include "api.h"

#include "confine.h"

#include "../util/flag_names.h"
#include "../util/lora_arg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void api_engine_settings_free(api_engine_settings *s) {
    free(s->model);
    free(s->model_draft);
    free(s->mmproj);
    free(s->mmproj_draft);
    free(s->alias);
    free(s->calibration_cache);
    free(s->devices);
    free(s->devices_draft);
    free(s->rpc_servers);
    for (int32_t i = 0; i < SPECD_MAX_LORA; i++) {
        if (s->lora) free((char *)s->lora[i].path);
        if (s->lora_draft) free((char *)s->lora_draft[i].path);
    }
    free(s->lora);
    free(s->lora_draft);
    memset(s, 0, sizeof *s);
}

/* ---- command line ---------------------------------------------------------------------------- */

/* Splits a command line into words, shell-like: blanks separate, '...' and "..." quote,
 * backslash escapes the next character. Returns a JSON array of strings, or NULL with err set. */
static json_t *split_command_line(const char *cmd, api_error *err) {
    json_t *words = json_array();
    size_t n = strlen(cmd);
    char *word = malloc(n + 1);
    if (!words || !word) {
        free(word);
        json_decref(words);
        api_fail(err, API_INTERNAL_ERROR, "cmd", "out of memory splitting the command line");
        return NULL;
    }
    size_t i = 0;
    while (i < n) {
        while (i < n && (cmd[i] == ' ' || cmd[i] == '\t' || cmd[i] == '\n' || cmd[i] == '\r')) i++;
        if (i >= n) break;
        size_t len = 0;
        char quote = 0;
        for (; i < n; i++) {
            char c = cmd[i];
            if (quote && c == quote) quote = 0;
            else if (!quote && (c == '"' || c == '\'')) quote = c;
            else if (c == '\\' && quote != '\'' && i + 1 < n) word[len++] = cmd[++i];
            else if (!quote && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) break;
            else word[len++] = c;
        }
        if (quote) {
            free(word);
            json_decref(words);
            api_fail(err, API_INVALID_PARAMS, "cmd", "init: the command line has an unclosed %c quote", quote);
            return NULL;
        }
        json_array_append_new(words, json_stringn(word, len));
    }
    free(word);
    return words;
}

typedef struct arg_cursor {
    const char *const *words;
    size_t n, i;
    api_error *err;
} arg_cursor;

static const char *next_value(arg_cursor *c, const char *flag) {
    if (c->i >= c->n) {
        api_fail(c->err, API_INVALID_PARAMS, flag, "init: %s needs a value", flag);
        return NULL;
    }
    return c->words[c->i++];
}

static bool next_int(arg_cursor *c, const char *flag, long min, long max, int32_t *out) {
    const char *s = next_value(c, flag);
    if (!s) return false;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return api_fail(c->err, API_INVALID_PARAMS, flag, "init: %s expects an integer from %ld to %ld, got '%s'",
                        flag, min, max, s);
    *out = (int32_t)v;
    return true;
}

static bool set_string(char **slot, const char *value, api_error *err, const char *field) {
    free(*slot);
    *slot = strdup(value);
    return *slot ? true : api_fail(err, API_INTERNAL_ERROR, field, "out of memory");
}

static bool flash_attn_value(const char *v, specd_flash_attn *out, api_error *err, const char *field) {
    if (specd_flash_attn_parse(v, out)) return true;
    return api_fail(err, API_INVALID_PARAMS, field, "init: %s expects \"on\", \"off\" or \"auto\", got '%s'",
                    field, v);
}

static bool load_mode_value(const char *v, specd_load_mode *out, api_error *err, const char *field) {
    if (specd_load_mode_parse(v, out)) return true;
    return api_fail(err, API_INVALID_PARAMS, field, "init: %s expects \"auto\", \"none\", \"mmap\", \"mlock\", "
                    "\"mmap+mlock\" or \"dio\" (llama.cpp's load modes), got '%s'", field, v);
}

static bool draft_hold_value(const char *v, specd_draft_hold *out, api_error *err, const char *field) {
    if (specd_draft_hold_parse(v, out)) return true;
    return api_fail(err, API_INVALID_PARAMS, field, "init: %s expects \"auto\", \"on\" or \"off\", got '%s'", field, v);
}

static bool cache_type_value(const char *v, specd_cache_type *out, api_error *err, const char *field) {
    if (specd_cache_type_parse(v, out)) return true;
    return api_fail(err, API_INVALID_PARAMS, field, "init: %s expects \"f32\", \"f16\", \"bf16\", \"q8_0\", "
                    "\"q4_0\", \"q4_1\", \"iq4_nl\", \"q5_0\" or \"q5_1\", got '%s'", field, v);
}

/* -ctk, -ctv, -ctkd, -ctvd (llama.cpp's names): the field they set, or NULL. */
static specd_cache_type *cache_type_flag(specd_engine_params *p, const char *f) {
    if (!strcmp(f, "-ctk") || !strcmp(f, "--cache-type-k")) return &p->cache_type_k;
    if (!strcmp(f, "-ctv") || !strcmp(f, "--cache-type-v")) return &p->cache_type_v;
    if (!strcmp(f, "-ctkd") || !strcmp(f, "--cache-type-k-draft") || !strcmp(f, "--spec-draft-type-k"))
        return &p->cache_type_k_draft;
    if (!strcmp(f, "-ctvd") || !strcmp(f, "--cache-type-v-draft") || !strcmp(f, "--spec-draft-type-v"))
        return &p->cache_type_v_draft;
    return NULL;
}

static bool on_off_value(const char *v, bool *out, api_error *err, const char *field) {
    if (v && (!strcmp(v, "on") || !strcmp(v, "off"))) {
        *out = !strcmp(v, "on");
        return true;
    }
    return api_fail(err, API_INVALID_PARAMS, field, "init: %s expects \"on\" or \"off\", got '%s'", field, v);
}

/* The drafters a list names, in order (none for AUTO). */
static int32_t listed_types(const specd_spec_params *sp, specd_spec_type *out) {
    if (sp->n_types > 0) {
        memcpy(out, sp->types, (size_t)sp->n_types * sizeof *out);
        return sp->n_types;
    }
    if (sp->type == SPECD_SPEC_AUTO) return 0;
    out[0] = sp->type;
    return 1;
}

/* --spec-type LIST (llama-server's: "draft-mtp", "ngram-mod,draft-simple", ...): what every
 * request that names no drafters drafts with, as llama-server applies it; a list that names MTP
 * loads the target's MTP layers. Repeated, the lists add up (as llama-server's), each type once. */
static bool spec_type_value(const char *v, api_engine_settings *s, api_error *err, const char *field) {
    specd_spec_params parsed = s->speculative;
    specd_spec_type before[SPECD_SPEC_MAX_TYPES], added[SPECD_SPEC_MAX_TYPES];
    const char *names[2 * SPECD_SPEC_MAX_TYPES];
    char *message = NULL;
    bool ok = specd_spec_params_parse_types(&parsed, v, &message) == SPECD_OK;
    int32_t n = ok ? listed_types(&s->speculative, before) : 0, n_added = ok ? listed_types(&parsed, added) : 0;
    for (int32_t i = 0; i < n; i++) names[i] = specd_spec_type_name(before[i]);
    for (int32_t i = 0; i < n_added; i++) {
        bool seen = false;
        for (int32_t j = 0; j < n; j++) seen |= before[j] == added[i];
        if (!seen) names[n++] = specd_spec_type_name(added[i]);
    }
    ok = ok && specd_spec_params_set_types(&s->speculative, names, n, &message) == SPECD_OK;
    if (!ok) {
        api_fail(err, API_INVALID_PARAMS, field, "init: %s: %s", field, message ? message : "");
        specd_free(message);
        return false;
    }
    if (specd_spec_params_need(&s->speculative, SPECD_SPEC_NEEDS_TARGET_NEXTN)) s->params.mtp = true;
    return true;
}

/* Flags with a value that change nothing here: a server's address (meaningless in-process), and
 * llama.cpp's --defrag-thold (deprecated there: its cache no longer needs defragmenting). */
static bool is_ignored_flag_with_value(const char *f) {
    return !strcmp(f, "--host") || !strcmp(f, "--port") || !strcmp(f, "-dt") || !strcmp(f, "--defrag-thold");
}

static bool gpu_layers_value(const char *v, int32_t *out, api_error *err, const char *field) {
    if (specd_gpu_layers_parse(v, out)) return true;
    return api_fail(err, API_INVALID_PARAMS, field, "init: %s expects a layer count, -1, \"all\" or \"auto\", got '%s'",
                    field, v);
}

/* -ngl / -ngld and their long names (llama.cpp's). */
static int parse_gpu_layers_flag(arg_cursor *c, const char *f, api_engine_settings *s) {
    bool target = !strcmp(f, "-ngl") || !strcmp(f, "--n-gpu-layers") || !strcmp(f, "--gpu-layers");
    bool draft = !strcmp(f, "-ngld") || !strcmp(f, "--n-gpu-layers-draft") || !strcmp(f, "--gpu-layers-draft") ||
                 !strcmp(f, "--spec-draft-ngl");
    if (!target && !draft) return 0;
    const char *v = next_value(c, f);
    int32_t *slot = target ? &s->params.n_gpu_layers : &s->params.n_gpu_layers_draft;
    if (!v || !gpu_layers_value(v, slot, c->err, f)) return -1;
    s->gpu_layers_given |= *slot != 0; /* 0 asks for the CPU: nothing to say */
    return 1;
}

/* --device, --device-draft, --rpc (llama.cpp's names). */
static int parse_device_flag(arg_cursor *c, const char *f, api_engine_settings *s) {
    char **slot = !strcmp(f, "-dev") || !strcmp(f, "--device")         ? &s->devices
                  : !strcmp(f, "-devd") || !strcmp(f, "--device-draft") || !strcmp(f, "--spec-draft-device")
                      ? &s->devices_draft
                  : !strcmp(f, "--rpc")                                 ? &s->rpc_servers
                                                                        : NULL;
    if (!slot) return 0;
    const char *v = next_value(c, f);
    return v && set_string(slot, v, c->err, f) ? 1 : -1;
}

/* Appends a copy of each adapter of items[0..k) to list (the settings own the paths). */
static bool keep_adapters(arg_cursor *c, const char *f, const specd_lora_adapter *items, int32_t k,
                          specd_lora_adapter *list, int32_t *n) {
    for (int32_t i = 0; i < k; i++) {
        char *copy = strdup(items[i].path);
        if (!copy) return api_fail(c->err, API_INTERNAL_ERROR, f, "out of memory");
        list[(*n)++] = (specd_lora_adapter){copy, items[i].scale};
    }
    return true;
}

/* --lora FILE[,FILE...], --lora-scaled FILE:SCALE[,...] or FILE SCALE (llama-server's, in its
 * current and older forms), --lora-draft FILE[,FILE...] (specd's, for the draft),
 * --lora-init-without-apply; 0 when f is none of them. */
static int parse_lora_flag(arg_cursor *c, const char *f, api_engine_settings *s) {
    specd_engine_params *p = &s->params;
    if (!strcmp(f, "--lora-init-without-apply")) return p->lora_init_without_apply = true;
    bool draft = !strcmp(f, "--lora-draft"), scaled = !strcmp(f, "--lora-scaled");
    if (!draft && !scaled && strcmp(f, "--lora")) return 0;
    specd_lora_adapter **list_slot = draft ? &s->lora_draft : &s->lora;
    if (!*list_slot && !(*list_slot = calloc(SPECD_MAX_LORA, sizeof **list_slot)))
        return api_fail(c->err, API_INTERNAL_ERROR, f, "out of memory") ? 1 : -1;
    int32_t *n = draft ? &p->n_lora_draft : &p->n_lora;
    p->lora = s->lora;
    p->lora_draft = s->lora_draft;
    const char *value = next_value(c, f);
    if (!value) return -1;
    specd_lora_adapter items[SPECD_MAX_LORA];
    char why[300];
    if (scaled && !lora_arg_is_scaled_list(value)) { /* llama.cpp's older form: FILE SCALE */
        const char *text = next_value(c, f);
        if (!text) return -1;
        if (!lora_arg_scale(text, &items[0].scale))
            return api_fail(c->err, API_INVALID_PARAMS, f, "init: --lora-scaled expects FILE:SCALE or FILE SCALE, got "
                            "the scale '%s'", text) ? 1 : -1;
        items[0].path = value;
        if (*n == SPECD_MAX_LORA)
            return api_fail(c->err, API_INVALID_PARAMS, f, "init: %s: at most %d adapters", f, SPECD_MAX_LORA) ? 1 : -1;
        return keep_adapters(c, f, items, 1, *list_slot, n) ? 1 : -1;
    }
    char *buffer = strdup(value); /* split in place, then each path copied */
    if (!buffer) return api_fail(c->err, API_INTERNAL_ERROR, f, "out of memory") ? 1 : -1;
    int32_t end = *n; /* items[*n..end): lora_arg_split counts the adapters already given */
    bool ok = lora_arg_split(f, buffer, scaled, items, &end, why, sizeof why);
    if (ok) ok = keep_adapters(c, f, items + *n, end - *n, *list_slot, n);
    else api_fail(c->err, API_INVALID_PARAMS, f, "init: %s", why);
    free(buffer);
    return ok ? 1 : -1;
}

static bool next_float(arg_cursor *c, const char *flag, float *out) {
    const char *v = next_value(c, flag);
    if (!v) return false;
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || d != d)
        return api_fail(c->err, API_INVALID_PARAMS, flag, "init: %s expects a number, got '%s'", flag, v);
    *out = (float)d;
    return true;
}

/* llama.cpp keeps an n-gram length per model-free type; specd has one for ngram-simple and
 * ngram-map (specd_spec_params.ngram_n), which each of them sets. */
static bool is_ngram_size_flag(const char *f) {
    return !strcmp(f, "--spec-ngram-simple-size-n") || !strcmp(f, "--spec-ngram-size-n") ||
           !strcmp(f, "--spec-ngram-map-k-size-n") || !strcmp(f, "--spec-ngram-map-k4v-size-n");
}

/* The hits an ngram-map continuation needs before it is drafted (specd_spec_params.ngram_min_hits). */
static bool is_ngram_map_hits_flag(const char *f) {
    return !strcmp(f, "--spec-ngram-min-hits") || !strcmp(f, "--spec-ngram-map-k-min-hits") ||
           !strcmp(f, "--spec-ngram-map-k4v-min-hits");
}

/* llama-server 0.5.0's drafting flags that specd does not take, each with the reason (a user moving
 * a command line over reads why, not "unknown option"; docs/cli.md lists them). */
static const struct {
    const char *flags[24]; /* NULL-terminated */
    const char *why;
} refused_llama_flags[] = {
    {{"--spec-draft-threads", "-td", "--threads-draft", "--spec-draft-threads-batch", "-tbd", "--threads-batch-draft",
      NULL},
     "specd's draft runs on the target's threads (-t, -tb): it drafts and verifies in turn, never at once"},
    {{"--spec-draft-cpu-mask", "-Cd", "--cpu-mask-draft", "--spec-draft-cpu-mask-batch", "-Cbd", "--cpu-mask-batch-draft",
      "--spec-draft-cpu-range", "-Crd", "--cpu-range-draft", "--spec-draft-cpu-range-batch", "--spec-draft-cpu-strict",
      "--cpu-strict-draft", "--spec-draft-cpu-strict-batch", "--cpu-strict-batch-draft", "--spec-draft-poll",
      "--poll-draft", "--spec-draft-poll-batch", "--poll-batch-draft", NULL},
     "the draft has no thread pool of its own to place: it runs on the target's threads"},
    {{"--spec-draft-prio", "--prio-draft", "--spec-draft-prio-batch", "--prio-batch-draft", NULL},
     "the draft has no thread pool of its own to give a priority: it runs on the target's threads"},
    {{"--spec-draft-cpu-moe", "-cmoed", "--cpu-moe-draft", "--spec-draft-n-cpu-moe", "--spec-draft-ncmoe", "-ncmoed",
      "--n-cpu-moe-draft", "--spec-draft-override-tensor", "-otd", "--override-tensor-draft", NULL},
     "specd places the draft by whole layers (-ngld, --device-draft), not by tensor"},
    {{"--spec-draft-hf", "-hfd", "-hfrd", "--hf-repo-draft", "--fim-qwen-7b-spec", "--fim-qwen-14b-spec", NULL},
     "specd downloads nothing: give the draft model's file with -md"},
    {{"--spec-draft-backend-sampling", "--no-spec-draft-backend-sampling", NULL},
     "specd samples drafts itself, as exact verification needs the draft's distribution"},
    {{"--spec-ngram-size-m", "--spec-ngram-simple-size-m", "--spec-ngram-map-k-size-m", "--spec-ngram-map-k4v-size-m", NULL},
     "specd's model-free drafters draft up to --draft-max tokens, as the draft model does"},
    {{"--spec-ngram-mod-n-match", "--spec-ngram-mod-n-min", "--spec-ngram-mod-n-max", NULL},
     "specd's ngram-mod runs with its own settings; its drafts are bounded by --draft-max"},
    {{"--spec-ngram-simple-min-hits", NULL},
     "specd's ngram-simple drafts from the latest occurrence of its n-gram; hits apply to ngram-map "
     "(--spec-ngram-min-hits)"},
    {{"--spec-synth-len", "--spec-synth-rates", NULL},
     "synthetic acceptance is for benchmarking llama.cpp's own drafting; specd measures real drafts"},
};

/* A llama-server flag specd refuses, with why; false when f is none of them. */
static bool refused_llama_flag(const char *f, api_error *err) {
    for (size_t i = 0; i < sizeof refused_llama_flags / sizeof *refused_llama_flags; i++)
        for (size_t j = 0; refused_llama_flags[i].flags[j]; j++)
            if (!strcmp(f, refused_llama_flags[i].flags[j]))
                return !api_fail(err, API_INVALID_PARAMS, f, "init: %s is llama-server's, and specd does not take it: %s",
                                 f, refused_llama_flags[i].why);
    return false;
}

/* llama-server's drafting flags (its 0.5.0 names, and the older ones specd run takes): the engine's
 * longest draft, and what a request that sets none drafts with (speculative, checked once all
 * flags are in); 0 when f is none of them. --draft-max (--draft) N is both the engine's cap and a
 * request's default, as /props shows it; --spec-draft-n-max 0, as llama-server, drafts nothing
 * unless a request asks (the cap stays the engine's default). */
static int parse_spec_flag(arg_cursor *c, const char *f, api_engine_settings *s) {
    specd_spec_params *sp = &s->speculative;
    const char *v;
    bool ok;
    if (!strcmp(f, "--draft-max") || !strcmp(f, "--draft") || !strcmp(f, "--draft-n") || !strcmp(f, "--spec-draft-n-max")) {
        int32_t n = 0;
        ok = next_int(c, f, strcmp(f, "--spec-draft-n-max") ? 1 : 0, 256, &n);
        if (ok) s->params.draft_max = sp->draft_max = n;
    } else if (!strcmp(f, "--draft-min") || !strcmp(f, "--draft-n-min") || !strcmp(f, "--spec-draft-n-min")) {
        ok = next_int(c, f, 0, 256, &sp->draft_min);
    } else if (!strcmp(f, "--draft-p-min") || !strcmp(f, "--spec-draft-p-min")) {
        ok = next_float(c, f, &sp->draft_p_min);
    } else if (!strcmp(f, "--draft-p-split") || !strcmp(f, "--spec-draft-p-split")) {
        ok = next_float(c, f, &sp->draft_p_split);
    } else if (is_ngram_size_flag(f)) {
        ok = next_int(c, f, 1, 1024, &sp->ngram_n);
    } else if (is_ngram_map_hits_flag(f)) {
        ok = next_int(c, f, 1, 1 << 20, &sp->ngram_min_hits);
    } else if (!strcmp(f, "--spec-default")) { /* llama-server's: ngram-mod beside what else drafts */
        ok = spec_type_value("ngram-mod", s, c->err, f);
    } else if (!strcmp(f, "--spec-type")) {
        ok = (v = next_value(c, f)) && spec_type_value(v, s, c->err, f);
    } else if (!strcmp(f, "--context-shift") || !strcmp(f, "--no-context-shift")) {
        s->context_shift = !strcmp(f, "--context-shift");
        ok = s->context_shift_given = true;
    } else {
        return 0;
    }
    return ok ? 1 : -1;
}

static bool pooling_value(const char *v, specd_pooling *out, api_error *err, const char *field) {
    if (specd_pooling_parse(v, out)) return true;
    return api_fail(err, API_INVALID_PARAMS, field, "init: %s must be none, mean, cls, last or rank (got '%s')", field, v);
}

/* llama-server's embedding flags: --embedding (--embeddings) gives the engine its embedding
 * context, --pooling chooses its pooling (the model's own otherwise), --rerank (--reranking) is
 * both with rank pooling, --embd-normalize N the requests' default normalization; 0 when f is none
 * of them. */
static int parse_embedding_flag(arg_cursor *c, const char *f, api_engine_settings *s) {
    specd_engine_params *p = &s->params;
    const char *v;
    if (!strcmp(f, "--embd-normalize")) return next_int(c, f, -1, 1000, &s->embd_normalize) ? 1 : -1;
    if (!strcmp(f, "--embedding") || !strcmp(f, "--embeddings")) return p->embedding = true;
    if (!strcmp(f, "--rerank") || !strcmp(f, "--reranking")) {
        p->pooling = SPECD_POOLING_RANK;
        return p->embedding = true;
    }
    if (strcmp(f, "--pooling") != 0) return 0;
    return (v = next_value(c, f)) && pooling_value(v, &p->pooling, c->err, f) ? 1 : -1;
}

static bool parse_flag(arg_cursor *c, const char *f, api_engine_settings *s) {
    specd_engine_params *p = &s->params;
    const char *v;
    if (!strcmp(f, "-m") || !strcmp(f, "--model"))
        return (v = next_value(c, f)) && set_string(&s->model, v, c->err, f);
    if (!strcmp(f, "-md") || !strcmp(f, "--model-draft") || !strcmp(f, "--spec-draft-model"))
        return (v = next_value(c, f)) && set_string(&s->model_draft, v, c->err, f);
    if (!strcmp(f, "--mmproj") || !strcmp(f, "-mm"))
        return (v = next_value(c, f)) && set_string(&s->mmproj, v, c->err, f);
    if (!strcmp(f, "--mmproj-draft"))
        return (v = next_value(c, f)) && set_string(&s->mmproj_draft, v, c->err, f);
    if (!strcmp(f, "-a") || !strcmp(f, "--alias"))
        return (v = next_value(c, f)) && set_string(&s->alias, v, c->err, f);
    if (!strcmp(f, "--calibration-cache")) { /* a file or directory (specd_engine_params), or "off" */
        if (!(v = next_value(c, f))) return false;
        s->calibration_given = true;
        free(s->calibration_cache);
        s->calibration_cache = NULL;
        return !strcmp(v, "off") || set_string(&s->calibration_cache, v, c->err, f);
    }
    if (!strcmp(f, "-c") || !strcmp(f, "--ctx-size")) return next_int(c, f, 0, 1 << 24, &p->n_ctx);
    if (!strcmp(f, "-t") || !strcmp(f, "--threads")) return next_int(c, f, 1, 1024, &p->n_threads);
    if (!strcmp(f, "-b") || !strcmp(f, "--batch-size")) return next_int(c, f, 1, 1 << 20, &p->n_batch);
    if (!strcmp(f, "-ub") || !strcmp(f, "--ubatch-size")) return next_int(c, f, 1, 1 << 20, &p->n_ubatch);
    if (!strcmp(f, "-tb") || !strcmp(f, "--threads-batch")) return next_int(c, f, 1, 1024, &p->n_threads_batch);
    int r = parse_spec_flag(c, f, s);
    if (r != 0) return r > 0;
    if (!strcmp(f, "-np") || !strcmp(f, "--parallel"))
        return (s->parallel_given = true) && next_int(c, f, 1, SPECD_MAX_PARALLEL, &p->n_parallel);
    if (!strcmp(f, "--ctx-per-slot")) return next_int(c, f, 16, 1 << 24, &p->n_ctx_per_slot);
    if (!strcmp(f, "--queue")) return next_int(c, f, 0, 1 << 20, &s->n_queue);
    if (!strcmp(f, "--verbose") || !strcmp(f, "-v")) return p->verbose = true;
    if (!strcmp(f, "-lm") || !strcmp(f, "--load-mode")) return (v = next_value(c, f)) && load_mode_value(v, &p->load_mode, c->err, f);
    if (!strcmp(f, "--draft-hold")) return (v = next_value(c, f)) && draft_hold_value(v, &p->draft_hold, c->err, f);
    if (!strcmp(f, "--warmup")) return !(s->no_warmup = false);
    if (!strcmp(f, "--no-warmup")) return s->no_warmup = true;
    /* llama.cpp's unified KV cache: specd's is unified wherever a context keeps several sequences */
    if (!strcmp(f, "-kvu") || !strcmp(f, "--kv-unified")) return true;
    if (!strcmp(f, "-fa") || !strcmp(f, "--flash-attn"))
        return (s->flash_attn_given = true) && (v = next_value(c, f)) && flash_attn_value(v, &p->flash_attn, c->err, f);
    specd_cache_type *cache_type = cache_type_flag(p, f);
    if (cache_type) return (v = next_value(c, f)) && cache_type_value(v, cache_type, c->err, f);
    if (!strcmp(f, "--batch-invariant")) return (v = next_value(c, f)) && on_off_value(v, &p->batch_invariant, c->err, f);
    r = parse_embedding_flag(c, f, s);
    if (r != 0) return r > 0;
    r = parse_gpu_layers_flag(c, f, s);
    if (r == 0) r = parse_device_flag(c, f, s);
    if (r == 0) r = parse_lora_flag(c, f, s);
    if (r != 0) return r > 0;
    if (is_ignored_flag_with_value(f)) return next_value(c, f) != NULL;
    if (refused_llama_flag(f, c->err)) return false;
    return api_fail(c->err, API_INVALID_PARAMS, f,
                    "init: unknown option '%s' (known: -m, -md, -a, -c, -t, -tb, -b, -ub, --draft-max, --draft-min, --draft-p-min, "
                    "--spec-draft-model, --spec-draft-n-max, --spec-draft-n-min, --spec-draft-p-min, "
                    "--spec-ngram-simple-size-n, --context-shift, --no-context-shift, -fa, -ctk, -ctv, -ctkd, -ctvd, "
                    "--batch-invariant, --lora, --lora-scaled, --lora-init-without-apply, --lora-draft, "
                    "-ngl, -ngld, --device, --device-draft, --rpc, -np, --ctx-per-slot, --queue, "
                    "--calibration-cache, --spec-type, --warmup, --no-warmup, --load-mode, --draft-hold, --embedding, "
                    "--pooling, --rerank, --embd-normalize, --verbose)", f);
}

static bool parse_words(const char *const *words, size_t n, api_engine_settings *s, api_error *err) {
    arg_cursor c = {words, n, 0, err};
    while (c.i < c.n)
        if (!parse_flag(&c, c.words[c.i++], s)) return false;
    return true;
}

/* A JSON array of strings (init's "args", or a split command line) as flags. */
static bool parse_args(json_t *args, api_engine_settings *s, api_error *err) {
    size_t n = json_array_size(args);
    const char **words = calloc(n + 1, sizeof *words);
    if (!words) return api_fail(err, API_INTERNAL_ERROR, "args", "out of memory");
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        words[i] = json_string_value(json_array_get(args, i));
        if (!words[i]) ok = api_fail(err, API_INVALID_PARAMS, "args", "init: args must be an array of strings");
    }
    ok = ok && parse_words(words, n, s, err);
    free(words);
    return ok;
}

/* ---- JSON object ----------------------------------------------------------------------------- */

static bool copy_string_field(api_params *rp, const char *name, char **slot) {
    const char *v = NULL;
    int got = api_get_string(rp, name, &v);
    if (got < 0) return false;
    return got == 0 || set_string(slot, v, rp->err, name);
}

/* "flash_attn": "on" | "off" | "auto", or true / false. */
static bool read_flash_attn(api_params *rp, specd_flash_attn *out) {
    json_t *v = api_get_value(rp, "flash_attn");
    if (!v) return true;
    if (json_is_boolean(v)) {
        *out = json_is_true(v) ? SPECD_FLASH_ATTN_ON : SPECD_FLASH_ATTN_OFF;
        return true;
    }
    if (json_is_string(v)) return flash_attn_value(json_string_value(v), out, rp->err, "flash_attn");
    return api_fail(rp->err, API_INVALID_PARAMS, "flash_attn",
                    "init: flash_attn must be \"on\", \"off\", \"auto\" or a boolean");
}

/* "cache_type_k" and the others: a type name as -ctk takes. */
static bool read_cache_type(api_params *rp, const char *name, specd_cache_type *out) {
    const char *v = NULL;
    int got = api_get_string(rp, name, &v);
    if (got < 0) return false;
    return got == 0 || cache_type_value(v, out, rp->err, name);
}

static bool read_cache_types(api_params *rp, specd_engine_params *p) {
    return read_cache_type(rp, "cache_type_k", &p->cache_type_k) && read_cache_type(rp, "cache_type_v", &p->cache_type_v) &&
           read_cache_type(rp, "cache_type_k_draft", &p->cache_type_k_draft) &&
           read_cache_type(rp, "cache_type_v_draft", &p->cache_type_v_draft) &&
           api_get_bool(rp, "batch_invariant", &p->batch_invariant) >= 0;
}

/* "n_gpu_layers": an integer from -1, or "all" / "auto". */
static bool read_gpu_layers(api_params *rp, const char *name, int32_t *out, bool *given) {
    json_t *v = api_get_value(rp, name);
    if (!v) return true;
    if (json_is_string(v)) {
        if (!gpu_layers_value(json_string_value(v), out, rp->err, name)) return false;
        *given |= *out != 0;
        return true;
    }
    if (json_is_integer(v) && json_integer_value(v) >= -1 && json_integer_value(v) <= 100000) {
        *out = (int32_t)json_integer_value(v);
        *given |= *out != 0; /* 0 asks for the CPU: nothing to say */
        return true;
    }
    return api_fail(rp->err, API_INVALID_PARAMS, name, "init: %s must be a layer count from -1, \"all\" or \"auto\"",
                    name);
}

/* Where the layers go: the JSON names of -ngl, -ngld, --device, --device-draft, --rpc. */
static bool parse_placement_object(api_params *rp, api_engine_settings *s) {
    specd_engine_params *p = &s->params;
    return read_gpu_layers(rp, "n_gpu_layers", &p->n_gpu_layers, &s->gpu_layers_given) &&
           read_gpu_layers(rp, "n_gpu_layers_draft", &p->n_gpu_layers_draft, &s->gpu_layers_given) &&
           copy_string_field(rp, "device", &s->devices) && copy_string_field(rp, "device_draft", &s->devices_draft) &&
           copy_string_field(rp, "rpc", &s->rpc_servers);
}

/* "calibration_cache": a file or folder (as --calibration-cache), or "off". */
static bool read_calibration_cache(api_params *rp, api_engine_settings *s) {
    const char *v = NULL;
    int got = api_get_string(rp, "calibration_cache", &v);
    if (got <= 0) return got == 0;
    s->calibration_given = true;
    free(s->calibration_cache);
    s->calibration_cache = NULL;
    return !strcmp(v, "off") || set_string(&s->calibration_cache, v, rp->err, "calibration_cache");
}

/* "load_mode": llama.cpp's --load-mode names. */
static bool read_load_mode(api_params *rp, specd_load_mode *out) {
    const char *v = NULL;
    int got = api_get_string(rp, "load_mode", &v);
    if (got <= 0) return got == 0;
    return load_mode_value(v, out, rp->err, "load_mode");
}

/* "draft_hold": "auto", "on" or "off". */
static bool read_draft_hold(api_params *rp, specd_draft_hold *out) {
    const char *v = NULL;
    int got = api_get_string(rp, "draft_hold", &v);
    if (got <= 0) return got == 0;
    return draft_hold_value(v, out, rp->err, "draft_hold");
}

/* "embedding": true, "pooling": "mean" (... as --pooling), "embd_normalize": 2. */
static bool read_embedding(api_params *rp, api_engine_settings *s) {
    specd_engine_params *p = &s->params;
    const char *v = NULL;
    if (!api_read_int32(rp, "embd_normalize", -1, 1000, &s->embd_normalize)) return false;
    if (api_get_bool(rp, "embedding", &p->embedding) < 0) return false;
    int got = api_get_string(rp, "pooling", &v);
    if (got <= 0) return got == 0;
    return pooling_value(v, &p->pooling, rp->err, "pooling");
}

/* "warmup": true (the default, as llama-server) or false. */
static bool read_warmup(api_params *rp, api_engine_settings *s) {
    bool warmup = !s->no_warmup;
    if (api_get_bool(rp, "warmup", &warmup) < 0) return false;
    s->no_warmup = !warmup;
    return true;
}

static bool parse_object(api_params *rp, api_engine_settings *s) {
    specd_engine_params *p = &s->params;
    s->parallel_given |= json_object_get(rp->obj, "n_parallel") != NULL;
    s->flash_attn_given |= json_object_get(rp->obj, "flash_attn") != NULL;
    int64_t port = 0;
    const char *host = NULL;
    return copy_string_field(rp, "model", &s->model) && copy_string_field(rp, "model_draft", &s->model_draft) &&
           copy_string_field(rp, "mmproj", &s->mmproj) && copy_string_field(rp, "mmproj_draft", &s->mmproj_draft) &&
           read_calibration_cache(rp, s) &&
           copy_string_field(rp, "model_alias", &s->alias) && api_read_int32(rp, "n_ctx", 0, 1 << 24, &p->n_ctx) &&
           api_read_int32(rp, "n_threads", 1, 1024, &p->n_threads) &&
           api_read_int32(rp, "n_batch", 1, 1 << 20, &p->n_batch) &&
           api_read_int32(rp, "n_ubatch", 1, 1 << 20, &p->n_ubatch) &&
           api_read_int32(rp, "n_threads_batch", 1, 1024, &p->n_threads_batch) &&
           api_read_int32(rp, "draft_max", 1, 256, &p->draft_max) && read_flash_attn(rp, &p->flash_attn) &&
           api_read_int32(rp, "n_parallel", 1, SPECD_MAX_PARALLEL, &p->n_parallel) &&
           api_read_int32(rp, "n_ctx_per_slot", 16, 1 << 24, &p->n_ctx_per_slot) &&
           api_read_int32(rp, "n_queue", 0, 1 << 20, &s->n_queue) &&
           read_cache_types(rp, p) && api_get_bool(rp, "verbose", &p->verbose) >= 0 &&
           api_get_bool(rp, "mtp", &p->mtp) >= 0 && read_warmup(rp, s) && read_load_mode(rp, &p->load_mode) &&
           read_draft_hold(rp, &p->draft_hold) && read_embedding(rp, s) &&
           /* a server's address: meaningless in-process, accepted for existing callers */
           api_get_string(rp, "hostname", &host) >= 0 && api_get_int(rp, "port", 0, 65535, &port) >= 0;
}

static void start_settings(api_engine_settings *s) {
    memset(s, 0, sizeof *s);
    s->params = specd_engine_default_params();
    s->n_queue = -1;
    s->speculative = specd_generation_default_params().speculative;
    s->context_shift = true;
    s->embd_normalize = 2;
}

/* The library's field names of the drafting defaults -> the flags that set them. */
static const char *spec_flag_of(const char *field) {
    static const char *const pairs[][2] = {
        {"speculative.draft_max", "--spec-draft-n-max"}, {"speculative.draft_min", "--spec-draft-n-min"},
        {"speculative.draft_p_min", "--spec-draft-p-min"}, {"speculative.ngram_n", "--spec-ngram-simple-size-n"},
    };
    for (size_t i = 0; field && i < sizeof pairs / sizeof *pairs; i++)
        if (!strcmp(field, pairs[i][0])) return pairs[i][1];
    return "--spec-type";
}

/* The drafting defaults every request starts from, checked once by the library's rules (a
 * request's n_max never starts above the engine's cap), and a drafter list that needs a model
 * file has one. */
static bool check_spec_defaults(api_engine_settings *s, api_error *err) {
    specd_spec_params *sp = &s->speculative;
    if (s->params.draft_max > 0 && sp->draft_max > s->params.draft_max) sp->draft_max = s->params.draft_max;
    specd_generation_params g = specd_generation_default_params();
    g.speculative = *sp;
    const char *field = NULL;
    char *message = NULL;
    if (specd_generation_params_validate(&g, &field, &message) != SPECD_OK) {
        const char *flag = spec_flag_of(field);
        api_fail(err, API_INVALID_PARAMS, flag, "init: %s%s", flag,
                 message && field ? message + strlen(field) : message ? message : " is out of range");
        specd_free(message);
        return false;
    }
    bool needs_file = specd_spec_params_need(sp, SPECD_SPEC_NEEDS_DRAFT_MODEL) ||
                      specd_spec_params_need(sp, SPECD_SPEC_NEEDS_HEAD_FILE);
    if (needs_file && !s->model_draft)
        return api_fail(err, API_INVALID_PARAMS, "--spec-type", "init: --spec-type names a drafter that needs a "
                        "draft model or head file (draft-simple, draft-eagle3, draft-dflash, draft-dspark): pass -md "
                        "FILE, or leave that drafter out of the list");
    return true;
}

/* The settings are complete: a target model is named (when needed), and the params point at the
 * strings. */
static bool finish_settings(api_engine_settings *s, bool ok, bool need_model, api_error *err) {
    if (ok && need_model && !s->model)
        ok = api_fail(err, API_INVALID_PARAMS, "model", "init: no target model: pass -m FILE or \"model\"");
    ok = ok && check_spec_defaults(s, err);
    if (!ok) {
        api_engine_settings_free(s);
        return false;
    }
    api_engine_settings_point(s);
    return true;
}

void api_engine_settings_point(api_engine_settings *s) {
    s->params.target_path = s->model;
    s->params.draft_path = s->model_draft;
    s->params.mmproj_path = s->mmproj;
    s->params.mmproj_draft_path = s->mmproj_draft;
    s->params.calibration_cache = s->calibration_cache;
    s->params.devices = s->devices;
    s->params.devices_draft = s->devices_draft;
    s->params.rpc_servers = s->rpc_servers;
}

bool api_engine_settings_parse(json_t *params, api_engine_settings *s, api_error *err) {
    start_settings(s);
    api_params rp;
    api_params_open(&rp, params, "init params", "", err);
    const char *cmd = NULL;
    json_t *args = api_get_value(&rp, "args");
    bool ok = api_get_string(&rp, "cmd", &cmd) >= 0 && api_get_bool(&rp, "async", &s->async) >= 0;
    if (ok && args && !json_is_array(args))
        ok = api_fail(err, API_INVALID_PARAMS, "args", "init params: 'args' must be an array of strings");
    if (ok && cmd && args)
        ok = api_fail(err, API_INVALID_PARAMS, "cmd", "init params: give 'cmd' or 'args', not both");
    if (ok && (cmd || args)) {
        json_t *words = cmd ? split_command_line(cmd, err) : json_incref(args);
        ok = words && parse_args(words, s, err);
        json_decref(words);
    }
    ok = ok && parse_object(&rp, s) && parse_placement_object(&rp, s) && api_params_finish(&rp);
    return finish_settings(s, ok, true, err);
}

bool api_engine_settings_parse_words(const char *const *words, size_t n, bool need_model, api_engine_settings *s,
                                     api_error *err) {
    start_settings(s);
    return finish_settings(s, parse_words(words, n, s, err), need_model, err);
}

/* ---- models directory ------------------------------------------------------------------------ */

/* Sets params[field] to the checked real path of `path` (`what` names it in the message, which is
 * the same whatever made the path fail: confine.h). */
static bool pin_path(json_t *params, const char *field, const char *path, api_path_kind kind, const char *what,
                     const char *dir, api_error *err) {
    char *real = api_confine_path(path, dir, kind);
    if (!real)
        return api_fail(err, API_INVALID_PARAMS, field, "init: %s path '%s' is not a %s under the models directory "
                        "(--models-dir)", what, path, kind == API_PATH_FILE ? "file" : "file or existing folder");
    int rc = json_object_set_new(params, field, json_string(real));
    free(real);
    return rc == 0 || api_fail(err, API_INTERNAL_ERROR, field, "init: out of memory");
}

json_t *api_init_params_confine(json_t *params, const char *models_dir, api_error *err) {
    api_engine_settings s;
    if (!api_engine_settings_parse(params, &s, err)) return NULL;
    /* The paths init would load or write are those the parse found, from whichever form named
     * them. They are pinned in the object fields "model", "model_draft" and "calibration_cache",
     * which init reads after cmd and args, so they win over the words that named them (a path
     * cannot change between this check and its use by being re-read from a symlink in a cmd word). */
    json_t *copy = json_deep_copy(params);
    bool ok = copy ? true : api_fail(err, API_INTERNAL_ERROR, "", "init: out of memory");
    if (s.params.n_lora + s.params.n_lora_draft > 0) /* adapter paths are not confined: the command line's only */
        ok = ok && api_fail(err, API_INVALID_PARAMS, "args", "init: LoRA adapters (--lora, --lora-draft) can only be "
                            "given on specd serve's command line while --models-dir confines init");
    ok = ok && pin_path(copy, "model", s.model, API_PATH_FILE, "model", models_dir, err);
    ok = ok && (!s.model_draft || pin_path(copy, "model_draft", s.model_draft, API_PATH_FILE, "model", models_dir, err));
    ok = ok && (!s.mmproj || pin_path(copy, "mmproj", s.mmproj, API_PATH_FILE, "vision projector", models_dir, err));
    ok = ok && (!s.mmproj_draft || pin_path(copy, "mmproj_draft", s.mmproj_draft, API_PATH_FILE, "vision projector",
                                            models_dir, err));
    ok = ok && (!s.calibration_cache || pin_path(copy, "calibration_cache", s.calibration_cache, API_PATH_WRITABLE,
                                                 "calibration cache", models_dir, err));
    api_engine_settings_free(&s);
    if (ok) return copy;
    json_decref(copy);
    return NULL;
}
