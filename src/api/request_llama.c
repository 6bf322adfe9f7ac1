/* request_llama.c - the fields llama-server's /completion accepts (tools/server/server-schema.cpp
 * and server-context.cpp of llama.cpp 0.5.0, plus the flat speculative.* keys it used to take),
 * so that its clients work unchanged, and a typo still fails:
 *  - what specd implements acts as there: aliases (max_tokens, max_completion_tokens, logprobs,
 *    n), n_cmpl (one completion here; several are split before: completion_outputs.c), the flat
 *    speculative.* keys
 *    (request_spec.c), json_schema (a grammar), return_tokens, timings_per_token, response_fields,
 *    cache_prompt, samplers (the order specd's chain has), stream_options, t_max_predict_ms, DRY,
 *    XTC, top_n_sigma, dynatemp, min_keep, lora (a request's own adapter scales),
 *    preserved_tokens (control tokens whose text the output keeps), and generation_prompt with
 *    grammar_type (the grammar's prefill, as llama-server's sampler);
 *  - what it does not implement is accepted where the value changes nothing (its default, or any
 *    value while the sampler it tunes is off) and refused otherwise with a message naming the field;
 *  - any other name stays an unknown field (api_params_finish).
 * Also probs_format, which picks the shape of completion_probabilities (probs_json.h). */
#include "request_json.h"

#include "json_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool refuse(api_params *rp, const char *field, const char *why) {
    return api_fail(rp->err, API_INVALID_PARAMS, field, "completion params: '%s' %s", field, why);
}

static bool present(const api_params *rp, const char *name) {
    json_t *v = json_object_get(rp->obj, name);
    return v && !(rp->null_is_absent && json_is_null(v));
}

/* ---- fields specd does not implement ---------------------------------------------------------- */

/* A field accepted only where it changes nothing: at `inert` (JSON text), or for numbers also
 * anything <= `off_at_most` (when has_off), or any value of the right type while `gate` (another
 * field) has its inert value, i.e. the sampler it tunes is off. */
typedef struct inert_field {
    const char *name;
    const char *inert;
    const char *gate;       /* NULL: none */
    bool has_off;
    double off_at_most;
    const char *what;       /* what it would do, for the message */
} inert_field;

static const inert_field inert_fields[] = {
    {"verbose", "false", NULL, false, 0, "adds __verbose debug output"},
    {"return_progress", "false", NULL, false, 0, "streams prompt progress events"},
    {"n_indent", "0", NULL, false, 0, "stops at a line indented less than n_indent"},
    {"n_discard", "0", NULL, false, 0, "sets how many tokens a context shift drops (specd drops half, as 0 does)"},
    {"n_cache_reuse", "0", NULL, false, 0, "reuses cache chunks by KV shifting"},
    {"t_max_prompt_ms", "-1", NULL, true, 0, "limits the prompt time (llama-server reads it no more)"},
    {"adaptive_target", "-1", NULL, true, -1e-30, "is the adaptive-p sampler"},
    {"adaptive_decay", "0.9", "adaptive_target", false, 0, "tunes the adaptive-p sampler"},
    {"backend_sampling", "false", NULL, false, 0, "samples on the backend"},
    {"chat_format", "0", NULL, false, 0, "parses the output as a chat message"},
    {"parse_tool_calls", "false", NULL, false, 0, "parses tool calls from the output"},
    {"chat_parser", "\"\"", NULL, false, 0, "parses the output as a chat message"},
    {"continue_final_message", "false", NULL, false, 0, "continues a chat message"},
    {"echo", "false", NULL, false, 0, "echoes the prompt"},
    {"message_delimiters", "[]", NULL, false, 0, "checkpoints chat messages"},
    {"reasoning_control", "false", NULL, false, 0, "controls a reasoning budget"},
    {"reasoning_budget_tokens", "-1", NULL, false, 0, "is a reasoning budget"},
    {"reasoning_budget_start_tag", "\"\"", NULL, false, 0, "tunes a reasoning budget"},
    {"reasoning_budget_end_tags", "[]", NULL, false, 0, "tunes a reasoning budget"},
    {"reasoning_budget_end_tag", "\"\"", NULL, false, 0, "tunes a reasoning budget"},
    {"reasoning_budget_message", "\"\"", NULL, false, 0, "tunes a reasoning budget"},
    {"speculative.ngram_size_m", "48", NULL, false, 0, "sets the m-gram length of ngram drafts (specd drafts up to "
     "speculative.n_max tokens)"},
};

