/* anthropic.c - Anthropic's Messages API on `specd serve` (what Claude Code and Anthropic's SDKs
 * speak), over the same chat path as OpenAI's /v1/chat/completions (llama.cpp's Jinja chat code,
 * tools, reasoning):
 *   POST /v1/messages               {model, max_tokens, system, messages (content blocks: text,
 *                                   tool_use, tool_result, thinking), tools (input_schema),
 *                                   tool_choice, stop_sequences, temperature, top_p, top_k, thinking}
 *                                   -> {type: "message", content: [text | thinking | tool_use],
 *                                   stop_reason, usage}; "stream": true gives Anthropic's events
 *                                   (anthropic_reply.c)
 *   POST /v1/messages/count_tokens  the same body -> {input_tokens}
 * The request is rewritten as an OpenAI chat request, so both APIs share every check and the
 * prompt; errors come in Anthropic's shape {"type": "error", "error": {type, message}}. */
#define _POSIX_C_SOURCE 200809L
#include "openai.h"

#include "../util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Anthropic's errors name no field (anthropic_error_body would add it to the message). */
#define BAD(err, ...) openai_fail_with(err, MHD_HTTP_BAD_REQUEST, "invalid_request_error", NULL, __VA_ARGS__)

bool anthropic_route(const char *url) {
    return !strcmp(url, "/v1/messages") || !strcmp(url, "/v1/messages/count_tokens");
}

/* ---- request: Anthropic -> OpenAI ------------------------------------------------------------- */

/* The text of a string or of an array of text blocks (new string), NULL with *err. */
static json_t *text_of(json_t *content, const char *where, openai_error *err) {
    if (json_is_string(content)) return json_incref(content);
    if (!json_is_array(content)) {
        BAD(err, "'%s' must be a string or an array of text blocks", where);
        return NULL;
    }
    static const char *const text_blocks[] = {"text", NULL};
    long bad = openai_first_non_text_part(content, text_blocks);
    if (bad >= 0) {
        BAD(err, "'%s[%ld]' must be a text block {\"type\": \"text\", \"text\"}", where, bad);
        return NULL;
    }
    return openai_joined_text(content);
}

/* One Anthropic message -> OpenAI messages appended to `out`: its text (and thinking, tool_use
 * calls) as one message, each tool_result as a "tool" message before it. */
static bool convert_message(json_t *m, size_t index, json_t *out, openai_error *err) {
    char where[64];
    snprintf(where, sizeof where, "messages[%zu]", index);
    const char *role = json_string_value(json_object_get(m, "role"));
    if (!json_is_object(m) || !role || (strcmp(role, "user") && strcmp(role, "assistant")))
        return BAD(err, "'%s.role' must be \"user\" or \"assistant\"", where);
    json_t *content = json_object_get(m, "content");
    if (json_is_string(content))
        return json_array_append_new(out, json_pack("{s:s, s:O}", "role", role, "content", content)) == 0;
    if (!json_is_array(content)) return BAD(err, "'%s.content' must be a string or an array of content blocks", where);
    json_t *parts = json_array(), *calls = json_array();
    json_t *thinking = NULL;
    size_t i;
    json_t *b;
    bool ok = true;
    json_array_foreach(content, i, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        char block[96];
        snprintf(block, sizeof block, "%s.content[%zu]", where, i);
        if (!type) {
            ok = BAD(err, "'%s' has no 'type'", block);
        } else if (!strcmp(type, "text") && json_is_string(json_object_get(b, "text"))) {
            json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", json_object_get(b, "text")));
        } else if (!strcmp(type, "image") && !strcmp(role, "user")) {
            json_t *image = openai_image_from_anthropic(b, block, err); /* an image_url part (image_parts.c) */
            ok = image && json_array_append_new(parts, image) == 0;
        } else if (!strcmp(type, "thinking") && !strcmp(role, "assistant")) {
            thinking = json_object_get(b, "thinking");
        } else if (!strcmp(type, "tool_use") && !strcmp(role, "assistant")) {
            json_t *input = json_object_get(b, "input");
            const char *name = json_string_value(json_object_get(b, "name"));
            const char *id = json_string_value(json_object_get(b, "id"));
            char *args = input ? json_dumps(input, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
            if (!name || !id || !args) ok = BAD(err, "'%s' (tool_use) needs an id, a name and an input", block);
            else json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function",
                                                        "function", "name", name, "arguments", args));
            free(args);
        } else if (!strcmp(type, "tool_result") && !strcmp(role, "user")) {
            const char *id = json_string_value(json_object_get(b, "tool_use_id"));
            json_t *result = json_object_get(b, "content");
            json_t *text = !result ? json_string("") : text_of(result, block, err);
            if (!id) ok = BAD(err, "'%s' (tool_result) needs its tool_use_id", block);
            else if (!text) ok = false;
            else json_array_append_new(out, json_pack("{s:s, s:s, s:O}", "role", "tool", "tool_call_id", id, "content", text));
            json_decref(text);
        } else {
            ok = BAD(err, "'%s': a block of type '%.40s' is not supported in a %s message (text, %s)", block, type, role,
                     strcmp(role, "user") ? "thinking and tool_use" : "image and tool_result");
        }
        if (!ok) break;
    }
    if (ok && (json_array_size(parts) || json_array_size(calls) || thinking)) {
        json_t *msg = json_pack("{s:s, s:O}", "role", role, "content", json_array_size(parts) ? parts : json_null());
        if (json_array_size(calls)) json_object_set(msg, "tool_calls", calls);
        if (json_is_string(thinking)) json_object_set(msg, "reasoning_content", thinking);
        json_array_append_new(out, msg);
    }
    json_decref(parts);
    json_decref(calls);
    return ok;
}

