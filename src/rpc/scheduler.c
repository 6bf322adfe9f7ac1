/* scheduler.c - see scheduler.h. One thread owns the engine's slots: each round it admits queued
 * jobs into idle slots (the slot whose cache shares the longest prefix with the prompt), then steps
 * every active slot once, in slot order, so every running completion advances by one speculative
 * step per round whatever else runs; except a slot whose own work would stall the others (a
 * runaway grammar), which steps in rounds of its own (heavy.h). A finished job is answered and
 * unclaimed at once. */
#define _POSIX_C_SOURCE 200809L
#include "scheduler.h"

#include "completion.h"
#include "heavy.h"
#include "limits.h"

#include <stdlib.h>
#include <string.h>

/* What `status` shows of a slot: copied from the running session after each step; an idle slot
 * keeps its latest request's figures (as llama-server's /slots does). */
typedef struct slot_view {
    bool processing;
    int64_t id_task;  /* 0: it has run nothing yet */
    int32_t n_prompt, n_cached, n_generated, n_steps, n_drafted, n_accepted;
} slot_view;

typedef struct sched_slot {
    rpc_job *job;          /* referenced while it runs here; NULL: idle */
    completion_exec *exec; /* the scheduler thread's only */
} sched_slot;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;           /* new work or a cancel */
    rpc_job **queue;               /* FIFO, referenced */
    int32_t n_queued, queue_cap;
    int32_t queue_max;
    int32_t n_slots;               /* the engine's, for the busy check and status */
    int32_t n_running;
    slot_view views[SPECD_MAX_PARALLEL];
    bool thread_started;
    pthread_t thread;
    sched_slot slots[SPECD_MAX_PARALLEL]; /* the scheduler thread's only (job pointers mirrored in views) */
} S = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, .queue_max = RPC_DEFAULT_QUEUE,
       .n_slots = 1};

void rpc_sched_configure(int32_t n_slots, int32_t n_queue) {
    pthread_mutex_lock(&S.lock);
    S.n_slots = n_slots > 0 ? n_slots : 1;
    S.queue_max = n_queue;
    memset(S.views, 0, sizeof S.views);
    pthread_mutex_unlock(&S.lock);
}

/* The job is over: its final response goes where its caller waits, then it is unclaimed (before
 * pollers see `finished`, so they may claim the next at once). */
static void finish_job(rpc_job *job, json_t *final) {
    rpc_state_unclaim(job);
    pthread_mutex_lock(&job->lock);
    if (final && job->stream) json_array_append_new(job->updates, final);
    else if (final) job->response = final;
    job->finished = true;
    pthread_cond_broadcast(&job->changed);
    pthread_mutex_unlock(&job->lock);
    rpc_job_unref(job);
}

/* Removes queue entry i (S.lock held); returns the job, still referenced. */
static rpc_job *take_queued_locked(int32_t i) {
    rpc_job *job = S.queue[i];
    memmove(S.queue + i, S.queue + i + 1, (size_t)(S.n_queued - i - 1) * sizeof *S.queue);
    S.n_queued--;
    return job;
}

/* A job taken off the queue fails with err, never having run. */
static void fail_unrun(rpc_job *job, const rpc_error *err) {
    pthread_mutex_lock(&job->lock);
    job->failed = true;
    job->error = *err;
    pthread_mutex_unlock(&job->lock);
    finish_job(job, NULL);
}

/* Every queued job fails with err (there is no engine to run them on). */
static void fail_queued(const rpc_error *err) {
    for (;;) {
        pthread_mutex_lock(&S.lock);
        rpc_job *job = S.n_queued > 0 ? take_queued_locked(0) : NULL;
        pthread_mutex_unlock(&S.lock);
        if (!job) return;
        fail_unrun(job, err);
    }
}

/* Jobs ended while queued: answered as completions that never ran (their stop_type says why),
 * except a blocking one ended by a shutdown, which fails as busy: its client may retry elsewhere
 * or later, and a 200 with no text would read as an answer. */
static void drop_cancelled(specd_engine *engine) {
    for (;;) {
        rpc_job *job = NULL;
        pthread_mutex_lock(&S.lock);
        for (int32_t i = 0; i < S.n_queued && !job; i++)
            if (atomic_load(&S.queue[i]->cancel)) job = take_queued_locked(i);
        pthread_mutex_unlock(&S.lock);
        if (!job) return;
        if (!job->stream && atomic_load(&job->end_reason) == RPC_END_SHUTDOWN) {
            rpc_error err;
            rpc_fail(&err, RPC_BUSY, "", "the server is stopping or unloading its models (shutdown): this request "
                     "waited in the queue and never ran; retry later");
            fail_unrun(job, &err);
            continue;
        }
        completion_exec *x = completion_exec_new(job, engine);
        finish_job(job, x ? completion_exec_end(x) : NULL);
    }
}

