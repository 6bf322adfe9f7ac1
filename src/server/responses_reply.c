/* responses_reply.c - the answer of POST /v1/responses, built once from the result (views of the
 * running request, serve/reply.h) from the same parsed chat turn as OpenAI's chat answer:
 *  - not streamed: {id: "resp_...", object: "response", status (completed, or incomplete when cut,
 *    with incomplete_details), output: [reasoning (reasoning_text), message (output_text),
 *    function_call items], usage} and specd's speculative and stop_type;
 *  - streamed: the Responses API's named events, numbered by sequence_number: response.created,
 *    response.in_progress, per output item .output_item.added, content_part.added, output_text /
 *    reasoning_text / function_call_arguments deltas and their .done, output_item.done, then
 *    response.completed (or response.incomplete) with the whole response. */
#define _POSIX_C_SOURCE 200809L
#include "openai.h"

#include "../api/reply_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *model_of(const serve_view *v) {
    char *id = openai_model_id(v->model);
    json_t *s = json_string(id ? id : "");
    free(id);
    return s;
}

/* The response object for `message` (the parsed answer, borrowed) and the final `result`. */
static json_t *response_object(openai_call *call, const serve_view *v, json_t *message) {
    const char *suffix = call->id + (strncmp(call->id, "chatcmpl-", 9) ? 0 : 9);
    char id[96];
    json_t *output = json_array();
    json_t *reasoning = json_object_get(message, "reasoning_content");
    if (json_string_length(reasoning)) {
        snprintf(id, sizeof id, "rs_%s", suffix);
        json_array_append_new(output, json_pack("{s:s, s:s, s:[], s:[{s:s, s:O}]}", "type", "reasoning", "id", id,
                                                "summary", "content", "type", "reasoning_text", "text", reasoning));
    }
    json_t *text = json_object_get(message, "content");
    if (json_string_length(text)) {
        snprintf(id, sizeof id, "msg_%s", suffix);
        json_array_append_new(output, json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:O, s:[]}]}", "type", "message", "id",
                                                id, "status", "completed", "role", "assistant", "content", "type",
                                                "output_text", "text", text, "annotations"));
    }
    size_t i;
    json_t *tc;
    json_array_foreach(json_object_get(message, "tool_calls"), i, tc) {
        json_t *fn = json_object_get(tc, "function");
        snprintf(id, sizeof id, "fc_%s_%zu", suffix, i);
        json_array_append_new(output, json_pack("{s:s, s:s, s:O, s:O, s:O, s:s}", "type", "function_call", "id", id,
                                                "call_id", json_object_get(tc, "id"), "name",
                                                json_object_get(fn, "name"), "arguments",
                                                json_object_get(fn, "arguments"), "status", "completed"));
    }
    bool cut = !strcmp(openai_finish_reason(v->stop), "length");
    json_int_t n_in = v->request->n_tokens, n_out = v->result->n_tokens;
    snprintf(id, sizeof id, "resp_%s", suffix);
    json_t *answer = json_pack("{s:s, s:s, s:I, s:s, s:o, s:o, s:o, s:o, s:{s:I, s:I, s:I}}", "id", id, "object",
                               "response", "created_at", call->created, "status", cut ? "incomplete" : "completed",
                               "model", model_of(v), "incomplete_details",
                               cut ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null(), "error",
                               json_null(), "output", output, "usage", "input_tokens", n_in, "output_tokens", n_out,
                               "total_tokens", n_in + n_out);
    if (answer) {
        json_object_set_new(answer, "speculative", reply_json_speculative(v));
        json_object_set_new(answer, "stop_type", json_string(serve_stop_name(v->stop)));
    }
    return answer;
}

/* ---- streamed: the Responses API's events -------------------------------------------------------- */

static void add(openai_call *call, json_t *events, json_t *event) {
    if (!event) return;
    json_object_set_new(event, "sequence_number", json_integer(call->sequence++));
    json_array_append_new(events, event);
}

static const char *item_id(const openai_call *call) { return json_string_value(json_object_get(call->item, "id")); }

