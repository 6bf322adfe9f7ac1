/* scheduler.c - a server's one thread (server_state.h). Each round it admits queued jobs into idle
 * slots (the slot whose cache shares the longest prefix with the prompt) and begins their sessions
 * there with the requests' own parameters, then steps every active slot once, in slot order, so
 * every running completion advances by one speculative step per round whatever else runs; except
 * a slot whose own work would stall the others (a runaway grammar), which steps in rounds of its
 * own (heavy.h). A finished job is answered at once. */
#include "server_state.h"

#include "clock.h"
#include "../engine/grammar_clock.h"

#include <stdlib.h>
#include <string.h>

static run_env env_of(serve_server *s, int32_t slot) {
    return (run_env){.engine = s->engine, .model = s->model, .limits = &s->limits, .metrics = &s->metrics,
                     .history = &s->history, .slot = slot};
}

/* The job is over: the server forgets it first (so that whoever sees it finished may submit the
 * next at once), then its answer goes where its caller waits. `slot`: the slot it held, or -1. */
static void finish_job(serve_server *s, serve_job *job, void *final, int32_t slot) {
    pthread_mutex_lock(&s->lock);
    if (slot >= 0) {
        s->n_running--;
        s->running[slot] = NULL;
        s->views[slot].processing = false;
    }
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
    serve_job_complete(job, final);
    serve_job_unref(job);
}

/* Removes queue entry i (s->lock held); returns the job, still referenced. */
static serve_job *take_queued_locked(serve_server *s, int32_t i) {
    serve_job *job = s->queue[i];
    memmove(s->queue + i, s->queue + i + 1, (size_t)(s->n_queued - i - 1) * sizeof *s->queue);
    s->n_queued--;
    return job;
}

/* Jobs ended while queued: answered as completions that never ran (their stop says why), except
 * a blocking one ended by a shutdown, which fails as busy: its client may retry elsewhere or
 * later, and a 200 with no text would read as an answer. */
static void drop_ended(serve_server *s) {
    for (;;) {
        serve_job *job = NULL;
        pthread_mutex_lock(&s->lock);
        for (int32_t i = 0; i < s->n_queued && !job; i++)
            if (atomic_load(&s->queue[i]->cancel)) job = take_queued_locked(s, i);
        pthread_mutex_unlock(&s->lock);
        if (!job) return;
        if (!job->request.stream && atomic_load(&job->end_reason) == SERVE_END_SHUTDOWN) {
            serve_fault fault;
            serve_fail(&fault, SERVE_BUSY, "", "the server is stopping or unloading its models (shutdown): this "
                       "request waited in the queue and never ran; retry later");
            serve_job_set_fault(job, &fault);
            finish_job(s, job, NULL, -1);
            continue;
        }
        run_env env = env_of(s, -1);
        serve_run *run = serve_run_new(job, &env);
        finish_job(s, job, run ? serve_run_end(run) : NULL, -1);
    }
}

/* The slot the request asked for (id_slot, already taken modulo the slots by serve_request_prepare);
 * -1: any. */
static int32_t wanted_slot(const serve_server *s, const serve_request *req) {
    return req->slot >= 0 && req->slot < s->n_slots ? req->slot : -1;
}

/* The idle slot whose cache shares the longest prefix with the job's prompt (the first on ties,
 * so a lone client keeps its slot), or the slot the request asked for (id_slot: idle, since
 * next_seat_locked passes by a job whose slot is busy); -1 when none is idle. */
static int32_t best_slot(serve_server *s, const serve_request *req) {
    int32_t wanted = wanted_slot(s, req);
    if (wanted >= 0) return wanted;
    int32_t best = -1, best_len = -1;
    for (int32_t i = 0; i < s->n_slots; i++) {
        if (s->slots[i].job) continue;
        int32_t len = specd_engine_slot_cached(s->engine, i, req->tokens, req->n_tokens);
        if (len > best_len) best = i, best_len = len;
    }
    return best;
}

/* Whether the job's prompt is the very prompt a running session is still decoding (the choices of
 * one request with n > 1, or two clients asking the same at once): the job then waits a round or
 * a few and shares those cells (share_prompt) instead of decoding them beside it. */
