/* openai_choices.c - OpenAI's `n` on /v1/chat/completions and /v1/completions, and several prompts
 * in one /v1/completions request: every output (prompt p, choice c; index p * n + c, as
 * llama-server numbers them) is its own request (its own sampler, seed and speculation) and job,
 * as llama-server's n_cmpl makes one child task per choice. Here: `n` read and checked (1 to the
 * server's slots, as llama-server bounds n_cmpl by -np), the outputs' calls built from the same
 * body (seed + c when a seed is given, as llama-server's children), and a blocking answer's
 * choices merged into one answer with the usage summed (a stream's one usage chunk is
 * openai_reply.c's, over the outputs' shared count). A prompt's tokens count once, as OpenAI
 * does: its choices share it. A request with one output (no `n`, one prompt: nearly all) never
 * comes here: the route hands its body to openai_request.c itself. */
#define _POSIX_C_SOURCE 200809L
#include "openai.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What every output of a request is built from. */
typedef struct openai_build {
    api_host *host;
    openai_kind kind;
    json_t *body;
    json_t *prompts; /* /v1/completions' list of prompts; NULL: one */
    const http_chat *chat;
    openai_error *err;
    int n;           /* choices per prompt */
} openai_build;

/* n: 1 to the serving server's slots (completion_read_n). */
static bool read_n(api_host *host, json_t *body, int *n, openai_error *err) {
    int32_t slots;
    if (completion_read_n(host, json_object_get(body, "n"), n, &slots)) return true;
    return openai_fail_with(err, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "n",
                            "'n' must be an integer from 1 to %d: each choice runs in a slot of its own "
                            "(this server has %d; more with -np)", (int)slots, (int)slots);
}

/* /v1/completions' prompts: a list of several (each a string or token ids), checked; NULL: one
 * prompt (a string, token ids, or a list of one), read as such by openai_request.c. */
static json_t *prompt_list(openai_kind kind, json_t *body, openai_error *err, bool *bad) {
    json_t *list = json_object_get(body, "prompt");
    *bad = false;
    if (!openai_several_prompts(kind, body)) return NULL;
    size_t i;
    json_t *p;
    json_array_foreach(list, i, p) {
        bool ids = json_is_array(p) && json_array_size(p) > 0;
        for (size_t k = 0; ids && k < json_array_size(p); k++) ids = json_is_integer(json_array_get(p, k));
        if (json_is_string(p) || ids) continue;
        *bad = true;
        openai_fail_with(err, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "prompt",
                         "'prompt[%zu]' must be a string or an array of token ids (a list of prompts holds prompts)", i);
        return NULL;
    }
    return list;
}

static openai_call *call_of(completion_call *call) { return call->reply.ctx; }

/* Moves an answer's speculative and stop_type into its (only) choice. */
static void figures_into_choice(json_t *answer) {
    json_t *choice = json_array_get(json_object_get(answer, "choices"), 0);
    if (!choice || json_object_get(choice, "speculative")) return;
    json_object_set(choice, "speculative", json_object_get(answer, "speculative"));
    json_object_set(choice, "stop_type", json_object_get(answer, "stop_type"));
}

static void add_to(json_t *usage, const char *key, json_int_t more) {
    json_object_set_new(usage, key, json_integer(json_integer_value(json_object_get(usage, key)) + more));
}

/* The blocking merge: other's choice appended to answer's, its completion tokens added (and its
 * prompt's, when that is another prompt). */
static json_t *merge(json_t *answer, json_t *other, bool new_prompt) {
    figures_into_choice(answer);
    figures_into_choice(other);
    json_array_append(json_object_get(answer, "choices"), json_array_get(json_object_get(other, "choices"), 0));
    json_t *usage = json_object_get(answer, "usage"), *more = json_object_get(other, "usage");
    json_int_t completion = json_integer_value(json_object_get(more, "completion_tokens"));
    json_int_t prompt = new_prompt ? json_integer_value(json_object_get(more, "prompt_tokens")) : 0;
    add_to(usage, "completion_tokens", completion);
    add_to(usage, "prompt_tokens", prompt);
    add_to(usage, "total_tokens", completion + prompt);
    return answer;
}

/* Output i (prompt i / n, choice i % n) as a call beside `first` sharing its id, time and count. */
static bool add_output(completion_call *first, openai_build *b, int i) {
    json_t *copy = completion_output_body(b->body, b->prompts, (size_t)(i / b->n), i % b->n);
    completion_call *other = copy ? openai_build_call(b->host, b->kind, copy, b->chat, b->err) : NULL;
    bool made = copy != NULL;
    completion_call_share(other, copy, openai_shared_fields);
    if (other) { /* one answer: the first output's id and time */
        memcpy(call_of(other)->id, call_of(first)->id, sizeof call_of(first)->id);
        call_of(other)->created = call_of(first)->created;
        call_of(other)->index = i;
        call_of(other)->counts_prompt = other->new_prompt = i % b->n == 0;
        call_of(other)->choices = openai_choices_ref(call_of(first)->choices);
    }
    if (other && completion_call_add_choice(first, other)) return true;
    if (other || !made) /* else the build said why */
        openai_fail_with(b->err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
    return false;
}

completion_call *openai_choices_call(api_host *host, openai_kind kind, json_t *body, const http_chat *chat,
                                     openai_error *err) {
    bool bad = false;
    openai_build b = {host, kind, body, prompt_list(kind, body, err, &bad), chat, err, 1};
    if (bad || !read_n(host, body, &b.n, err)) return NULL;
    size_t outputs = (size_t)b.n * (b.prompts ? json_array_size(b.prompts) : 1);
    if (outputs > COMPLETION_OUTPUTS_MAX) {
        openai_fail_with(err, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "prompt", "%zu prompts x n %d: at most %d "
                         "completions per request; send several requests", outputs / (size_t)b.n, b.n,
                         COMPLETION_OUTPUTS_MAX);
        return NULL;
    }
    json_t *first_body = completion_output_body(body, b.prompts, 0, 0);
    completion_call *first = first_body ? openai_build_call(host, kind, first_body, chat, err) : NULL;
    bool made = first_body != NULL;
    completion_call_share(first, first_body, openai_shared_fields);
    if (!made) openai_fail_with(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
    if (!first || outputs == 1) return first;
    call_of(first)->choices = openai_choices_new((int)outputs);
    call_of(first)->counts_prompt = true;
    first->merge = merge;
    bool ok = call_of(first)->choices != NULL;
    if (!ok) openai_fail_with(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
    for (int i = 1; ok && i < (int)outputs; i++) ok = add_output(first, &b, i);
    if (ok) return first;
    completion_call_free(first);
    return NULL;
}
