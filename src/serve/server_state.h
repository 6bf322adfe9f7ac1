/* server_state.h - what a server is made of, shared by server.c (the object: status, the stop),
 * submit.c (a job's way in) and scheduler.c (its thread). Nothing else sees it.
 *
 * Locks: `lock` guards the queue, the counts, the views, `running`, `latest` and `lora`; held briefly, never while
 * generating. The scheduler thread alone touches `slots` and `heavy`. A job's lock may be held
 * while taking `lock` (serve_job_end wakes the scheduler), never the other way round. */
#ifndef SPECD_SERVE_SERVER_STATE_H
#define SPECD_SERVE_SERVER_STATE_H

#include "heavy.h"
#include "history.h"
#include "run.h"
#include "server.h"

/* A call waiting for its slot to be idle (serve_server_slot_call, slot_call.c). */
typedef struct slot_call {
    int32_t slot;
    serve_slot_fn fn;
    void *arg;
    bool taken; /* the scheduler runs it: its caller waits for it even when the server stops */
    bool done;
} slot_call;

typedef struct sched_slot {
    serve_job *job;  /* referenced while it runs here; NULL: idle */
    serve_run *run;
} sched_slot;

struct serve_server {
    specd_engine *engine; /* owned */
    char *model;          /* owned */
    serve_limits limits;
    double step_limit_now_ms; /* under lock: heavy_step_limit_ms as of the latest round (grammars are priced against it) */
    pthread_mutex_t lock;
    pthread_cond_t wake;  /* new work, an end asked for, the stop */
    pthread_cond_t idle;  /* a job finished */
    serve_job **queue;    /* FIFO, referenced */
    int32_t n_queued, queue_cap, queue_max;
    int32_t n_slots;
    int32_t n_running;
    bool closed;          /* refuses new jobs */
    bool quit;            /* the scheduler thread ends */
    float lora[SPECD_MAX_LORA]; /* the adapter scales of requests that give none (serve_server_set_lora) */
    serve_slot_view views[SPECD_MAX_PARALLEL];
    serve_job *running[SPECD_MAX_PARALLEL]; /* the job in each slot (borrowed from slots[]), NULL: idle */
    serve_job *latest[SPECD_MAX_PARALLEL];  /* referenced: the latest job each slot ran */
    pthread_t thread;
    sched_slot slots[SPECD_MAX_PARALLEL]; /* the scheduler thread's only */
    heavy_state heavy;                    /* the scheduler thread's only */
    metrics_counter metrics;
    serve_history history;
    slot_call *call;       /* the slot call waiting for its slot, NULL: none (guarded by `lock`) */
    pthread_cond_t called; /* a slot call ran, or the thread stopped */
};

/* scheduler.c: the thread that runs the server's jobs, until s->quit. */
void *serve_scheduler_main(void *server);
/* slot_call.c: runs the waiting slot call when its slot is idle (the scheduler thread, between
 * rounds); true when one ran. */
bool serve_slot_call_run(serve_server *s);

#endif