/* Ends the item being written: its .done events, with what it holds. */
static void close_item(openai_call *call, json_t *events) {
    if (!call->item) return;
    const char *type = json_string_value(json_object_get(call->item, "type"));
    int index = (int)(call->next_block - 1);
    json_object_set_new(call->item, "status", json_string("completed"));
    bool message = !strcmp(type, "message");
    if (message || !strcmp(type, "reasoning")) {
        json_t *part = json_array_get(json_object_get(call->item, "content"), 0);
        add(call, events, json_pack("{s:s, s:s, s:i, s:i, s:O}", "type", message ? "response.output_text.done"
                                    : "response.reasoning_text.done", "item_id", item_id(call), "output_index", index,
                                    "content_index", 0, "text", json_object_get(part, "text")));
        add(call, events, json_pack("{s:s, s:s, s:i, s:i, s:O}", "type", "response.content_part.done", "item_id",
                                    item_id(call), "output_index", index, "content_index", 0, "part", part));
    } else if (!strcmp(type, "function_call")) {
        add(call, events, json_pack("{s:s, s:s, s:i, s:O}", "type", "response.function_call_arguments.done", "item_id",
                                    item_id(call), "output_index", index, "arguments",
                                    json_object_get(call->item, "arguments")));
    }
    add(call, events, json_pack("{s:s, s:i, s:O}", "type", "response.output_item.done", "output_index", index, "item",
                                call->item));
    json_decref(call->item);
    call->item = NULL;
}

/* Opens an item (taken) unless one of its type is open and `fresh` is false. */
static void open_item(openai_call *call, json_t *item, bool fresh, json_t *events) {
    const char *type = json_string_value(json_object_get(item, "type"));
    if (call->item && !fresh && !strcmp(type, json_string_value(json_object_get(call->item, "type")))) {
        json_decref(item);
        return;
    }
    close_item(call, events);
    call->item = item;
    int index = call->next_block++;
    /* The event gets the item as it is now (a copy: call->item grows with the deltas, and the
     * events are sent later); a message or reasoning item opens with no content, its part comes
     * in content_part.added, as OpenAI's stream does it (the clients' stream helpers build the
     * item from these events, and a part already there would be counted twice). */
    json_t *shown = json_deep_copy(item);
    json_t *part = json_deep_copy(json_array_get(json_object_get(item, "content"), 0));
    if (shown && part) json_object_set_new(shown, "content", json_array());
    add(call, events, json_pack("{s:s, s:i, s:o}", "type", "response.output_item.added", "output_index", index, "item",
                                shown));
    if (part)
        add(call, events, json_pack("{s:s, s:s, s:i, s:i, s:o}", "type", "response.content_part.added", "item_id",
                                    item_id(call), "output_index", index, "content_index", 0, "part", part));
}

/* s += more, for a string field of an object. */
static void append_field(json_t *obj, const char *key, json_t *more) {
    json_t *now = json_object_get(obj, key);
    size_t a = json_string_length(now), b = json_string_length(more);
    char *joined = malloc(a + b + 1);
    if (!joined) return;
    memcpy(joined, json_string_value(now) ? json_string_value(now) : "", a);
    memcpy(joined + a, json_string_value(more), b);
    joined[a + b] = '\0';
    json_object_set_new(obj, key, json_stringn(joined, a + b));
    free(joined);
}