static bool same_value(json_t *a, json_t *b) {
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    return json_equal(a, b);
}

static bool same_kind(json_t *a, json_t *b) {
    return (json_is_number(a) && json_is_number(b)) || (json_is_boolean(a) && json_is_boolean(b)) ||
           json_typeof(a) == json_typeof(b);
}

static const inert_field *find_inert(const char *name) {
    for (size_t i = 0; i < sizeof inert_fields / sizeof *inert_fields; i++)
        if (strcmp(inert_fields[i].name, name) == 0) return &inert_fields[i];
    return NULL;
}

/* Whether field f's value `v` changes nothing; `v` NULL means absent (its default). */
static bool is_inert(api_params *rp, const inert_field *f, json_t *v) {
    if (!v || (rp->null_is_absent && json_is_null(v))) return true;
    json_t *inert = json_loads(f->inert, JSON_DECODE_ANY, NULL);
    bool ok = inert && same_value(v, inert);
    if (!ok && f->has_off && json_is_number(v)) ok = json_number_value(v) <= f->off_at_most;
    json_decref(inert);
    if (ok || !f->gate) return ok;
    const inert_field *gate = find_inert(f->gate);
    return gate && is_inert(rp, gate, json_object_get(rp->obj, f->gate));
}

static bool parse_inert_fields(api_params *rp) {
    for (size_t i = 0; i < sizeof inert_fields / sizeof *inert_fields; i++) {
        const inert_field *f = &inert_fields[i];
        json_t *v = api_get_value(rp, f->name);
        if (!v) continue;
        json_t *inert = json_loads(f->inert, JSON_DECODE_ANY, NULL);
        bool kind = inert && same_kind(v, inert);
        char shape[200];
        snprintf(shape, sizeof shape, "must have the type of its default %s", f->inert);
        json_decref(inert);
        if (!kind) return refuse(rp, f->name, shape);
        if (is_inert(rp, f, v)) continue;
        char why[400];
        snprintf(why, sizeof why, "is not implemented by specd (it %s): leave it out or give its default %s%s%s",
                 f->what, f->inert, f->gate ? ", or turn off " : "", f->gate ? f->gate : "");
        return refuse(rp, f->name, why);
    }
    return true;
}

/* reasoning_format only shapes chat messages (the OpenAI chat route); /completion is raw text
 * in llama-server too, so any of its names is accepted and changes nothing here. */
static bool parse_reasoning_format(api_params *rp) {
    const char *v = NULL;
    int got = api_get_string(rp, "reasoning_format", &v);
    if (got <= 0) return got == 0;
    static const char *names[] = {"none", "auto", "deepseek", "deepseek-legacy"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(v, names[i]) == 0) return true;
    return refuse(rp, "reasoning_format", "must be one of \"none\", \"auto\", \"deepseek\", \"deepseek-legacy\"");
}

/* ---- fields specd implements ----------------------------------------------------------------- */

/* n_predict, else max_completion_tokens, else max_tokens (llama-server's order of aliases). */
static bool parse_n_predict_aliases(api_params *rp, json_request *jr) {
    static const char *aliases[] = {"max_completion_tokens", "max_tokens"};
    serve_request *req = jr->req;
    bool taken = present(rp, "n_predict");
    if (taken) req->n_predict_field = "n_predict";
    for (size_t i = 0; i < 2; i++) {
        int32_t n = req->gen.n_predict;
        if (!api_read_int32(rp, aliases[i], -1, INT32_MAX, &n)) return false;
        if (!taken && present(rp, aliases[i])) {
            req->gen.n_predict = n;
            req->n_predict_field = aliases[i];
            taken = true;
        }
    }
    return true;
}

/* logprobs: n_probs when n_probs is not given (as llama-server's /completion reads it). */
static bool parse_logprobs_alias(api_params *rp, json_request *jr) {
    int32_t n = jr->req->gen.n_probs;
    if (!api_read_int32(rp, "logprobs", 0, 100, &n)) return false;
    if (!present(rp, "n_probs")) jr->req->gen.n_probs = n;
    return true;
}

