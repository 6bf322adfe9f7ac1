/* anthropic_reply.c - the answer of POST /v1/messages in Anthropic's shape, built once from the
 * result (views of the running request, serve/reply.h) on the server's thread, from the same
 * parsed chat turn as OpenAI's answer (openai_reply.c):
 *  - not streamed: {id, type: "message", role, model, content: [thinking | text | tool_use],
 *    stop_reason (tool_use, max_tokens, stop_sequence, end_turn), stop_sequence, usage} and specd's
 *    speculative and stop_type;
 *  - streamed: Anthropic's named events: message_start, then per block content_block_start,
 *    content_block_delta (text_delta, thinking_delta, input_json_delta), content_block_stop, then
 *    message_delta (stop_reason, usage, speculative) and message_stop;
 *  - errors: {"type": "error", "error": {type, message}}. */
#define _POSIX_C_SOURCE 200809L
#include "openai.h"

#include "../api/reply_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add(json_t *events, json_t *event) {
    if (event) json_array_append_new(events, event);
}

static json_t *model_of(const serve_view *v) {
    char *id = openai_model_id(v->model);
    json_t *s = json_string(id ? id : "");
    free(id);
    return s;
}

/* msg_ + the chat id's own part. */
static void message_id(const openai_call *call, char *id, size_t size) {
    snprintf(id, size, "msg_%s", call->id + (strncmp(call->id, "chatcmpl-", 9) ? 0 : 9));
}

/* stop_reason: tool_use when the answer calls tools, max_tokens for every cut, stop_sequence for
 * a stop string, end_turn for the rest. */
static const char *stop_reason(bool tool_use, const serve_view *v) {
    return tool_use ? "tool_use" : !strcmp(openai_finish_reason(v->stop), "length") ? "max_tokens"
                                 : v->stop == SERVE_STOP_WORD ? "stop_sequence" : "end_turn";
}

static json_t *stop_sequence(const serve_view *v) {
    return v->stop == SERVE_STOP_WORD ? json_string(v->stopping_word) : json_null();
}

static json_t *usage_json(const serve_view *v) {
    return json_pack("{s:I, s:I}", "input_tokens", (json_int_t)v->request->n_tokens, "output_tokens",
                     (json_int_t)v->result->n_tokens);
}

static void add_specd_fields(json_t *to, const serve_view *v) {
    if (!to) return;
    json_object_set_new(to, "speculative", reply_json_speculative(v));
    json_object_set_new(to, "stop_type", json_string(serve_stop_name(v->stop)));
}

/* ---- errors -------------------------------------------------------------------------------- */

json_t *anthropic_error_body(const openai_error *err) {
    /* Anthropic's error types: the 400s are invalid_request_error, 401 authentication_error, ... */
    const char *type = err->status == MHD_HTTP_UNAUTHORIZED ? "authentication_error"
                     : err->status == MHD_HTTP_NOT_FOUND ? "not_found_error"
                     : err->status == MHD_HTTP_SERVICE_UNAVAILABLE ? "overloaded_error"
                     : err->status >= 500 ? "api_error" : "invalid_request_error";
    char message[1100];
    if (err->param[0]) snprintf(message, sizeof message, "%s (%s)", err->message, err->param);
    else snprintf(message, sizeof message, "%s", err->message);
    return json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type", type, "message", message);
}

enum MHD_Result anthropic_send_error(struct MHD_Connection *c, const openai_error *err) {
    return send_json(c, err->status, anthropic_error_body(err));
}

/* ---- the message ----------------------------------------------------------------------------- */

static json_t *message(openai_call *call, const serve_view *v) {
    json_t *parsed = openai_chat_message(call, v);
    json_t *blocks = json_array();
    json_t *reasoning = json_object_get(parsed, "reasoning_content");
    if (json_string_length(reasoning))
        json_array_append_new(blocks, json_pack("{s:s, s:O, s:s}", "type", "thinking", "thinking", reasoning,
                                                "signature", ""));
    json_t *text = json_object_get(parsed, "content");
    if (json_string_length(text)) json_array_append_new(blocks, json_pack("{s:s, s:O}", "type", "text", "text", text));
    size_t i;
    json_t *tc;
    bool tool_use = false;
    json_array_foreach(json_object_get(parsed, "tool_calls"), i, tc) {
        json_t *fn = json_object_get(tc, "function");
        json_t *input = json_loads(json_string_value(json_object_get(fn, "arguments")), JSON_DECODE_ANY, NULL);
        if (!json_is_object(input)) {
            json_decref(input);
            input = json_object(); /* arguments that are no JSON object: none, rather than a broken block */
        }
        json_array_append_new(blocks, json_pack("{s:s, s:O, s:O, s:o}", "type", "tool_use", "id",
                                                json_object_get(tc, "id"), "name", json_object_get(fn, "name"),
                                                "input", input));
        tool_use = true;
    }
    char id[96];
    message_id(call, id, sizeof id);
    json_t *answer = json_pack("{s:s, s:s, s:s, s:o, s:o, s:s, s:o, s:o}", "id", id, "type", "message", "role",
                               "assistant", "model", model_of(v), "content", blocks, "stop_reason",
                               stop_reason(tool_use, v), "stop_sequence", stop_sequence(v), "usage", usage_json(v));
    json_decref(parsed);
    add_specd_fields(answer, v);
    return answer;
}

