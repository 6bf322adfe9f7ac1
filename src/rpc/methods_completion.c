/* methods_completion.c - the completion methods: `completion` answers when done; completion.start
 * answers at once with an id, and its answer collects in the job piece by piece until
 * completion.poll takes it; completion.cancel ends it. Poll and cancel are safe from any thread
 * and never wait for the completion's step: they only touch the job (serve/job.h). Reading,
 * submitting and waiting are the API layer's, as for every transport (api/completion.h). */
#include "methods.h"

#include <stdio.h>
#include <stdlib.h>

json_t *rpc_method_completion(api_host *h, json_t *params, api_error *err) {
    serve_job *job = api_completion_begin(h, params, DIALECT_JSONRPC, false, err);
    if (!job) return NULL;
    json_t *answer = api_completion_wait(job, err); /* an HTTP client that went away cancels it */
    serve_job_unref(job);
    return answer;
}

json_t *rpc_method_completion_start(api_host *h, json_t *params, api_error *err) {
    serve_job *job = api_completion_begin(h, params, DIALECT_JSONRPC, true, err);
    if (!job) return NULL;
    json_t *result = json_pack("{s:I, s:o}", "id", (json_int_t)job->id, "prompt_stats",
                               reply_json_prompt_stats(&job->request));
    serve_job_unref(job);
    return result;
}

/* {"id"?: n} plus, for poll, {"wait_ms"?: ms}: the job, referenced. */
static serve_job *find_job(api_host *h, json_t *params, const char *where, int64_t *wait_ms, api_error *err) {
    api_params rp;
    api_params_open(&rp, params, where, "", err);
    int64_t id = -1;
    if (api_get_int(&rp, "id", 1, INT64_MAX, &id) < 0 || (wait_ms && api_get_int(&rp, "wait_ms", 0, 60000, wait_ms) < 0) ||
        !api_params_finish(&rp))
        return NULL;
    return api_host_find_job(h, id, err);
}

json_t *rpc_method_completion_poll(api_host *h, json_t *params, api_error *err) {
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
        api_error e;
        api_error_from_fault(&fault, &e);
        json_object_set_new(result, "error", api_error_object(&e));
    }
    serve_job_unref(job);
    if (!result) api_fail(err, API_INTERNAL_ERROR, "", "completion.poll: out of memory");
    return result;
}

json_t *rpc_method_completion_cancel(api_host *h, json_t *params, api_error *err) {
    serve_job *job = find_job(h, params, "completion.cancel params", NULL, err);
    if (!job) return NULL;
    serve_job_end(job, SERVE_END_CANCELLED);
    json_t *result = json_pack("{s:I, s:b}", "id", (json_int_t)job->id, "cancelled", !serve_job_finished(job));
    serve_job_unref(job);
    return result;
}