/* n_cmpl (alias n): completions per request; one here (the HTTP route splits several into one
 * request each before). */
static bool parse_counts(api_params *rp) {
    static const char *names[] = {"n_cmpl", "n"};
    for (size_t i = 0; i < 2; i++) {
        int64_t n = 1;
        if (api_get_int(rp, names[i], INT64_MIN, INT64_MAX, &n) < 0) return false;
        if (n != 1) return refuse(rp, names[i], "must be 1: specd generates one completion per request (send "
                                  "several requests for more)");
    }
    return true;
}

static bool parse_flags(api_params *rp, json_request *jr) {
    if (api_get_bool(rp, "return_tokens", &jr->reply->return_tokens) < 0 ||
        api_get_bool(rp, "parse_special", &jr->req->parse_special) < 0 ||
        api_get_bool(rp, "timings_per_token", &jr->reply->timings_per_token) < 0 ||
        api_get_bool(rp, "cache_prompt", &jr->req->cache_prompt) < 0)
        return false;
    int64_t ping = 30;
    if (api_get_int(rp, "sse_ping_interval", -1, INT32_MAX, &ping) < 0) return false;
    if (ping != 30 && ping != -1)
        return refuse(rp, "sse_ping_interval", "is not implemented by specd (it sends no SSE pings): leave it "
                      "out, or give 30 (the default) or -1 (no pings)");
    /* stream_options.include_usage only matters on the OpenAI routes, as in llama-server */
    json_t *so = api_get_value(rp, "stream_options");
    if (!so) return true;
    if (!json_is_object(so)) return refuse(rp, "stream_options", "must be an object {include_usage}");
    api_params sp;
    api_params_open(&sp, so, "completion params", "stream_options.", rp->err);
    sp.null_is_absent = rp->null_is_absent;
    bool usage = false;
    return api_get_bool(&sp, "include_usage", &usage) >= 0 && api_params_finish(&sp);
}

/* response_fields: the final response keeps only these fields; "a/b" is b inside a, under the
 * key "a/b" (llama-server's json_get_nested_values); missing ones are left out. */
static bool parse_response_fields(api_params *rp, json_request *jr) {
    json_t *v = api_get_value(rp, "response_fields");
    if (!v) return true;
    size_t i;
    json_t *item;
    bool strings = json_is_array(v);
    json_array_foreach(v, i, item) strings = strings && json_is_string(item);
    if (!strings) return refuse(rp, "response_fields", "must be an array of field names (\"a/b\" for b inside a)");
    if (json_array_size(v) > 0) jr->reply->response_fields = json_incref(v);
    return true;
}

/* probs_format: "llama" (llama-server's entries, the default of POST /completion) or "specd"
 * ({content, probs: [{tok_str, prob}]}, the default of JSON-RPC and the C ABI). */
static bool parse_probs_format(api_params *rp, json_request *jr) {
    const char *v = NULL;
    int got = api_get_string(rp, "probs_format", &v);
    if (got < 0) return false;
    if (got == 0) return true;
    if (strcmp(v, "llama") && strcmp(v, "specd"))
        return refuse(rp, "probs_format", "must be \"llama\" (llama-server's completion_probabilities) or \"specd\" "
                      "({tok_str, prob})");
    jr->reply->probs_server_shape = strcmp(v, "llama") == 0;
    return true;
}

/* ---- json_schema ----------------------------------------------------------------------------- */

/* json_schema: the output must be JSON matching it (a grammar, so speculation stays exact). An
 * empty object means any object, as in llama-server. With a non-empty grammar as well it is
 * refused: llama-server's documentation and its code disagree on which one wins. */
static bool parse_json_schema(api_params *rp, json_request *jr) {
    json_t *schema = api_get_value(rp, "json_schema");
    if (!schema) return true;
    if (jr->req->grammar)
        return refuse(rp, "json_schema", "and 'grammar' are both given: give one (json_schema becomes a grammar)");
    json_t *any_object = json_is_object(schema) && json_object_size(schema) == 0 ? json_pack("{s:s}", "type", "object")
                                                                                 : NULL;
    char *gbnf = NULL;
    bool ok = specd_json_schema_to_grammar(any_object ? any_object : schema, "json_schema", &gbnf, rp->err);
    json_decref(any_object);
    if (!ok) return false;
    serve_request_take_grammar(jr->req, gbnf);
    return true;
}

