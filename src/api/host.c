/* host.c - a host (host.h): made and freed, the process's own, and what completions and short
 * calls take from it: claims, submitting to the serving server, the jobs found by id, the engine.
 * Loading and unloading are host_load.c's. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "host_state.h"

#include <stdlib.h>
#include <string.h>

api_host *api_host_new(void) {
    api_host *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->idle, NULL);
    pthread_cond_init(&h->changed, NULL);
    pthread_rwlock_init(&h->engine_lock, NULL);
    h->limits = (serve_limits){.n_predict_max = -1};
    h->sampling = specd_generation_default_params().sampling;
    h->speculative = specd_generation_default_params().speculative;
    h->context_shift = true;
    h->embd_normalize = 2;
    h->next_id = 1;
    return h;
}

void api_host_free(api_host *h) {
    if (!h) return;
    bool was_loaded;
    api_host_shutdown(h, &was_loaded);
    for (int32_t i = 0; i < h->n_jobs; i++) serve_job_unref(h->jobs[i]);
    free(h->jobs);
    serve_job_unref(h->latest);
    free(h->loading_model);
    pthread_rwlock_destroy(&h->engine_lock);
    pthread_cond_destroy(&h->changed);
    pthread_cond_destroy(&h->idle);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

void api_host_set_sampling(api_host *h, const specd_sampling_params *sampling) {
    pthread_mutex_lock(&h->lock);
    h->sampling = *sampling;
    pthread_mutex_unlock(&h->lock);
}

int32_t api_host_embd_normalize(api_host *h) {
    pthread_mutex_lock(&h->lock);
    int32_t n = h->embd_normalize;
    pthread_mutex_unlock(&h->lock);
    return n;
}

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

void api_host_set_limits(api_host *h, serve_limits limits) {
    pthread_mutex_lock(&h->lock);
    h->limits = limits;
    pthread_mutex_unlock(&h->lock);
}

load_state host_state_locked(const api_host *h) {
    if (h->server) return STATE_READY;
    if (h->loading) return STATE_LOADING;
    return h->last_init_error ? STATE_FAILED : STATE_NONE;
}

bool host_fail_no_model_locked(const api_host *h, api_error *err) {
    if (h->closed) return api_fail(err, API_BUSY, "", "the server is stopping: retry later");
    if (h->shutting_down) return api_fail(err, API_NO_MODEL, "", "shutdown in progress: call init again after it");
    if (h->loading) return api_fail(err, API_NO_MODEL, "", "the model is still loading: poll status");
    return api_fail(err, API_NO_MODEL, "", "no model loaded: call init first");
}

/* ---- jobs ------------------------------------------------------------------------------------ */

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

serve_job *api_host_claim(api_host *h, api_error *err) {
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

serve_job *api_host_submit(api_host *h, serve_job *job, bool filled, const serve_names *names, api_error *err) {
    pthread_mutex_lock(&h->lock);
    serve_server *server = h->server; /* claimed: it stays until the claim ends */
    pthread_mutex_unlock(&h->lock);
    serve_fault fault;
    bool ok = filled && serve_server_submit(server, job, names, &fault);
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

serve_job *api_host_find_job(api_host *h, int64_t id, api_error *err) {
    pthread_mutex_lock(&h->lock);
    serve_job *found = id < 0 ? h->latest : NULL;
    for (int32_t i = 0; id >= 0 && i < h->n_jobs && !found; i++)
        if (h->jobs[i]->id == id) found = h->jobs[i];
    if (found) serve_job_ref(found);
    pthread_mutex_unlock(&h->lock);
    if (!found && id >= 0)
        api_fail(err, API_UNKNOWN_JOB, "id", "no completion with id %lld: it never existed, or it finished long ago "
                 "(the latest %d are kept)", (long long)id, API_KEEP_JOBS);
    else if (!found)
        api_fail(err, API_UNKNOWN_JOB, "id", "no completion has been started: call completion.start first");
    return found;
}

/* ---- the engine, for short calls ------------------------------------------------------------- */

bool api_host_acquire_server(api_host *h, serve_server **server, api_error *err) {
    /* Look first, so a call without a model fails at once instead of waiting for the lock; a swap
     * about to happen is waited for (it only waits for short calls like this one). Look again
     * under the read lock, which is what keeps the server alive. */
    pthread_mutex_lock(&h->lock);
    while (h->swapping) pthread_cond_wait(&h->changed, &h->lock);
    bool has = h->server != NULL;
    pthread_mutex_unlock(&h->lock);
    if (has) {
        pthread_rwlock_rdlock(&h->engine_lock);
        pthread_mutex_lock(&h->lock);
        *server = h->server;
        pthread_mutex_unlock(&h->lock);
        if (*server) return true;
        pthread_rwlock_unlock(&h->engine_lock);
    }
    pthread_mutex_lock(&h->lock);
    host_fail_no_model_locked(h, err);
    pthread_mutex_unlock(&h->lock);
    return false;
}

bool api_host_acquire_engine(api_host *h, specd_engine **engine, api_error *err) {
    serve_server *server = NULL;
    if (!api_host_acquire_server(h, &server, err)) return false;
    *engine = serve_server_engine(server);
    return true;
}

void api_host_release_engine(api_host *h) { pthread_rwlock_unlock(&h->engine_lock); }

char *api_host_model_name(api_host *h) {
    pthread_mutex_lock(&h->lock);
    char *name = strdup(h->alias ? h->alias : h->model ? h->model : "");
    pthread_mutex_unlock(&h->lock);
    return name;
}
