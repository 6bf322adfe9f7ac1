/* setup_call.c - a completion request on a call worker (openai.h), not on libmicrohttpd's
 * threads: its body read by its API's reader (OpenAI's, Anthropic's, the Responses API's, or
 * llama-server's dialect of the JSON API for /completion and /infill), handed to the host's server
 * through the API layer's one submit (api/completion.h), then its answer waited for there while
 * the client is still there, or its job kept for the stream that follows.
 *
 * Why on a worker: rendering a chat template can take seconds (a 900 KB body of 30000 messages held
 * /health 4-5 s), so can reading a large body, tokenizing /infill's files or copying a body for each
 * of its outputs, and libmicrohttpd's threads answer /health and every quick route. A request
 * refused on the way keeps its error in its API's shape for the handler to send (/completion's is
 * its answer). /apply-template and count_tokens answer with what they made; nothing runs. */
#include "openai.h"

#include "../api/completion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the completion: submitted, waited for ---------------------------------------------------- */

static json_t *error_answer(const api_error *err) { return json_pack("{s:o}", "error", api_error_object(err)); }

/* A request already read (OpenAI's, Anthropic's, ...): its request and reply become the job's. */
static serve_job *submit_request(completion_call *call, api_error *err) {
    serve_request *req = call->request;
    serve_reply reply = call->reply;
    call->request = NULL;
    call->reply = (serve_reply){0};
    req->stream = call->stream;
    serve_job *job = api_completion_submit(call->host, req, call->shared_fields, call->shared_names, reply, err);
    free(req);
    return job;
}

static serve_job *submit(completion_call *call, api_error *err) {
    return call->job = call->body ? api_completion_begin(call->host, call->body, DIALECT_LLAMA, call->stream, err)
                                  : submit_request(call, err);
}

/* Every choice's job submitted; at the first refusal the ones already in are ended. */
static bool submit_all(completion_call *call, api_error *err) {
    if (!submit(call, err)) return false;
    for (int i = 0; i < call->n_more; i++) {
        if (submit(call->more[i], err)) continue;
        serve_job_end(call->job, SERVE_END_CANCELLED);
        for (int k = 0; k < i; k++) serve_job_end(call->more[k]->job, SERVE_END_CANCELLED);
        return false;
    }
    return true;
}

/* Submits every choice, then waits for a blocking completion's answer ({"result": answer} or
 * {"error"}); a streamed one answers {"result": {"id"}} at once, its job left in call->job (and
 * the other choices' in theirs). */
static json_t *run_completion(completion_call *call) {
    api_error err;
    if (!submit_all(call, &err)) return error_answer(&err);
    if (call->stream) return json_pack("{s:{s:I}}", "result", "id", (json_int_t)call->job->id);
    json_t *answer = api_completion_wait(call->job, &err);
    for (int i = 0; answer && i < call->n_more; i++) {
        json_t *other = api_completion_wait(call->more[i]->job, &err);
        if (!other) {
            json_decref(answer);
            answer = NULL;
        } else if (call->merge) {
            answer = call->merge(answer, other, call->more[i]->new_prompt);
        }
        json_decref(other);
    }
    if (answer) return json_pack("{s:o}", "result", answer);
    /* one choice failed: the answer is its error, and the others are not waited for */
    for (int i = 0; i < call->n_more; i++) serve_job_end(call->more[i]->job, SERVE_END_CANCELLED);
    serve_job_end(call->job, SERVE_END_CANCELLED);
    return error_answer(&err);
}

/* ---- the set-up: a body read by its API's reader ------------------------------------------------ */

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
    if (json_object_get(body, "n") || openai_several_prompts(kind, body)) {
        completion_call *call = openai_choices_call(s->host, kind, body, s->chat, &s->err);
        json_decref(body);
        return call;
    }
    completion_call *call = openai_build_call(s->host, kind, body, s->chat, &s->err);
    completion_call_share(call, body, openai_shared_fields);
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
        return s->call ? run_completion(s->call) : error_answer(&err);
    }
    s->call = set_up(s);
    s->failed = s->call == NULL;
    return s->call ? run_completion(s->call) : NULL;
}

completion_call *setup_call_completion(setup_call *s) { return s->call; }

const openai_error *setup_call_error(const setup_call *s) { return s->failed ? &s->err : NULL; }

bool setup_call_not_supported(const setup_call *s) { return s->not_supported; }

json_t *setup_call_answer(setup_call *s) {
    json_t *answer = s->answer;
    s->answer = NULL;
    return answer;
}
