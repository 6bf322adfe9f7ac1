/* openai_request.c - an OpenAI request's body into the server's typed request (serve/request.h) and
 * the choices that shape its answer (openai_call). Fields, by policy: what specd implements is
 * read into the request (the fields it shares with the JSON API by the JSON API's own readers);
 * fields clients send by habit that change nothing here (user, store, metadata, ...) are accepted
 * and ignored; fields that would change the output but are not implemented (audio, ...) are a 400 naming them, as are unknown fields: a request is never silently answered
 * differently from what it asked. */
#define _POSIX_C_SOURCE 200809L
#include "openai.h"

#include "../util/util.h"

#include "../api/json_schema.h"
#include "../api/request_json.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BAD(err, param, ...) openai_fail_with(err, MHD_HTTP_BAD_REQUEST, "invalid_request_error", param, __VA_ARGS__)

/* One request being read: the body, the request and the answer's choices. */
typedef struct openai_read {
    json_t *body;
    openai_kind kind;
    serve_request *req;
    openai_call *call;
    openai_error *err;
} openai_read;

/* ---- the body -------------------------------------------------------------------------------- */

static json_t *drop_nulls(json_t *body) {
    const char *key;
    json_t *value;
    void *tmp;
    json_object_foreach_safe(body, tmp, key, value) if (json_is_null(value)) json_object_del(body, key);
    return body;
}

json_t *openai_load_object(const char *text, size_t len, openai_error *err) {
    json_error_t jerr;
    json_t *body = json_loadb(text ? text : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (json_is_object(body)) return body;
    if (body) BAD(err, NULL, "the request body must be a JSON object");
    else { /* the API layer's words for where it failed, without its JSON-RPC "parse error: " */
        api_error parse;
        api_parse_error(text, len, &jerr, &parse);
        BAD(err, parse.field[0] ? parse.field : NULL, "the request body is not JSON: %s",
            parse.message + strlen("parse error: "));
    }
    json_decref(body);
    return NULL;
}

/* The body as a JSON object without its nulls (OpenAI's clients send null for "not given"). */
json_t *openai_parse_body(const char *text, size_t len, openai_error *err) {
    json_t *body = openai_load_object(text, len, err);
    return body ? drop_nulls(body) : NULL;
}

/* ---- fields ---------------------------------------------------------------------------------- */

/* Read as the JSON API reads them (request_json.h: names it shares with OpenAI, and llama-server's
 * sampler extensions that OpenAI clients send through extra_body); the rest of llama.cpp's
 * samplers and `lora` are request_json_sampler_names, read by that API's one reader too. */
const char *const openai_shared_fields[] = {
    "temperature", "top_p", "stop", "seed", "presence_penalty", "frequency_penalty", "logit_bias",
    "speculative", "return_origins", "top_k", "min_p", "typical_p", "repeat_penalty", "repeat_last_n",
    "mirostat", "mirostat_tau", "mirostat_eta", "ignore_eos", "id_slot", NULL};

/* Mapped by the functions below (or checked for a harmless value by check_harmless). */
static const char *const mapped_fields[] = {
    "messages", "prompt", "max_tokens", "max_completion_tokens", "logprobs", "top_logprobs", "n" /* openai_choices.c */,
    "stream",
    "stream_options", "response_format", "tools", "tool_choice", "modalities", "echo", "suffix", "best_of",
    "parallel_tool_calls", "chat_template_kwargs", "reasoning_format", "add_generation_prompt", NULL};

/* Accepted and ignored: they change nothing about the output (model: one is served, any name). */
static const char *const ignored_fields[] = {
    "model", "user", "store", "metadata", "service_tier", "service_level", "prompt_cache_key",
    "safety_identifier", NULL};

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

bool openai_shared_field(const char *key) {
    return specd_listed(openai_shared_fields, key) || specd_listed(request_json_sampler_names, key);
}

bool openai_chat_field_known(const char *key) {
    for (int i = 0; refused_fields[i].name; i++)
        if (strcmp(refused_fields[i].name, key) == 0) return true;
    return openai_shared_field(key) || specd_listed(mapped_fields, key) || specd_listed(ignored_fields, key);
}

/* Every field must be known: mapped, passed, ignored; the refused ones say why. */
static bool check_names(json_t *body, openai_error *err) {
    const char *key;
    json_t *value;
    json_object_foreach(body, key, value) {
        for (int i = 0; refused_fields[i].name; i++)
            if (strcmp(refused_fields[i].name, key) == 0)
                return BAD(err, key, "'%s' is not supported: %s", key, refused_fields[i].why);
        if (!openai_shared_field(key) && !specd_listed(mapped_fields, key) && !specd_listed(ignored_fields, key))
            return BAD(err, key, "unknown field '%s'", key);
    }
    return true;
}

/* Fields that are only accepted at their harmless values. */
static bool check_harmless(json_t *body, openai_kind kind, openai_error *err) {
    json_t *v;
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
        if ((v = json_object_get(body, "suffix")) && !json_is_string(v))
            return BAD(err, "suffix", "'suffix' must be a string (the text after the insertion)");
        if ((v = json_object_get(body, "best_of")) && !(json_is_integer(v) && json_integer_value(v) == 1))
            return BAD(err, "best_of", "'best_of' must be 1");
    } else {
        static const char *const text_only_fields[] = {"prompt", "echo", "suffix", "best_of", NULL};
        for (const char *const *f = text_only_fields; *f; f++)
            if (json_object_get(body, *f))
                return BAD(err, *f, "unknown field '%s' (it belongs to /v1/completions)", *f);
    }
    static const char *const chat_only_fields[] = {"messages", "tools", "tool_choice", "parallel_tool_calls",
                                                   "chat_template_kwargs", "reasoning_format", "add_generation_prompt",
                                                   NULL};
    for (const char *const *f = chat_only_fields; kind == OPENAI_TEXT && *f; f++)
        if (json_object_get(body, *f))
            return BAD(err, *f, "unknown field '%s' (it belongs to /v1/chat/completions)", *f);
    return true;
}

