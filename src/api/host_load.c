/* host_load.c - a host's models (host.h): init loads the new engine beside the serving one and
 * swaps it in only once it has loaded, so a failed load leaves the old model serving and its
 * completions keep running during the load. The swap waits until no completion is claimed and the
 * old server is idle (new claims are refused as busy meanwhile), then takes the engine write lock, which only
 * short calls (tokenize, detokenize) can still hold. shutdown aborts a load through llama.cpp's
 * progress callback, so it returns in bounded time. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "host_state.h"

#include "invariance_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void replace_string(char **slot, const char *value) {
    free(*slot);
    *slot = value ? strdup(value) : NULL;
}

void api_host_set_load_hook(api_host *h, api_host_load_hook hook, void *user_data) {
    pthread_mutex_lock(&h->lock);
    h->load_hook = hook;
    h->load_hook_data = user_data;
    pthread_mutex_unlock(&h->lock);
}

/* llama.cpp calls this per tensor while it reads the models: false stops the load. */
static bool keep_loading(float progress, void *user_data) {
    api_host *h = user_data;
    pthread_mutex_lock(&h->lock);
    api_host_load_hook hook = h->load_hook;
    void *hook_data = h->load_hook_data;
    pthread_mutex_unlock(&h->lock);
    if (hook) hook(progress, hook_data);
    return !atomic_load(&h->abort_load);
}

/* The load is over without a new engine (lock held): the serving one, if any, stays. */
static void end_load_failed_locked(api_host *h, const char *message) {
    h->loading = false;
    replace_string(&h->loading_model, NULL);
    replace_string(&h->last_init_error, message);
    pthread_cond_broadcast(&h->changed);
}

/* ---- the swap -------------------------------------------------------------------------------- */

static json_t *placement_json(const specd_engine *engine, bool draft) {
    if (draft && !specd_engine_has_draft(engine)) return json_null();
    specd_placement_info p = specd_engine_placement(engine, draft);
    return json_pack("{s:s, s:i, s:i}", "devices", p.devices ? p.devices : "CPU", "n_layers", p.n_layers,
                     "n_layers_offloaded", p.n_layers_offloaded);
}

/* The new serving server and what describes it (lock held). */
static void describe_locked(api_host *h, serve_server *server, const api_engine_settings *s) {
    specd_engine *engine = serve_server_engine(server);
    json_decref(h->placement);
    h->placement = json_pack("{s:o, s:o}", "target", placement_json(engine, false), "draft", placement_json(engine, true));
    replace_string(&h->placement_note, s->gpu_layers_given ? specd_gpu_offload_note() : NULL);
    json_decref(h->invariance);
    h->invariance = api_invariance_json(engine);
    h->server = server;
    replace_string(&h->model, s->model);
    replace_string(&h->alias, s->alias);
    h->n_ctx = specd_engine_n_ctx(engine);
    h->n_vocab = specd_engine_n_vocab(engine);
    h->has_draft = specd_engine_has_draft(engine);
    h->n_parallel = specd_engine_n_parallel(engine);
    h->speculative = s->speculative; /* its drafting defaults (no pointers: no ngram cache path) */
    h->context_shift = s->context_shift;
    h->embd_normalize = s->embd_normalize;
    /* a client's share: every slot and half the queue places, so that another client always
     * finds the other half (a batch of 100 completion.start took them all) */
    h->client_share = h->n_parallel + serve_server_status(server).queue_max / 2;
}

/* Waits until no completion is claimed, then new claims are refused as busy (draining; lock
 * held, released while waiting); false when shutdown aborted the load meanwhile. */
static bool stop_claims_locked(api_host *h) {
    while (h->n_claimed > 0 && !atomic_load(&h->abort_load)) pthread_cond_wait(&h->idle, &h->lock);
    h->draining = !atomic_load(&h->abort_load);
    return h->draining;
}

/* Puts the loaded server in place of the serving one once that one is idle, and frees the old
 * one. False (server freed) when shutdown aborted the load meanwhile. */