static bool waits_for_same_prompt(const serve_server *s, const serve_request *req) {
    if (!req->cache_prompt) return false;
    for (int32_t j = 0; j < s->n_slots; j++) {
        const serve_job *job = s->slots[j].job;
        if (!job || !s->slots[j].run || job->request.n_tokens != req->n_tokens) continue;
        if (memcmp(job->request.tokens, req->tokens, (size_t)req->n_tokens * sizeof *req->tokens) == 0 &&
            serve_run_pending_prompt(s->slots[j].run) > 0)
            return true;
    }
    return false;
}

/* Slot i takes the longest prefix of the job's prompt that another slot, running or idle, holds
 * where it is longer than its own (llama.cpp's sequence copy, no decode): the choices of one
 * request, a client's earlier prompt left in another slot, a common system prompt. */
static void share_prompt(serve_server *s, int32_t i, const serve_request *req) {
    if (!req->cache_prompt) return;
    int32_t best = -1, best_len = specd_engine_slot_cached(s->engine, i, req->tokens, req->n_tokens);
    for (int32_t j = 0; j < s->n_slots; j++) {
        int32_t len = j == i ? 0 : specd_engine_slot_cached(s->engine, j, req->tokens, req->n_tokens);
        if (len > best_len) best = j, best_len = len;
    }
    if (best >= 0) specd_engine_slot_share(s->engine, best, i, req->tokens, req->n_tokens);
}

/* The job's session begins in slot i with the request's generation parameters as they are (its
 * prompt goes in by chunks that join the rounds' passes: specd_sessions_verify), and its run takes
 * it. False when it did not begin. */
static bool begin_session(serve_server *s, int32_t i) {
    serve_request *req = &s->slots[i].job->request;
    if (!req->cache_prompt) specd_engine_slot_forget(s->engine, i); /* decoded in full, as llama-server */
    specd_session *session = NULL;
    char *message = NULL;
    /* images let go while the request waited are held again (request_images.c) */
    specd_status st = serve_request_hold_images(req, s->engine, &message) ? SPECD_OK : SPECD_ERR_INVALID_ARGUMENT;
    if (st == SPECD_OK)
        st = specd_session_begin_in_slot(s->engine, i, req->tokens, req->n_tokens, &req->gen, &session, &message);
    return serve_run_open(s->slots[i].run, st, session, message);
}

/* The running request's figures into the slot's view. */
static void publish_view(serve_server *s, int32_t i) {
    sched_slot *slot = &s->slots[i];
    const specd_result *r = serve_run_result(slot->run);
    serve_slot_view v = {.processing = true, .id_task = slot->job->id, .n_prompt = r->stats.n_prompt,
                         .n_cached = r->stats.n_prompt_cached, .n_generated = r->n_tokens,
                         .n_steps = r->stats.n_steps, .n_drafted = r->stats.n_drafted,
                         .n_accepted = r->stats.n_accepted};
    pthread_mutex_lock(&s->lock);
    s->views[i] = v;
    pthread_mutex_unlock(&s->lock);
}

/* Ends the job in slot i and frees the slot; its view keeps the figures of the request it ran. */
static void end_slot(serve_server *s, int32_t i) {
    sched_slot *slot = &s->slots[i];
    serve_job *job = slot->job;
    publish_view(s, i); /* its final figures */
    void *final = serve_run_end(slot->run);
    slot->job = NULL;
    slot->run = NULL;
    heavy_forget(&s->heavy, i);
    finish_job(s, job, final, i);
}

/* The job goes into slot i (s->lock held): the slot's latest from now on. */
static void seat_locked(serve_server *s, int32_t i, serve_job *job) {
    s->slots[i].job = job;
    serve_job_ref(job);
    serve_job_unref(s->latest[i]);
    s->latest[i] = job;
    s->running[i] = job;
    s->n_running++;
}

/* The queue entry to seat next and its slot (s->lock held): the first job, in FIFO order, that
 * can go into an idle slot now; a job waiting for its own slot (id_slot) is passed by, as
 * llama-server defers it, and nothing passes a job that waits for any slot. -1: none. */
