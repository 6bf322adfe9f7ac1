/* openai_messages.c - the messages of an OpenAI chat request, checked so that a mistake is a 400
 * naming the field (messages[i].role, ...) rather than a template's own failure: for llama.cpp's
 * built-in formats (--no-jinja: roles and text, into the typed request's messages) and for its
 * Jinja chat code (tool calls and tool results too; the JSON goes to specd_chat_begin as sent). */
#define _POSIX_C_SOURCE 200809L
#include "openai.h"

#include "../util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(err, param, ...) openai_fail_with(err, MHD_HTTP_BAD_REQUEST, "invalid_request_error", param, __VA_ARGS__)

static char *out_of_memory(openai_error *err) {
    openai_fail_with(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
    return NULL;
}

/* A message's content: a string, null, or an array of {type: "text", text} parts (joined). Heap. */
char *openai_message_text(json_t *content, size_t index, openai_error *err) {
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
    static const char *const text_only[] = {"text", NULL};
    long bad = openai_first_non_text_part(content, text_only);
    if (bad >= 0) {
        /* image parts became markers in the text before (image_parts.c): what is left is another kind */
        const char *type = json_string_value(json_object_get(json_array_get(content, (size_t)bad), "type"));
        BAD(err, param, "%s[%ld]: a part of type '%s' is not supported: only text parts ({\"type\": \"text\", \"text\": "
            "\"...\"}) and image_url parts (with --mmproj) are", param, bad, type ? type : "(none)");
        return NULL;
    }
    char *joined = openai_join_texts(content);
    return joined ? joined : out_of_memory(err);
}

long openai_first_non_text_part(json_t *parts, const char *const *types) {
    size_t i;
    json_t *part;
    json_array_foreach(parts, i, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        if (!specd_listed(types, type) || !json_is_string(json_object_get(part, "text"))) return (long)i;
    }
    return -1;
}

char *openai_join_texts(json_t *parts) {
    size_t len = 1, at = 0, i;
    json_t *part;
    json_array_foreach(parts, i, part) len += json_string_length(json_object_get(part, "text"));
    char *joined = malloc(len);
    if (!joined) return NULL;
    json_array_foreach(parts, i, part) { /* each up to its first NUL, as C strings join */
        const char *text = json_string_value(json_object_get(part, "text"));
        size_t n = strlen(text);
        memcpy(joined + at, text, n);
        at += n;
    }
    joined[at] = '\0';
    return joined;
}

json_t *openai_joined_text(json_t *parts) {
    char *joined = openai_join_texts(parts);
    json_t *out = joined ? json_string(joined) : NULL;
    free(joined);
    return out;
}

/* The role of the message at `param` ("messages[i]"): one of `roles` (NULL-terminated), which
 * must_be names for the error; NULL (and the error) when the message is no object with a role, or
 * has another. */
static const char *message_role(json_t *m, const char *param, const char *const *roles, const char *must_be,
                                openai_error *err) {
    if (!json_is_object(m) || !json_is_string(json_object_get(m, "role"))) {
        BAD(err, param, "'%s' must be an object with a 'role' (a string) and a 'content'", param);
        return NULL;
    }
    const char *role = json_string_value(json_object_get(m, "role"));
    if (specd_listed(roles, role)) return role;
    char role_param[96];
    snprintf(role_param, sizeof role_param, "%s.role", param);
    BAD(err, role_param, "'%s' is '%.100s': it must be %s", role_param, role, must_be);
    return NULL;
}

static bool check_message(json_t *m, size_t i, openai_error *err) {
    /* The roles a chat template knows: "tool" and "function" messages come with tool calls, which
     * specd does not support, and any other name is a client's mistake the template would pass on. */
    static const char *const roles[] = {"system", "developer", "user", "assistant", NULL};
    char param[80];
    snprintf(param, sizeof param, "messages[%zu]", i);
    if (!message_role(m, param, roles, "\"system\", \"developer\", \"user\" or \"assistant\" (tool messages need tool "
                      "calls, which specd does not support)", err))
        return false;
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

/* The conversation as chat messages (the template is applied once the request meets the engine). */
bool openai_read_messages(json_t *messages, serve_request *req, openai_error *err) {
    size_t n = json_array_size(messages);
    if (!json_is_array(messages) || n == 0)
        return BAD(err, "messages", "'messages' (a non-empty array of {role, content}) is required");
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(messages, i);
        char *text = check_message(m, i, err) ? openai_message_text(json_object_get(m, "content"), i, err) : NULL;
        bool ok = text && serve_request_add_message(req, json_string_value(json_object_get(m, "role")), text);
        if (text && !ok) out_of_memory(err);
        free(text);
        if (!ok) return false;
    }
    return true;
}

/* A message for the Jinja chat code: what llama-server takes. */
static bool check_jinja_message(json_t *m, size_t i, openai_error *err) {
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool", NULL};
    char param[80];
    snprintf(param, sizeof param, "messages[%zu]", i);
    const char *role =
        message_role(m, param, roles, "\"system\", \"developer\", \"user\", \"assistant\" or \"tool\"", err);
    if (!role) return false;
    bool assistant = !strcmp(role, "assistant"), tool = !strcmp(role, "tool");
    json_t *content = json_object_get(m, "content");
    if (content && !json_is_null(content) && !json_is_string(content)) {
        char *text = openai_message_text(content, i, err); /* text parts only */
        if (!text) return false;
        free(text);
    }
    if (!content && !(assistant && json_object_get(m, "tool_calls")))
        return BAD(err, param, "'%s' has no 'content'%s", param, assistant ? " (nor 'tool_calls')" : "");
    const char *key;
    json_t *v;
    json_object_foreach(m, key, v) {
        if (!strcmp(key, "role") || !strcmp(key, "content") || !strcmp(key, "name") ||
            (!strcmp(key, "refusal") && json_is_null(v)) ||
            (assistant && (!strcmp(key, "tool_calls") || !strcmp(key, "reasoning_content"))) ||
            (tool && !strcmp(key, "tool_call_id")))
            continue;
        return BAD(err, param, "'%s.%s' is not supported here (a %s message carries %s)", param, key, role,
                   assistant ? "content, name, tool_calls and reasoning_content" : tool ? "content and tool_call_id"
                                                                                  : "a content and a name");
    }
    return true;
}

bool openai_check_jinja_messages(json_t *messages, openai_error *err) {
    if (!json_is_array(messages) || json_array_size(messages) == 0)
        return BAD(err, "messages", "'messages' (a non-empty array of {role, content}) is required");
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) if (!check_jinja_message(m, i, err)) return false;
    return true;
}
