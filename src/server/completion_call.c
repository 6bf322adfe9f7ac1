/* completion_call.c - a completion on a call worker (see server.h): handed to the host's server
 * through the API layer's one submit (api/completion.h), then its answer waited for there while
 * the client is still there, or its job kept for the stream that follows. /completion's body is
 * read in llama-server's dialect (api_completion_begin); OpenAI's request comes already read. */
#include "server.h"

#include "../api/completion.h"

#include <stdlib.h>

completion_call *completion_call_new(api_host *host, bool stream) {
    completion_call *call = calloc(1, sizeof *call);
    if (call) *call = (completion_call){.host = host, .stream = stream};
    return call;
}

void completion_call_free(void *ctx) {
    completion_call *call = ctx;
    if (!call) return;
    json_decref(call->body);
    json_decref(call->shared_fields);
    if (call->request) serve_request_clear(call->request);
    free(call->request);
    if (call->reply.free_ctx) call->reply.free_ctx(call->reply.ctx);
    serve_job_unref(call->job);
    for (int i = 0; i < call->n_more; i++) completion_call_free(call->more[i]);
    free(call->more);
    free(call);
}

bool completion_call_add_choice(completion_call *call, completion_call *other) {
    completion_call **grown = realloc(call->more, (size_t)(call->n_more + 1) * sizeof *grown);
    if (!grown) {
        completion_call_free(other);
        return false;
    }
    call->more = grown;
    call->more[call->n_more++] = other;
    return true;
}

int completion_call_jobs(const completion_call *call, serve_job **jobs, int max) {
    int n = 0;
    if (call->job && n < max) jobs[n++] = call->job;
    for (int i = 0; i < call->n_more && n < max; i++)
        if (call->more[i]->job) jobs[n++] = call->more[i]->job;
    return n;
}

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

json_t *completion_call_run(void *ctx) {
    completion_call *call = ctx;
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
