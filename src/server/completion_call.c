/* completion_call.c - a completion on a call worker (see server.h): handed to the host's server
 * (claimed, submitted, unclaimed), then its answer waited for while the client is still there, or
 * its job kept for the stream that follows. /completion's body is read in llama-server's dialect
 * by the JSON API (rpc_completion_begin); OpenAI's request comes already read, and goes to the
 * host's server from here. */
#include "server.h"

#include "../rpc/methods.h"

#include <stdlib.h>

completion_call *completion_call_new(rpc_host *host, bool stream) {
    completion_call *call = calloc(1, sizeof *call);
    if (call) *call = (completion_call){.host = host, .stream = stream};
    return call;
}

void completion_call_free(void *ctx) {
    completion_call *call = ctx;
    if (!call) return;
    json_decref(call->body);
    if (call->request) serve_request_clear(call->request);
    free(call->request);
    if (call->reply.free_ctx) call->reply.free_ctx(call->reply.ctx);
    serve_job_unref(call->job);
    free(call);
}

static json_t *error_answer(const rpc_error *err) { return json_pack("{s:o}", "error", rpc_error_object(err)); }

/* A request already read (OpenAI's, Anthropic's, ...) handed straight to the host's server: the
 * call's request and reply become the job's (a request never handed over stays the call's). */
static serve_job *submit_request(completion_call *call, rpc_error *err) {
    serve_job *job = rpc_host_claim(call->host, err);
    if (!job) return NULL;
    serve_request_clear(&job->request);
    job->request = *call->request;
    free(call->request);
    call->request = NULL;
    job->reply = call->reply;
    call->reply = (serve_reply){0};
    job->request.stream = call->stream;
    return rpc_host_submit(call->host, job, true, &request_json_names, err);
}

static bool client_still_there(void *unused) {
    (void)unused;
    return rpc_thread_still_wanted();
}

json_t *completion_call_run(void *ctx) {
    completion_call *call = ctx;
    rpc_error err;
    call->job = call->body ? rpc_completion_begin(call->host, call->body, DIALECT_LLAMA, call->stream, &err)
                           : submit_request(call, &err);
    if (!call->job) return error_answer(&err);
    if (call->stream) return json_pack("{s:{s:I}}", "result", "id", (json_int_t)call->job->id);
    void *answer = NULL;
    serve_fault fault;
    if (serve_job_wait_final(call->job, client_still_there, NULL, RPC_WATCH_MS, &answer, &fault))
        return json_pack("{s:o}", "result", (json_t *)answer);
    rpc_error_from_fault(&fault, &err);
    return error_answer(&err);
}
