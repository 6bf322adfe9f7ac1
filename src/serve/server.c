/* server.c - the server object (see server.h): its life, ending jobs, and what it shows of itself.
 * A job's way in is submit.c's; the thread is scheduler.c's. */
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
