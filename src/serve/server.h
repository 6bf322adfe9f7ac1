/* server.h - the server: one engine, its slots, the queue of requests waiting for one, the
 * scheduler thread that runs them side by side, and its counters. An object (no globals): a
 * process may hold several, each with its own engine (two models served by one program, or the
 * library embedded twice). The JSON API keeps one per loaded model (api/host.h); so does `specd
 * serve`.
 *
 * A request reaches it as a job (job.h) whose request and reply the API filled: submit checks the
 * request once (serve_request_prepare) and queues it; the scheduler admits queued jobs into idle
 * slots (the slot whose cache shares the longest prefix with the prompt), steps every active slot
 * once per round with ONE target pass for all of them, and answers each job through its reply.
 *
 * Threads: every function is safe from any thread, except serve_server_free (once, by the owner,
 * with no call in flight). */
#ifndef SPECD_SERVE_SERVER_H
#define SPECD_SERVE_SERVER_H

#include "job.h"
#include "metrics.h"

#define SERVE_DEFAULT_QUEUE 64

typedef struct serve_server serve_server;

typedef struct serve_options {
    const char *model;   /* the model's name in answers (an alias, or its path); copied */
    int32_t n_queue;     /* requests waiting for a slot at most; -1: SERVE_DEFAULT_QUEUE */
    serve_limits limits; /* what one request may ask for */
} serve_options;

/* A server on `engine`, which it takes: serve_server_free frees it. NULL with *fault set when out
 * of memory or no thread can start (the engine is then the caller's still). */
serve_server *serve_server_new(specd_engine *engine, const serve_options *options, serve_fault *fault);
/* Ends every job (stop "shutdown"), waits until none runs, stops the scheduler, frees the engine. */
void serve_server_free(serve_server *s);

specd_engine *serve_server_engine(const serve_server *s);
const char *serve_server_model(const serve_server *s);

/* The LoRA adapter scales of the requests that give none of their own: the engine's defaults (as
 * it loaded them) until set. serve_server_lora copies them into scales[SPECD_MAX_LORA] and returns
 * how many adapters the engine has; serve_server_set_lora takes llama-server's list (adapters left
 * out: 0), false with *fault set for a bad one (lora.h). */
int32_t serve_server_lora(serve_server *s, float *scales);
bool serve_server_set_lora(serve_server *s, const serve_lora *list, int32_t n, const char *where, const char *field,
                           serve_fault *fault);

/* (submit.c) Prepares `job`'s request against the engine (request.h; messages as `names` says) and queues
 * the job (the server references it until it finishes). False with *fault set when the request
 * is refused, every slot is busy and the queue is full (SERVE_BUSY), or the server is closed: the
 * job has then ended with that fault (serve_job_fail). When it finishes its final answer is
 * there for serve_job_wait_final (or the last of serve_job_take, with stream). */
bool serve_server_submit(serve_server *s, serve_job *job, const serve_names *names, serve_fault *fault);

/* Ends every job, queued or running, for `why` (serve_job_end). */
void serve_server_end_all(serve_server *s, serve_end why);
/* The server is stopping for good: every job ends (SERVE_END_SHUTDOWN), new ones are refused. */
void serve_server_close(serve_server *s);
/* Waits until no job is queued or running, or *abort turns true. */
void serve_server_wait_idle(serve_server *s, const atomic_bool *abort);

/* What `status` and /slots show of a slot: the running request's figures, copied after each step;
 * an idle slot keeps its latest request's (as llama-server's /slots does). */
typedef struct serve_slot_view {
    bool processing;
    int64_t id_task; /* 0: it has run nothing yet */
    int32_t n_prompt, n_cached, n_generated, n_steps, n_drafted, n_accepted;
} serve_slot_view;

typedef struct serve_status {
    int32_t n_slots;
    int32_t n_running, n_queued, queue_max;
    serve_slot_view slots[SPECD_MAX_PARALLEL];
} serve_status;

serve_status serve_server_status(serve_server *s);
serve_metrics serve_server_metrics(serve_server *s);
/* The latest job slot `slot` ran (or runs), referenced; NULL: none yet. */
serve_job *serve_server_slot_job(serve_server *s, int32_t slot);

/* Runs fn(engine, slot, arg) on the server's thread once slot `slot` is idle, between rounds (no
 * pass under way, as the engine's slot calls need), and waits for it: llama-server's slot actions
 * (save, restore, erase). One call at a time; a request queued for that slot meanwhile runs after
 * it. False with *fault (SERVE_BUSY) when the server stops first, or (SERVE_INVALID) for a slot
 * out of range. */
typedef void (*serve_slot_fn)(specd_engine *engine, int32_t slot, void *arg);
bool serve_server_slot_call(serve_server *s, int32_t slot, serve_slot_fn fn, void *arg, serve_fault *fault);

#endif
