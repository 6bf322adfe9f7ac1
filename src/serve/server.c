/* server.c - the server object (see server.h): its life, submitting jobs, ending them, and what it
 * shows of itself. Its thread is scheduler.c's. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "server_state.h"

#include "clock.h"

#include <stdlib.h>
#include <string.h>

serve_server *serve_server_new(specd_engine *engine, const serve_options *o, serve_fault *fault) {
    serve_server *s = calloc(1, sizeof *s);
    char *model = s ? strdup(o->model ? o->model : "") : NULL;
    if (!model) {
        free(s);
        serve_fail(fault, SERVE_INTERNAL, "", "out of memory for the server");
        return NULL;
    }
    s->engine = engine;
    s->model = model;
    s->limits = o->limits;
    s->queue_max = o->n_queue >= 0 ? o->n_queue : SERVE_DEFAULT_QUEUE;
    s->n_slots = specd_engine_n_parallel(engine) > 0 ? specd_engine_n_parallel(engine) : 1;
    for (int32_t i = 0; i < specd_engine_n_lora(engine); i++) specd_engine_lora(engine, i, NULL, &s->lora[i]);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->idle, NULL);
    pthread_cond_init(&s->called, NULL);
    heavy_reset(&s->heavy, o->limits.step_limit_ms);
    s->step_limit_now_ms = (double)o->limits.step_limit_ms;
    metrics_counter_init(&s->metrics);
    serve_history_init(&s->history);
    if (pthread_create(&s->thread, NULL, serve_scheduler_main, s) != 0) {
        s->engine = NULL; /* the caller's still */
        serve_server_free(s);
        serve_fail(fault, SERVE_INTERNAL, "", "could not start the scheduler thread");
        return NULL;
    }
    return s;
}

/* Stops the thread (every job ended first, so it has nothing left to run). */
static void stop_thread(serve_server *s) {
    pthread_mutex_lock(&s->lock);
    s->quit = true;
    pthread_cond_broadcast(&s->wake);
    pthread_cond_broadcast(&s->called); /* a slot call still waiting fails */
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
}

void serve_server_free(serve_server *s) {
    if (!s) return;
    if (s->engine) { /* the thread runs */
        serve_server_close(s);
        serve_server_wait_idle(s, NULL);
        stop_thread(s);
    }
    for (int32_t i = 0; i < SPECD_MAX_PARALLEL; i++) serve_job_unref(s->latest[i]);
    free(s->queue);
    serve_history_destroy(&s->history);
    metrics_counter_destroy(&s->metrics);
    pthread_cond_destroy(&s->idle);
    pthread_cond_destroy(&s->called);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    specd_engine_free(s->engine);
    free(s->model);
    free(s);
}

specd_engine *serve_server_engine(const serve_server *s) { return s->engine; }

const char *serve_server_model(const serve_server *s) { return s->model; }

int32_t serve_server_lora(serve_server *s, float *scales) {
    pthread_mutex_lock(&s->lock);
    memcpy(scales, s->lora, sizeof s->lora);
    pthread_mutex_unlock(&s->lock);
    return specd_engine_n_lora(s->engine);
}

bool serve_server_set_lora(serve_server *s, const serve_lora *list, int32_t n, const char *where, const char *field,
                           serve_fault *fault) {
    float scales[SPECD_MAX_LORA];
    if (!serve_lora_scales(list, n, specd_engine_n_lora(s->engine), where, field, scales, fault)) return false;
    pthread_mutex_lock(&s->lock);
    memcpy(s->lora, scales, sizeof s->lora);
    pthread_mutex_unlock(&s->lock);
    return true;
}

/* ---- jobs ------------------------------------------------------------------------------------ */

/* Room in the queue (s->lock held): busy when every slot and the queue are taken. */
static bool make_room_locked(serve_server *s, serve_fault *fault) {
    if (s->closed) return serve_fail(fault, SERVE_BUSY, "", "the server is stopping: retry later");
    /* counted together: a job not admitted yet is still headed for an idle slot */
    int32_t taken = s->n_running + s->n_queued;
    if (taken >= s->n_slots + s->queue_max)
        return serve_fail(fault, SERVE_BUSY, "", "busy: all %d slots are busy and %d requests are queued (the most "
                          "--queue allows); retry later", s->n_slots, taken - s->n_slots);
    if (s->n_queued < s->queue_cap) return true;
    int32_t cap = s->queue_cap ? s->queue_cap * 2 : 16;
    serve_job **grown = realloc(s->queue, (size_t)cap * sizeof *grown);
    if (!grown) return serve_fail(fault, SERVE_INTERNAL, "", "completion: out of memory");
    s->queue = grown;
    s->queue_cap = cap;
    return true;
}