static bool swap_in(api_host *h, serve_server *server, const api_engine_settings *s) {
    pthread_mutex_lock(&h->lock);
    bool go = stop_claims_locked(h);
    serve_server *old = h->server;
    pthread_mutex_unlock(&h->lock);
    if (go && old) serve_server_wait_idle(old, &h->abort_load); /* its last completions end */
    if (!go || atomic_load(&h->abort_load)) {
        pthread_mutex_lock(&h->lock);
        h->draining = false;
        pthread_cond_broadcast(&h->changed);
        pthread_mutex_unlock(&h->lock);
        serve_server_free(server);
        return false;
    }
    pthread_mutex_lock(&h->lock);
    h->swapping = true; /* short calls wait too */
    pthread_mutex_unlock(&h->lock);
    pthread_rwlock_wrlock(&h->engine_lock); /* tokenize/detokenize calls already in finish first */
    pthread_mutex_lock(&h->lock);
    describe_locked(h, server, s);
    h->loading = h->swapping = h->draining = false;
    replace_string(&h->loading_model, NULL);
    replace_string(&h->last_init_error, NULL);
    pthread_cond_broadcast(&h->changed);
    pthread_mutex_unlock(&h->lock);
    pthread_rwlock_unlock(&h->engine_lock);
    serve_server_free(old);
    return true;
}

/* ---- loading --------------------------------------------------------------------------------- */

/* The request field of the input a load failed on. */
static const char *failed_field(specd_engine_input input) {
    return input == SPECD_INPUT_DRAFT ? "model_draft" : input == SPECD_INPUT_MMPROJ ? "mmproj" : "model";
}

/* A server for the loaded engine, with the host's limits; NULL (engine freed) when it cannot start. */
static serve_server *server_for(api_host *h, specd_engine *engine, const api_engine_settings *s, char *reason,
                                size_t size) {
    pthread_mutex_lock(&h->lock);
    serve_options o = {.model = s->alias ? s->alias : s->model, .n_queue = s->n_queue, .limits = h->limits};
    pthread_mutex_unlock(&h->lock);
    serve_fault fault;
    serve_server *server = serve_server_new(engine, &o, &fault);
    if (server) return server;
    specd_engine_free(engine);
    snprintf(reason, size, "%s", fault.message);
    return NULL;
}

/* Loads the models described by `s` beside the serving ones and swaps them in (begin_loading has
 * marked the load as running). */
static bool load_engine(api_host *h, const api_engine_settings *s, api_error *err) {
    specd_engine_params params = s->params;
    params.progress_callback = keep_loading;
    params.progress_user_data = h;
    specd_engine *engine = NULL;
    specd_engine_input failed = SPECD_INPUT_NONE;
    params.failed_input = &failed;
    char *message = NULL, reason[sizeof err->message] = "";
    specd_status st = specd_engine_new(&params, &engine, &message);
    if (st == SPECD_OK && !s->no_warmup && (st = specd_engine_warm_up(engine, &message)) != SPECD_OK) {
        specd_engine_free(engine);
        engine = NULL;
    }
    serve_server *server = st == SPECD_OK ? server_for(h, engine, s, reason, sizeof reason) : NULL;
    if (server && swap_in(h, server, s)) return true;
    if (server || st == SPECD_ERR_CANCELLED)
        snprintf(reason, sizeof reason, "loading '%s' was cancelled by shutdown", s->model);
    else if (st != SPECD_OK)
        snprintf(reason, sizeof reason, "%s", message ? message : "loading failed");
    specd_free(message);
    api_fail(err, API_MODEL_LOAD, failed_field(failed), "init: %s", reason);
    pthread_mutex_lock(&h->lock);
    end_load_failed_locked(h, reason);
    pthread_mutex_unlock(&h->lock);
    return false;
}

typedef struct load_job {
    api_host *host;
    api_engine_settings settings;
} load_job;

static void *init_thread_main(void *arg) {
    load_job *job = arg;
    api_error err;
    load_engine(job->host, &job->settings, &err);
    api_engine_settings_free(&job->settings);
    free(job);
    return NULL;
}

/* Marks a load of `model` as running; false (busy) while another load or a shutdown runs. */
static bool begin_loading(api_host *h, const char *model, api_error *err) {
    pthread_mutex_lock(&h->lock);
    bool ok = !h->loading && !h->shutting_down;
    if (h->shutting_down) api_fail(err, API_BUSY, "", "busy: shutdown in progress; call init after it");
    else if (h->loading)
        api_fail(err, API_BUSY, "", "busy: '%s' is already loading; poll status", h->loading_model ? h->loading_model : "");
    bool join = ok && h->has_init_thread; /* the previous load's thread, finished or finishing */
    pthread_t previous = h->init_thread;
    if (ok) {
        h->has_init_thread = false;
        h->loading = true;
        replace_string(&h->loading_model, model);
        atomic_store(&h->abort_load, false);
    }
    pthread_mutex_unlock(&h->lock);
    if (join) pthread_join(previous, NULL);
    return ok;
}

