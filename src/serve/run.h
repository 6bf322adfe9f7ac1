/* run.h - a job running in a slot, driven step by step by the scheduler (one thread): its session
 * (begun by the scheduler in the slot it picked, the run's from then on), and its text as it is
 * decided (stop strings cut, UTF-8 never split), handed to the job's reply piece by piece (with
 * stream) and as the final answer. */
#ifndef SPECD_SERVE_RUN_H
#define SPECD_SERVE_RUN_H

#include "history.h"
#include "job.h"
#include "metrics.h"

typedef struct serve_run serve_run;

/* What a run needs of its server. */
typedef struct run_env {
    specd_engine *engine;
    const char *model;
    const serve_limits *limits;
    metrics_counter *metrics; /* a finished run is counted here */
    serve_history *history;   /* and leaves what the caches hold here */
    int32_t slot;             /* the slot it runs in; -1: none (it ended while queued) */
} run_env;

/* Ready to run `job`, its time in the slot (--time-limit) counting from now; NULL (the job's fault
 * set) when out of memory. */
serve_run *serve_run_new(serve_job *job, const run_env *env);
/* The run takes the session the scheduler began for its job in a slot (specd_session_begin_in_slot's
 * status, session and message, all taken). False when the session did not begin (serve_run_end
 * then answers with the fault). */
bool serve_run_open(serve_run *x, specd_status status, specd_session *session, char *message);
/* One step of several runs (each in its own slot): each drafts (an ended job stops here), then ONE
 * target pass verifies every tree, then each keeps its accepted tokens. done[i]: run i is over. */
void serve_runs_step(serve_run **xs, int32_t n, bool *done);
/* Ends the job for the time limit named `limit` (a static string: its stopping limit). */
void serve_run_end_for_time(serve_job *job, const char *limit);
/* The result so far (the slots' figures, the pass time a round counted). */
const specd_result *serve_run_result(const serve_run *x);
/* Prompt tokens its session has still to decode (0 once generating, or without a session). */
int32_t serve_run_pending_prompt(const serve_run *x);
/* The final answer (the reply's item), or NULL with the job's fault set; frees x. A run never
 * opened answers as a cancelled, empty completion. */
void *serve_run_end(serve_run *x);

#endif
