/* methods_completion.c - the completion methods: `completion` answers when done; completion.start
 * answers at once with an id, and its answer collects in the job piece by piece until
 * completion.poll takes it; completion.cancel ends it. Poll and cancel are safe from any thread
 * and never wait for the completion's step: they only touch the job (serve/job.h). */
#include "methods.h"

#include <stdio.h>
#include <stdlib.h>

static void debug_log_request(const json_reply *reply, json_t *params) {
    if (!reply->debug) return;
    char *text = json_dumps(params, JSON_COMPACT | JSON_REAL_PRECISION(15));
    fprintf(stderr, "specd rpc: request %s\n", text ? text : "?");
    free(text);
}

/* A claimed job's request and reply from `params` in `dialect`; false with *err set. */
static bool fill_job(serve_job *job, json_t *params, request_dialect dialect, bool stream, rpc_error *err) {
    json_reply *reply = json_reply_new();
    if (!reply) return rpc_fail(err, RPC_INTERNAL_ERROR, "", "out of memory for the completion");
    job->reply = json_reply_formatter(reply); /* the job's from now on */
    if (!request_json_parse(params, dialect, &job->request, reply, err)) return false;
    debug_log_request(reply, params);
    job->request.stream = stream;
    return true;
}

serve_job *rpc_completion_begin(rpc_host *h, json_t *params, request_dialect dialect, bool stream, rpc_error *err) {
    serve_job *job = rpc_host_claim(h, err);
    if (!job) return NULL;
    bool filled = fill_job(job, params, dialect, stream, err);
    return rpc_host_submit(h, job, filled, &request_json_names, err);
}

static bool thread_still_wanted(void *unused) {
    (void)unused;
    return rpc_thread_still_wanted();
}

json_t *rpc_method_completion(rpc_host *h, json_t *params, rpc_error *err) {
    serve_job *job = rpc_completion_begin(h, params, DIALECT_JSONRPC, false, err);
    if (!job) return NULL;
    void *answer = NULL;
    serve_fault fault;
    /* an HTTP client that went away (rpc_watch_thread) cancels it */
    if (!serve_job_wait_final(job, thread_still_wanted, NULL, RPC_WATCH_MS, &answer, &fault))
        rpc_error_from_fault(&fault, err);
    serve_job_unref(job);
    return answer;
}

json_t *rpc_method_completion_start(rpc_host *h, json_t *params, rpc_error *err) {
    serve_job *job = rpc_completion_begin(h, params, DIALECT_JSONRPC, true, err);
    if (!job) return NULL;
    json_t *result = json_pack("{s:I, s:o}", "id", (json_int_t)job->id, "prompt_stats",
                               reply_json_prompt_stats(&job->request));
    serve_job_unref(job);
    return result;
}

/* {"id"?: n} plus, for poll, {"wait_ms"?: ms}: the job, referenced. */
static serve_job *find_job(rpc_host *h, json_t *params, const char *where, int64_t *wait_ms, rpc_error *err) {
    rpc_params rp;
    rpc_params_open(&rp, params, where, "", err);
    int64_t id = -1;
    if (rpc_get_int(&rp, "id", 1, INT64_MAX, &id) < 0 || (wait_ms && rpc_get_int(&rp, "wait_ms", 0, 60000, wait_ms) < 0) ||
        !rpc_params_finish(&rp))
        return NULL;
    return rpc_host_find_job(h, id, err);
}

json_t *rpc_method_completion_poll(rpc_host *h, json_t *params, rpc_error *err) {
    int64_t wait_ms = 0;
    serve_job *job = find_job(h, params, "completion.poll params", &wait_ms, err);
    if (!job) return NULL;
    size_t n = 0;
    bool finished = false, failed = false;
    serve_fault fault;
    void **items = serve_job_take(job, wait_ms, &n, &finished, &failed, &fault);
    json_t *updates = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(updates, items[i]);
    free(items);
    json_t *result = json_pack("{s:I, s:o, s:b}", "id", (json_int_t)job->id, "completion_updates", updates, "finished",
                               finished);
    if (result && failed) {
        rpc_error e;
        rpc_error_from_fault(&fault, &e);
        json_object_set_new(result, "error", rpc_error_object(&e));
    }
    serve_job_unref(job);
    if (!result) rpc_fail(err, RPC_INTERNAL_ERROR, "", "completion.poll: out of memory");
    return result;
}

json_t *rpc_method_completion_cancel(rpc_host *h, json_t *params, rpc_error *err) {
    serve_job *job = find_job(h, params, "completion.cancel params", NULL, err);
    if (!job) return NULL;
    serve_job_end(job, SERVE_END_CANCELLED);
    json_t *result = json_pack("{s:I, s:b}", "id", (json_int_t)job->id, "cancelled", !serve_job_finished(job));
    serve_job_unref(job);
    return result;
}
