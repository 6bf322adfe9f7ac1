/* chat.c - chat messages -> prompt text through llama.cpp's chat templates (specd.h:
 * specd_chat_apply_template). llama_chat_apply_template takes either a built-in template's name or
 * a model's Jinja text, which it recognizes by its markers as one of the built-in formats. */
#include "engine_internal.h"

#include "../util/util.h"
#include "chat_jinja.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* "chatml, llama2, ..." (heap; NULL when out of memory). */
static char *builtin_template_list(void) {
    int32_t n = llama_chat_builtin_templates(NULL, 0);
    const char **names = n > 0 ? calloc((size_t)n, sizeof *names) : NULL;
    if (!names) return NULL;
    llama_chat_builtin_templates(names, (size_t)n);
    size_t len = 1;
    for (int32_t i = 0; i < n; i++) len += strlen(names[i]) + 2;
    char *list = malloc(len);
    if (list) {
        list[0] = '\0';
        for (int32_t i = 0; i < n; i++) {
            if (i) strcat(list, ", ");
            strcat(list, names[i]);
        }
    }
    free(names);
    return list;
}

static bool is_builtin_template(const char *name) {
    int32_t n = llama_chat_builtin_templates(NULL, 0);
    const char **names = n > 0 ? calloc((size_t)n, sizeof *names) : NULL;
    if (!names) return false;
    llama_chat_builtin_templates(names, (size_t)n);
    bool found = false;
    for (int32_t i = 0; i < n && !found; i++) found = strcmp(names[i], name) == 0;
    free(names);
    return found;
}

bool specd_chat_template_is_builtin(const char *name, char **names) {
    if (names) *names = NULL;
    if (name && is_builtin_template(name)) return true;
    if (names) *names = builtin_template_list();
    return false;
}

/* Sets *error to `what` followed by the built-in names; returns SPECD_ERR_INVALID_ARGUMENT. */
static specd_status fail_listing_builtins(char **error, const char *what, const char *name) {
    char *list = builtin_template_list();
    specd_set_error(error, "%s%s%s: name one of llama.cpp's built-in chat templates: %s", what, name ? name : "",
                    name ? "'" : "", list ? list : "(out of memory listing them)");
    free(list);
    return SPECD_ERR_INVALID_ARGUMENT;
}

/* The template text or name to give llama.cpp, or NULL with *error set. */
static const char *choose_template(const specd_engine *engine, const char *name, specd_status *status, char **error) {
    if (name && name[0]) {
        if (is_builtin_template(name)) return name;
        const char *own = llama_model_chat_template(engine->target.model, name);
        if (own) return own;
        *status = fail_listing_builtins(error, "unknown chat template '", name);
        return NULL;
    }
    const char *own = llama_model_chat_template(engine->target.model, NULL);
    if (!own)
        *status = fail_listing_builtins(error, "the model has no chat template (no tokenizer.chat_template in its GGUF)", NULL);
    return own;
}

static specd_status check_messages(const specd_chat_message *messages, size_t n, size_t *total, char **error) {
    *total = 0;
    if (n > 0 && !messages) {
        specd_set_error(error, "chat: %zu messages given but the array is NULL", n);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < n; i++) {
        if (!messages[i].role || !messages[i].content) {
            specd_set_error(error, "chat message %zu has no %s", i, messages[i].role ? "content" : "role");
            return SPECD_ERR_INVALID_ARGUMENT;
        }
        *total += strlen(messages[i].role) + strlen(messages[i].content);
        if (*total > INT32_MAX / 4) {
            specd_set_error(error, "chat: the messages are too long to format (over %d bytes)", INT32_MAX / 4);
            return SPECD_ERR_INVALID_ARGUMENT;
        }
    }
    return SPECD_OK;
}

/* Runs llama_chat_apply_template into a buffer that grows to the formatted length. */
static specd_status format_chat(const char *tmpl, const llama_chat_message *chat, size_t n, bool add_assistant,
                                size_t estimate, char **out, char **error) {
    int32_t cap = (int32_t)estimate + 256;
    for (int attempt = 0; attempt < 2; attempt++) {
        char *buf = malloc((size_t)cap);
        if (!buf) {
            specd_set_error(error, "out of memory formatting the chat (%d bytes)", cap);
            return SPECD_ERR_NO_MEMORY;
        }
        int32_t len = llama_chat_apply_template(tmpl, chat, n, add_assistant, buf, cap);
        if (len < 0) {
            free(buf);
            return fail_listing_builtins(error, "llama.cpp does not recognize the model's chat template (it applies its "
                                         "built-in formats only and runs no Jinja)", NULL);
        }
        if (len < cap) {
            buf[len] = '\0';
            *out = buf;
            return SPECD_OK;
        }
        free(buf);
        if (len == INT32_MAX) break;
        cap = len + 1; /* the text is longer than guessed: once more with its length */
    }
    specd_set_error(error, "chat: the formatted conversation is too long");
    return SPECD_ERR_INVALID_ARGUMENT;
}