static bool convert_tools(json_t *tools, json_t *body, openai_error *err) {
    if (!tools) return true;
    if (!json_is_array(tools)) return BAD(err, "'tools' must be an array of {name, description, input_schema}");
    json_t *out = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        json_t *schema = json_object_get(t, "input_schema");
        if (!name || !name[0]) return json_decref(out), BAD(err, "'tools[%zu].name' must be a non-empty string", i);
        if (schema && !json_is_object(schema))
            return json_decref(out), BAD(err, "'tools[%zu].input_schema' must be a JSON Schema (an object)", i);
        json_t *fn = json_pack("{s:s, s:O}", "name", name, "parameters", schema ? schema : json_object());
        json_t *desc = json_object_get(t, "description");
        if (json_is_string(desc)) json_object_set(fn, "description", desc);
        json_array_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", fn));
    }
    return json_object_set_new(body, "tools", out) == 0;
}

/* stop_sequences: non-empty strings, checked here so that a refusal names them (the chat request
 * they become calls them stop). */
static bool convert_stop_sequences(json_t *list, json_t *body, openai_error *err) {
    if (!list) return true;
    if (!json_is_array(list)) return BAD(err, "'stop_sequences' must be an array of non-empty strings");
    size_t i;
    json_t *s;
    json_array_foreach(list, i, s)
        if (!json_is_string(s) || json_string_length(s) == 0 || strlen(json_string_value(s)) != json_string_length(s))
            return BAD(err, "'stop_sequences[%zu]' must be a non-empty string without NUL characters", i);
    json_object_set(body, "stop", list);
    return true;
}

/* tool_choice {type: auto | any | tool (name) | none, disable_parallel_tool_use}. */
static bool convert_tool_choice(json_t *choice, json_t *body, openai_error *err) {
    if (!choice) return true;
    const char *type = json_string_value(json_object_get(choice, "type"));
    if (!type) return BAD(err, "'tool_choice' must be an object with a 'type' (auto, any, tool, none)");
    if (!strcmp(type, "auto")) json_object_set_new(body, "tool_choice", json_string("auto"));
    else if (!strcmp(type, "any")) json_object_set_new(body, "tool_choice", json_string("required"));
    else if (!strcmp(type, "none")) json_object_set_new(body, "tool_choice", json_string("none"));
    else if (!strcmp(type, "tool") && json_is_string(json_object_get(choice, "name")))
        json_object_set_new(body, "tool_choice", json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name",
                                                           json_object_get(choice, "name")));
    else return BAD(err, "'tool_choice.type' must be \"auto\", \"any\", \"tool\" (with a 'name') or \"none\"");
    if (json_is_true(json_object_get(choice, "disable_parallel_tool_use")))
        json_object_set_new(body, "parallel_tool_calls", json_false());
    return true;
}

/* thinking.type into chat_template_kwargs.enable_thinking, beside the kwargs the client sent
 * (llama-server passes chat_template_kwargs through too); false with *err when they are no object. */
static bool set_enable_thinking(json_t *body, bool enabled, openai_error *err) {
    json_t *sent = json_object_get(body, "chat_template_kwargs");
    if (sent && !json_is_object(sent)) return BAD(err, "'chat_template_kwargs' must be an object");
    json_t *kwargs = sent ? json_deep_copy(sent) : json_object();
    json_object_set_new(kwargs, "enable_thinking", json_boolean(enabled));
    json_object_set_new(body, "chat_template_kwargs", kwargs);
    return true;
}