/* The load on a thread of its own, which takes the settings. */
static bool start_init_thread(api_host *h, api_engine_settings *settings, api_error *err) {
    load_job *job = malloc(sizeof *job);
    if (job) *job = (load_job){h, *settings}; /* the thread owns the strings now */
    if (job) memset(settings, 0, sizeof *settings);
    else api_engine_settings_free(settings);
    pthread_mutex_lock(&h->lock);
    bool ok = job && pthread_create(&h->init_thread, NULL, init_thread_main, job) == 0;
    h->has_init_thread = ok;
    if (!ok) end_load_failed_locked(h, "init: could not start the loading thread");
    pthread_mutex_unlock(&h->lock);
    if (ok) return true;
    if (job) api_engine_settings_free(&job->settings);
    free(job);
    return api_fail(err, API_INTERNAL_ERROR, "", "init: could not start the loading thread");
}

bool api_host_load(api_host *h, api_engine_settings *s, api_error *err) {
    if (!begin_loading(h, s->model, err)) {
        api_engine_settings_free(s);
        return false;
    }
    if (s->async) return start_init_thread(h, s, err);
    bool ok = load_engine(h, s, err);
    api_engine_settings_free(s);
    return ok;
}

/* ---- shutdown -------------------------------------------------------------------------------- */

/* Every completion the host knows ends for `why` (lock held): the recorded ones (claimed ones not
 * submitted yet among them: they end as the server takes them), then what the server holds. */
static void end_all_locked(api_host *h, serve_end why) {
    for (int32_t i = 0; i < h->n_jobs; i++) serve_job_end(h->jobs[i], why); /* finished ones: nothing happens */
    if (h->server) serve_server_end_all(h->server, why);
}

/* Stops what runs (lock held, released while waiting): aborts a load and waits for it to end,
 * ends every completion (stop_type "shutdown") and waits until none is claimed. The load's thread
 * goes to *init. */
static void stop_everything_locked(api_host *h, pthread_t *init, bool *has_init) {
    atomic_store(&h->abort_load, true);
    end_all_locked(h, SERVE_END_SHUTDOWN);
    pthread_cond_broadcast(&h->idle); /* a load waiting to swap in sees the abort */
    while (h->loading) pthread_cond_wait(&h->changed, &h->lock); /* until its next progress call */
    while (h->n_claimed > 0) pthread_cond_wait(&h->idle, &h->lock);
    *init = h->init_thread;
    *has_init = h->has_init_thread;
    h->has_init_thread = false;
}

/* Forgets the serving model and the latest init (lock held); returns its server, to free. The
 * finished jobs stay findable by id, as always: a stream's poller still gets the final update of
 * a completion the shutdown ended. */
static serve_server *clear_locked(api_host *h) {
    serve_server *server = h->server;
    h->server = NULL;
    replace_string(&h->model, NULL);
    replace_string(&h->alias, NULL);
    replace_string(&h->last_init_error, NULL);
    h->n_parallel = h->n_ctx = h->n_vocab = h->client_share = 0;
    h->has_draft = false;
    json_decref(h->placement);
    h->placement = NULL;
    json_decref(h->invariance);
    h->invariance = NULL;
    replace_string(&h->placement_note, NULL);
    return server;
}

void api_host_shutdown(api_host *h, bool *was_loaded) {
    pthread_mutex_lock(&h->lock);
    while (h->shutting_down) pthread_cond_wait(&h->changed, &h->lock); /* one at a time */
    h->shutting_down = true;
    pthread_t init;
    bool has_init;
    stop_everything_locked(h, &init, &has_init);
    pthread_mutex_unlock(&h->lock);
    if (has_init) pthread_join(init, NULL);
    pthread_rwlock_wrlock(&h->engine_lock);
    pthread_mutex_lock(&h->lock);
    *was_loaded = h->server != NULL;
    serve_server *server = clear_locked(h);
    pthread_mutex_unlock(&h->lock);
    pthread_rwlock_unlock(&h->engine_lock);
    serve_server_free(server); /* its completions end with stop_type "shutdown" first */
    pthread_mutex_lock(&h->lock);
    atomic_store(&h->abort_load, false);
    h->shutting_down = false;
    pthread_cond_broadcast(&h->changed);
    pthread_mutex_unlock(&h->lock);
}

void api_host_close(api_host *h) {
    pthread_mutex_lock(&h->lock);
    h->closed = true;
    end_all_locked(h, SERVE_END_SHUTDOWN);
    if (h->server) serve_server_close(h->server);
    pthread_mutex_unlock(&h->lock);
}