static void add_chat_delta(openai_call *call, json_t *d, json_t *events) {
    const char *suffix = call->id + (strncmp(call->id, "chatcmpl-", 9) ? 0 : 9);
    char id[96];
    json_t *v;
    if (json_string_length(v = json_object_get(d, "reasoning_content"))) {
        snprintf(id, sizeof id, "rs_%s", suffix);
        open_item(call, json_pack("{s:s, s:s, s:[], s:[{s:s, s:s}]}", "type", "reasoning", "id", id, "summary",
                                  "content", "type", "reasoning_text", "text", ""), false, events);
        append_field(json_array_get(json_object_get(call->item, "content"), 0), "text", v);
        add(call, events, json_pack("{s:s, s:s, s:i, s:i, s:O}", "type", "response.reasoning_text.delta", "item_id",
                                    item_id(call), "output_index", call->next_block - 1, "content_index", 0, "delta", v));
    }
    if (json_string_length(v = json_object_get(d, "content"))) {
        snprintf(id, sizeof id, "msg_%s", suffix);
        open_item(call, json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:s, s:[]}]}", "type", "message", "id", id, "status",
                                  "in_progress", "role", "assistant", "content", "type", "output_text", "text", "",
                                  "annotations"), false, events);
        append_field(json_array_get(json_object_get(call->item, "content"), 0), "text", v);
        add(call, events, json_pack("{s:s, s:s, s:i, s:i, s:O}", "type", "response.output_text.delta", "item_id",
                                    item_id(call), "output_index", call->next_block - 1, "content_index", 0, "delta", v));
    }
    json_t *tc = json_array_get(json_object_get(d, "tool_calls"), 0);
    if (!tc) return;
    json_t *fn = json_object_get(tc, "function");
    if (json_object_get(tc, "id")) {
        snprintf(id, sizeof id, "fc_%s_%d", suffix, (int)json_integer_value(json_object_get(tc, "index")));
        const char *name = json_string_value(json_object_get(fn, "name"));
        open_item(call, json_pack("{s:s, s:s, s:O, s:s, s:s, s:s}", "type", "function_call", "id", id, "call_id",
                                  json_object_get(tc, "id"), "name", name ? name : "", "arguments", "", "status",
                                  "in_progress"), true, events);
    }
    if (json_string_length(v = json_object_get(fn, "arguments")) && call->item &&
        !strcmp(json_string_value(json_object_get(call->item, "type")), "function_call")) {
        append_field(call->item, "arguments", v);
        add(call, events, json_pack("{s:s, s:s, s:i, s:O}", "type", "response.function_call_arguments.delta", "item_id",
                                    item_id(call), "output_index", call->next_block - 1, "delta", v));
    }
}

static json_t *stream_events(openai_call *call, const serve_view *v) {
    json_t *events = json_array();
    if (!events) return NULL;
    const char *suffix = call->id + (strncmp(call->id, "chatcmpl-", 9) ? 0 : 9);
    if (!call->role_sent) {
        call->role_sent = true;
        char id[96];
        snprintf(id, sizeof id, "resp_%s", suffix);
        json_t *r = json_pack("{s:s, s:s, s:I, s:s, s:o, s:[]}", "id", id, "object", "response", "created_at",
                              call->created, "status", "in_progress", "model", model_of(v), "output");
        add(call, events, json_pack("{s:s, s:O}", "type", "response.created", "response", r));
        add(call, events, json_pack("{s:s, s:o}", "type", "response.in_progress", "response", r));
    }
    json_t *deltas = openai_chat_deltas(call, v);
    size_t i;
    json_t *d;
    json_array_foreach(deltas, i, d) add_chat_delta(call, d, events);
    json_decref(deltas);
    if (!v->final) return events;
    close_item(call, events);
    json_t *message = json_loads(specd_chat_answer(call->chat), 0, NULL);
    json_t *r = response_object(call, v, message);
    json_decref(message);
    bool done = !strcmp(json_string_value(json_object_get(r, "status")), "completed");
    add(call, events, json_pack("{s:s, s:o}", "type", done ? "response.completed" : "response.incomplete", "response", r));
    return events;
}

static json_t *response(openai_call *call, const serve_view *v) {
    json_t *message = openai_chat_message(call, v);
    json_t *answer = response_object(call, v, message);
    json_decref(message);
    return answer;
}

/* ---- the formatter --------------------------------------------------------------------------- */

serve_reply responses_reply_formatter(openai_call *call) {
    static const openai_shape shape = {.events = stream_events, .whole = response};
    return openai_shape_reply(call, &shape);
}

/* A failure in the middle of a stream: the Responses API's error event (without a sequence
 * number: the stream's formatter context is not the error's). */
static json_t *stream_error(const serve_fault *fault) {
    openai_error err;
    openai_error_from_fault(fault, &err);
    return json_pack("{s:s, s:s, s:s}", "type", "error", "code", err.status >= 500 ? "server_error"
                     : "invalid_request_error", "message", err.message);
}

enum MHD_Result responses_stream_respond(struct MHD_Connection *c, serve_job *job) {
    static const sse_format format = {.error = stream_error, .done = NULL, .named = true};
    return sse_respond(c, job, &format);
}
