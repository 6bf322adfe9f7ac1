/* openai.c - the OpenAI-compatible routes of `specd serve`:
 *   POST /v1/chat/completions  messages -> a prompt through the model's chat template (or
 *                              --chat-template), then a completion
 *   POST /v1/completions       a prompt string -> a completion
 *   GET  /v1/models            the loaded model
 * Fields, by policy: what specd implements is mapped onto the completion method's params; fields
 * clients send by habit that change nothing here (user, store, metadata, ...) are accepted and
 * ignored; fields that would change the output but are not implemented (tools, n > 1, audio, ...)
 * are a 400 naming them, as are unknown fields: a request is never silently answered differently
 * from what it asked. Errors come in OpenAI's shape {"error": {message, type, param, code}}.
 * Streamed answers are openai_stream.c's. */
#define _POSIX_C_SOURCE 200809L
#include "openai.h"

#include "../rpc/state.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- errors ---------------------------------------------------------------------------------- */

static json_t *error_body(const openai_error *err) {
    return json_pack("{s:{s:s, s:s, s:o, s:n}}", "error", "message", err->message, "type", err->type, "param",
                     err->param[0] ? json_string(err->param) : json_null(), "code");
}

enum MHD_Result openai_send_error(struct MHD_Connection *c, const openai_error *err) {
    return send_json(c, err->status, error_body(err));
}

static bool fail(openai_error *err, unsigned status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static bool fail(openai_error *err, unsigned status, const char *type, const char *param, const char *fmt, ...) {
    err->status = status;
    err->type = type;
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return false;
}

#define BAD(err, param, ...) fail(err, MHD_HTTP_BAD_REQUEST, "invalid_request_error", param, __VA_ARGS__)

enum MHD_Result openai_fail(struct MHD_Connection *c, unsigned status, const char *type, const char *param,
                            const char *message) {
    openai_error err;
    fail(&err, status, type, param, "%s", message);
    return openai_send_error(c, &err);
}

void openai_error_from_rpc(json_t *error, openai_error *err) {
    json_int_t code = json_integer_value(json_object_get(error, "code"));
    const char *message = json_string_value(json_object_get(error, "message"));
    const char *field = json_string_value(json_object_get(json_object_get(error, "data"), "field"));
    bool client = code == RPC_PARSE_ERROR || code == RPC_INVALID_REQUEST || code == RPC_INVALID_PARAMS;
    unsigned status = client ? MHD_HTTP_BAD_REQUEST
                    : code == RPC_NO_MODEL || code == RPC_BUSY ? MHD_HTTP_SERVICE_UNAVAILABLE
                    : code == RPC_FORBIDDEN ? MHD_HTTP_FORBIDDEN : MHD_HTTP_INTERNAL_SERVER_ERROR;
    fail(err, status, client ? "invalid_request_error" : "server_error", field, "%s", message ? message : "error");
}

/* ---- routes ---------------------------------------------------------------------------------- */

bool openai_route_post(const char *url) {
    return strcmp(url, "/v1/chat/completions") == 0 || strcmp(url, "/v1/completions") == 0;
}

bool openai_route_get(const char *url) { return strcmp(url, "/v1/models") == 0; }

/* The model's id: its file name (or its alias), as /v1/models lists it (heap). */
static char *model_id(void) {
    json_t *name = rpc_state_model_name();
    const char *text = json_string_value(name);
    const char *slash = text ? strrchr(text, '/') : NULL;
    char *id = strdup(slash ? slash + 1 : text ? text : "");
    json_decref(name);
    return id;
}

static json_int_t started_at(void) {
    static _Atomic json_int_t at;
    json_int_t t = atomic_load(&at);
    if (!t) {
        json_int_t now = (json_int_t)time(NULL);
        atomic_compare_exchange_strong(&at, &t, now);
        t = atomic_load(&at);
    }
    return t;
}

enum MHD_Result openai_answer_get(struct MHD_Connection *c, const char *url) {
    (void)url;
    char *id = model_id();
    json_t *list = json_array();
    if (id && id[0])
        json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:I}", "id", id, "object", "model", "owned_by", "specd",
                                              "created", started_at()));
    free(id);
    return send_json(c, MHD_HTTP_OK, json_pack("{s:s, s:o}", "object", "list", "data", list));
}

