/* job.h - one submitted request and its answer, shared by the server that runs it and the API
 * threads that wait for it, take its pieces or cancel it. Reference-counted: freed by the last
 * serve_job_unref, which may come long after the server is gone (a finished job stays readable).
 *
 * Threads: every function is safe from any thread. Lock order: a job's lock, then its server's
 * (serve_job_end wakes the scheduler); the server never takes a job's lock while holding its own. */
#ifndef SPECD_SERVE_JOB_H
#define SPECD_SERVE_JOB_H

#include "reply.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Why a job was asked to end before it finished by itself (the first reason given wins). */
typedef enum serve_end {
    SERVE_END_NONE,
    SERVE_END_CANCELLED,  /* cancelled, or its client went away */
    SERVE_END_SHUTDOWN,   /* the server is stopping or unloading its models */
    SERVE_END_TIME_LIMIT, /* a time limit (the job's stopping limit names it) */
} serve_end;

typedef struct serve_job {
    atomic_int refs;
    int64_t id;
    uint64_t client;            /* who asked for it (the API's: its share, src/api/completion.c); 0: unknown */
    pthread_mutex_t lock;
    pthread_cond_t changed;     /* signalled on every new item and when finished */
    void **items;               /* stream: the pieces (and the final answer) not taken yet */
    size_t n_items, cap_items;
    void *final;                /* not streamed: the final answer once finished */
    bool finished;
    bool failed;                /* fault says why */
    serve_fault fault;
    atomic_bool cancel;         /* stop it (the scheduler looks at every step) */
    atomic_int end_reason;      /* serve_end: why, set before cancel */
    const char *time_limit;     /* SERVE_END_TIME_LIMIT: the limit's name (the scheduler thread's) */
    serve_request request;      /* owned */
    serve_reply reply;          /* its ctx owned */
    /* While queued or running: the server's lock and the condition its scheduler waits on, so that
     * an end asked for wakes it; NULL once finished (under the job's lock). */
    pthread_mutex_t *waker_lock;
    pthread_cond_t *waker;
} serve_job;

/* A job with this id and an empty request (serve_request_init), one reference. NULL: no memory. */
serve_job *serve_job_new(int64_t id);
void serve_job_ref(serve_job *job);
void serve_job_unref(serve_job *job);

/* A job that will never run (its request was refused before it reached a server): it ends at once,
 * failed with `fault`, so whoever waits for it or polls it sees the error. */
void serve_job_fail(serve_job *job, const serve_fault *fault);

/* Asks the job to end for `why`: a queued one at once, a running one at its next step, with a
 * final answer whose stop says why. The first reason given wins; a finished job is left as it is.
 * Returns true when `why` is the reason that counts. */
bool serve_job_end(serve_job *job, serve_end why);

/* Waits until the job finished: its final answer (taken) in *final, or false with its fault.
 * `still_wanted` (may be NULL) is asked every `watch_ms` while it waits: once it says no, the job
 * is cancelled (its final answer still comes). For a job submitted without stream. */
bool serve_job_wait_final(serve_job *job, bool (*still_wanted)(void *), void *ctx, int64_t watch_ms, void **final,
                          serve_fault *fault);

/* A streamed job's pieces so far (the final answer last, once finished), taken: a new array of
 * *n items (free it with free(), each item with the API's own free; NULL when none), waiting up
 * to wait_ms for one when there are none. *finished once every piece was taken; *failed (and
 * *fault) when it ended with an error instead. */
void **serve_job_take(serve_job *job, int64_t wait_ms, size_t *n, bool *finished, bool *failed, serve_fault *fault);

/* Whether it finished (its answer complete). */
bool serve_job_finished(serve_job *job);

/* ---- the server's side ----------------------------------------------------------------------- */

/* A piece of a streamed answer (taken). */
void serve_job_publish(serve_job *job, void *item);
/* The job is over: its final answer (taken; NULL: failed, see serve_job_set_fault) goes where its
 * caller waits, and it is marked finished. */
void serve_job_complete(serve_job *job, void *final);
void serve_job_set_fault(serve_job *job, const serve_fault *fault);

#endif