bool serve_server_submit(serve_server *s, serve_job *job, const serve_names *names, serve_fault *fault) {
    serve_request *req = &job->request;
    serve_limits limits = s->limits; /* the step limit as it is now: a grammar is priced against it */
    pthread_mutex_lock(&s->lock);
    if (limits.step_limit_ms > 0) limits.step_limit_ms = (int64_t)s->step_limit_now_ms;
    pthread_mutex_unlock(&s->lock);
    if (!serve_request_prepare(req, s->engine, &limits, names, fault)) {
        serve_job_fail(job, fault);
        return false;
    }
    int32_t n_lora = specd_engine_n_lora(s->engine);
    if (req->n_lora == 0 && n_lora > 0) { /* the server's current scales (prepare took a request's own) */
        pthread_mutex_lock(&s->lock);
        memcpy(req->lora_scales, s->lora, sizeof req->lora_scales);
        pthread_mutex_unlock(&s->lock);
        req->gen.lora_scales = req->lora_scales;
        req->gen.n_lora_scales = n_lora;
    }
    req->n_cached = serve_history_cached_prefix(&s->history, req->tokens, req->n_tokens);
    pthread_mutex_lock(&job->lock); /* a job's lock before the server's */
    pthread_mutex_lock(&s->lock);
    bool ok = make_room_locked(s, fault);
    if (ok) {
        job->waker_lock = &s->lock;
        job->waker = &s->wake;
        serve_job_ref(job);
        s->queue[s->n_queued++] = job;
        pthread_cond_broadcast(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&job->lock);
    if (!ok) serve_job_fail(job, fault);
    return ok;
}

/* Every job the server holds (queued or in a slot), referenced: a new array of *n (NULL: none, or
 * out of memory, which leaves them to end by themselves). */
static serve_job **held_jobs(serve_server *s, int32_t *n) {
    pthread_mutex_lock(&s->lock);
    serve_job **jobs = malloc(((size_t)s->n_queued + SPECD_MAX_PARALLEL) * sizeof *jobs);
    *n = 0;
    for (int32_t i = 0; jobs && i < s->n_queued; i++) serve_job_ref(jobs[(*n)++] = s->queue[i]);
    for (int32_t i = 0; jobs && i < SPECD_MAX_PARALLEL; i++)
        if (s->running[i]) serve_job_ref(jobs[(*n)++] = s->running[i]);
    pthread_mutex_unlock(&s->lock);
    return jobs;
}

void serve_server_end_all(serve_server *s, serve_end why) {
    int32_t n = 0;
    serve_job **jobs = held_jobs(s, &n);
    for (int32_t i = 0; i < n; i++) {
        serve_job_end(jobs[i], why);
        serve_job_unref(jobs[i]);
    }
    free(jobs);
}

void serve_server_close(serve_server *s) {
    pthread_mutex_lock(&s->lock);
    s->closed = true;
    pthread_mutex_unlock(&s->lock);
    serve_server_end_all(s, SERVE_END_SHUTDOWN);
}

void serve_server_wait_idle(serve_server *s, const atomic_bool *abort) {
    pthread_mutex_lock(&s->lock);
    while ((s->n_queued > 0 || s->n_running > 0) && !(abort && atomic_load(abort))) {
        struct timespec until = serve_realtime_after_ms(50); /* to see *abort */
        pthread_cond_timedwait(&s->idle, &s->lock, &until);
    }
    pthread_mutex_unlock(&s->lock);
}

/* ---- what it shows --------------------------------------------------------------------------- */

serve_status serve_server_status(serve_server *s) {
    serve_status st;
    memset(&st, 0, sizeof st);
    pthread_mutex_lock(&s->lock);
    st.n_slots = s->n_slots;
    st.n_running = s->n_running;
    st.n_queued = s->n_queued;
    st.queue_max = s->queue_max;
    memcpy(st.slots, s->views, sizeof st.slots);
    pthread_mutex_unlock(&s->lock);
    return st;
}

serve_metrics serve_server_metrics(serve_server *s) { return metrics_counter_get(&s->metrics); }

serve_job *serve_server_slot_job(serve_server *s, int32_t slot) {
    if (slot < 0 || slot >= SPECD_MAX_PARALLEL) return NULL;
    pthread_mutex_lock(&s->lock);
    serve_job *job = s->latest[slot];
    if (job) serve_job_ref(job);
    pthread_mutex_unlock(&s->lock);
    return job;
}