/* ---- a lazy grammar ------------------------------------------------------------------------- */

/* grammar_lazy + grammar_triggers, llama-server's [{type, value, token}] (type 0: a token, 1: a
 * word, 2: a pattern, 3: a pattern the whole output matches): the grammar holds from a trigger on
 * (what llama-server applies for a tool call the model may make). */
static bool parse_lazy_grammar(api_params *rp, json_request *jr) {
    if (api_get_bool(rp, "grammar_lazy", &jr->req->gen.grammar_lazy) < 0) return false;
    json_t *list = api_get_value(rp, "grammar_triggers");
    if (!list) return true;
    if (!json_is_array(list)) return refuse(rp, "grammar_triggers", "must be an array of {type, value, token}");
    size_t i;
    json_t *t;
    json_array_foreach(list, i, t) {
        json_t *type = json_object_get(t, "type"), *token = json_object_get(t, "token");
        const char *value = json_string_value(json_object_get(t, "value"));
        json_int_t kind = json_is_integer(type) ? json_integer_value(type) : -1;
        if (kind < 0 || kind > 3 || !value || (kind == 0 && !json_is_integer(token)))
            return api_fail(rp->err, API_INVALID_PARAMS, "grammar_triggers", "completion params: grammar_triggers[%zu] "
                            "must be {\"type\": 0 (token, with \"token\"), 1 (word), 2 (pattern) or 3 (full pattern), "
                            "\"value\"}", i);
        json_int_t id = kind == 0 ? json_integer_value(token) : 0;
        specd_token tok = id >= 0 && id <= INT32_MAX ? (specd_token)id : -1; /* out of range: prepare refuses it */
        if (!serve_request_add_trigger(jr->req, (serve_trigger)kind, value, tok))
            return api_fail(rp->err, API_INTERNAL_ERROR, "grammar_triggers", "out of memory");
    }
    return true;
}

/* preserved_tokens: texts of tokens the output shows even when they are control tokens (a chat
 * format's markers; serve_request_prepare keeps those that are one token, as llama-server). */
static bool parse_preserved_tokens(api_params *rp, json_request *jr) {
    json_t *list = api_get_value(rp, "preserved_tokens");
    if (!list) return true;
    if (!json_is_array(list)) return refuse(rp, "preserved_tokens", "must be an array of token texts");
    size_t i;
    json_t *t;
    json_array_foreach(list, i, t) {
        if (!json_is_string(t))
            return api_fail(rp->err, API_INVALID_PARAMS, "preserved_tokens", "completion params: preserved_tokens[%zu] "
                            "must be a string (a token's text, e.g. \"<tool_call>\")", i);
        if (!serve_request_add_preserved(jr->req, json_string_value(t)))
            return api_fail(rp->err, API_INTERNAL_ERROR, "preserved_tokens", "out of memory");
    }
    return true;
}

/* ---- the grammar's prefill -------------------------------------------------------------------- */

/* generation_prompt (with grammar_type): as llama-server's sampler, the text the prompt ends with
 * (a chat template's generation prompt) is read by the grammar first (grammar_prefill), so the
 * output starts where the grammar expects it: for an output-format grammar (json_schema) or a
 * tool-call grammar ("grammar_type": "tool_calls"), not lazy; a user's own grammar is not
 * prefilled (llama.cpp's common_grammar_needs_prefill). It also tells llama-server's chat parser
 * where the message begins, which /completion's raw text does not use. */
static bool parse_generation_prompt(api_params *rp, json_request *jr) {
    const char *text = NULL, *type = NULL;
    int got = api_get_string(rp, "generation_prompt", &text);
    if (got < 0 || api_get_string(rp, "grammar_type", &type) < 0) return false;
    bool tool_calls = type && strcmp(type, "tool_calls") == 0;
    bool output_format = present(rp, "json_schema");
    if (got == 0 || !text[0] || !jr->req->grammar || jr->req->gen.grammar_lazy || !(tool_calls || output_format))
        return true;
    if (!serve_request_set_grammar_prefill(jr->req, text))
        return api_fail(rp->err, API_INTERNAL_ERROR, "generation_prompt", "out of memory");
    return true;
}

