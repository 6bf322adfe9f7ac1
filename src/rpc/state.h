/* state.h - the one global engine behind the JSON API, and the completion that may be running.
 *
 * Locks: `lock` guards the fields below (held briefly, never while generating or loading). The
 * engine itself is guarded by a read-write lock: tokenize/detokenize/completions hold it for
 * reading while they use the engine, init and shutdown hold it for writing while they replace or
 * free it (init only for the swap: it loads the new engine without any lock). Order: the
 * read-write lock before `lock`, never the other way. Completions run on the scheduler's thread
 * (scheduler.h), as many at once as the engine has slots, the others queued. A claimed completion
 * keeps one engine from claim to unclaim: a swap waits until no completion is claimed, and claims
 * wait while it happens. */
#ifndef SPECD_RPC_STATE_H
#define SPECD_RPC_STATE_H

#include "rpc_internal.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct completion_request completion_request;

/* Why a job was asked to end before it finished by itself (the first reason given wins). */
typedef enum rpc_end_reason {
    RPC_END_NONE,
    RPC_END_CANCELLED,  /* completion.cancel, or its client went away */
    RPC_END_SHUTDOWN,   /* shutdown, or the server is stopping */
    RPC_END_TIME_LIMIT, /* a time limit (job->time_limit names it) */
} rpc_end_reason;

/* A completion, blocking or async. Shared by the thread that runs it, pollers and cancellers:
 * reference-counted, freed by the last rpc_job_unref. */
typedef struct rpc_job {
    atomic_int refs;
    int64_t id;
    pthread_mutex_t lock;
    pthread_cond_t changed;     /* signalled on every new update and when finished */
    json_t *updates;            /* partial responses not polled yet (owned) */
    bool finished;
    bool failed;                /* error says why */
    rpc_error error;
    atomic_bool cancel;         /* stop it (the scheduler looks at every step) */
    atomic_int end_reason;      /* rpc_end_reason: why, set before cancel */
    const char *time_limit;     /* RPC_END_TIME_LIMIT: the limit's name (the scheduler thread's) */
    bool stream;                /* partial responses and the final one go to updates */
    json_t *response;           /* without stream: the final response once finished (owned) */
    completion_request *request; /* owned */
} rpc_job;

rpc_job *rpc_job_new(void);
void rpc_job_ref(rpc_job *job);
void rpc_job_unref(rpc_job *job);

/* The loaded engine, read-locked: call rpc_state_release_engine when done. */
bool rpc_state_acquire_engine(specd_engine **engine, rpc_error *err);
void rpc_state_release_engine(void);
/* The model's alias, or its path (new reference). */
json_t *rpc_state_model_name(void);

/* The engine's longest draft (its draft_max), the ceiling of a request's speculative.n_max. */
int32_t rpc_state_draft_max(void);

/* Test-only: called from llama.cpp's progress callback each time a load reads a tensor, before
 * the callback checks for an abort (a test makes loads slow with it, as a slow disk would). NULL
 * removes it. */
typedef void (*rpc_state_load_hook)(float progress, void *user_data);
void rpc_state_set_load_hook(rpc_state_load_hook hook, void *user_data);

/* Ends every claimed completion, queued or running, with `why` (rpc_sched_end). */
void rpc_state_end_all(rpc_end_reason why);
/* The server is stopping for good: every claimed completion ends (RPC_END_SHUTDOWN) and new
 * claims are refused (busy: the server is stopping). */
void rpc_state_close(void);

/* Claims a completion for `job` (no model, or shutdown: an error); assigns its id and records it,
 * so that poll and cancel find it by id (RPC_KEEP_JOBS finished ones are kept for polls). */
bool rpc_state_claim(rpc_job *job, rpc_error *err);
/* The claimed completion is over (or was refused). */
void rpc_state_unclaim(rpc_job *job);
/* The job with this id (id NULL: the latest claimed one), referenced. */
rpc_job *rpc_state_find_job(json_t *id, rpc_error *err);
/* Finished jobs kept findable by id, beyond those claimed. */
#define RPC_KEEP_JOBS 256

/* The prompt tokens of the last completion and the tokens it generated: to report how much of the
 * next prompt the prompt cache will reuse. */
void rpc_state_remember_history(const specd_token *prompt, int32_t n_prompt, const specd_token *out,
                                int32_t n_out);
int32_t rpc_state_cached_prefix(const specd_token *prompt, int32_t n_prompt);

#endif
