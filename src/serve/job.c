/* job.c - a submitted request and its answer (see job.h). */
#include "job.h"

#include "clock.h"

#include <errno.h>
#include <stdlib.h>

serve_job *serve_job_new(int64_t id) {
    serve_job *job = calloc(1, sizeof *job);
    if (!job) return NULL;
    atomic_init(&job->refs, 1);
    atomic_init(&job->cancel, false);
    atomic_init(&job->end_reason, SERVE_END_NONE);
    pthread_mutex_init(&job->lock, NULL);
    pthread_cond_init(&job->changed, NULL);
    job->id = id;
    serve_request_init(&job->request);
    return job;
}

void serve_job_ref(serve_job *job) { atomic_fetch_add(&job->refs, 1); }

static void free_item(serve_job *job, void *item) {
    if (item && job->reply.free_item) job->reply.free_item(item);
}

void serve_job_unref(serve_job *job) {
    if (!job || atomic_fetch_sub(&job->refs, 1) != 1) return;
    for (size_t i = 0; i < job->n_items; i++) free_item(job, job->items[i]);
    free(job->items);
    free_item(job, job->final);
    if (job->reply.free_ctx) job->reply.free_ctx(job->reply.ctx);
    serve_request_clear(&job->request);
    pthread_mutex_destroy(&job->lock);
    pthread_cond_destroy(&job->changed);
    free(job);
}

/* ---- the server's side ----------------------------------------------------------------------- */

/* Appends an item (job->lock held); false when out of memory (the item is then freed). */
static bool append_locked(serve_job *job, void *item) {
    if (job->n_items == job->cap_items) {
        size_t cap = job->cap_items ? 2 * job->cap_items : 8;
        void **grown = realloc(job->items, cap * sizeof *grown);
        if (!grown) {
            free_item(job, item);
            return false;
        }
        job->items = grown;
        job->cap_items = cap;
    }
    job->items[job->n_items++] = item;
    return true;
}

void serve_job_publish(serve_job *job, void *item) {
    pthread_mutex_lock(&job->lock);
    append_locked(job, item);
    pthread_cond_broadcast(&job->changed);
    pthread_mutex_unlock(&job->lock);
}

void serve_job_set_fault(serve_job *job, const serve_fault *fault) {
    pthread_mutex_lock(&job->lock);
    job->failed = true;
    job->fault = *fault;
    pthread_mutex_unlock(&job->lock);
}

void serve_job_complete(serve_job *job, void *final) {
    pthread_mutex_lock(&job->lock);
    if (final && job->request.stream) append_locked(job, final);
    else if (final) job->final = final;
    job->finished = true;
    job->waker_lock = NULL;
    job->waker = NULL;
    pthread_cond_broadcast(&job->changed);
    pthread_mutex_unlock(&job->lock);
}

/* ---- the API's side -------------------------------------------------------------------------- */

void serve_job_fail(serve_job *job, const serve_fault *fault) {
    serve_job_set_fault(job, fault);
    serve_job_complete(job, NULL);
}

bool serve_job_end(serve_job *job, serve_end why) {
    int none = SERVE_END_NONE;
    bool first = atomic_compare_exchange_strong(&job->end_reason, &none, (int)why);
    atomic_store(&job->cancel, true);
    pthread_mutex_lock(&job->lock);
    if (job->waker) { /* alive: a server is freed only once its jobs finished */
        pthread_mutex_lock(job->waker_lock);
        pthread_cond_broadcast(job->waker);
        pthread_mutex_unlock(job->waker_lock);
    }
    pthread_mutex_unlock(&job->lock);
    return first;
}

bool serve_job_wait_final(serve_job *job, bool (*still_wanted)(void *), void *ctx, int64_t watch_ms, void **final,
                          serve_fault *fault) {
    bool cancelled = false;
    pthread_mutex_lock(&job->lock);
    while (!job->finished) {
        struct timespec deadline = serve_realtime_after_ms(watch_ms);
        pthread_cond_timedwait(&job->changed, &job->lock, &deadline);
        if (job->finished || cancelled || !still_wanted) continue;
        pthread_mutex_unlock(&job->lock); /* the check may take time: never hold the job's lock in it */
        cancelled = !still_wanted(ctx);
        if (cancelled) serve_job_end(job, SERVE_END_CANCELLED);
        pthread_mutex_lock(&job->lock);
    }
    *final = job->final;
    job->final = NULL;
    if (!*final) *fault = job->fault;
    pthread_mutex_unlock(&job->lock);
    return *final != NULL;
}

void **serve_job_take(serve_job *job, int64_t wait_ms, size_t *n, bool *finished, bool *failed, serve_fault *fault) {
    pthread_mutex_lock(&job->lock);
    if (wait_ms > 0) {
        struct timespec deadline = serve_realtime_after_ms(wait_ms);
        while (job->n_items == 0 && !job->finished)
            if (pthread_cond_timedwait(&job->changed, &job->lock, &deadline) == ETIMEDOUT) break;
    }
    void **items = job->items;
    *n = job->n_items;
    job->items = NULL;
    job->n_items = job->cap_items = 0;
    *finished = job->finished;
    *failed = job->failed && job->finished;
    if (*failed) *fault = job->fault;
    pthread_mutex_unlock(&job->lock);
    return items;
}

bool serve_job_finished(serve_job *job) {
    pthread_mutex_lock(&job->lock);
    bool finished = job->finished;
    pthread_mutex_unlock(&job->lock);
    return finished;
}
