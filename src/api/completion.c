/* completion.c - the hand-over every transport shares (completion.h): a request's defaults
 * (api_host_request_defaults, host.h), its shared fields read, its claim on the host, its
 * submission to the serving server, and the wait for its answer. The defaults are applied once,
 * before the request is read; the claim sets none. What a host is made of is host_state.h's; the
 * jobs found by id are host.c's. */
#define _POSIX_C_SOURCE 200809L /* pthread_rwlock_t in host_state.h */
#include "completion.h"
#include "host_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A default seed counts as the request's own (its reply says so, and its draws are the seeded
 * ones). */
void api_host_request_defaults(api_host *h, serve_request *r) {
    pthread_mutex_lock(&h->lock);
    r->gen.sampling = h->sampling;
    r->gen.speculative = h->speculative;
    r->context_shift = h->context_shift;
    r->seed_requested = h->sampling.seed == SPECD_SEED_RANDOM ? -1 : (int64_t)h->sampling.seed;
    pthread_mutex_unlock(&h->lock);
}

/* Records a claimed job (lock held): findable by id; the oldest finished ones are forgotten. */
static void record_job_locked(api_host *h, serve_job *job) {
    if (h->n_jobs >= API_KEEP_JOBS) {
        for (int32_t i = 0; i < h->n_jobs; i++) {
            if (!serve_job_finished(h->jobs[i])) continue;
            serve_job_unref(h->jobs[i]);
            memmove(h->jobs + i, h->jobs + i + 1, (size_t)(h->n_jobs - i - 1) * sizeof *h->jobs);
            h->n_jobs--;
            break;
        }
    }
    if (h->n_jobs == h->jobs_cap) {
        int32_t cap = h->jobs_cap ? h->jobs_cap * 2 : 16;
        serve_job **grown = realloc(h->jobs, (size_t)cap * sizeof *grown);
        if (!grown) return; /* not findable by id: polls without id still find it as the latest */
        h->jobs = grown;
        h->jobs_cap = cap;
    }
    serve_job_ref(job);
    h->jobs[h->n_jobs++] = job;
}

/* How many of `client`'s completions are queued or running (lock held); 0 for client 0. */
static int32_t client_jobs_locked(const api_host *h, uint64_t client) {
    int32_t n = 0;
    for (int32_t i = 0; client && i < h->n_jobs; i++)
        if (h->jobs[i]->client == client && !serve_job_finished(h->jobs[i])) n++;
    return n;
}

/* A new job claimed for a completion (the serving model stays until hand_over), its id assigned
 * and recorded; NULL with *err set when no model serves (loading, none, stopping) or this client
 * has its share. */
static serve_job *claim(api_host *h, api_error *err) {
    uint64_t client = api_thread_client();
    pthread_mutex_lock(&h->lock);
    /* A swap waits for the running completions to end (draining, then swapping), which may take
     * minutes: a new one is refused at once (503 with Retry-After over HTTP), not held without a
     * word until then. */
    serve_job *job = NULL;
    if (h->draining)
        api_fail(err, API_BUSY, "", "busy: the model '%s' is being swapped in by init and waits for the running "
                 "completions to end; retry in a moment", h->loading_model ? h->loading_model : "");
    else if (!h->server || h->shutting_down || h->closed) host_fail_no_model_locked(h, err);
    else if (client && client_jobs_locked(h, client) >= h->client_share)
        api_fail(err, API_BUSY, "", "busy: this client already has %d completions queued or running, the most one "
                 "client may have (the server's %d slots and half its queue places); wait for some to end",
                 (int)h->client_share, (int)h->n_parallel);
    else if (!(job = serve_job_new(h->next_id))) api_fail(err, API_INTERNAL_ERROR, "", "out of memory for the completion");
    if (job) {
        job->client = client;
        h->next_id++;
        h->n_claimed++;
        record_job_locked(h, job);
        serve_job_unref(h->latest);
        serve_job_ref(job);
        h->latest = job;
    }
    pthread_mutex_unlock(&h->lock);
    return job;
}

static void unclaim(api_host *h) {
    pthread_mutex_lock(&h->lock);
    h->n_claimed--;
    pthread_cond_broadcast(&h->idle);
    pthread_mutex_unlock(&h->lock);
}

/* Hands the claimed job to the serving server and ends the claim. `filled`: its request and reply
 * were filled (false: filling them failed with *err). The job (still referenced) when the server
 * took it; NULL with *err set otherwise, the job ended with the error (a refused request still got
 * an id: a poll of the latest finds it over) and its reference dropped. */
static serve_job *hand_over(api_host *h, serve_job *job, bool filled, api_error *err) {
    pthread_mutex_lock(&h->lock);
    serve_server *server = h->server; /* claimed: it stays until the claim ends */
    pthread_mutex_unlock(&h->lock);
    serve_fault fault;
    bool ok = filled && serve_server_submit(server, job, &request_json_names, &fault);
    if (filled && !ok) api_error_from_fault(&fault, err);
    if (!ok && !serve_job_finished(job)) { /* refused before the server saw it: it ends now */
        serve_fail(&fault, SERVE_INVALID, err->field, "%s", err->message);
        serve_job_fail(job, &fault);
    }
    unclaim(h);
    if (ok) return job;
    serve_job_unref(job);
    return NULL;
}

serve_job *api_completion_submit(api_host *h, serve_request *req, json_t *fields, const char *const *names,
                                 serve_reply reply, api_error *err) {
    /* a front end's own fields never overlap what the defaults set (sampling, speculative,
     * context shift, seed) */
    api_host_request_defaults(h, req);
    bool read = !fields || request_json_read_fields(fields, DIALECT_LLAMA, req, names, err);
    serve_job *job = read ? claim(h, err) : NULL;
    if (!job) {
        serve_request_clear(req);
        if (reply.free_ctx) reply.free_ctx(reply.ctx);
        return NULL;
    }
    serve_request_clear(&job->request);
    job->request = *req;
    job->reply = reply;
    return hand_over(h, job, true, err);
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
    serve_job *job = claim(h, err);
    if (!job) return NULL;
    bool filled = fill_job(h, job, params, dialect, stream, err);
    return hand_over(h, job, filled, err);
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