/* ---- samplers -------------------------------------------------------------------------------- */

/* specd's chain, in llama.cpp's default order (sampler.c): each must be listed in this order,
 * except one whose setting leaves it off; llama.cpp's other samplers may be listed anywhere while
 * they are off (their settings are refused otherwise). */
static const struct {
    const char *name;
    char chr;
} chain[] = {{"penalties", 'e'}, {"dry", 'd'}, {"top_n_sigma", 's'}, {"top_k", 'k'}, {"typ_p", 'y'},
             {"top_p", 'p'},     {"min_p", 'm'}, {"xtc", 'x'},        {"temperature", 't'}};
static const struct {
    const char *name;
    char chr;
} off_samplers[] = {{"adaptive_p", 'a'}};

static bool sampler_on(const json_request *jr, int i) {
    const specd_sampling_params *s = &jr->req->gen.sampling;
    switch (i) {
    case 0: return s->repeat_penalty != 1.0f || s->presence_penalty != 0.0f || s->frequency_penalty != 0.0f;
    case 1: return s->dry_multiplier != 0.0f && s->dry_penalty_last_n != 0;
    case 2: return s->top_n_sigma > 0.0f;
    case 3: return s->top_k > 0;
    case 4: return s->typical_p < 1.0f;
    case 5: return s->top_p < 1.0f;
    case 6: return s->min_p > 0.0f;
    case 7: return s->xtc_probability > 0.0f;
    default: return true; /* temperature: greedy or not, it decides */
    }
}

/* The chain index of entry `name` (or char `c`), -2 for an off sampler, -1 unknown. */
static int sampler_index(const char *name, char c) {
    for (int i = 0; i < (int)(sizeof chain / sizeof *chain); i++)
        if (name ? strcmp(name, chain[i].name) == 0 : c == chain[i].chr) return i;
    for (size_t i = 0; i < sizeof off_samplers / sizeof *off_samplers; i++)
        if (name ? strcmp(name, off_samplers[i].name) == 0 : c == off_samplers[i].chr) return -2;
    return -1;
}

static bool parse_samplers(api_params *rp, const json_request *jr) {
    json_t *v = api_get_value(rp, "samplers");
    if (!v) return true;
    size_t n = json_is_array(v) ? json_array_size(v) : json_is_string(v) ? json_string_length(v) : 0;
    if (!json_is_array(v) && !json_is_string(v))
        return refuse(rp, "samplers", "must be an array of sampler names or a string of sampler letters");
    int next = 0; /* the chain entry expected next */
    for (size_t i = 0; i < n; i++) {
        const char *name = json_is_array(v) ? json_string_value(json_array_get(v, i)) : NULL;
        if (json_is_array(v) && !name) return refuse(rp, "samplers", "must hold strings");
        int at = sampler_index(name, name ? 0 : json_string_value(v)[i]);
        if (at == -1) return refuse(rp, "samplers", "names a sampler llama.cpp does not have");
        if (at == -2) continue;
        while (next < at && !sampler_on(jr, next)) next++;
        if (at > next) break; /* chain[next] is on but not listed: said below */
        if (at != next)
            return refuse(rp, "samplers", "must keep specd's order: penalties, dry, top_n_sigma, top_k, typ_p, top_p, "
                          "min_p, xtc, temperature (llama.cpp's default; other orders are not implemented)");
        next++;
    }
    while (next < (int)(sizeof chain / sizeof *chain) && !sampler_on(jr, next)) next++;
    if (next < (int)(sizeof chain / sizeof *chain))
        return api_fail(rp->err, API_INVALID_PARAMS, "samplers", "completion params: 'samplers' leaves out %s, "
                        "which this request's settings use: specd cannot skip it (set it off instead)",
                        chain[next].name);
    return true;
}

