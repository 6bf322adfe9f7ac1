/* openai_chat.c - chat prompts through llama.cpp's Jinja chat code (specd_chat_*, the code
 * llama-server runs with --jinja): a /v1/chat/completions request's messages, tools and template
 * options rendered into the typed request's prompt and stop strings, the turn kept for its answer
 * to be parsed back (content, reasoning_content, tool_calls; openai_reply.c); and POST
 * /apply-template (llama-server's): the prompt a chat request would get, nothing generated, in
 * either mode (Jinja, or --no-jinja's built-in formats). The template renders on the HTTP thread:
 * it takes milliseconds, and a mistake in the request is then a 400 before it is queued. */
#define _POSIX_C_SOURCE 200809L
#include "openai.h"

#include <stdlib.h>
#include <string.h>

#define BAD(err, param, ...) openai_fail_with(err, MHD_HTTP_BAD_REQUEST, "invalid_request_error", param, __VA_ARGS__)

/* The fields of a chat request the Jinja chat code reads (specd_chat_begin). */
static const char *const jinja_fields[] = {"messages", "tools", "tool_choice", "parallel_tool_calls",
                                           "chat_template_kwargs", "reasoning_format", "add_generation_prompt", NULL};

static bool out_of_memory(openai_error *err) {
    return openai_fail_with(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
}

/* Which field an error from the chat code is about, for OpenAI's `param`. */
static const char *error_param(const char *message) {
    if (strstr(message, "tool_choice")) return "tool_choice";
    if (strstr(message, "tools")) return "tools";
    if (strstr(message, "schema")) return "tools"; /* a tool's parameters: llama.cpp's JSON schema conversion */
    if (strstr(message, "chat_template_kwargs") || strstr(message, "enable_thinking")) return "chat_template_kwargs";
    if (strstr(message, "reasoning format") || strstr(message, "reasoning_format")) return "reasoning_format";
    return "messages";
}

/* tool_choice "required" (Anthropic's "any") or a named function asks for a call that cannot be
 * made without tools: refused as OpenAI refuses it, not answered with free text. */
static bool check_tool_choice(json_t *body, openai_error *err) {
    json_t *choice = json_object_get(body, "tool_choice"), *tools = json_object_get(body, "tools");
    bool needs_tools = (json_is_string(choice) && !strcmp(json_string_value(choice), "required")) || json_is_object(choice);
    if (!needs_tools || (json_is_array(tools) && json_array_size(tools) > 0)) return true;
    if (json_is_string(choice))
        return BAD(err, "tool_choice", "'tool_choice' \"required\" asks for a tool call, but the request gives no "
                   "'tools': list the tools the model may call, or leave tool_choice out");
    const char *name = json_string_value(json_object_get(json_object_get(choice, "function"), "name"));
    return BAD(err, "tool_choice", "'tool_choice' names the function '%.100s', but the request gives no 'tools': list "
               "the tools the model may call, or leave tool_choice out", name ? name : "");
}

/* Begins the chat turn of `body` on the serving engine's model; false with *err. */
static bool begin_turn(api_host *host, json_t *body, const http_chat *chat, specd_chat **out, openai_error *err) {
    if (!openai_check_jinja_messages(json_object_get(body, "messages"), err) || !check_tool_choice(body, err))
        return false;
    json_t *request = json_object();
    for (const char *const *f = jinja_fields; request && *f; f++) {
        json_t *v = json_object_get(body, *f);
        if (v) json_object_set(request, *f, v);
    }
    char *text = request ? json_dumps(request, JSON_COMPACT) : NULL;
    json_decref(request);
    if (!text) return out_of_memory(err);
    specd_engine *engine = NULL;
    api_error rerr;
    bool ok = api_host_acquire_engine(host, &engine, &rerr);
    if (!ok) {
        openai_error_from(&rerr, err);
    } else {
        char *why = NULL;
        if (specd_chat_begin(engine, chat->template_src, text, out, &why) != SPECD_OK) {
            const char *message = why ? why : "the chat template failed";
            ok = BAD(err, error_param(message), "%s", message);
        }
        specd_free(why);
        api_host_release_engine(host);
    }
    free(text);
    return ok;
}

/* The turn's parameters (specd_chat_params) as JSON (new), or NULL with *err. */
static json_t *turn_params(const specd_chat *turn, openai_error *err) {
    json_error_t jerr;
    json_t *made = json_loads(specd_chat_params(turn), 0, &jerr);
    if (!made) openai_fail_with(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "chat params: %s", jerr.text);
    return made;
}

/* llama.cpp's tool grammar constrains the output: from the first token for tool_choice "required"
 * or a named function (the template's generation prompt prefilled, as llama-server does), lazily
 * for "auto" (free text until the model opens a call, then the call's grammar). */
static bool tool_grammar(json_t *made, serve_request *req, openai_error *err) {
    const char *grammar = json_string_value(json_object_get(made, "grammar"));
    if (!grammar || !grammar[0]) return true;
    if (req->grammar)
        return BAD(err, "response_format", "'response_format' cannot be combined with tools: both constrain the output");
    if (!serve_request_set_grammar(req, grammar)) return out_of_memory(err);
    if (!json_is_true(json_object_get(made, "grammar_lazy")))
        return serve_request_set_grammar_prefill(req, json_string_value(json_object_get(made, "generation_prompt"))) ||
               out_of_memory(err);
    req->gen.grammar_lazy = true;
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(made, "grammar_triggers"), i, t) {
        json_int_t type = json_integer_value(json_object_get(t, "type"));
        const char *value = json_string_value(json_object_get(t, "value"));
        if (type < SERVE_TRIGGER_TOKEN || type > SERVE_TRIGGER_PATTERN_FULL || !value) continue;
        if (!serve_request_add_trigger(req, (serve_trigger)type, value,
                                       (specd_token)json_integer_value(json_object_get(t, "token"))))
            return out_of_memory(err);
    }
    return true;
}

