/* infill.c - llama-server's POST /infill (code completion in editors, e.g. llama.vscode): the
 * text before and after the cursor (input_prefix, input_suffix), more files as context
 * (input_extra [{filename, text}]) and `prompt` (typed after the cursor) become one token prompt
 * with the model's fill-in-the-middle tokens, laid out as llama-server's format_prompt_infill
 * does (its repo-level pattern when the model has FIM_REP/FIM_SEP, its budgets: a 3:1 share of a
 * batch for prefix and suffix, extra context in what the context leaves); the rest of the body
 * is a /completion request. A model without FIM tokens: 501 not_supported_error, as llama-server. */
#include "server.h"

#include "../util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama-server's default batch: the prefix and suffix budgets are shares of it. */
#define INFILL_BATCH 2048

static bool push(specd_token_list *l, const specd_token *t, int32_t n) { return specd_token_list_add(l, t, n); }
static bool push_one(specd_token_list *l, specd_token t) { return push(l, &t, 1); }

/* Appends the tokens of `text` (no BOS, special-token text kept as text, as llama-server). */
static bool push_text(specd_token_list *l, specd_engine *e, const char *text, api_error *err, const char *field) {
    specd_token *t = NULL;
    int32_t n = 0;
    char *why = NULL;
    bool ok = specd_tokenize_special(e, text, false, false, &t, &n, &why) == SPECD_OK;
    if (!ok) api_fail(err, API_INVALID_PARAMS, field, "infill: '%s' cannot be tokenized: %s", field, why ? why : "");
    else if (!push(l, t, n)) ok = api_fail(err, API_INTERNAL_ERROR, field, "out of memory");
    specd_free(t);
    specd_free(why);
    return ok;
}

/* The model's BOS, when it adds one (the tokens of "" with the special ones). */
static bool push_bos(specd_token_list *l, specd_engine *e, api_error *err) {
    specd_token *t = NULL;
    int32_t n = 0;
    char *why = NULL;
    bool ok = specd_tokenize_special(e, "", true, false, &t, &n, &why) == SPECD_OK;
    if (!ok) api_fail(err, API_INTERNAL_ERROR, "", "infill: %s", why ? why : "cannot tokenize");
    else ok = push(l, t, n) || api_fail(err, API_INTERNAL_ERROR, "", "out of memory");
    specd_free(t);
    specd_free(why);
    return ok;
}

static const char *string_field(json_t *body, const char *name, api_error *err, bool *ok) {
    json_t *v = json_object_get(body, name);
    if (!v || json_is_null(v)) return "";
    if (!json_is_string(v)) *ok = api_fail(err, API_INVALID_PARAMS, name, "infill: '%s' must be a string", name);
    return json_is_string(v) ? json_string_value(v) : "";
}

/* The extra context: [FIM_REP]myproject\n, then per chunk [FIM_SEP]filename\n text (or a
 * "--- snippet ---" separator without FIM_SEP), then [FIM_SEP]filename\n. */
static bool extra_tokens(specd_token_list *x, specd_engine *e, const specd_fim_tokens *fim, json_t *extra,
                         api_error *err) {
    if (extra && !json_is_array(extra))
        return api_fail(err, API_INVALID_PARAMS, "input_extra", "infill: 'input_extra' must be an array of "
                        "{\"filename\", \"text\"}");
    bool ok = true;
    if (fim->rep >= 0) ok = push_one(x, fim->rep) && push_text(x, e, "myproject\n", err, "input_extra");
    size_t i;
    json_t *chunk;
    json_array_foreach(extra, i, chunk) {
        const char *text = json_string_value(json_object_get(chunk, "text"));
        const char *filename = json_string_value(json_object_get(chunk, "filename"));
        if (!ok) break;
        /* as llama-server: the text is required, the filename optional, both strings */
        if (!json_is_object(chunk) || !text || (json_object_get(chunk, "filename") && !filename))
            return api_fail(err, API_INVALID_PARAMS, "input_extra", "infill: input_extra[%zu] must be {\"text\": "
                            "string, \"filename\": string (optional)}", i);
        char name[1100];
        snprintf(name, sizeof name, "%s\n", filename ? filename : "tmp");
        if (fim->sep >= 0) ok = push_one(x, fim->sep) && push_text(x, e, name, err, "input_extra");
        else ok = push_text(x, e, "\n\n--- snippet ---\n\n", err, "input_extra");
        ok = ok && push_text(x, e, text ? text : "", err, "input_extra");
    }
    if (ok && fim->sep >= 0) ok = push_one(x, fim->sep) && push_text(x, e, "filename\n", err, "input_extra");
    return ok;
}

/* A model without the three FIM tokens cannot infill: false with *err naming the missing ones (as
 * llama-server's message does). */
static bool has_fim_tokens(const specd_fim_tokens *fim, api_error *err) {
    if (fim->pre >= 0 && fim->suf >= 0 && fim->mid >= 0) return true;
    return api_fail(err, API_INVALID_PARAMS, "input_prefix", "infill is not supported by this model: %s%s%s(the GGUF "
                    "has no tokenizer.ggml.fim_pre, fim_suf or fim_mid): use a code model that has them, or "
                    "/completion", fim->pre < 0 ? "prefix token is missing. " : "",
                    fim->suf < 0 ? "suffix token is missing. " : "", fim->mid < 0 ? "middle token is missing. " : "");
}