/* The idle slot whose cache shares the longest prefix with the job's prompt (the first on ties,
 * so a lone client keeps its slot); -1 when none is idle. */
static int32_t best_slot(specd_engine *engine, int32_t n_slots, const completion_request *req) {
    int32_t best = -1, best_len = -1;
    for (int32_t i = 0; i < n_slots; i++) {
        if (S.slots[i].job) continue;
        int32_t len = specd_engine_slot_cached(engine, i, req->tokens, req->n_tokens);
        if (len > best_len) best = i, best_len = len;
    }
    return best;
}

/* The running request's figures into the slot's view (S.lock not held). */
static void publish_view(int32_t i) {
    sched_slot *slot = &S.slots[i];
    const specd_result *r = completion_exec_result(slot->exec);
    slot_view v = {.processing = true, .id_task = slot->job->id, .n_prompt = r->stats.n_prompt,
                   .n_cached = r->stats.n_prompt_cached, .n_generated = r->n_tokens, .n_steps = r->stats.n_steps,
                   .n_drafted = r->stats.n_drafted, .n_accepted = r->stats.n_accepted};
    pthread_mutex_lock(&S.lock);
    S.views[i] = v;
    pthread_mutex_unlock(&S.lock);
}

/* The slot is idle again; its view keeps the figures of the request it ran. */
static void publish_idle(int32_t i) {
    pthread_mutex_lock(&S.lock);
    S.views[i].processing = false;
    pthread_mutex_unlock(&S.lock);
}

/* Ends the job in slot i and frees the slot. */
static void end_slot(int32_t i) {
    sched_slot *slot = &S.slots[i];
    rpc_job *job = slot->job;
    publish_view(i); /* its final figures */
    json_t *final = completion_exec_end(slot->exec);
    slot->job = NULL;
    slot->exec = NULL;
    heavy_forget(i);
    pthread_mutex_lock(&S.lock);
    S.n_running--;
    pthread_mutex_unlock(&S.lock);
    publish_idle(i);
    finish_job(job, final);
}

/* Moves queued jobs into idle slots, in FIFO order, and ingests their prompts. */
static void admit(specd_engine *engine) {
    int32_t n_slots = specd_engine_n_parallel(engine);
    for (;;) {
        pthread_mutex_lock(&S.lock);
        rpc_job *job = NULL;
        int32_t i = S.n_queued > 0 ? best_slot(engine, n_slots, S.queue[0]->request) : -1;
        if (i >= 0) {
            job = take_queued_locked(0);
            S.n_running++;
        }
        pthread_mutex_unlock(&S.lock);
        if (!job) return;
        S.slots[i].job = job;
        S.slots[i].exec = completion_exec_new(job, engine);
        if (!S.slots[i].exec) {
            S.slots[i].job = NULL;
            pthread_mutex_lock(&S.lock);
            S.n_running--;
            pthread_mutex_unlock(&S.lock);
            finish_job(job, NULL);
            continue;
        }
        if (!completion_exec_open(S.slots[i].exec, i)) end_slot(i);
        else publish_view(i);
    }
}

/* The target pass time a slot's result has counted so far: its part of every pass that verified
 * its trees (the parts of one pass add up to it). */
static double pass_time_of(int32_t i) { return completion_exec_result(S.slots[i].exec)->stats.verify_ms; }

/* One round: admit, then one step of the slots heavy.h picks (every light one, or one heavy one
 * alone), their verifications in one target pass. */
static void run_round(specd_engine *engine) {
    static const specd_engine *last_engine; /* this thread's only, as heavy.c's state */
    if (engine != last_engine) heavy_reset(); /* another engine: its passes are not the last one's */
    last_engine = engine;
    drop_cancelled(engine);
    admit(engine);
    int32_t active[SPECD_MAX_PARALLEL], n_active = 0;
    for (int32_t i = 0; i < SPECD_MAX_PARALLEL; i++)
        if (S.slots[i].job) active[n_active++] = i;
    int32_t at[SPECD_MAX_PARALLEL];
    bool solo = false;
    int32_t n = heavy_pick_round(active, n_active, at, &solo);
    completion_exec *execs[SPECD_MAX_PARALLEL];
    bool grammar[SPECD_MAX_PARALLEL], done[SPECD_MAX_PARALLEL];
    double pass_before[SPECD_MAX_PARALLEL], pass_ms = 0.0;
    for (int32_t k = 0; k < n; k++) {
        execs[k] = S.slots[at[k]].exec;
        grammar[k] = S.slots[at[k]].job->request->grammar != NULL;
        pass_before[k] = pass_time_of(at[k]);
    }
    double t0 = rpc_now_ms(), grammar0 = specd_grammar_thread_ms();
    completion_execs_step(execs, n, done);
    double round_ms = rpc_now_ms() - t0, grammar_ms = specd_grammar_thread_ms() - grammar0;
    for (int32_t k = 0; k < n; k++) pass_ms += pass_time_of(at[k]) - pass_before[k];
    int32_t over = heavy_after_round(at, grammar, n, solo, round_ms, grammar_ms, pass_ms);
    if (over >= 0) completion_end_for_time(S.slots[over].job, "--step-limit");
    for (int32_t k = 0; k < n; k++) {
        if (done[k]) end_slot(at[k]);
        else publish_view(at[k]);
    }
}