/* ---- streamed: Anthropic's events ------------------------------------------------------------- */

static void close_block(openai_call *call, json_t *events) {
    if (!call->block_kind) return;
    add(events, json_pack("{s:s, s:i}", "type", "content_block_stop", "index", call->block));
    call->block_kind = 0;
}

/* Opens a block of `kind` (closing the open one) unless one of that kind is open and `fresh` is
 * false; `start` is its content_block (taken). */
static void open_block(openai_call *call, char kind, bool fresh, json_t *start, json_t *events) {
    if (call->block_kind == kind && !fresh) {
        json_decref(start);
        return;
    }
    close_block(call, events);
    call->block = call->next_block++;
    call->block_kind = kind;
    add(events, json_pack("{s:s, s:i, s:o}", "type", "content_block_start", "index", call->block, "content_block", start));
}

static void add_delta(openai_call *call, json_t *delta, json_t *events) {
    add(events, json_pack("{s:s, s:i, s:o}", "type", "content_block_delta", "index", call->block, "delta", delta));
}

/* One chat delta (OpenAI's shape, from specd_chat_update) as Anthropic's block events. */
static void add_chat_delta(openai_call *call, json_t *d, json_t *events) {
    json_t *v;
    if (json_string_length(v = json_object_get(d, "reasoning_content"))) {
        open_block(call, 'k', false, json_pack("{s:s, s:s, s:s}", "type", "thinking", "thinking", "", "signature", ""),
                   events);
        add_delta(call, json_pack("{s:s, s:O}", "type", "thinking_delta", "thinking", v), events);
    }
    if (json_string_length(v = json_object_get(d, "content"))) {
        open_block(call, 't', false, json_pack("{s:s, s:s}", "type", "text", "text", ""), events);
        add_delta(call, json_pack("{s:s, s:O}", "type", "text_delta", "text", v), events);
    }
    json_t *tc = json_array_get(json_object_get(d, "tool_calls"), 0);
    if (!tc) return;
    json_t *fn = json_object_get(tc, "function");
    if (json_object_get(tc, "id")) { /* a new call */
        const char *name = json_string_value(json_object_get(fn, "name"));
        call->tool_calls_seen = true;
        open_block(call, 'u', true, json_pack("{s:s, s:O, s:s, s:{}}", "type", "tool_use", "id", json_object_get(tc, "id"),
                                              "name", name ? name : "", "input"), events);
    }
    if (json_string_length(v = json_object_get(fn, "arguments")) && call->block_kind == 'u')
        add_delta(call, json_pack("{s:s, s:O}", "type", "input_json_delta", "partial_json", v), events);
}

static json_t *stream_events(openai_call *call, const serve_view *v) {
    json_t *events = json_array();
    if (!events) return NULL;
    if (!call->role_sent) {
        call->role_sent = true;
        char id[96];
        message_id(call, id, sizeof id);
        add(events, json_pack("{s:s, s:{s:s, s:s, s:s, s:o, s:[], s:n, s:n, s:{s:I, s:i}}}", "type", "message_start",
                              "message", "id", id, "type", "message", "role", "assistant", "model", model_of(v),
                              "content", "stop_reason", "stop_sequence", "usage", "input_tokens",
                              (json_int_t)v->request->n_tokens, "output_tokens", 0));
    }
    json_t *deltas = openai_chat_deltas(call, v);
    size_t i;
    json_t *d;
    json_array_foreach(deltas, i, d) add_chat_delta(call, d, events);
    json_decref(deltas);
    if (!v->final) return events;
    close_block(call, events);
    json_t *delta = json_pack("{s:s, s:{s:s, s:o}, s:o}", "type", "message_delta", "delta", "stop_reason",
                              stop_reason(call->tool_calls_seen, v), "stop_sequence", stop_sequence(v), "usage",
                              usage_json(v));
    add_specd_fields(delta, v);
    add(events, delta);
    add(events, json_pack("{s:s}", "type", "message_stop"));
    return events;
}

/* ---- the formatter --------------------------------------------------------------------------- */

serve_reply anthropic_reply_formatter(openai_call *call) {
    static const openai_shape shape = {.events = stream_events, .whole = message};
    return openai_shape_reply(call, &shape);
}

/* A failure in the middle of a stream, in Anthropic's shape. */
static json_t *stream_error(const serve_fault *fault) {
    openai_error err;
    openai_error_from_fault(fault, &err);
    return anthropic_error_body(&err);
}

enum MHD_Result anthropic_stream_respond(struct MHD_Connection *c, serve_job *job) {
    static const sse_format format = {.error = stream_error, .done = NULL, .named = true};
    return sse_respond(c, job, &format);
}
