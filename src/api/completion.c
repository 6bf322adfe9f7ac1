/* completion.c - claim, submit and wait (completion.h): the hand-over every transport shares. The
 * request's defaults are applied once, by whoever starts reading it (api_host_request_defaults),
 * never by the claim. */
#include "completion.h"

#include <stdio.h>
#include <stdlib.h>

/* The host's defaults, then the shared fields over them: a front end's own fields never overlap
 * what the defaults set (sampling, speculative, context shift, seed). */
static bool read_shared(api_host *h, serve_request *req, json_t *fields, const char *const *names, api_error *err) {
    api_host_request_defaults(h, req);
    return !fields || request_json_read_fields(fields, DIALECT_LLAMA, req, names, err);
}

serve_job *api_completion_submit(api_host *h, serve_request *req, json_t *fields, const char *const *names,
                                 serve_reply reply, api_error *err) {
    serve_job *job = read_shared(h, req, fields, names, err) ? api_host_claim(h, err) : NULL;
    if (!job) {
        serve_request_clear(req);
        if (reply.free_ctx) reply.free_ctx(reply.ctx);
        return NULL;
    }
    serve_request_clear(&job->request);
    job->request = *req;
    job->reply = reply;
    return api_host_submit(h, job, true, &request_json_names, err);
}

static void debug_log_request(const json_reply *reply, json_t *params) {
    if (!reply->debug) return;
    char *text = json_dumps(params, JSON_COMPACT | JSON_REAL_PRECISION(15));
    fprintf(stderr, "specd rpc: request %s\n", text ? text : "?");
    free(text);
}

/* A claimed job's request (over the host's defaults) and reply from `params` in `dialect`; false
 * with *err set. */
static bool fill_job(api_host *h, serve_job *job, json_t *params, request_dialect dialect, bool stream,
                     api_error *err) {
    json_reply *reply = json_reply_new();
    if (!reply) return api_fail(err, API_INTERNAL_ERROR, "", "out of memory for the completion");
    job->reply = json_reply_formatter(reply); /* the job's from now on */
    api_host_request_defaults(h, &job->request);
    if (!request_json_parse(params, dialect, &job->request, reply, err)) return false;
    debug_log_request(reply, params);
    job->request.stream = stream;
    return true;
}

serve_job *api_completion_begin(api_host *h, json_t *params, request_dialect dialect, bool stream, api_error *err) {
    serve_job *job = api_host_claim(h, err);
    if (!job) return NULL;
    bool filled = fill_job(h, job, params, dialect, stream, err);
    return api_host_submit(h, job, filled, &request_json_names, err);
}

static bool thread_still_wanted(void *unused) {
    (void)unused;
    return api_thread_still_wanted();
}

void *api_completion_wait(serve_job *job, api_error *err) {
    void *answer = NULL;
    serve_fault fault;
    if (serve_job_wait_final(job, thread_still_wanted, NULL, API_WATCH_MS, &answer, &fault)) return answer;
    api_error_from_fault(&fault, err);
    return NULL;
}
