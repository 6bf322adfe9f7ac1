/* scheduler.h - the completions' one worker thread: it runs every claimed completion in a slot
 * of the engine (specd_engine_params.n_parallel), one step of each active slot in turn, and keeps
 * those that find every slot busy in a bounded FIFO queue; past the queue a request is the busy
 * error. A new request takes the idle slot whose cache shares the longest prefix with its prompt.
 *
 * Threads: every function is safe from any thread. The scheduler's lock is held briefly, never
 * while generating; it may be taken under state.c's lock (shutdown cancels under it), never the
 * other way round: the scheduler calls into state.c only without its own lock held. */
#ifndef SPECD_RPC_SCHEDULER_H
#define SPECD_RPC_SCHEDULER_H

#include "state.h"

#define RPC_DEFAULT_QUEUE 64

/* Slots and queue length for the engine being swapped in (no completion is claimed then). */
void rpc_sched_configure(int32_t n_slots, int32_t n_queue);
/* Queues a claimed, parsed job (referenced by the scheduler until it finishes): false with the
 * busy error when every slot is busy and the queue is full. When it finishes, its final response
 * is in job->response (blocking) or the last of job->updates (job->stream), job->finished is set
 * and the job is unclaimed. */
bool rpc_sched_submit(rpc_job *job, rpc_error *err);
/* Asks the scheduler to end a job for `why`: a queued one at once, a running one at its next
 * step, with a final response whose stop_type says why ("cancelled", "shutdown", "time_limit").
 * A blocking job that never ran because of a shutdown fails instead (busy: retry later). The first
 * reason given wins; a finished job is left as it is. */
bool rpc_sched_end(rpc_job *job, rpc_end_reason why); /* true when `why` is the reason that counts */
/* rpc_sched_end(job, RPC_END_CANCELLED). */
void rpc_sched_cancel(rpc_job *job);
/* The slots for `status`: an array of {id, state, id_task, n_prompt_tokens, n_cached,
 * n_generated, n_drafted, n_accepted, acceptance_rate, n_steps} (new reference; an idle slot shows
 * its latest request's figures, id_task 0 before any), the queue's length and bound in *n_queued
 * and *queue_max. */
json_t *rpc_sched_slots_json(int32_t *n_queued, int32_t *queue_max);

#endif