/* ---- requests: fields ------------------------------------------------------------------------ */

/* Copied as they are: the completion method checks them (names it shares with OpenAI, and
 * llama-server's sampler extensions that OpenAI clients send through extra_body). */
static const char *const passed_fields[] = {
    "temperature", "top_p", "stop", "seed", "presence_penalty", "frequency_penalty", "logit_bias",
    "speculative", "return_origins", "top_k", "min_p", "typical_p", "repeat_penalty", "repeat_last_n", NULL};

/* Mapped by the functions below (or checked for a harmless value by check_harmless). */
static const char *const mapped_fields[] = {
    "messages", "prompt", "max_tokens", "max_completion_tokens", "logprobs", "top_logprobs", "n", "stream",
    "stream_options", "response_format", "tools", "tool_choice", "modalities", "echo", "suffix", "best_of", NULL};

/* Accepted and ignored: they change nothing about the output (model: one is served, any name). */
static const char *const ignored_fields[] = {
    "model", "user", "store", "metadata", "service_tier", "service_level", "prompt_cache_key",
    "safety_identifier", "parallel_tool_calls", NULL};

/* Would change the output, not implemented: a 400 with the reason. */
static const struct { const char *name, *why; } refused_fields[] = {
    {"functions", "function calling is not implemented"},
    {"function_call", "function calling is not implemented"},
    {"audio", "audio output is not implemented"},
    {"prediction", "predicted outputs are not implemented"},
    {"reasoning_effort", "reasoning effort is not implemented"},
    {"web_search_options", "web search is not implemented"},
    {"verbosity", "verbosity is not implemented"},
    {NULL, NULL}};

static bool listed(const char *const *names, const char *key) {
    for (; *names; names++)
        if (strcmp(*names, key) == 0) return true;
    return false;
}

/* Every field must be known: mapped, passed, ignored; the refused ones say why. */
static bool check_names(json_t *body, openai_error *err) {
    const char *key;
    json_t *value;
    json_object_foreach(body, key, value) {
        for (int i = 0; refused_fields[i].name; i++)
            if (strcmp(refused_fields[i].name, key) == 0)
                return BAD(err, key, "'%s' is not supported: %s", key, refused_fields[i].why);
        if (!listed(passed_fields, key) && !listed(mapped_fields, key) && !listed(ignored_fields, key))
            return BAD(err, key, "unknown field '%s'", key);
    }
    return true;
}

/* Fields that are only accepted at their harmless values. */
static bool check_harmless(json_t *body, openai_kind kind, openai_error *err) {
    json_t *v;
    if ((v = json_object_get(body, "n")) && (!json_is_integer(v) || json_integer_value(v) != 1))
        return BAD(err, "n", "'n' must be 1: specd makes one choice per request");
    if ((v = json_object_get(body, "tools")) && !(json_is_array(v) && json_array_size(v) == 0))
        return BAD(err, "tools", "'tools' is not supported: tool calling is not implemented");
    if ((v = json_object_get(body, "tool_choice")) && !(json_is_string(v) && !strcmp(json_string_value(v), "none")))
        return BAD(err, "tool_choice", "'tool_choice' may only be \"none\": tool calling is not implemented");
    if ((v = json_object_get(body, "modalities"))) {
        bool text_only = json_is_array(v);
        size_t i;
        json_t *m;
        json_array_foreach(v, i, m) text_only = text_only && json_is_string(m) && !strcmp(json_string_value(m), "text");
        if (!text_only) return BAD(err, "modalities", "'modalities' may only be [\"text\"]");
    }
    if (kind == OPENAI_TEXT) {
        if ((v = json_object_get(body, "echo")) && !json_is_false(v))
            return BAD(err, "echo", "'echo' must be false: echoing the prompt is not implemented");
        if ((v = json_object_get(body, "suffix")) && !(json_is_string(v) && !json_string_length(v)))
            return BAD(err, "suffix", "'suffix' is not supported: insertion is not implemented");
        if ((v = json_object_get(body, "best_of")) && !(json_is_integer(v) && json_integer_value(v) == 1))
            return BAD(err, "best_of", "'best_of' must be 1");
    } else {
        static const char *const text_only_fields[] = {"prompt", "echo", "suffix", "best_of", NULL};
        for (const char *const *f = text_only_fields; *f; f++)
            if (json_object_get(body, *f))
                return BAD(err, *f, "unknown field '%s' (it belongs to /v1/completions)", *f);
    }
    if (kind == OPENAI_TEXT && json_object_get(body, "messages"))
        return BAD(err, "messages", "unknown field 'messages' (it belongs to /v1/chat/completions)");
    return true;
}

