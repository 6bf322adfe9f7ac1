/* completion_call.c - a completion's call (server.h): what a reader fills for the set-up to submit
 * (setup_call.c): the request and its reply, or /completion's body, the fields shared with the JSON
 * API, and the other choices of one request; made, freed, and the jobs it submitted. */
#include "server.h"

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
