/* completion_outputs.c - llama-server's /completion (and /infill) with n_cmpl (alias n) > 1 or
 * several prompts (an array of strings or of arrays): every output (prompt p, choice c) is its own
 * completion, index p * n + c as llama-server numbers its tasks, each its own request, sampler,
 * seed (seed + c when one is given, as llama-server's child tasks) and speculation, run in the
 * slots side by side. n_cmpl is 1 to the server's slots, as llama-server bounds it by -np. The
 * blocking answer is llama-server's array of results, each with its "index"; streamed, every
 * event carries its output's "index". One output stays the plain object of one completion. */
#define _POSIX_C_SOURCE 200809L
#include "server.h"

#include "../api/api.h"

#include <stdint.h>
#include <stdlib.h>

/* The serving server's slots (1 while none serves). */
static int32_t server_slots(api_host *host) {
    int32_t slots = 1;
    serve_server *server = NULL;
    api_error ignored;
    if (api_host_acquire_server(host, &server, &ignored)) {
        slots = serve_server_status(server).n_slots;
        api_host_release_engine(host);
    }
    return slots;
}

bool completion_read_n(api_host *host, json_t *v, int *n, int32_t *slots) {
    *n = 1;
    *slots = 0;
    if (!v || json_is_null(v)) return true;
    *slots = server_slots(host);
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > *slots) return false;
    *n = (int)json_integer_value(v);
    return true;
}

/* n_cmpl, else n. */
static bool read_n(api_host *host, json_t *body, int *n, api_error *err) {
    const char *name = json_object_get(body, "n_cmpl") ? "n_cmpl" : "n";
    int32_t slots;
    if (completion_read_n(host, json_object_get(body, name), n, &slots)) return true;
    return api_fail(err, API_INVALID_PARAMS, name, "completion params: '%s' must be an integer from 1 to %d: each "
                    "completion runs in a slot of its own (this server has %d; more with -np)", name, (int)slots,
                    (int)slots);
}

/* Several prompts: an array of two or more strings or arrays (llama-server's batch); NULL: one
 * prompt (a string, or one array mixing text and token ids). */
static json_t *prompt_list(json_t *body) {
    json_t *prompt = json_object_get(body, "prompt");
    if (!json_is_array(prompt) || json_array_size(prompt) < 2) return NULL;
    size_t i;
    json_t *item;
    json_array_foreach(prompt, i, item) if (!json_is_string(item) && !json_is_array(item)) return NULL;
    return prompt;
}

json_t *completion_output_body(json_t *body, json_t *prompts, size_t p, int c) {
    json_t *copy = json_copy(body), *seed = json_object_get(body, "seed");
    if (!copy) return NULL;
    if (prompts) json_object_set(copy, "prompt", json_array_get(prompts, p));
    if (p > 0 || c > 0) json_object_del(copy, "id_slot");
    if (c > 0 && json_is_integer(seed) && json_integer_value(seed) >= 0) {
        json_int_t s = json_integer_value(seed);
        json_object_set_new(copy, "seed", json_integer(s <= INT64_MAX - c ? s + c : s - c));
    }
    return copy;
}

/* Output (prompt p, choice c)'s /completion body: one completion each. */
static json_t *output_body(json_t *body, json_t *prompts, size_t p, int c) {
    json_t *copy = completion_output_body(body, prompts, p, c);
    if (copy) {
        json_object_del(copy, "n_cmpl");
        json_object_del(copy, "n");
    }
    return copy;
}

/* The blocking merge: llama-server's array of results in order, each with its index. */
static json_t *merge(json_t *answer, json_t *other, bool new_prompt) {
    (void)new_prompt;
    json_t *list = answer;
    if (!json_is_array(list)) {
        list = json_array();
        if (!list) return answer;
        json_object_set_new(answer, "index", json_integer(0));
        json_array_append_new(list, answer);
    }
    json_object_set_new(other, "index", json_integer((json_int_t)json_array_size(list)));
    json_array_append(list, other);
    return list;
}

completion_call *completion_outputs_call(api_host *host, json_t *body, bool stream, api_error *err) {
    json_t *prompts = prompt_list(body);
    int n = 1;
    if (!read_n(host, body, &n, err)) {
        json_decref(body);
        return NULL;
    }
    size_t outputs = (size_t)n * (prompts ? json_array_size(prompts) : 1);
    if (outputs > COMPLETION_OUTPUTS_MAX) {
        api_fail(err, API_INVALID_PARAMS, "prompt", "completion params: %d prompts x n_cmpl %d: at most %d "
                 "completions per request; send several requests", (int)(outputs / (size_t)n), n,
                 COMPLETION_OUTPUTS_MAX);
        json_decref(body);
        return NULL;
    }
    completion_call *first = completion_call_new(host, stream);
    bool ok = first != NULL;
    if (ok) first->body = outputs == 1 ? json_incref(body) : output_body(body, prompts, 0, 0);
    if (ok && outputs > 1) first->merge = merge;
    for (size_t i = 1; ok && i < outputs; i++) {
        completion_call *other = completion_call_new(host, stream);
        if (other) other->body = output_body(body, prompts, i / (size_t)n, (int)(i % (size_t)n));
        if (other && !other->body) {
            completion_call_free(other);
            other = NULL;
        }
        ok = other && completion_call_add_choice(first, other); /* which frees it when it fails */
    }
    ok = ok && first->body;
    json_decref(body);
    if (ok) return first;
    completion_call_free(first);
    api_fail(err, API_INTERNAL_ERROR, NULL, "out of memory");
    return NULL;
}

enum MHD_Result completion_stream_respond(struct MHD_Connection *c, const completion_call *call) {
    static const sse_format indexed = {.indexed = true};
    if (call->n_more == 0) return sse_respond(c, call->job, NULL);
    int n = 1 + call->n_more;
    serve_job **jobs = malloc((size_t)n * sizeof *jobs);
    if (!jobs) { /* nothing will read the jobs: they end */
        serve_job_end(call->job, SERVE_END_CANCELLED);
        for (int i = 0; i < call->n_more; i++) serve_job_end(call->more[i]->job, SERVE_END_CANCELLED);
        return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL_ERROR, "out of memory");
    }
    enum MHD_Result ok = sse_respond_jobs(c, jobs, completion_call_jobs(call, jobs, n), &indexed);
    free(jobs);
    return ok;
}