/* dry_sequence_breakers: an array of strings (a request's own list replaces llama.cpp's default). */
static bool parse_dry_breakers(api_params *rp, json_request *jr) {
    json_t *list = api_get_value(rp, "dry_sequence_breakers");
    if (!list) return true;
    if (!json_is_array(list)) return refuse(rp, "dry_sequence_breakers", "must be an array of strings");
    size_t n = json_array_size(list);
    const char **breakers = calloc(n > 0 ? n : 1, sizeof *breakers);
    if (!breakers) return api_fail(rp->err, API_INTERNAL_ERROR, "dry_sequence_breakers", "out of memory");
    for (size_t i = 0; i < n; i++)
        if (!(breakers[i] = json_string_value(json_array_get(list, i))) || !breakers[i][0]) {
            free(breakers);
            return refuse(rp, "dry_sequence_breakers", "must hold non-empty strings");
        }
    bool ok = serve_request_set_dry_breakers(jr->req, breakers, (int32_t)n);
    free(breakers);
    return ok || api_fail(rp->err, API_INTERNAL_ERROR, "dry_sequence_breakers", "out of memory");
}

/* llama.cpp's samplers beyond the old API's: DRY, top-n-sigma, XTC, dynatemp, min_keep (ranges are
 * specd_generation_params_validate's). llama-server takes dry_base below 1 as its default. */
static bool parse_sampler_settings(api_params *rp, json_request *jr) {
    specd_sampling_params *s = &jr->req->gen.sampling;
    float dry_base = s->dry_base;
    bool ok = api_read_any_float(rp, "top_n_sigma", &s->top_n_sigma) &&
              api_read_any_int32(rp, "min_keep", &s->min_keep) &&
              api_read_any_float(rp, "dynatemp_range", &s->dynatemp_range) &&
              api_read_any_float(rp, "dynatemp_exponent", &s->dynatemp_exponent) &&
              api_read_any_float(rp, "xtc_probability", &s->xtc_probability) &&
              api_read_any_float(rp, "xtc_threshold", &s->xtc_threshold) &&
              api_read_any_float(rp, "dry_multiplier", &s->dry_multiplier) &&
              api_read_any_float(rp, "dry_base", &dry_base) &&
              api_read_any_int32(rp, "dry_allowed_length", &s->dry_allowed_length) &&
              api_read_any_int32(rp, "dry_penalty_last_n", &s->dry_penalty_last_n) && parse_dry_breakers(rp, jr);
    if (dry_base >= 1.0f) s->dry_base = dry_base;
    return ok;
}

/* lora: [{id, scale}] for this request (adapters not listed: 0; the ids are checked against the
 * engine's adapters by serve_request_prepare), else the server's current scales. */
static bool parse_lora(api_params *rp, json_request *jr) {
    json_t *list = api_get_value(rp, "lora");
    return !list || request_json_lora_list(list, "lora", &jr->req->lora, &jr->req->n_lora, rp->err);
}

/* t_max_predict_ms: as llama-server reads it, once that long has passed since the first generated
 * token, generation ends at the next step that produces a newline (<= 0: never). */
static bool parse_t_max_predict_ms(api_params *rp, json_request *jr) {
    return api_get_int(rp, "t_max_predict_ms", INT64_MIN, INT64_MAX, &jr->req->t_max_predict_ms) >= 0;
}

const char *const request_json_sampler_names[] = {
    "top_n_sigma", "min_keep", "dynatemp_range", "dynatemp_exponent", "xtc_probability", "xtc_threshold",
    "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers", "lora",
    "samplers", NULL};

bool request_json_sampler_fields(json_request *jr) {
    api_params *rp = jr->rp;
    /* samplers last: it is checked against every sampler's setting */
    return parse_sampler_settings(rp, jr) && parse_lora(rp, jr) && parse_samplers(rp, jr);
}

bool request_json_llama_fields(json_request *jr) {
    api_params *rp = jr->rp;
    return request_json_sampler_fields(jr) && parse_n_predict_aliases(rp, jr) && parse_t_max_predict_ms(rp, jr) &&
           parse_logprobs_alias(rp, jr) && parse_counts(rp) && parse_flags(rp, jr) && parse_probs_format(rp, jr) &&
           parse_response_fields(rp, jr) && request_json_flat_speculative(jr) && parse_json_schema(rp, jr) &&
           parse_lazy_grammar(rp, jr) && parse_preserved_tokens(rp, jr) && parse_generation_prompt(rp, jr) &&
           parse_reasoning_format(rp) && parse_inert_fields(rp);
}