static int32_t next_seat_locked(serve_server *s, int32_t *slot) {
    for (int32_t q = 0; q < s->n_queued; q++) {
        const serve_request *req = &s->queue[q]->request;
        int32_t wanted = wanted_slot(s, req);
        if (wanted >= 0 && s->slots[wanted].job) continue;
        *slot = waits_for_same_prompt(s, req) ? -1 : best_slot(s, req);
        return *slot >= 0 ? q : -1;
    }
    return -1;
}

/* Moves queued jobs into idle slots, in FIFO order, and begins their sessions there. */
static void admit(serve_server *s) {
    for (;;) {
        pthread_mutex_lock(&s->lock);
        int32_t i = -1, q = next_seat_locked(s, &i);
        serve_job *job = q >= 0 ? take_queued_locked(s, q) : NULL;
        if (job) seat_locked(s, i, job);
        pthread_mutex_unlock(&s->lock);
        if (!job) return;
        share_prompt(s, i, &job->request);
        run_env env = env_of(s, i);
        s->slots[i].run = serve_run_new(job, &env);
        if (!s->slots[i].run) {
            s->slots[i].job = NULL;
            finish_job(s, job, NULL, i);
            continue;
        }
        if (!begin_session(s, i)) end_slot(s, i);
        else publish_view(s, i);
    }
}

/* The target pass time a slot's result has counted so far: its part of every pass that verified
 * its trees (the parts of one pass add up to it). */
static double pass_time_of(serve_server *s, int32_t i) { return serve_run_result(s->slots[i].run)->stats.verify_ms; }

/* One round: admit, then one step of the slots heavy.h picks (every light one, or one heavy one
 * alone), their verifications in one target pass. */
static void run_round(serve_server *s) {
    drop_ended(s);
    admit(s);
    int32_t active[SPECD_MAX_PARALLEL], n_active = 0;
    for (int32_t i = 0; i < SPECD_MAX_PARALLEL; i++)
        if (s->slots[i].job) active[n_active++] = i;
    int32_t at[SPECD_MAX_PARALLEL];
    bool solo = false;
    int32_t n = heavy_pick_round(&s->heavy, active, n_active, at, &solo);
    serve_run *runs[SPECD_MAX_PARALLEL];
    bool grammar[SPECD_MAX_PARALLEL], done[SPECD_MAX_PARALLEL];
    double pass_before[SPECD_MAX_PARALLEL], pass_ms = 0.0;
    for (int32_t k = 0; k < n; k++) {
        runs[k] = s->slots[at[k]].run;
        grammar[k] = s->slots[at[k]].job->request.grammar != NULL;
        pass_before[k] = pass_time_of(s, at[k]);
    }
    double t0 = serve_now_ms(), grammar0 = specd_grammar_thread_ms();
    serve_runs_step(runs, n, done);
    double round_ms = serve_now_ms() - t0, grammar_ms = specd_grammar_thread_ms() - grammar0;
    metrics_counter_set_graphs(&s->metrics, specd_engine_graph_counts(s->engine));
    for (int32_t k = 0; k < n; k++) pass_ms += pass_time_of(s, at[k]) - pass_before[k];
    int32_t over = heavy_after_round(&s->heavy, at, grammar, n, solo, round_ms, grammar_ms, pass_ms);
    pthread_mutex_lock(&s->lock);
    s->step_limit_now_ms = heavy_step_limit_ms(&s->heavy); /* what submit prices grammars against */
    pthread_mutex_unlock(&s->lock);
    if (over >= 0) serve_run_end_for_time(s->slots[over].job, "--step-limit");
    for (int32_t k = 0; k < n; k++) {
        if (done[k]) end_slot(s, at[k]);
        else publish_view(s, at[k]);
    }
}

void *serve_scheduler_main(void *server) {
    serve_server *s = server;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (s->n_queued == 0 && s->n_running == 0 && !s->call && !s->quit) pthread_cond_wait(&s->wake, &s->lock);
        bool quit = s->quit && s->n_queued == 0 && s->n_running == 0;
        pthread_mutex_unlock(&s->lock);
        if (quit) return NULL;
        serve_slot_call_run(s); /* a slot action, before the round admits a request into its slot */
        pthread_mutex_lock(&s->lock);
        bool work = s->n_queued > 0 || s->n_running > 0;
        pthread_mutex_unlock(&s->lock);
        if (work) run_round(s);
    }
}
