/* responses.c - OpenAI's Responses API on `specd serve` (what the Codex CLI and the Agents SDK
 * speak), over the same chat path as /v1/chat/completions (llama.cpp's Jinja chat code, tools,
 * reasoning):
 *   POST /v1/responses  {model, input (a string, or items: messages {role, content (a string or
 *                       input_text / output_text parts)}, function_call {call_id, name,
 *                       arguments}, function_call_output {call_id, output}), instructions, tools
 *                       ([{type: "function", name, description, parameters}]), tool_choice,
 *                       parallel_tool_calls, max_output_tokens, temperature, top_p, and the
 *                       chat route's llama.cpp sampler fields (openai_shared_field) and
 *                       id_slot, as llama-server passes them on}
 *                       -> {object: "response", status, output: [reasoning, message
 *                       (output_text), function_call items], usage} (responses_reply.c)
 * The request is rewritten as a chat request, so both share every check and the prompt; errors
 * in OpenAI's shape. "stream": true gives the Responses API's events. previous_response_id is not
 * implemented (400), as the pinned llama-server refuses it too (tools/server/server-chat.cpp). */
#define _POSIX_C_SOURCE 200809L
#include "openai.h"

#include "../util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(err, param, ...) openai_fail_with(err, MHD_HTTP_BAD_REQUEST, "invalid_request_error", param, __VA_ARGS__)

bool responses_route(const char *url) { return !strcmp(url, "/v1/responses"); }

