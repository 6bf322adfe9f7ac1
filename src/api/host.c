/* host.c - a host (host.h): made and freed, its settings, the jobs found by id, and the engine for
 * short calls. Loading and unloading are host_load.c's; a request's defaults, a completion's claim
 * and its hand-over are completion.c's. */
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

/* ---- jobs (claimed and handed over by completion.c) ------------------------------------------ */

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