static void *scheduler_main(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&S.lock);
        while (S.n_queued == 0 && S.n_running == 0) pthread_cond_wait(&S.wake, &S.lock);
        pthread_mutex_unlock(&S.lock);
        specd_engine *engine = NULL;
        rpc_error err;
        /* A claimed job keeps the engine: it cannot be swapped or freed while jobs wait here. */
        if (!rpc_state_acquire_engine(&engine, &err)) { /* cannot happen while jobs are claimed; never spin */
            fail_queued(&err);
            continue;
        }
        run_round(engine);
        rpc_state_release_engine();
    }
    return NULL;
}

/* Starts the thread on first use (S.lock held); it lives as long as the process, waiting when idle. */
static bool ensure_thread_locked(void) {
    if (S.thread_started) return true;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    S.thread_started = pthread_create(&S.thread, &attr, scheduler_main, NULL) == 0;
    pthread_attr_destroy(&attr);
    return S.thread_started;
}

bool rpc_sched_submit(rpc_job *job, rpc_error *err) {
    pthread_mutex_lock(&S.lock);
    /* counted together: a job not admitted yet is still headed for an idle slot */
    int32_t taken = S.n_running + S.n_queued;
    bool room = taken < S.n_slots + S.queue_max;
    bool grown = true;
    if (room && S.n_queued == S.queue_cap) {
        int32_t cap = S.queue_cap ? S.queue_cap * 2 : 16;
        rpc_job **q = realloc(S.queue, (size_t)cap * sizeof *q);
        if (q) S.queue = q, S.queue_cap = cap;
        grown = q != NULL;
    }
    bool ok = room && grown && ensure_thread_locked();
    if (ok) {
        rpc_job_ref(job);
        S.queue[S.n_queued++] = job;
        pthread_cond_broadcast(&S.wake);
    } else if (!room) {
        rpc_fail(err, RPC_BUSY, "", "busy: all %d slots are busy and %d requests are queued (the most --queue "
                 "allows); retry later", S.n_slots, taken - S.n_slots);
    } else {
        rpc_fail(err, RPC_INTERNAL_ERROR, "", "completion: out of memory, or no scheduler thread");
    }
    pthread_mutex_unlock(&S.lock);
    return ok;
}

bool rpc_sched_end(rpc_job *job, rpc_end_reason why) {
    int none = RPC_END_NONE;
    bool first = atomic_compare_exchange_strong(&job->end_reason, &none, (int)why);
    atomic_store(&job->cancel, true);
    pthread_mutex_lock(&S.lock);
    pthread_cond_broadcast(&S.wake);
    pthread_mutex_unlock(&S.lock);
    return first;
}

void rpc_sched_cancel(rpc_job *job) { rpc_sched_end(job, RPC_END_CANCELLED); }

json_t *rpc_sched_slots_json(int32_t *n_queued, int32_t *queue_max) {
    json_t *a = json_array();
    pthread_mutex_lock(&S.lock);
    for (int32_t i = 0; a && i < S.n_slots; i++) {
        const slot_view *v = &S.views[i];
        json_array_append_new(
            a, json_pack("{s:i, s:s, s:I, s:i, s:i, s:i, s:i, s:i, s:i, s:f}", "id", i, "state",
                         v->processing ? "processing" : "idle", "id_task", (json_int_t)v->id_task, "n_prompt_tokens",
                         v->n_prompt, "n_cached", v->n_cached, "n_generated", v->n_generated, "n_steps", v->n_steps,
                         "n_drafted", v->n_drafted, "n_accepted", v->n_accepted, "acceptance_rate",
                         v->n_drafted > 0 ? (double)v->n_accepted / v->n_drafted : 0.0));
    }
    *n_queued = S.n_queued;
    *queue_max = S.queue_max;
    pthread_mutex_unlock(&S.lock);
    return a;
}
