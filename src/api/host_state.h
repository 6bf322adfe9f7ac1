/* host_state.h - what a host is made of (host.h), shared by host.c (completions, the engine for
 * short calls), completion.c (a request's defaults, a completion's claim and hand-over), host_load.c (init, the swap,
 * shutdown) and host_status.c. Nothing else sees it.
 *
 * Locks: `lock` guards the fields below (held briefly, never while generating or loading).
 * `engine_lock` keeps the serving server alive: short calls hold it for reading while they use
 * the engine, a swap and shutdown hold it for writing while they replace or free the server (a
 * load only for the swap: it loads the new engine without any lock). Order: `engine_lock` before
 * `lock`, never the other way. */
#ifndef SPECD_API_HOST_STATE_H
#define SPECD_API_HOST_STATE_H

#include "host.h"

#include <pthread.h>
#include <stdatomic.h>

typedef enum load_state { STATE_NONE, STATE_LOADING, STATE_READY, STATE_FAILED } load_state;

struct api_host {
    pthread_mutex_t lock;
    pthread_cond_t idle;          /* signalled when a claim ends */
    pthread_cond_t changed;       /* signalled when a load or a swap ends, and when shutdown ends */
    pthread_rwlock_t engine_lock; /* read: using the server; write: replacing or freeing it */
    serve_limits limits;          /* for the servers it makes */
    specd_sampling_params sampling; /* what a request that sets none samples with (api_host_set_sampling) */
    /* what a request that sets none drafts with, and whether a full context shifts: the serving
     * model's init settings (--spec-type, --spec-draft-n-max, ..., --context-shift) */
    specd_spec_params speculative;
    bool context_shift;
    int32_t embd_normalize;       /* the serving model's --embd-normalize */
    /* the serving server (NULL: none) and what describes it */
    serve_server *server;
    char *model, *alias;          /* owned */
    int32_t n_ctx, n_vocab, n_parallel;
    int32_t client_share;         /* completions one client may have queued or running at once */
    bool has_draft;
    json_t *placement;            /* {"target": {...}, "draft": {...} | null} of the serving engine */
    char *placement_note;         /* owned: -ngl asked on a build that cannot offload, else NULL */
    json_t *invariance;           /* owned: whether the engine's verification is batch-invariant */
    /* the latest init */
    bool loading;                 /* a load runs (beside the serving engine, if any) */
    char *loading_model;          /* owned: its target path while it runs */
    bool draining;                /* its engine waits for the serving one to be idle: claims are refused (busy) */
    bool swapping;                /* its engine is being swapped in: claims and short calls wait */
    char *last_init_error;        /* owned: why the latest init's load failed; NULL if it did not */
    atomic_bool abort_load;       /* read by the load's progress callback: stop now */
    bool shutting_down;
    bool closed;                  /* api_host_close: stopping for good */
    pthread_t init_thread;
    bool has_init_thread;
    api_host_load_hook load_hook; /* tests only */
    void *load_hook_data;
    /* completions */
    int32_t n_claimed;            /* claimed and not handed to the server yet */
    serve_job **jobs;             /* referenced: the latest ones, oldest first */
    int32_t n_jobs, jobs_cap;
    serve_job *latest;            /* referenced: the latest claimed job */
    int64_t next_id;
};

/* What serves (lock held): a model (also during a reload and after a failed one), none yet while
 * the first loads, none after a failed load, or none at all. */
load_state host_state_locked(const api_host *h);
/* Why there is no server to use (lock held); returns false. */
bool host_fail_no_model_locked(const api_host *h, api_error *err);

#endif
