/* async.c - completion.start / poll / cancel: a completion run by the scheduler (scheduler.h),
 * as many at once as there are slots, whose partial responses collect in the job until polled. Poll and cancel are safe from any thread: they only
 * touch the job under its lock (and the engine's thread-safe stop flag). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "completion.h"
#include "scheduler.h"

#include <errno.h>
#include <time.h>

json_t *rpc_method_completion_start(json_t *params, rpc_error *err) {
    rpc_job *job = rpc_job_new();
    if (!job) {
        rpc_fail(err, RPC_INTERNAL_ERROR, "", "out of memory for the completion");
        return NULL;
    }
    job->stream = true;
    if (!completion_claim_and_parse(job, params, err)) {
        rpc_job_unref(job);
        return NULL;
    }
    json_t *result = json_pack("{s:I, s:o}", "id", (json_int_t)job->id, "prompt_stats",
                               completion_prompt_stats(job->request));
    if (!rpc_sched_submit(job, err)) {
        completion_end_unrun(job, err);
        json_decref(result);
        result = NULL;
    }
    rpc_job_unref(job);
    return result;
}

/* {"id"?: n} plus, for poll, {"wait_ms"?: ms}: the job, referenced. */
static rpc_job *find_job(json_t *params, const char *where, int64_t *wait_ms, rpc_error *err) {
    rpc_params rp;
    rpc_params_open(&rp, params, where, "", err);
    int64_t id = 0;
    int got_id = rpc_get_int(&rp, "id", 1, INT64_MAX, &id);
    if (got_id < 0 || (wait_ms && rpc_get_int(&rp, "wait_ms", 0, 60000, wait_ms) < 0) || !rpc_params_finish(&rp))
        return NULL;
    json_t *id_json = got_id ? json_integer(id) : NULL;
    rpc_job *job = rpc_state_find_job(id_json, err);
    json_decref(id_json);
    return job;
}

static void wait_for_news(rpc_job *job, int64_t wait_ms) {
    struct timespec deadline = rpc_realtime_after_ms(wait_ms);
    while (json_array_size(job->updates) == 0 && !job->finished)
        if (pthread_cond_timedwait(&job->changed, &job->lock, &deadline) == ETIMEDOUT) break;
}

json_t *rpc_method_completion_poll(json_t *params, rpc_error *err) {
    int64_t wait_ms = 0;
    rpc_job *job = find_job(params, "completion.poll params", &wait_ms, err);
    if (!job) return NULL;
    json_t *fresh = json_array();
    pthread_mutex_lock(&job->lock);
    if (wait_ms > 0) wait_for_news(job, wait_ms);
    json_t *updates = job->updates;
    job->updates = fresh ? fresh : updates;
    if (!fresh) updates = json_array(); /* out of memory: keep the updates for the next poll */
    json_t *result = json_pack("{s:I, s:o, s:b}", "id", (json_int_t)job->id, "completion_updates", updates,
                               "finished", job->finished && fresh);
    if (result && job->failed && job->finished) json_object_set_new(result, "error", rpc_error_object(&job->error));
    pthread_mutex_unlock(&job->lock);
    rpc_job_unref(job);
    if (!result) rpc_fail(err, RPC_INTERNAL_ERROR, "", "completion.poll: out of memory");
    return result;
}

json_t *rpc_method_completion_cancel(json_t *params, rpc_error *err) {
    rpc_job *job = find_job(params, "completion.cancel params", NULL, err);
    if (!job) return NULL;
    rpc_sched_cancel(job);
    pthread_mutex_lock(&job->lock);
    bool running = !job->finished;
    json_t *result = json_pack("{s:I, s:b}", "id", (json_int_t)job->id, "cancelled", running);
    pthread_mutex_unlock(&job->lock);
    rpc_job_unref(job);
    return result;
}