static bool copy_fields(json_t *body, json_t *params) {
    for (const char *const *f = passed_fields; *f; f++) {
        json_t *v = json_object_get(body, *f);
        if (v && json_object_set(params, *f, v) != 0) return false;
    }
    return true;
}

/* max_completion_tokens (or max_tokens) -> n_predict. */
static bool map_max_tokens(json_t *body, json_t *params, openai_error *err) {
    const char *name = json_object_get(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    json_t *v = json_object_get(body, name);
    if (!v) return true;
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return BAD(err, name, "'%s' must be a positive integer", name);
    json_object_set(params, name, v); /* an alias of n_predict: an error about it names it as sent */
    return true;
}

/* chat: logprobs (bool) + top_logprobs (0..20); completions: logprobs (int 0..5, the top count). */
static bool map_logprobs(json_t *body, openai_kind kind, json_t *params, openai_call *call, openai_error *err) {
    json_t *lp = json_object_get(body, "logprobs"), *top = json_object_get(body, "top_logprobs");
    json_int_t n_top = 0;
    if (kind == OPENAI_CHAT) {
        if (lp && !json_is_boolean(lp)) return BAD(err, "logprobs", "'logprobs' must be true or false");
        if (top && (!json_is_integer(top) || json_integer_value(top) < 0 || json_integer_value(top) > 20))
            return BAD(err, "top_logprobs", "'top_logprobs' must be an integer from 0 to 20");
        if (top && !json_is_true(lp)) return BAD(err, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        call->logprobs = json_is_true(lp);
        n_top = top ? json_integer_value(top) : 0;
    } else {
        if (top) return BAD(err, "top_logprobs", "unknown field 'top_logprobs' (a chat field; here 'logprobs' is the count)");
        if (lp && (!json_is_integer(lp) || json_integer_value(lp) < 0 || json_integer_value(lp) > 20))
            return BAD(err, "logprobs", "'logprobs' must be an integer from 0 to 20");
        call->logprobs = lp != NULL;
        n_top = lp ? json_integer_value(lp) : 0;
    }
    call->top_logprobs = (int)n_top;
    if (!call->logprobs) return true;
    /* n_probs candidates hold the chosen token's probability too; at least one for it */
    json_object_set_new(params, "n_probs", json_integer(n_top > 0 ? n_top : 1));
    json_object_set_new(params, "probs_format", json_string("llama"));
    json_object_set_new(params, "parse_special", json_true()); /* the chat template's control tokens */
    return true;
}

static bool map_stream(json_t *body, json_t *params, openai_call *call, openai_error *err) {
    json_t *stream = json_object_get(body, "stream"), *so = json_object_get(body, "stream_options");
    if (stream && !json_is_boolean(stream)) return BAD(err, "stream", "'stream' must be true or false");
    call->stream = json_is_true(stream);
    if (so) {
        if (!json_is_object(so)) return BAD(err, "stream_options", "'stream_options' must be an object");
        const char *key;
        json_t *v;
        json_object_foreach(so, key, v) {
            if (strcmp(key, "include_usage") != 0 && strcmp(key, "include_obfuscation") != 0)
                return BAD(err, "stream_options", "unknown field 'stream_options.%s'", key);
            if (!json_is_boolean(v)) return BAD(err, "stream_options", "'stream_options.%s' must be true or false", key);
        }
        if (!call->stream) return BAD(err, "stream_options", "'stream_options' needs 'stream': true");
        call->include_usage = json_is_true(json_object_get(so, "include_usage"));
    }
    json_object_set_new(params, "stream", json_boolean(call->stream));
    call->return_origins = json_is_true(json_object_get(body, "return_origins"));
    return true;
}

/* response_format: text (nothing), json_object (any object), json_schema ({schema}). */
static bool map_response_format(json_t *body, json_t *params, openai_error *err) {
    json_t *rf = json_object_get(body, "response_format");
    if (!rf) return true;
    const char *type = json_string_value(json_object_get(rf, "type"));
    if (!json_is_object(rf) || !type)
        return BAD(err, "response_format", "'response_format' must be an object with a 'type'");
    if (!strcmp(type, "text")) return true;
    if (!strcmp(type, "json_object")) return json_object_set_new(params, "json_schema", json_object()) == 0;
    if (strcmp(type, "json_schema") != 0)
        return BAD(err, "response_format", "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
    json_t *schema = json_object_get(json_object_get(rf, "json_schema"), "schema");
    if (!json_is_object(schema))
        return BAD(err, "response_format", "'response_format.json_schema.schema' (the JSON Schema, an object) is required");
    return json_object_set(params, "json_schema", schema) == 0;
}

/* ---- requests: the prompt -------------------------------------------------------------------- */

/* A message's content: a string, null, or an array of {type: "text", text} parts (joined). Heap. */
static char *out_of_memory(openai_error *err) {
    fail(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
    return NULL;
}

static char *message_text(json_t *content, size_t index, openai_error *err) {
    const char *plain = json_is_string(content) ? json_string_value(content)
                      : !content || json_is_null(content) ? "" : NULL;
    if (plain) {
        char *copy = strdup(plain);
        return copy ? copy : out_of_memory(err);
    }
    char param[64];
    snprintf(param, sizeof param, "messages[%zu].content", index);
    if (!json_is_array(content)) {
        BAD(err, param, "'%s' must be a string or an array of {\"type\": \"text\", \"text\"} parts", param);
        return NULL;
    }
    size_t len = 1, i;
    json_t *part;
    json_array_foreach(content, i, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        json_t *text = json_object_get(part, "text");
        if (!type || strcmp(type, "text") != 0 || !json_is_string(text)) {
            BAD(err, param, "%s[%zu]: only text parts ({\"type\": \"text\", \"text\": \"...\"}) are supported", param, i);
            return NULL;
        }
        len += json_string_length(text);
    }
    char *joined = malloc(len);
    if (!joined) return out_of_memory(err);
    joined[0] = '\0';
    json_array_foreach(content, i, part) strcat(joined, json_string_value(json_object_get(part, "text")));
    return joined;
}

/* The roles a chat template knows: "tool" and "function" messages come with tool calls, which
 * specd does not support, and any other name is a client's mistake the template would pass on. */
static bool known_role(const char *role) {
    static const char *const roles[] = {"system", "developer", "user", "assistant"};
    for (size_t i = 0; i < sizeof roles / sizeof *roles; i++)
        if (!strcmp(role, roles[i])) return true;
    return false;
}

static bool check_message(json_t *m, size_t i, openai_error *err) {
    char param[64];
    snprintf(param, sizeof param, "messages[%zu]", i);
    if (!json_is_object(m) || !json_is_string(json_object_get(m, "role")))
        return BAD(err, param, "'%s' must be an object with a 'role' (a string) and a 'content'", param);
    const char *role = json_string_value(json_object_get(m, "role"));
    if (!known_role(role)) {
        char role_param[80];
        snprintf(role_param, sizeof role_param, "%s.role", param);
        return BAD(err, role_param, "'%s' is '%.100s': it must be \"system\", \"developer\", \"user\" or "
                   "\"assistant\" (tool messages need tool calls, which specd does not support)", role_param, role);
    }
    const char *key;
    json_t *v;
    json_object_foreach(m, key, v) {
        if (!strcmp(key, "role") || !strcmp(key, "content") || !strcmp(key, "name") ||
            (!strcmp(key, "refusal") && json_is_null(v)))
            continue;
        if (!strcmp(key, "tool_calls") && json_is_array(v) && json_array_size(v) == 0) continue;
        return BAD(err, param, "'%s.%s' is not supported (messages carry a role, a content and a name)", param, key);
    }
    return true;
}

/* The conversation as prompt text through the chat template (heap), or NULL with *err. */
static char *chat_prompt(json_t *messages, const char *chat_template, openai_error *err) {
    size_t n = json_array_size(messages);
    if (!json_is_array(messages) || n == 0) {
        BAD(err, "messages", "'messages' (a non-empty array of {role, content}) is required");
        return NULL;
    }
    specd_chat_message *list = calloc(n, sizeof *list);
    char **texts = calloc(n, sizeof *texts);
    char *prompt = NULL;
    bool ok = list && texts;
    if (!ok) out_of_memory(err);
    for (size_t i = 0; ok && i < n; i++) {
        json_t *m = json_array_get(messages, i);
        ok = check_message(m, i, err) && (texts[i] = message_text(json_object_get(m, "content"), i, err)) != NULL;
        if (ok) list[i] = (specd_chat_message){.role = json_string_value(json_object_get(m, "role")), .content = texts[i]};
    }
    specd_engine *engine = NULL;
    rpc_error rerr;
    if (ok && !rpc_state_acquire_engine(&engine, &rerr)) {
        fail(err, MHD_HTTP_SERVICE_UNAVAILABLE, "server_error", NULL, "%s", rerr.message);
        ok = false;
    }
    if (ok) {
        char *out = NULL, *why = NULL;
        if (!chat_template && !specd_engine_chat_template(engine))
            BAD(err, "messages", "the model has no chat template: start `specd serve` with --chat-template NAME "
                "(one of llama.cpp's built-in templates, e.g. chatml, llama3), or use /v1/completions");
        else if (specd_chat_apply_template(engine, list, n, chat_template, true, &out, &why) != SPECD_OK)
            BAD(err, "messages", "the chat template failed: %s", why ? why : "unknown error");
        else if (!(prompt = strdup(out))) out_of_memory(err);
        specd_free(out);
        specd_free(why);
        rpc_state_release_engine();
    }
    for (size_t i = 0; texts && i < n; i++) free(texts[i]);
    free(texts);
    free(list);
    return prompt;
}

static bool token_ids(json_t *list) {
    if (!json_is_array(list) || json_array_size(list) == 0) return false;
    size_t i;
    json_t *id;
    json_array_foreach(list, i, id) if (!json_is_integer(id)) return false;
    return true;
}

static bool map_prompt(json_t *body, openai_kind kind, const char *chat_template, json_t *params, openai_error *err) {
    if (kind == OPENAI_CHAT) {
        char *prompt = chat_prompt(json_object_get(body, "messages"), chat_template, err);
        if (!prompt) return false;
        json_object_set_new(params, "prompt", json_string(prompt));
        free(prompt);
        return true;
    }
    json_t *prompt = json_object_get(body, "prompt");
    if (json_is_array(prompt) && json_array_size(prompt) == 1 && !json_is_integer(json_array_get(prompt, 0)))
        prompt = json_array_get(prompt, 0); /* one prompt in a list: a string or token ids */
    if (!json_is_string(prompt) && !token_ids(prompt))
        return BAD(err, "prompt", "'prompt' (a string, or an array of token ids) is required; specd makes one "
                   "completion per request: send one request per prompt");
    json_object_set(params, "prompt", prompt);
    return true;
}

/* ---- requests -------------------------------------------------------------------------------- */

void openai_call_free(openai_call *call) {
    if (!call) return;
    free(call->model);
    free(call);
}

static openai_call *new_call(openai_kind kind) {
    static atomic_uint_fast64_t counter;
    openai_call *call = calloc(1, sizeof *call);
    if (!call) return NULL;
    call->kind = kind;
    call->created = (json_int_t)time(NULL);
    unsigned long long n = (unsigned long long)atomic_fetch_add(&counter, 1) + 1;
    snprintf(call->id, sizeof call->id, "%s-%llx%06llx", kind == OPENAI_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)call->created, n);
    call->model = model_id();
    return call;
}

static json_t *drop_nulls(json_t *body) {
    const char *key;
    json_t *value;
    void *tmp;
    json_object_foreach_safe(body, tmp, key, value) if (json_is_null(value)) json_object_del(body, key);
    return body;
}

json_t *openai_completion_params(const char *url, const char *body_text, size_t len, const char *chat_template,
                                 openai_call **call_out, openai_error *err) {
    openai_kind kind = strcmp(url, "/v1/chat/completions") == 0 ? OPENAI_CHAT : OPENAI_TEXT;
    *call_out = NULL;
    json_error_t jerr;
    json_t *body = json_loadb(body_text ? body_text : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (!body || !json_is_object(body)) {
        if (body) BAD(err, NULL, "the request body must be a JSON object");
        else BAD(err, NULL, "the request body is not JSON: %s at line %d, column %d", jerr.text, jerr.line, jerr.column);
        json_decref(body);
        return NULL;
    }
    drop_nulls(body); /* OpenAI's clients send null for "not given" */
    openai_call *call = new_call(kind);
    json_t *params = json_object();
    bool ok = call && params && call->model;
    if (!ok) fail(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
    ok = ok && check_names(body, err) && check_harmless(body, kind, err) && map_max_tokens(body, params, err) &&
         map_logprobs(body, kind, params, call, err) && map_stream(body, params, call, err) &&
         map_response_format(body, params, err);
    if (ok && !copy_fields(body, params)) ok = fail(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
    ok = ok && map_prompt(body, kind, chat_template, params, err);
    json_decref(body);
    if (ok) {
        rpc_error rerr;
        params = llama_completion_params(params, &rerr); /* stop as a string, logit_bias as an object */
        if (!params) ok = BAD(err, rerr.field, "%s", rerr.message);
    }
    if (!ok) {
        json_decref(params);
        openai_call_free(call);
        return NULL;
    }
    *call_out = call;
    return params;
}

/* ---- responses ------------------------------------------------------------------------------- */

const char *openai_finish_reason(const char *stop_type) {
    static const char *const cut[] = {"limit", "context", "time_limit", "shutdown"};
    for (size_t i = 0; stop_type && i < sizeof cut / sizeof *cut; i++)
        if (!strcmp(stop_type, cut[i])) return "length";
    return "stop";
}

static const char *finish_reason(json_t *result) {
    return openai_finish_reason(json_string_value(json_object_get(result, "stop_type")));
}

void openai_add_specd_fields(json_t *to, json_t *result) {
    json_t *spec = json_object_get(result, "speculative"), *type = json_object_get(result, "stop_type");
    if (to && spec) json_object_set(to, "speculative", spec);
    if (to && type) json_object_set(to, "stop_type", type);
}

json_t *openai_usage(json_t *result) {
    json_int_t prompt = json_integer_value(json_object_get(result, "tokens_evaluated"));
    json_int_t completion = json_integer_value(json_object_get(result, "tokens_predicted"));
    return json_pack("{s:I, s:I, s:I}", "prompt_tokens", prompt, "completion_tokens", completion, "total_tokens",
                     prompt + completion);
}

json_t *openai_response(const openai_call *call, json_t *result) {
    json_t *content = json_object_get(result, "content");
    json_t *logprobs = json_null();
    if (call->logprobs) {
        json_int_t offset = 0;
        logprobs = openai_logprobs(call, json_object_get(result, "completion_probabilities"), &offset);
    }
    json_t *choice = call->kind == OPENAI_CHAT
        ? json_pack("{s:i, s:{s:s, s:O}, s:s, s:o}", "index", 0, "message", "role", "assistant", "content",
                    content ? content : json_string(""), "finish_reason", finish_reason(result), "logprobs", logprobs)
        : json_pack("{s:i, s:O, s:s, s:o}", "index", 0, "text", content ? content : json_string(""), "finish_reason",
                    finish_reason(result), "logprobs", logprobs);
    json_t *response = json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o}", "id", call->id, "object",
                                 call->kind == OPENAI_CHAT ? "chat.completion" : "text_completion", "created",
                                 call->created, "model", call->model, "choices", choice, "usage", openai_usage(result));
    openai_add_specd_fields(response, result);
    json_t *origins = json_object_get(result, "origins");
    if (response && origins && call->return_origins) json_object_set(response, "origins", origins);
    return response;
}