/* The FIM prompt of `body` (borrowed) as a token array (new), NULL with *err. */
static json_t *infill_prompt(json_t *body, specd_engine *e, int64_t n_predict, api_error *err) {
    specd_fim_tokens fim = specd_engine_fim_tokens(e);
    bool ok = true;
    const char *prefix = string_field(body, "input_prefix", err, &ok);
    const char *suffix = ok ? string_field(body, "input_suffix", err, &ok) : "";
    const char *typed = ok ? string_field(body, "prompt", err, &ok) : "";
    specd_token_list pre = {0}, suf = {0}, mid = {0}, x = {0}, out = {0};
    ok = ok && push_text(&pre, e, prefix, err, "input_prefix") && push_text(&suf, e, suffix, err, "input_suffix") &&
         push_text(&mid, e, typed, err, "prompt") && extra_tokens(&x, e, &fim, json_object_get(body, "input_extra"), err);
    int32_t n_ctx = specd_engine_n_ctx(e), batch = INFILL_BATCH < n_ctx ? INFILL_BATCH : n_ctx;
    int32_t take_pre = pre.n < 3 * (batch / 4) ? pre.n : 3 * (batch / 4);
    int32_t room_suf = batch / 4 - (2 + mid.n);
    int32_t take_suf = suf.n < room_suf ? suf.n : room_suf > 0 ? room_suf : 0;
    int64_t room_x = (int64_t)n_ctx - batch - 2 * (n_predict > 0 ? n_predict : 0);
    int32_t take_x = room_x <= 0 ? 0 : x.n < room_x ? x.n : (int32_t)room_x;
    /* [extra] [BOS] FIM_PRE prefix prompt FIM_SUF suffix FIM_MID: the prefix's end and the suffix's
     * start are kept, the extra context's end */
    ok = ok && push(&out, x.v + (x.n - take_x), take_x) &&
         push_bos(&out, e, err) && push_one(&out, fim.pre) &&
         push(&out, pre.v + (pre.n - take_pre), take_pre) && push(&out, mid.v, mid.n) && push_one(&out, fim.suf) &&
         push(&out, suf.v, take_suf) && push_one(&out, fim.mid);
    json_t *list = NULL;
    if (ok && (list = json_array()) != NULL)
        for (int32_t i = 0; i < out.n; i++) json_array_append_new(list, json_integer(out.v[i]));
    if (ok && !list) api_fail(err, API_INTERNAL_ERROR, "", "out of memory");
    free(pre.v);
    free(suf.v);
    free(mid.v);
    free(x.v);
    free(out.v);
    return list;
}

/* Whether the body names its drafters (llama-server's nested or flat form). */
static bool names_drafters(json_t *body) {
    return json_object_get(body, "speculative") || json_object_get(body, "speculative.type");
}

/* Code completion writes again what the file already holds (a name, a line, a block): the suffix
 * drafter, which drafts from the prompt's and the output's own text for free, goes beside what a
 * request drafts with anyway (the server's --spec-type, else its draft model or head); each step
 * drafts with whichever is expected to give more tokens per second there, so where the file does
 * not repeat nothing changes. NULL (nothing added) when out of memory. */
static json_t *default_drafters(api_host *host, const specd_engine *e) {
    serve_request defaults;
    serve_request_init(&defaults);
    api_host_request_defaults(host, &defaults);
    specd_spec_type out[SPECD_SPEC_MAX_TYPES];
    int32_t n = specd_generation_drafters(e, &defaults.gen, out, NULL);
    serve_request_clear(&defaults);
    json_t *types = json_array();
    for (int32_t i = 0; types && i < n; i++)
        if (out[i] != SPECD_SPEC_SUFFIX) json_array_append_new(types, json_string(specd_spec_type_name(out[i])));
    if (types) json_array_append_new(types, json_string(specd_spec_type_name(SPECD_SPEC_SUFFIX)));
    return types ? json_pack("{s:o}", "type", types) : NULL;
}

json_t *infill_completion_params(api_host *host, json_t *body, api_error *err, bool *not_supported) {
    static const char *const own[] = {"input_prefix", "input_suffix", "input_extra", NULL};
    if (!json_is_object(body)) {
        api_fail(err, API_INVALID_PARAMS, "", "infill: the body must be a JSON object");
        json_decref(body);
        return NULL;
    }
    json_t *np = json_object_get(body, "n_predict");
    int64_t n_predict = json_is_integer(np) ? json_integer_value(np) : -1;
    specd_engine *e = NULL;
    if (!api_host_acquire_engine(host, &e, err)) {
        json_decref(body);
        return NULL;
    }
    specd_fim_tokens fim = specd_engine_fim_tokens(e);
    bool supported = has_fim_tokens(&fim, err);
    if (not_supported) *not_supported = !supported;
    json_t *prompt = supported ? infill_prompt(body, e, n_predict, err) : NULL;
    json_t *drafters = prompt && !names_drafters(body) ? default_drafters(host, e) : NULL;
    api_host_release_engine(host);
    if (drafters) json_object_set_new(body, "speculative", drafters);
    if (!prompt) {
        json_decref(body);
        return NULL;
    }
    for (const char *const *f = own; *f; f++) json_object_del(body, *f);
    json_object_set_new(body, "prompt", prompt);
    return body;
}