/* The Anthropic body -> an OpenAI chat body (new), NULL with *err. */
static json_t *to_openai(json_t *in, bool count_only, openai_error *err) {
    static const char *const known[] = {"model", "max_tokens", "system", "messages", "tools", "tool_choice",
                                        "stop_sequences", "temperature", "top_p", "top_k", "stream", "metadata",
                                        "thinking", "service_tier", "chat_template_kwargs", NULL};
    const char *key;
    json_t *v;
    json_object_foreach(in, key, v) {
        bool found = specd_listed(known, key);
        if (!found) {
            BAD(err, "unknown field '%s'", key);
            return NULL;
        }
    }
    /* Anthropic requires max_tokens; llama-server does not, and neither do we (the server's
     * n_predict then): a client written against llama-server keeps working. */
    json_t *max = json_object_get(in, "max_tokens");
    if (!count_only && max && (!json_is_integer(max) || json_integer_value(max) < 1)) {
        BAD(err, "'max_tokens' must be a positive integer");
        return NULL;
    }
    json_t *messages = json_object_get(in, "messages");
    if (!json_is_array(messages) || json_array_size(messages) == 0) {
        BAD(err, "'messages' (a non-empty array of {role, content}) is required");
        return NULL;
    }
    json_t *body = json_object(), *list = json_array();
    json_object_set_new(body, "messages", list);
    bool ok = true;
    json_t *system = json_object_get(in, "system");
    if (system) {
        json_t *text = text_of(system, "system", err);
        ok = text != NULL;
        if (ok) json_array_append_new(list, json_pack("{s:s, s:o}", "role", "system", "content", text));
    }
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) if (ok) ok = convert_message(m, i, list, err);
    ok = ok && convert_tools(json_object_get(in, "tools"), body, err) &&
         convert_tool_choice(json_object_get(in, "tool_choice"), body, err);
    static const char *const same[] = {"model", "max_tokens", "temperature", "top_p", "top_k", "stream",
                                       "chat_template_kwargs", NULL};
    for (const char *const *k = same; ok && *k; k++)
        if ((v = json_object_get(in, *k))) json_object_set(body, *k, v);
    ok = ok && convert_stop_sequences(json_object_get(in, "stop_sequences"), body, err);
    json_t *thinking = json_object_get(in, "thinking");
    if (ok && thinking) {
        const char *type = json_string_value(json_object_get(thinking, "type"));
        if (!type || (strcmp(type, "enabled") && strcmp(type, "disabled")))
            ok = BAD(err, "'thinking.type' must be \"enabled\" or \"disabled\"");
        else ok = set_enable_thinking(body, !strcmp(type, "enabled"), err);
    }
    if (!ok) {
        json_decref(body);
        return NULL;
    }
    return body;
}

/* The body, parsed and rewritten as an OpenAI chat body (new), NULL with *err. */
static json_t *parse(const char *text, size_t len, bool count_only, openai_error *err) {
    json_t *in = openai_load_object(text, len, err);
    if (!in) {
        err->param[0] = '\0'; /* Anthropic's error would repeat the field its message names already */
        return NULL;
    }
    json_t *body = to_openai(in, count_only, err);
    json_decref(in);
    return body;
}

completion_call *anthropic_completion_call(api_host *host, const char *text, size_t len, const http_chat *chat,
                                           openai_error *err) {
    if (!chat->jinja) {
        BAD(err, "/v1/messages needs Jinja chat templates: start specd serve without --no-jinja or --chat-template NAME");
        return NULL;
    }
    json_t *body = parse(text, len, false, err);
    completion_call *call = body ? openai_build_call(host, OPENAI_CHAT, body, chat, err) : NULL;
    completion_call_share(call, body, openai_shared_fields);
    if (call) call->reply = anthropic_reply_formatter(call->reply.ctx);
    return call;
}

json_t *anthropic_count_tokens(api_host *host, const char *text, size_t len, const http_chat *chat, openai_error *err) {
    json_t *body = parse(text, len, true, err);
    char *body_text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!body_text) return NULL;
    json_t *chat_body = openai_parse_body(body_text, strlen(body_text), err); /* as /apply-template reads it */
    free(body_text);
    serve_request images; /* the image parts as the chat would take them: their positions count */
    serve_request_init(&images);
    bool taken = chat_body && openai_take_images(json_object_get(chat_body, "messages"), &images, err);
    json_t *prompt = taken ? openai_apply_template(host, chat_body, chat, err) : NULL;
    json_decref(chat_body);
    if (!prompt) {
        serve_request_clear(&images);
        return NULL;
    }
    specd_engine *engine = NULL;
    api_error rerr;
    json_t *answer = NULL;
    if (!api_host_acquire_engine(host, &engine, &rerr)) {
        openai_fail_with(err, MHD_HTTP_SERVICE_UNAVAILABLE, "overloaded_error", NULL, "%s", rerr.message);
    } else {
        specd_token *tokens = NULL;
        int32_t n = 0;
        char *why = NULL;
        const char *prompt_text = json_string_value(json_object_get(prompt, "prompt"));
        specd_status st = images.n_images > 0 ? specd_tokenize_images(engine, prompt_text, true, true, images.images,
                                                                      images.n_images, &tokens, &n, &why)
                                              : specd_tokenize_special(engine, prompt_text, true, true, &tokens, &n, &why);
        if (st == SPECD_OK)
            answer = json_pack("{s:i}", "input_tokens", (int)n);
        else BAD(err, "the prompt cannot be tokenized: %s", why ? why : "unknown error");
        specd_free(tokens);
        specd_free(why);
        api_host_release_engine(host);
    }
    json_decref(prompt);
    serve_request_clear(&images);
    return answer;
}
