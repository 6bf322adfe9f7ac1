/* openai_stream.c - a streamed OpenAI answer (sse.c does the streaming): each completion update
 * becomes OpenAI chunks. Chat: a first chunk with delta {role: "assistant"}, then {content}
 * deltas (with the update's `origins` beside `choices` when return_origins was asked), a last
 * chunk with an empty delta, the finish_reason and specd's `speculative` figures, then with
 * stream_options.include_usage a chunk with choices [] and usage (and speculative again), then
 * "data: [DONE]". /v1/completions: text_completion chunks with choices[].text, ending the same way.
 * Logprobs (both shapes) are built here too, as the non-streamed answer uses the same mapping. */
#include "openai.h"

#include <string.h>

/* ---- logprobs -------------------------------------------------------------------------------- */

/* llama-server's entry {id, token, logprob, bytes, top_logprobs} -> chat's {token, logprob, bytes,
 * top_logprobs: [{token, logprob, bytes}]} with at most `n_top` alternatives. */
static json_t *chat_entry(json_t *entry, int n_top) {
    json_t *top = json_array();
    size_t i;
    json_t *alt;
    json_array_foreach(json_object_get(entry, "top_logprobs"), i, alt) {
        if ((int)i >= n_top) break;
        json_array_append_new(top, json_pack("{s:O, s:O, s:O}", "token", json_object_get(alt, "token"), "logprob",
                                             json_object_get(alt, "logprob"), "bytes", json_object_get(alt, "bytes")));
    }
    return json_pack("{s:O, s:O, s:O, s:o}", "token", json_object_get(entry, "token"), "logprob",
                     json_object_get(entry, "logprob"), "bytes", json_object_get(entry, "bytes"), "top_logprobs", top);
}

/* -> /v1/completions' {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}. */
static json_t *text_logprobs(json_t *probs, int n_top, json_int_t *text_offset) {
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offsets = json_array();
    size_t i, j;
    json_t *entry, *alt;
    json_array_foreach(probs, i, entry) {
        json_array_append(tokens, json_object_get(entry, "token"));
        json_array_append(lps, json_object_get(entry, "logprob"));
        json_t *top = json_object();
        json_array_foreach(json_object_get(entry, "top_logprobs"), j, alt) {
            const char *piece = json_string_value(json_object_get(alt, "token"));
            if ((int)j >= n_top || !piece) break;
            json_object_set(top, piece, json_object_get(alt, "logprob"));
        }
        json_array_append_new(tops, top);
        json_array_append_new(offsets, json_integer(*text_offset));
        *text_offset += (json_int_t)json_array_size(json_object_get(entry, "bytes"));
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offsets);
}

json_t *openai_logprobs(const openai_call *call, json_t *probs, json_int_t *text_offset) {
    if (call->kind == OPENAI_TEXT) return text_logprobs(probs, call->top_logprobs, text_offset);
    json_t *content = json_array();
    size_t i;
    json_t *entry;
    json_array_foreach(probs, i, entry) json_array_append_new(content, chat_entry(entry, call->top_logprobs));
    return json_pack("{s:o}", "content", content);
}

/* ---- chunks ---------------------------------------------------------------------------------- */

static json_t *chunk(const openai_call *call, json_t *choices) {
    return json_pack("{s:s, s:s, s:I, s:s, s:o}", "id", call->id, "object",
                     call->kind == OPENAI_CHAT ? "chat.completion.chunk" : "text_completion", "created", call->created,
                     "model", call->model, "choices", choices);
}

/* One choice: chat's {index, delta, finish_reason, logprobs} or text's {index, text, ...}. */
static json_t *choice(const openai_call *call, json_t *delta_or_text, const char *finish, json_t *logprobs) {
    return json_pack("{s:i, s:o, s:o, s:o}", "index", 0, call->kind == OPENAI_CHAT ? "delta" : "text", delta_or_text,
                     "finish_reason", finish ? json_string(finish) : json_null(), "logprobs",
                     logprobs ? logprobs : json_null());
}

static void add(json_t *events, json_t *event) {
    if (event) json_array_append_new(events, event);
}

/* The text of an update as a chunk (with its logprobs and origins). */
static void add_text(openai_call *call, json_t *update, json_t *events) {
    json_t *content = json_object_get(update, "content");
    json_t *probs = json_object_get(update, "completion_probabilities");
    if (json_string_length(content) == 0 && json_array_size(probs) == 0) return;
    json_t *logprobs = call->logprobs ? openai_logprobs(call, probs, &call->text_offset) : NULL;
    json_t *piece = call->kind == OPENAI_CHAT ? json_pack("{s:O}", "content", content) : json_incref(content);
    json_t *event = chunk(call, json_pack("[o]", choice(call, piece, NULL, logprobs)));
    json_t *origins = json_object_get(update, "origins");
    if (event && call->return_origins && origins) json_object_set(event, "origins", origins);
    add(events, event);
}

/* The end: finish_reason and speculative; then usage when asked. */
static void add_finish(openai_call *call, json_t *update, json_t *events) {
    const char *finish = openai_finish_reason(json_string_value(json_object_get(update, "stop_type")));
    json_t *empty = call->kind == OPENAI_CHAT ? json_object() : json_string("");
    json_t *event = chunk(call, json_pack("[o]", choice(call, empty, finish, NULL)));
    openai_add_specd_fields(event, update);
    add(events, event);
    if (!call->include_usage) return;
    event = chunk(call, json_array());
    if (event) json_object_set_new(event, "usage", openai_usage(update));
    openai_add_specd_fields(event, update);
    add(events, event);
}

json_t *openai_stream_events(openai_call *call, json_t *update) {
    json_t *events = json_array();
    if (!events) return NULL;
    if (call->kind == OPENAI_CHAT && !call->role_sent) {
        call->role_sent = true;
        add(events, chunk(call, json_pack("[o]", choice(call, json_pack("{s:s, s:s}", "role", "assistant", "content", ""),
                                                        NULL, NULL))));
    }
    add_text(call, update, events);
    if (json_is_true(json_object_get(update, "stop"))) add_finish(call, update, events);
    return events;
}

json_t *openai_stream_error(openai_call *call, json_t *error) {
    (void)call;
    openai_error err;
    openai_error_from_rpc(error, &err);
    return json_pack("{s:{s:s, s:s, s:o, s:n}}", "error", "message", err.message, "type", err.type, "param",
                     err.param[0] ? json_string(err.param) : json_null(), "code");
}

static json_t *events_cb(void *ctx, json_t *update) { return openai_stream_events(ctx, update); }
static json_t *error_cb(void *ctx, json_t *error) { return openai_stream_error(ctx, error); }
static void free_cb(void *ctx) { openai_call_free(ctx); }

enum MHD_Result openai_stream_respond(struct MHD_Connection *c, json_int_t id, openai_call *call) {
    sse_format format = {.events = events_cb, .error = error_cb, .done = "[DONE]", .free = free_cb, .ctx = call};
    return sse_respond_as(c, id, &format);
}