/* max_completion_tokens (or max_tokens) -> n_predict, named as sent in errors. */
static bool read_max_tokens(openai_read *r) {
    const char *name = json_object_get(r->body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    json_t *v = json_object_get(r->body, name);
    if (!v) return true;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > INT32_MAX)
        return BAD(r->err, name, "'%s' must be a positive integer", name);
    r->req->gen.n_predict = (int32_t)json_integer_value(v);
    r->req->n_predict_field = name;
    return true;
}

/* chat: logprobs (bool) + top_logprobs (0..20); completions: logprobs (int 0..5, the top count). */
static bool read_logprobs(openai_read *r) {
    json_t *lp = json_object_get(r->body, "logprobs"), *top = json_object_get(r->body, "top_logprobs");
    openai_call *call = r->call;
    json_int_t n_top = 0;
    if (r->kind == OPENAI_CHAT) {
        if (lp && !json_is_boolean(lp)) return BAD(r->err, "logprobs", "'logprobs' must be true or false");
        if (top && (!json_is_integer(top) || json_integer_value(top) < 0 || json_integer_value(top) > 20))
            return BAD(r->err, "top_logprobs", "'top_logprobs' must be an integer from 0 to 20");
        if (top && !json_is_true(lp)) return BAD(r->err, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        call->logprobs = json_is_true(lp);
        n_top = top ? json_integer_value(top) : 0;
    } else {
        if (top)
            return BAD(r->err, "top_logprobs", "unknown field 'top_logprobs' (a chat field; here 'logprobs' is the count)");
        if (lp && (!json_is_integer(lp) || json_integer_value(lp) < 0 || json_integer_value(lp) > 20))
            return BAD(r->err, "logprobs", "'logprobs' must be an integer from 0 to 20");
        call->logprobs = lp != NULL;
        n_top = lp ? json_integer_value(lp) : 0;
    }
    call->top_logprobs = (int)n_top;
    /* n_probs candidates hold the chosen token's probability too; at least one for it */
    if (call->logprobs) r->req->gen.n_probs = n_top > 0 ? (int32_t)n_top : 1;
    return true;
}

static bool read_stream(openai_read *r) {
    json_t *stream = json_object_get(r->body, "stream"), *so = json_object_get(r->body, "stream_options");
    openai_call *call = r->call;
    if (stream && !json_is_boolean(stream)) return BAD(r->err, "stream", "'stream' must be true or false");
    call->stream = json_is_true(stream);
    if (so) {
        if (!json_is_object(so)) return BAD(r->err, "stream_options", "'stream_options' must be an object");
        const char *key;
        json_t *v;
        json_object_foreach(so, key, v) {
            if (strcmp(key, "include_usage") != 0 && strcmp(key, "include_obfuscation") != 0)
                return BAD(r->err, "stream_options", "unknown field 'stream_options.%s'", key);
            if (!json_is_boolean(v))
                return BAD(r->err, "stream_options", "'stream_options.%s' must be true or false", key);
        }
        if (!call->stream) return BAD(r->err, "stream_options", "'stream_options' needs 'stream': true");
        call->include_usage = json_is_true(json_object_get(so, "include_usage"));
    }
    r->req->stream = call->stream;
    return true;
}

/* A JSON Schema as the request's grammar (an empty one: any object). */
static bool schema_grammar(openai_read *r, json_t *schema) {
    json_t *any_object = json_object_size(schema) == 0 ? json_pack("{s:s}", "type", "object") : NULL;
    char *gbnf = NULL;
    api_error rerr;
    bool ok = specd_json_schema_to_grammar(any_object ? any_object : schema, "json_schema", &gbnf, &rerr);
    json_decref(any_object);
    if (!ok) {
        openai_error_from(&rerr, r->err);
        return false;
    }
    serve_request_take_grammar(r->req, gbnf);
    return true;
}

/* response_format: text (nothing), json_object (any object), json_schema ({schema}). */
static bool read_response_format(openai_read *r) {
    json_t *rf = json_object_get(r->body, "response_format");
    if (!rf) return true;
    const char *type = json_string_value(json_object_get(rf, "type"));
    if (!json_is_object(rf) || !type)
        return BAD(r->err, "response_format", "'response_format' must be an object with a 'type'");
    if (!strcmp(type, "text")) return true;
    json_t *empty = json_object();
    bool ok = !strcmp(type, "json_object") ? schema_grammar(r, empty) : true;
    json_decref(empty);
    if (!strcmp(type, "json_object")) return ok;
    if (strcmp(type, "json_schema") != 0)
        return BAD(r->err, "response_format", "'response_format.type' must be \"text\", \"json_object\" or "
                   "\"json_schema\"");
    json_t *schema = json_object_get(json_object_get(rf, "json_schema"), "schema");
    if (!json_is_object(schema))
        return BAD(r->err, "response_format", "'response_format.json_schema.schema' (the JSON Schema, an object) is "
                   "required");
    return schema_grammar(r, schema);
}

/* ---- requests: the prompt -------------------------------------------------------------------- */

static char *out_of_memory(openai_error *err) {
    openai_fail_with(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
    return NULL;
}

static bool token_ids(json_t *list) {
    if (!json_is_array(list) || json_array_size(list) == 0) return false;
    size_t i;
    json_t *id;
    json_array_foreach(list, i, id) if (!json_is_integer(id)) return false;
    return true;
}

/* The token ids of a prompt (a wrong id is the token -1, which serve_request_prepare refuses). */
static bool add_token_ids(serve_request *req, json_t *list) {
    size_t i;
    json_t *id;
    json_array_foreach(list, i, id) {
        json_int_t v = json_integer_value(id);
        if (!serve_request_add_token(req, v >= 0 && v <= INT32_MAX ? (specd_token)v : -1)) return false;
    }
    return true;
}

/* The fields only llama.cpp's Jinja chat code reads. */
static const char *const jinja_only_fields[] = {"parallel_tool_calls", "chat_template_kwargs", "reasoning_format",
                                                "add_generation_prompt", NULL};

static bool read_chat_prompt(openai_read *r, api_host *host, const http_chat *chat) {
    r->req->whole_prompt = true; /* a cut conversation loses its system prompt and tools (request.h) */
    /* images become markers in the text (image_parts.c) before either template path reads it */
    if (!openai_take_images(json_object_get(r->body, "messages"), r->req, r->err)) return false;
    if (chat->jinja) return openai_chat_prompt(host, r->body, chat, r->req, &r->call->chat, r->err);
    json_t *tools = json_object_get(r->body, "tools"), *choice = json_object_get(r->body, "tool_choice");
    if (tools && !(json_is_array(tools) && json_array_size(tools) == 0))
        return BAD(r->err, "tools", "'tools' needs Jinja chat templates: this server formats chats with a llama.cpp "
                   "built-in format (--no-jinja or --chat-template NAME)");
    if (choice && !(json_is_string(choice) && (!strcmp(json_string_value(choice), "none") ||
                                               !strcmp(json_string_value(choice), "auto"))))
        return BAD(r->err, "tool_choice", "'tool_choice' needs Jinja chat templates: this server formats chats with "
                   "a llama.cpp built-in format (--no-jinja or --chat-template NAME)");
    for (const char *const *f = jinja_only_fields; *f; f++)
        if (json_object_get(r->body, *f))
            return BAD(r->err, *f, "'%s' needs Jinja chat templates: this server formats chats with a llama.cpp "
                       "built-in format (--no-jinja or --chat-template NAME)", *f);
    if (chat->builtin && !(r->req->chat_template = strdup(chat->builtin))) return out_of_memory(r->err) != NULL;
    return openai_read_messages(json_object_get(r->body, "messages"), r->req, r->err);
}

/* /v1/completions with a suffix: an insertion, the prompt before it and the suffix after, through
 * the model's fill-in-the-middle tokens as /infill lays them out (infill.c). */
static bool read_insertion(openai_read *r, api_host *host, json_t *prompt) {
    if (!json_is_string(prompt)) return BAD(r->err, "prompt", "'prompt' must be a string with a 'suffix'");
    api_error rerr;
    json_t *fim = infill_completion_params(host, json_pack("{s:O, s:O, s:I}", "input_prefix", prompt, "input_suffix",
                                                           json_object_get(r->body, "suffix"), "n_predict",
                                                           (json_int_t)r->req->gen.n_predict),
                                           &rerr, NULL);
    if (!fim) return BAD(r->err, "suffix", "%s", rerr.message);
    bool ok = add_token_ids(r->req, json_object_get(fim, "prompt"));
    /* /infill's default drafters (infill.c) where the request names none: as if it had, so that
     * the API layer reads them over the host's defaults with the other shared fields */
    json_t *types = json_object_get(json_object_get(fim, "speculative"), "type");
    if (ok && json_array_size(types) > 0 && !json_object_get(r->body, "speculative"))
        ok = json_object_set_new(r->body, "speculative", json_pack("{s:O}", "type", types)) == 0;
    json_decref(fim);
    return ok || out_of_memory(r->err) != NULL;
}

bool openai_several_prompts(openai_kind kind, json_t *body) {
    json_t *list = json_object_get(body, "prompt");
    return kind == OPENAI_TEXT && json_is_array(list) && json_array_size(list) >= 2 &&
           !json_is_integer(json_array_get(list, 0));
}

static bool read_prompt(openai_read *r, api_host *host, const http_chat *chat) {
    if (r->kind == OPENAI_CHAT) return read_chat_prompt(r, host, chat);
    json_t *prompt = json_object_get(r->body, "prompt");
    if (json_is_array(prompt) && json_array_size(prompt) == 1 && !json_is_integer(json_array_get(prompt, 0)))
        prompt = json_array_get(prompt, 0); /* one prompt in a list: a string or token ids */
    if (!json_is_string(prompt) && !token_ids(prompt))
        return BAD(r->err, "prompt", "'prompt' (a string, an array of token ids, or a list of them) is required");
    if (json_string_length(json_object_get(r->body, "suffix")) > 0) return read_insertion(r, host, prompt);
    bool ok = json_is_string(prompt) ? serve_request_add_text(r->req, json_string_value(prompt))
                                     : add_token_ids(r->req, prompt);
    return ok || out_of_memory(r->err) != NULL;
}

/* ---- the request ----------------------------------------------------------------------------- */

static openai_call *new_call(openai_kind kind) {
    static atomic_uint_fast64_t counter;
    openai_call *call = calloc(1, sizeof *call);
    if (!call) return NULL;
    call->kind = kind;
    call->created = (json_int_t)time(NULL);
    unsigned long long n = (unsigned long long)atomic_fetch_add(&counter, 1) + 1;
    snprintf(call->id, sizeof call->id, "%s-%llx%06llx", kind == OPENAI_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)call->created, n);
    return call;
}

static bool read_request(openai_read *r, api_host *host, const http_chat *chat) {
    /* the prompt as llama-server tokenizes it: special-token text (the chat template's control
     * tokens) becomes those tokens */
    r->req->parse_special = true;
    return check_names(r->body, r->err) && check_harmless(r->body, r->kind, r->err) && read_max_tokens(r) &&
           read_logprobs(r) && read_stream(r) && read_response_format(r) && read_prompt(r, host, chat);
}

completion_call *openai_build_call(api_host *host, openai_kind kind, json_t *body, const http_chat *chat,
                                   openai_error *err) {
    completion_call *call = completion_call_new(host, false);
    serve_request *req = call ? malloc(sizeof *req) : NULL;
    openai_call *answer = req ? new_call(kind) : NULL;
    if (req) serve_request_init(req); /* the host's defaults are the API layer's to apply, once */
    if (call) call->request = req;
    if (answer) call->reply = openai_reply_formatter(answer);
    bool ok = answer ? true : openai_fail_with(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
    openai_read r = {body, kind, req, answer, err};
    ok = ok && read_request(&r, host, chat);
    if (ok) {
        call->stream = answer->stream;
        return call;
    }
    completion_call_free(call);
    return NULL;
}