bool openai_chat_prompt(api_host *host, json_t *body, const http_chat *chat, serve_request *req, specd_chat **turn,
                        openai_error *err) {
    if (!begin_turn(host, body, chat, turn, err)) return false;
    json_t *made = turn_params(*turn, err);
    if (!made) return false;
    const char *prompt = json_string_value(json_object_get(made, "prompt"));
    bool ok = serve_request_add_text(req, prompt ? prompt : "");
    size_t i;
    json_t *stop;
    /* the template's own end markers, beside the request's stop strings */
    json_array_foreach(json_object_get(made, "additional_stops"), i, stop)
        if (ok && json_string_length(stop) > 0) ok = serve_request_add_stop(req, json_string_value(stop));
    if (!ok) {
        json_decref(made);
        return out_of_memory(err);
    }
    ok = tool_grammar(made, req, err);
    /* the format's markers that are control tokens stay in the text its parser reads */
    json_array_foreach(json_object_get(made, "preserved_tokens"), i, stop)
        if (ok && json_is_string(stop) && !serve_request_add_preserved(req, json_string_value(stop))) ok = out_of_memory(err);
    json_decref(made);
    return ok;
}

/* --no-jinja: the messages through one of llama.cpp's built-in formats (heap), or NULL. */
static char *builtin_prompt(api_host *host, json_t *body, const http_chat *chat, openai_error *err) {
    serve_request req;
    serve_request_init(&req);
    char *text = NULL;
    specd_engine *engine = NULL;
    api_error rerr;
    if (!openai_read_messages(json_object_get(body, "messages"), &req, err)) {
        serve_request_clear(&req);
        return NULL;
    }
    if (!api_host_acquire_engine(host, &engine, &rerr)) {
        openai_error_from(&rerr, err);
        serve_request_clear(&req);
        return NULL;
    }
    specd_chat_message *list = calloc((size_t)req.n_messages, sizeof *list);
    char *why = NULL;
    for (int32_t i = 0; list && i < req.n_messages; i++)
        list[i] = (specd_chat_message){req.messages[i].role, req.messages[i].content};
    if (!list) out_of_memory(err);
    else if (specd_chat_apply_template(engine, list, req.n_messages, chat->builtin, true, &text, &why) != SPECD_OK)
        BAD(err, "messages", "the chat template failed: %s", why ? why : "unknown error");
    api_host_release_engine(host);
    specd_free(why);
    free(list);
    serve_request_clear(&req);
    return text;
}

json_t *openai_apply_template(api_host *host, json_t *body, const http_chat *chat, openai_error *err) {
    json_t *answer = NULL;
    serve_request images; /* image parts become their markers in the prompt, as a chat request's do */
    serve_request_init(&images);
    bool taken = openai_take_images(json_object_get(body, "messages"), &images, err);
    serve_request_clear(&images);
    if (!taken) return NULL;
    if (chat->jinja) {
        specd_chat *turn = NULL;
        json_t *made = begin_turn(host, body, chat, &turn, err) ? turn_params(turn, err) : NULL;
        if (made) answer = json_pack("{s:O}", "prompt", json_object_get(made, "prompt"));
        if (made && !answer) out_of_memory(err);
        json_decref(made);
        specd_chat_free(turn);
    } else {
        char *prompt = builtin_prompt(host, body, chat, err);
        if (prompt) answer = json_pack("{s:s}", "prompt", prompt);
        if (prompt && !answer) out_of_memory(err);
        specd_free(prompt);
    }
    return answer;
}
