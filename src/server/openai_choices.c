/* openai_choices.c - OpenAI's `n` on /v1/chat/completions and /v1/completions: n choices, each its
 * own request (its own sampler, seed and speculation) and job, as llama-server's n_cmpl makes one
 * child task per choice. Here: `n` read and checked (1 to the server's slots, as llama-server
 * bounds n_cmpl by -np), the other choices' calls built from the same body (seed + i when a seed
 * is given, as llama-server's children), and a blocking answer's choices merged into one answer
 * with the usage summed (a stream's one usage chunk is openai_reply.c's, over the choices' shared
 * count). The prompt is counted once, as OpenAI does: the choices share it. Also the route's entry:
 * a body into its call (openai_completion_call). */
#define _POSIX_C_SOURCE 200809L
#include "openai.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* n: an integer from 1 to the slots of the serving server (1 when none serves: its 503 comes
 * later). */
static bool read_n(rpc_host *host, json_t *body, int *n, openai_error *err) {
    json_t *v = json_object_get(body, "n");
    *n = 1;
    if (!v) return true;
    int32_t slots = 1;
    serve_server *server = NULL;
    rpc_error rerr;
    if (rpc_host_acquire_server(host, &server, &rerr)) {
        slots = serve_server_status(server).n_slots;
        rpc_host_release_engine(host);
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > slots)
        return openai_fail_with(err, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "n",
                                "'n' must be an integer from 1 to %d: each choice runs in a slot of its own "
                                "(this server has %d; more with -np)", (int)slots, (int)slots);
    *n = (int)json_integer_value(v);
    return true;
}

/* Choice i's body: a shallow copy with seed + i (seeds given are each choice's own, as
 * llama-server's children get theirs; a random seed stays random for each). */
static json_t *choice_body(json_t *body, int i) {
    json_t *copy = json_copy(body), *seed = json_object_get(body, "seed");
    if (copy && json_is_integer(seed) && json_integer_value(seed) >= 0) {
        json_int_t s = json_integer_value(seed);
        json_object_set_new(copy, "seed", json_integer(s <= INT64_MAX - i ? s + i : s - i));
    }
    return copy;
}

static openai_call *call_of(completion_call *call) { return call->reply.ctx; }

/* Moves an answer's speculative and stop_type into its (only) choice. */
static void figures_into_choice(json_t *answer) {
    json_t *choice = json_array_get(json_object_get(answer, "choices"), 0);
    if (!choice || json_object_get(choice, "speculative")) return;
    json_object_set(choice, "speculative", json_object_get(answer, "speculative"));
    json_object_set(choice, "stop_type", json_object_get(answer, "stop_type"));
}

/* The blocking merge: other's choice appended to answer's, its completion tokens added. */
static void merge(json_t *answer, json_t *other) {
    figures_into_choice(answer);
    figures_into_choice(other);
    json_array_append(json_object_get(answer, "choices"), json_array_get(json_object_get(other, "choices"), 0));
    json_t *usage = json_object_get(answer, "usage");
    json_int_t more = json_integer_value(json_object_get(json_object_get(other, "usage"), "completion_tokens"));
    const char *keys[] = {"completion_tokens", "total_tokens"};
    for (int k = 0; k < 2; k++)
        json_object_set_new(usage, keys[k], json_integer(json_integer_value(json_object_get(usage, keys[k])) + more));
}

completion_call *openai_choices_call(rpc_host *host, openai_kind kind, json_t *body, const http_chat *chat,
                                     openai_error *err) {
    int n = 1;
    if (!read_n(host, body, &n, err)) return NULL;
    completion_call *first = openai_build_call(host, kind, body, chat, err);
    if (!first || n == 1) return first;
    openai_choices *g = openai_choices_new(n);
    if (!g) {
        completion_call_free(first);
        openai_fail_with(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
        return NULL;
    }
    call_of(first)->choices = g;
    first->merge = merge;
    for (int i = 1; i < n; i++) {
        json_t *copy = choice_body(body, i);
        completion_call *other = copy ? openai_build_call(host, kind, copy, chat, err) : NULL;
        json_decref(copy);
        if (other) { /* one answer: the first choice's id and time */
            memcpy(call_of(other)->id, call_of(first)->id, sizeof call_of(first)->id);
            call_of(other)->created = call_of(first)->created;
            call_of(other)->index = i;
            call_of(other)->choices = openai_choices_ref(g);
        }
        if (!other || !completion_call_add_choice(first, other)) {
            if (other || !copy) /* else the build said why */
                openai_fail_with(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
            completion_call_free(first);
            return NULL;
        }
    }
    return first;
}

completion_call *openai_completion_call(rpc_host *host, const char *url, const char *text, size_t len,
                                        const http_chat *chat, openai_error *err) {
    openai_kind kind = strcmp(url, "/v1/chat/completions") == 0 ? OPENAI_CHAT : OPENAI_TEXT;
    json_t *body = openai_parse_body(text, len, err);
    if (!body) return NULL;
    completion_call *call = openai_choices_call(host, kind, body, chat, err);
    json_decref(body);
    return call;
}
