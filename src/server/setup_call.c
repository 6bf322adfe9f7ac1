/* setup_call.c - a completion request (and /apply-template) read and set up on a call worker, not
 * on libmicrohttpd's threads: rendering a chat template can take seconds (a 900 KB body of 30000
 * messages held /health 4-5 s), so can reading a large body, tokenizing /infill's files or copying
 * a body for each of its outputs, and those threads answer /health and every quick route. The
 * worker reads the body, renders the prompt and makes the completion's call, then runs it
 * (completion_call_run); a request refused on the way keeps its error in its API's shape for the
 * handler to send (/completion's is its answer). /apply-template and count_tokens answer with what
 * they made, nothing runs. */
#include "openai.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct setup_call {
    setup_kind kind;
    api_host *host;
    const http_chat *chat;
    char *body;               /* the body text (owned) */
    size_t len;
    completion_call *call;    /* once set up (owned) */
    json_t *answer;           /* /apply-template, count_tokens: their answer (owned) */
    bool failed;              /* err says why */
    bool not_supported;       /* /infill on a model without fill-in-the-middle tokens (501) */
    openai_error err;
};

setup_call *setup_call_new(setup_kind kind, api_host *host, const http_chat *chat, char *body, size_t len) {
    setup_call *s = calloc(1, sizeof *s);
    if (!s) {
        free(body);
        return NULL;
    }
    *s = (setup_call){.kind = kind, .host = host, .chat = chat, .body = body, .len = len};
    return s;
}

void setup_call_free(void *ctx) {
    setup_call *s = ctx;
    if (!s) return;
    free(s->body);
    completion_call_free(s->call);
    json_decref(s->answer);
    free(s);
}

/* /v1/chat/completions, /v1/completions: one output, or one call per output (n, several prompts). */
static completion_call *openai_completion(setup_call *s, openai_kind kind) {
    json_t *body = openai_parse_body(s->body, s->len, &s->err);
    if (!body) return NULL;
    bool one_output = !json_object_get(body, "n") && !openai_several_prompts(kind, body);
    completion_call *call = one_output ? openai_build_call(s->host, kind, body, s->chat, &s->err)
                                       : openai_choices_call(s->host, kind, body, s->chat, &s->err);
    json_decref(body);
    return call;
}

/* The answer of /apply-template or count_tokens; NULL with s->err. */
/* Whether every field of /apply-template's body is one a chat request has (a typo would change
 * nothing silently); else s->err names the first that is not. */
static bool template_fields_known(setup_call *s, json_t *body) {
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v) {
        if (!openai_chat_field_known(key))
            return openai_fail_with(&s->err, MHD_HTTP_BAD_REQUEST, "invalid_request_error", key, "unknown field '%s' "
                                    "(the fields of a /v1/chat/completions request)", key);
    }
    return true;
}

static json_t *made_answer(setup_call *s) {
    if (s->kind == SETUP_COUNT_TOKENS) return anthropic_count_tokens(s->host, s->body, s->len, s->chat, &s->err);
    json_t *body = openai_parse_body(s->body, s->len, &s->err);
    json_t *answer = body && template_fields_known(s, body) ? openai_apply_template(s->host, body, s->chat, &s->err) : NULL;
    json_decref(body);
    return answer;
}

/* /completion, /infill: llama-server's dialect of the JSON API's completion (api/request_json.h);
 * NULL with *err. */
static completion_call *llama_completion(setup_call *s, api_error *err) {
    json_error_t jerr;
    json_t *body = json_loadb(s->body, s->len, JSON_REJECT_DUPLICATES, &jerr);
    if (!body) {
        api_parse_error(s->body, s->len, &jerr, err); /* names the field a number out of range was given for */
        return NULL;
    }
    if (!json_is_object(body)) {
        json_decref(body);
        api_fail(err, API_INVALID_PARAMS, "", "completion params: the body must be a JSON object");
        return NULL;
    }
    if (s->kind == SETUP_INFILL && !(body = infill_completion_params(s->host, body, err, &s->not_supported)))
        return NULL;
    return completion_outputs_call(s->host, body, json_is_true(json_object_get(body, "stream")), err);
}

static completion_call *set_up(setup_call *s) {
    switch (s->kind) {
    case SETUP_CHAT: return openai_completion(s, OPENAI_CHAT);
    case SETUP_TEXT: return openai_completion(s, OPENAI_TEXT);
    case SETUP_ANTHROPIC: return anthropic_completion_call(s->host, s->body, s->len, s->chat, &s->err);
    default: return responses_completion_call(s->host, s->body, s->len, s->chat, &s->err);
    }
}

json_t *setup_call_run(void *ctx) {
    setup_call *s = ctx;
    if (s->kind == SETUP_APPLY_TEMPLATE || s->kind == SETUP_COUNT_TOKENS) {
        s->answer = made_answer(s);
        s->failed = s->answer == NULL;
        return NULL;
    }
    if (s->kind == SETUP_COMPLETION || s->kind == SETUP_INFILL) {
        api_error err;
        s->call = llama_completion(s, &err);
        return s->call ? completion_call_run(s->call) : json_pack("{s:o}", "error", api_error_object(&err));
    }
    s->call = set_up(s);
    s->failed = s->call == NULL;
    return s->call ? completion_call_run(s->call) : NULL;
}

completion_call *setup_call_completion(setup_call *s) { return s->call; }

const openai_error *setup_call_error(const setup_call *s) { return s->failed ? &s->err : NULL; }

bool setup_call_not_supported(const setup_call *s) { return s->not_supported; }

json_t *setup_call_answer(setup_call *s) {
    json_t *answer = s->answer;
    s->answer = NULL;
    return answer;
}