/* Content with input_image parts: OpenAI chat parts, text and image_url (image_parts.c), in order. */
static json_t *content_parts(json_t *content, const char *where, openai_error *err) {
    json_t *out = json_array();
    size_t i;
    json_t *part;
    json_array_foreach(content, i, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        json_t *text = json_object_get(part, "text");
        char at[128];
        snprintf(at, sizeof at, "%.90s[%zu]", where, i);
        json_t *made = type && !strcmp(type, "input_image") ? openai_image_from_input_image(part, at, err)
                       : json_is_string(text) ? json_pack("{s:s, s:O}", "type", "text", "text", text)
                                              : (BAD(err, at, "'%s': only text and input_image parts are supported", at),
                                                 NULL);
        if (!made || json_array_append_new(out, made) != 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* A message's content: a string, or parts of type input_text / output_text / text (joined), or
 * with input_image parts an array of chat parts. */
static json_t *content_text(json_t *content, const char *where, openai_error *err) {
    if (json_is_string(content)) return json_incref(content);
    static const char *const with_image[] = {"input_image", NULL};
    size_t i;
    json_t *part;
    json_array_foreach(content, i, part) if (specd_listed(with_image, json_string_value(json_object_get(part, "type"))))
        return content_parts(content, where, err);
    if (!json_is_array(content)) {
        BAD(err, where, "'%s' must be a string or an array of input_text parts", where);
        return NULL;
    }
    static const char *const text_parts[] = {"input_text", "output_text", "text", NULL};
    long first_bad = openai_first_non_text_part(content, text_parts);
    if (first_bad >= 0) {
        BAD(err, where, "'%s[%ld]': only text parts (input_text, output_text) and input_image parts are supported",
            where, first_bad);
        return NULL;
    }
    return openai_joined_text(content);
}

/* One input item -> chat messages appended to `out`; function calls join the assistant message
 * before them (or start one). */
static bool convert_item(json_t *item, size_t i, json_t *out, openai_error *err) {
    char where[64];
    snprintf(where, sizeof where, "input[%zu]", i);
    if (!json_is_object(item)) return BAD(err, where, "'%s' must be an object", where);
    const char *type = json_string_value(json_object_get(item, "type"));
    const char *role = json_string_value(json_object_get(item, "role"));
    if (!type || !strcmp(type, "message")) {
        if (!role || (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system") &&
                      strcmp(role, "developer")))
            return BAD(err, where, "'%s.role' must be \"user\", \"assistant\", \"system\" or \"developer\"", where);
        char part[80];
        snprintf(part, sizeof part, "%s.content", where);
        json_t *text = content_text(json_object_get(item, "content"), part, err);
        if (!text) return false;
        return json_array_append_new(out, json_pack("{s:s, s:o}", "role", role, "content", text)) == 0;
    }
    if (!strcmp(type, "function_call")) {
        const char *id = json_string_value(json_object_get(item, "call_id"));
        const char *name = json_string_value(json_object_get(item, "name"));
        const char *args = json_string_value(json_object_get(item, "arguments"));
        if (!id || !name || !args) return BAD(err, where, "'%s' (function_call) needs call_id, name and arguments", where);
        json_t *call = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function", "function", "name", name,
                                 "arguments", args);
        json_t *last = json_array_get(out, json_array_size(out) - 1);
        const char *last_role = json_string_value(json_object_get(last, "role"));
        if (last_role && !strcmp(last_role, "assistant")) {
            json_t *calls = json_object_get(last, "tool_calls");
            if (!calls) json_object_set_new(last, "tool_calls", calls = json_array());
            return json_array_append_new(calls, call) == 0;
        }
        return json_array_append_new(out, json_pack("{s:s, s:n, s:[o]}", "role", "assistant", "content", "tool_calls",
                                                     call)) == 0;
    }
    if (!strcmp(type, "function_call_output")) {
        const char *id = json_string_value(json_object_get(item, "call_id"));
        json_t *output = json_object_get(item, "output");
        if (!id || !json_is_string(output))
            return BAD(err, where, "'%s' (function_call_output) needs call_id and output (a string)", where);
        return json_array_append_new(out, json_pack("{s:s, s:s, s:O}", "role", "tool", "tool_call_id", id, "content",
                                                    output)) == 0;
    }
    if (!strcmp(type, "reasoning")) return true; /* earlier reasoning: the templates drop it from the history */
    return BAD(err, where, "'%s.type' '%.40s' is not supported (message, function_call, function_call_output)", where,
               type);
}

/* reasoning: {effort, summary} as OpenAI takes them, each optional; effort "none" turns thinking
 * off (chat_template_kwargs), the others leave the template's default (llama-server passes effort
 * on and reads nothing else). Anything else is refused rather than ignored. */
static bool check_reasoning(json_t *reasoning, openai_error *err) {
    static const char *const efforts[] = {"none", "minimal", "low", "medium", "high", "xhigh", NULL};
    static const char *const summaries[] = {"auto", "concise", "detailed", NULL};
    if (!reasoning || json_is_null(reasoning)) return true;
    if (!json_is_object(reasoning))
        return BAD(err, "reasoning", "'reasoning' must be an object {\"effort\", \"summary\"}");
    const char *key;
    json_t *v;
    json_object_foreach(reasoning, key, v) {
        bool effort = !strcmp(key, "effort"), summary = !strcmp(key, "summary") || !strcmp(key, "generate_summary");
        if (!effort && !summary) return BAD(err, "reasoning", "unknown field 'reasoning.%.40s' (effort, summary)", key);
        if (json_is_null(v)) continue;
        if (effort && !specd_listed(efforts, json_string_value(v)))
            return BAD(err, "reasoning", "'reasoning.effort' must be \"none\", \"minimal\", \"low\", \"medium\", "
                       "\"high\" or \"xhigh\"");
        if (summary && !specd_listed(summaries, json_string_value(v)))
            return BAD(err, "reasoning", "'reasoning.%s' must be \"auto\", \"concise\" or \"detailed\"", key);
    }
    return true;
}

/* The Responses body -> a chat body (new), NULL with *err. */
static json_t *to_chat(json_t *in, openai_error *err) {
    static const char *const known[] = {"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
                                        "max_output_tokens", "temperature", "top_p", "stream", "store", "metadata",
                                        "user", "previous_response_id", "reasoning", "truncation", "include",
                                        "service_tier", "text", "id_slot", NULL};
    const char *key;
    json_t *v;
    json_object_foreach(in, key, v) {
        bool found = specd_listed(known, key);
        if (!found && openai_shared_field(key)) continue; /* llama-server's sampler fields, passed on below */
        if (!found) {
            BAD(err, key, "unknown field '%s'", key);
            return NULL;
        }
    }
    if (json_is_string(json_object_get(in, "previous_response_id"))) {
        BAD(err, "previous_response_id", "'previous_response_id' is not supported: specd keeps no responses (nor does "
            "llama-server); send the whole conversation as input items");
        return NULL;
    }
    if (!check_reasoning(json_object_get(in, "reasoning"), err)) return NULL;
    json_t *text = json_object_get(in, "text");
    const char *format = json_string_value(json_object_get(json_object_get(text, "format"), "type"));
    if (text && (!format || strcmp(format, "text"))) {
        BAD(err, "text", "'text.format' may only be {\"type\": \"text\"} here");
        return NULL;
    }
    json_t *body = json_object(), *messages = json_array();
    json_object_set_new(body, "messages", messages);
    bool ok = true;
    json_t *instructions = json_object_get(in, "instructions");
    if (json_is_string(instructions))
        json_array_append_new(messages, json_pack("{s:s, s:O}", "role", "system", "content", instructions));
    json_t *input = json_object_get(in, "input");
    if (json_is_string(input)) {
        json_array_append_new(messages, json_pack("{s:s, s:O}", "role", "user", "content", input));
    } else if (json_is_array(input) && json_array_size(input) > 0) {
        size_t i;
        json_t *item;
        json_array_foreach(input, i, item) if (ok) ok = convert_item(item, i, messages, err);
    } else {
        ok = BAD(err, "input", "'input' (a string or a non-empty array of items) is required");
    }
    json_t *tools = json_object_get(in, "tools");
    if (ok && tools) {
        json_t *list = json_array();
        json_object_set_new(body, "tools", list);
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            const char *type = json_string_value(json_object_get(t, "type"));
            if (!type || strcmp(type, "function")) {
                ok = BAD(err, "tools", "'tools[%zu]': only function tools are supported", i);
                break;
            }
            json_t *fn = json_object();
            static const char *const fields[] = {"name", "description", "parameters", NULL};
            for (const char *const *f = fields; *f; f++)
                if ((v = json_object_get(t, *f))) json_object_set(fn, *f, v);
            json_array_append_new(list, json_pack("{s:s, s:o}", "type", "function", "function", fn));
        }
    }
    json_t *choice = json_object_get(in, "tool_choice");
    if (ok && choice) {
        const char *type = json_string_value(json_object_get(choice, "type"));
        if (json_is_string(choice)) json_object_set(body, "tool_choice", choice);
        else if (type && !strcmp(type, "function") && json_is_string(json_object_get(choice, "name")))
            json_object_set_new(body, "tool_choice", json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name",
                                                               json_object_get(choice, "name")));
        else ok = BAD(err, "tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                      "{\"type\": \"function\", \"name\"}");
    }
    static const char *const same[] = {"model", "parallel_tool_calls", "stream", "id_slot", NULL};
    for (const char *const *k = same; ok && *k; k++)
        if ((v = json_object_get(in, *k))) json_object_set(body, *k, v);
    json_object_foreach(in, key, v) if (ok && openai_shared_field(key)) json_object_set(body, key, v);
    if (ok && (v = json_object_get(in, "max_output_tokens"))) json_object_set(body, "max_tokens", v);
    const char *effort = json_string_value(json_object_get(json_object_get(in, "reasoning"), "effort"));
    if (ok && effort && !strcmp(effort, "none"))
        json_object_set_new(body, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", 0));
    if (!ok) {
        json_decref(body);
        return NULL;
    }
    return body;
}

void responses_name_field(openai_error *err) {
    /* the request went on as a chat request (to_chat): its fields by the names the client sent */
    static const char *const names[][2] = {{"messages", "input"}, {"max_tokens", "max_output_tokens"}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(err->param, names[i][0])) snprintf(err->param, sizeof err->param, "%s", names[i][1]);
}

completion_call *responses_completion_call(api_host *host, const char *text, size_t len, const http_chat *chat,
                                           openai_error *err) {
    if (!chat->jinja) {
        BAD(err, NULL, "/v1/responses needs Jinja chat templates: start specd serve without --no-jinja or "
            "--chat-template NAME");
        return NULL;
    }
    json_t *in = openai_parse_body(text, len, err);
    json_t *body = in ? to_chat(in, err) : NULL;
    json_decref(in);
    completion_call *call = body ? openai_build_call(host, OPENAI_CHAT, body, chat, err) : NULL;
    if (body && !call) responses_name_field(err);
    completion_call_share(call, body, openai_shared_fields);
    if (call) call->reply = responses_reply_formatter(call->reply.ctx);
    return call;
}