specd_status specd_chat_apply_template(const specd_engine *engine, const specd_chat_message *messages,
                                       size_t n_messages, const char *template_name, bool add_assistant, char **out,
                                       char **error) {
    if (error) *error = NULL;
    if (out) *out = NULL;
    if (!engine || !out) {
        specd_set_error(error, "specd_chat_apply_template needs an engine and an output pointer");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    size_t total;
    specd_status st = check_messages(messages, n_messages, &total, error);
    if (st != SPECD_OK) return st;
    const char *tmpl = choose_template(engine, template_name, &st, error);
    if (!tmpl) return st;
    llama_chat_message *chat = n_messages ? specd_alloc_array(n_messages, sizeof *chat) : NULL;
    if (n_messages && !chat) {
        specd_set_error(error, "out of memory for %zu chat messages", n_messages);
        return SPECD_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < n_messages; i++) chat[i] = (llama_chat_message){messages[i].role, messages[i].content};
    st = format_chat(tmpl, chat, n_messages, add_assistant, total + total / 4, out, error);
    free(chat);
    return st;
}

const char *specd_engine_chat_template(const specd_engine *engine) {
    return engine ? llama_model_chat_template(engine->target.model, NULL) : NULL;
}

/* ---- Jinja chat (specd.h: specd_chat_*), over chat_jinja.cpp ------------------------------------ */

struct specd_chat {
    chat_jinja *turn;
};

/* The shim's messages are malloc'd; specd's callers free theirs with specd_free (free as well). */
static specd_status fail_with(char **error, char *message, const char *fallback) {
    specd_set_error(error, "%s", message ? message : fallback);
    free(message);
    return SPECD_ERR_INVALID_ARGUMENT;
}

specd_status specd_chat_begin(const specd_engine *engine, const char *template_src, const char *request_json,
                              specd_chat **out, char **error) {
    if (error) *error = NULL;
    if (out) *out = NULL;
    if (!engine || !out || !request_json) {
        specd_set_error(error, "specd_chat_begin needs an engine, a request and an output pointer");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    specd_chat *chat = calloc(1, sizeof *chat);
    if (!chat) {
        specd_set_error(error, "out of memory for a chat");
        return SPECD_ERR_NO_MEMORY;
    }
    char *why = NULL;
    chat->turn = chat_jinja_begin(engine->target.model, template_src, request_json, &why);
    if (!chat->turn) {
        free(chat);
        return fail_with(error, why, "the chat template failed");
    }
    *out = chat;
    return SPECD_OK;
}

const char *specd_chat_params(const specd_chat *chat) { return chat_jinja_params(chat ? chat->turn : NULL); }

const char *specd_chat_answer(const specd_chat *chat) { return chat_jinja_message(chat ? chat->turn : NULL); }

specd_status specd_chat_update(specd_chat *chat, const char *text, bool is_final, char **deltas, char **error) {
    if (error) *error = NULL;
    if (deltas) *deltas = NULL;
    if (!chat) {
        specd_set_error(error, "specd_chat_update needs a chat");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    char *why = NULL;
    char *list = chat_jinja_update(chat->turn, text ? text : "", !is_final, &why);
    if (!list) return fail_with(error, why, "the model's output could not be parsed");
    if (deltas) *deltas = list;
    else free(list);
    return SPECD_OK;
}

void specd_chat_free(specd_chat *chat) {
    if (!chat) return;
    chat_jinja_free(chat->turn);
    free(chat);
}

char *specd_chat_caps(const specd_engine *engine, const char *template_src, char **error) {
    if (error) *error = NULL;
    if (!engine) {
        specd_set_error(error, "specd_chat_caps needs an engine");
        return NULL;
    }
    char *why = NULL;
    char *caps = chat_jinja_caps(engine->target.model, template_src, &why);
    if (!caps) fail_with(error, why, "the chat template failed");
    return caps;
}
