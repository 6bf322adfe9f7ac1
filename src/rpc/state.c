/* state.c - the global engine of the JSON API and the methods that manage it: init (blocking or
 * on a background thread), status, tokenize, detokenize, shutdown. Locking rules in state.h.
 *
 * init loads the new engine beside the serving one and swaps it in only once it has loaded: a
 * failed load leaves the old model serving, and completions keep running on it during the load.
 * The swap waits until no completion runs (none can start while it happens), then takes the
 * engine write lock, which only short calls (tokenize, detokenize) can still hold. shutdown
 * aborts a load through llama.cpp's progress callback, so it returns in bounded time. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "state.h"

#include "scheduler.h"
#include "text_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum load_state { STATE_NONE, STATE_LOADING, STATE_READY, STATE_FAILED } load_state;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t idle;          /* signalled when the running completion ends */
    pthread_cond_t changed;       /* signalled when a load or a swap ends, and when shutdown ends */
    pthread_rwlock_t engine_lock; /* read: using the engine; write: replacing or freeing it */
    /* the serving engine (NULL: none) and what describes it */
    specd_engine *engine;
    char *model, *alias;          /* owned */
    int32_t n_ctx, n_vocab, draft_max, n_parallel;
    bool has_draft;
    json_t *placement;            /* {"target": {...}, "draft": {...} | null} of the serving engine */
    char *placement_note;         /* owned: -ngl asked on a build that cannot offload, else NULL */
    /* the latest init */
    bool loading;                 /* a load runs (beside the serving engine, if any) */
    char *loading_model;          /* owned: its target path while it runs */
    bool swapping;                /* its engine is being swapped in: claims and acquires wait */
    char *last_init_error;        /* owned: why the latest init's load failed; NULL if it did not */
    atomic_bool abort_load;       /* read by the load's progress callback: stop now */
    bool shutting_down;
    bool closed;                  /* rpc_state_close: the server is stopping for good */
    pthread_t init_thread;
    bool has_init_thread;
    rpc_state_load_hook load_hook; /* tests only */
    void *load_hook_data;
    /* completions */
    int32_t n_claimed;            /* claimed and not over: queued or running */
    rpc_job **jobs;               /* referenced: the claimed ones and the latest finished ones, oldest first */
    int32_t n_jobs, jobs_cap;
    rpc_job *latest;              /* referenced: the latest claimed job */
    int64_t next_id;
    specd_token *history;         /* the last completion's prompt + output (owned) */
    int32_t n_history;
} G = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .idle = PTHREAD_COND_INITIALIZER,
    .changed = PTHREAD_COND_INITIALIZER,
    .engine_lock = PTHREAD_RWLOCK_INITIALIZER,
    .next_id = 1,
};

/* What serves (G.lock held): a model (also during a reload and after a failed one), none yet
 * while the first loads, none after a failed load, or none at all. */
static load_state current_state_locked(void) {
    if (G.engine) return STATE_READY;
    if (G.loading) return STATE_LOADING;
    return G.last_init_error ? STATE_FAILED : STATE_NONE;
}

static const char *state_name(load_state s) {
    switch (s) {
    case STATE_NONE: return "uninitialized";
    case STATE_LOADING: return "loading";
    case STATE_READY: return "ready";
    case STATE_FAILED: return "failed";
    }
    return "unknown";
}

/* Why there is no engine to use (G.lock held). */
static bool fail_no_engine_locked(rpc_error *err) {
    if (G.closed) return rpc_fail(err, RPC_BUSY, "", "the server is stopping: retry later");
    if (G.shutting_down) return rpc_fail(err, RPC_NO_MODEL, "", "shutdown in progress: call init again after it");
    if (G.loading) return rpc_fail(err, RPC_NO_MODEL, "", "the model is still loading: poll status");
    return rpc_fail(err, RPC_NO_MODEL, "", "no model loaded: call init first");
}

/* ---- jobs ------------------------------------------------------------------------------------ */

rpc_job *rpc_job_new(void) {
    rpc_job *job = calloc(1, sizeof *job);
    if (!job) return NULL;
    atomic_init(&job->refs, 1);
    atomic_init(&job->cancel, false);
    atomic_init(&job->end_reason, RPC_END_NONE);
    pthread_mutex_init(&job->lock, NULL);
    pthread_cond_init(&job->changed, NULL);
    job->updates = json_array();
    if (!job->updates) {
        rpc_job_unref(job);
        return NULL;
    }
    return job;
}

void rpc_job_ref(rpc_job *job) { atomic_fetch_add(&job->refs, 1); }

void completion_request_free(completion_request *req); /* completion_request.c */

void rpc_job_unref(rpc_job *job) {
    if (!job || atomic_fetch_sub(&job->refs, 1) != 1) return;
    json_decref(job->updates);
    completion_request_free(job->request);
    pthread_mutex_destroy(&job->lock);
    pthread_cond_destroy(&job->changed);
    free(job);
}

/* Records a claimed job (G.lock held): findable by id; the oldest finished ones are forgotten. */
static void record_job_locked(rpc_job *job) {
    if (G.n_jobs >= RPC_KEEP_JOBS) {
        for (int32_t i = 0; i < G.n_jobs; i++) {
            rpc_job *old = G.jobs[i];
            pthread_mutex_lock(&old->lock);
            bool over = old->finished;
            pthread_mutex_unlock(&old->lock);
            if (!over) continue;
            rpc_job_unref(old);
            memmove(G.jobs + i, G.jobs + i + 1, (size_t)(G.n_jobs - i - 1) * sizeof *G.jobs);
            G.n_jobs--;
            break;
        }
    }
    if (G.n_jobs == G.jobs_cap) {
        int32_t cap = G.jobs_cap ? G.jobs_cap * 2 : 16;
        rpc_job **grown = realloc(G.jobs, (size_t)cap * sizeof *grown);
        if (!grown) return; /* not findable by id: polls without id still find it as the latest */
        G.jobs = grown;
        G.jobs_cap = cap;
    }
    rpc_job_ref(job);
    G.jobs[G.n_jobs++] = job;
}

bool rpc_state_claim(rpc_job *job, rpc_error *err) {
    pthread_mutex_lock(&G.lock);
    while (G.swapping) pthread_cond_wait(&G.changed, &G.lock);
    bool ok = G.engine && !G.shutting_down && !G.closed;
    if (!ok) fail_no_engine_locked(err);
    if (ok) {
        job->id = G.next_id++;
        G.n_claimed++;
        record_job_locked(job);
        rpc_job_unref(G.latest);
        rpc_job_ref(job);
        G.latest = job;
    }
    pthread_mutex_unlock(&G.lock);
    return ok;
}

/* Every claimed job is among G.jobs (G.lock held; then the scheduler's lock: the allowed order). */
static void end_all_locked(rpc_end_reason why) {
    for (int32_t i = 0; i < G.n_jobs; i++) rpc_sched_end(G.jobs[i], why); /* finished ones: nothing happens */
}

void rpc_state_end_all(rpc_end_reason why) {
    pthread_mutex_lock(&G.lock);
    end_all_locked(why);
    pthread_mutex_unlock(&G.lock);
}

void rpc_state_close(void) {
    pthread_mutex_lock(&G.lock);
    G.closed = true;
    pthread_mutex_unlock(&G.lock);
    rpc_state_end_all(RPC_END_SHUTDOWN);
}

void rpc_state_unclaim(rpc_job *job) {
    (void)job;
    pthread_mutex_lock(&G.lock);
    G.n_claimed--;
    pthread_cond_broadcast(&G.idle);
    pthread_mutex_unlock(&G.lock);
}

rpc_job *rpc_state_find_job(json_t *id, rpc_error *err) {
    pthread_mutex_lock(&G.lock);
    rpc_job *found = NULL;
    if (!id) found = G.latest;
    for (int32_t i = 0; id && i < G.n_jobs && !found; i++)
        if (G.jobs[i]->id == json_integer_value(id)) found = G.jobs[i];
    if (found) rpc_job_ref(found);
    pthread_mutex_unlock(&G.lock);
    if (!found && id)
        rpc_fail(err, RPC_UNKNOWN_JOB, "id", "no completion with id %lld: it never existed, or it finished "
                 "long ago (the latest %d are kept)", (long long)json_integer_value(id), RPC_KEEP_JOBS);
    else if (!found)
        rpc_fail(err, RPC_UNKNOWN_JOB, "id", "no completion has been started: call completion.start first");
    return found;
}

void rpc_state_remember_history(const specd_token *prompt, int32_t n_prompt, const specd_token *out,
                                int32_t n_out) {
    specd_token *h = malloc(((size_t)n_prompt + (size_t)n_out + 1) * sizeof *h);
    if (h) {
        memcpy(h, prompt, (size_t)n_prompt * sizeof *h);
        if (n_out) memcpy(h + n_prompt, out, (size_t)n_out * sizeof *h);
    }
    pthread_mutex_lock(&G.lock);
    free(G.history);
    G.history = h;
    G.n_history = h ? n_prompt + n_out : 0;
    pthread_mutex_unlock(&G.lock);
}

int32_t rpc_state_cached_prefix(const specd_token *prompt, int32_t n_prompt) {
    pthread_mutex_lock(&G.lock);
    int32_t n = 0;
    /* The engine keeps the prompt's last token out of the cache: it is the first step's root. */
    while (n < n_prompt - 1 && n < G.n_history && G.history[n] == prompt[n]) n++;
    pthread_mutex_unlock(&G.lock);
    return n;
}

/* ---- the engine ------------------------------------------------------------------------------ */

bool rpc_state_acquire_engine(specd_engine **engine, rpc_error *err) {
    /* Look first, so a call without an engine fails at once instead of waiting for the lock; a
     * swap about to happen is waited for (it only waits for short calls like this one). Look again
     * under the read lock, which is what keeps the engine alive. */
    pthread_mutex_lock(&G.lock);
    while (G.swapping) pthread_cond_wait(&G.changed, &G.lock);
    bool has = G.engine != NULL;
    pthread_mutex_unlock(&G.lock);
    if (has) {
        pthread_rwlock_rdlock(&G.engine_lock);
        pthread_mutex_lock(&G.lock);
        *engine = G.engine;
        pthread_mutex_unlock(&G.lock);
        if (*engine) return true;
        pthread_rwlock_unlock(&G.engine_lock);
    }
    pthread_mutex_lock(&G.lock);
    fail_no_engine_locked(err);
    pthread_mutex_unlock(&G.lock);
    return false;
}

void rpc_state_release_engine(void) { pthread_rwlock_unlock(&G.engine_lock); }

int32_t rpc_state_draft_max(void) {
    pthread_mutex_lock(&G.lock);
    int32_t n = G.draft_max;
    pthread_mutex_unlock(&G.lock);
    return n;
}

json_t *rpc_state_model_name(void) {
    pthread_mutex_lock(&G.lock);
    json_t *name = json_string(G.alias ? G.alias : G.model ? G.model : "");
    pthread_mutex_unlock(&G.lock);
    return name;
}

static void replace_string(char **slot, const char *value) {
    free(*slot);
    *slot = value ? strdup(value) : NULL;
}

void rpc_state_set_load_hook(rpc_state_load_hook hook, void *user_data) {
    pthread_mutex_lock(&G.lock);
    G.load_hook = hook;
    G.load_hook_data = user_data;
    pthread_mutex_unlock(&G.lock);
}

/* llama.cpp calls this per tensor while it reads the models: false stops the load. */
static bool keep_loading(float progress, void *user_data) {
    (void)user_data;
    pthread_mutex_lock(&G.lock);
    rpc_state_load_hook hook = G.load_hook;
    void *hook_data = G.load_hook_data;
    pthread_mutex_unlock(&G.lock);
    if (hook) hook(progress, hook_data);
    return !atomic_load(&G.abort_load);
}

/* The load is over without a new engine (G.lock held): the serving one, if any, stays. */
static void end_load_failed_locked(const char *message) {
    G.loading = false;
    replace_string(&G.loading_model, NULL);
    replace_string(&G.last_init_error, message);
    pthread_cond_broadcast(&G.changed);
}

static json_t *placement_json(const specd_engine *engine, bool draft) {
    if (draft && !specd_engine_has_draft(engine)) return json_null();
    specd_placement_info p = specd_engine_placement(engine, draft);
    return json_pack("{s:s, s:i, s:i}", "devices", p.devices ? p.devices : "CPU", "n_layers", p.n_layers,
                     "n_layers_offloaded", p.n_layers_offloaded);
}

/* Describes the new serving engine (G.lock held). */
static void describe_engine_locked(specd_engine *engine, const rpc_engine_settings *s) {
    json_decref(G.placement);
    G.placement = json_pack("{s:o, s:o}", "target", placement_json(engine, false), "draft", placement_json(engine, true));
    replace_string(&G.placement_note, s->gpu_layers_given ? specd_gpu_offload_note() : NULL);
    G.engine = engine;
    replace_string(&G.model, s->model);
    replace_string(&G.alias, s->alias);
    G.n_ctx = specd_engine_n_ctx(engine);
    G.n_vocab = specd_engine_n_vocab(engine);
    G.has_draft = specd_engine_has_draft(engine);
    G.draft_max = s->params.draft_max > 0 ? s->params.draft_max : 16; /* the engine's default */
    G.n_parallel = specd_engine_n_parallel(engine);
    free(G.history); /* the new engine's cache holds nothing */
    G.history = NULL;
    G.n_history = 0;
}

/* Puts the loaded engine in place of the serving one once no completion runs, and frees the old
 * one. False (engine freed) when shutdown aborted the load meanwhile. */
static bool swap_in(specd_engine *engine, const rpc_engine_settings *s) {
    pthread_mutex_lock(&G.lock);
    while (G.n_claimed > 0 && !atomic_load(&G.abort_load)) pthread_cond_wait(&G.idle, &G.lock);
    bool go = !atomic_load(&G.abort_load);
    G.swapping = go;
    pthread_mutex_unlock(&G.lock);
    if (!go) {
        specd_engine_free(engine);
        return false;
    }
    pthread_rwlock_wrlock(&G.engine_lock); /* tokenize/detokenize calls already in finish first */
    pthread_mutex_lock(&G.lock);
    specd_engine *old = G.engine;
    describe_engine_locked(engine, s);
    G.loading = G.swapping = false;
    replace_string(&G.loading_model, NULL);
    replace_string(&G.last_init_error, NULL);
    pthread_cond_broadcast(&G.changed);
    pthread_mutex_unlock(&G.lock);
    pthread_rwlock_unlock(&G.engine_lock);
    rpc_sched_configure(specd_engine_n_parallel(engine), s->n_queue >= 0 ? s->n_queue : RPC_DEFAULT_QUEUE);
    specd_engine_free(old);
    return true;
}

/* The request field of the input a load failed on. */
static const char *failed_field(specd_engine_input input) {
    return input == SPECD_INPUT_DRAFT ? "model_draft" : "model";
}

/* Loads the models described by `s` beside the serving ones and swaps them in (begin_loading has
 * marked the load as running). */
static bool load_engine(const rpc_engine_settings *s, rpc_error *err) {
    specd_engine_params params = s->params;
    params.progress_callback = keep_loading;
    params.progress_user_data = NULL;
    specd_engine *engine = NULL;
    specd_engine_input failed = SPECD_INPUT_NONE;
    char *message = NULL;
    specd_status st = specd_engine_new_v2(&params, &engine, &failed, &message);
    if (st == SPECD_OK && swap_in(engine, s)) return true;
    char reason[sizeof err->message];
    if (st == SPECD_OK || st == SPECD_ERR_CANCELLED)
        snprintf(reason, sizeof reason, "loading '%s' was cancelled by shutdown", s->model);
    else
        snprintf(reason, sizeof reason, "%s", message ? message : "loading failed");
    specd_free(message);
    rpc_fail(err, RPC_MODEL_LOAD, failed_field(failed), "init: %s", reason);
    pthread_mutex_lock(&G.lock);
    end_load_failed_locked(reason);
    pthread_mutex_unlock(&G.lock);
    return false;
}

static void *init_thread_main(void *arg) {
    rpc_engine_settings *s = arg;
    rpc_error err;
    load_engine(s, &err);
    rpc_engine_settings_free(s);
    free(s);
    return NULL;
}

/* Marks a load of `model` as running; false (busy) while another load or a shutdown runs. */
static bool begin_loading(const char *model, rpc_error *err) {
    pthread_mutex_lock(&G.lock);
    bool ok = !G.loading && !G.shutting_down;
    if (G.shutting_down) rpc_fail(err, RPC_BUSY, "", "busy: shutdown in progress; call init after it");
    else if (G.loading)
        rpc_fail(err, RPC_BUSY, "", "busy: '%s' is already loading; poll status", G.loading_model ? G.loading_model : "");
    bool join = ok && G.has_init_thread; /* the previous load's thread, finished or finishing */
    pthread_t previous = G.init_thread;
    if (ok) {
        G.has_init_thread = false;
        G.loading = true;
        replace_string(&G.loading_model, model);
        atomic_store(&G.abort_load, false);
    }
    pthread_mutex_unlock(&G.lock);
    if (join) pthread_join(previous, NULL);
    return ok;
}

static bool start_init_thread(rpc_engine_settings *settings, rpc_error *err) {
    rpc_engine_settings *copy = malloc(sizeof *copy);
    if (copy) *copy = *settings; /* the thread owns the strings now */
    pthread_mutex_lock(&G.lock);
    bool ok = copy && pthread_create(&G.init_thread, NULL, init_thread_main, copy) == 0;
    G.has_init_thread = ok;
    if (!ok) end_load_failed_locked("init: could not start the loading thread");
    pthread_mutex_unlock(&G.lock);
    if (ok) return true;
    if (copy) rpc_engine_settings_free(copy);
    free(copy);
    return rpc_fail(err, RPC_INTERNAL_ERROR, "", "init: could not start the loading thread");
}

json_t *rpc_method_init(json_t *params, rpc_error *err) {
    rpc_engine_settings s;
    if (!rpc_engine_settings_parse(params, &s, err)) return NULL;
    if (!begin_loading(s.model, err)) {
        rpc_engine_settings_free(&s);
        return NULL;
    }
    bool ok = s.async ? start_init_thread(&s, err) : load_engine(&s, err);
    if (!s.async) rpc_engine_settings_free(&s);
    return ok ? rpc_method_status(NULL, err) : NULL;
}

json_t *rpc_method_status(json_t *params, rpc_error *err) {
    rpc_params rp;
    rpc_params_open(&rp, params, "status params", "", err);
    if (!rpc_params_finish(&rp)) return NULL;
    pthread_mutex_lock(&G.lock);
    load_state state = current_state_locked();
    /* the old API's field, as the state: a reload (and a failed one) is 1 while the old model serves */
    int init_success = state == STATE_READY ? 1 : state == STATE_FAILED ? -1 : 0;
    json_t *r = json_pack("{s:s, s:i, s:s, s:s, s:s, s:b, s:b, s:i, s:i, s:s, s:i}", "state", state_name(state),
                          "init_success", init_success, "model", G.model ? G.model : "", "model_alias",
                          G.alias ? G.alias : "", "loading_model", G.loading_model ? G.loading_model : "",
                          "busy", G.n_claimed > 0, "has_draft", G.has_draft, "n_ctx", G.n_ctx, "n_vocab",
                          G.n_vocab, "version", specd_version(), "n_parallel", G.n_parallel);
    if (r && G.last_init_error) json_object_set_new(r, "last_init_error", json_string(G.last_init_error));
    /* A copy, not a shared reference: a load on another thread replaces G.placement while this
     * answer is printed, and jansson's reference counts are not something to share across threads
     * (ThreadSanitizer cannot see them either). */
    if (r && G.engine && G.placement) json_object_set_new(r, "placement", json_deep_copy(G.placement));
    if (r && G.engine && G.placement_note) json_object_set_new(r, "placement_note", json_string(G.placement_note));
    if (r && state == STATE_FAILED) json_object_set_new(r, "error", json_string(G.last_init_error));
    bool loaded = G.engine != NULL;
    pthread_mutex_unlock(&G.lock);
    if (r && loaded) { /* the scheduler's lock is never taken under G.lock */
        int32_t n_queued = 0, queue_max = 0;
        json_object_set_new(r, "slots", rpc_sched_slots_json(&n_queued, &queue_max));
        json_object_set_new(r, "n_queued", json_integer(n_queued));
        json_object_set_new(r, "queue_max", json_integer(queue_max));
    }
    return r;
}

/* ---- tokens ---------------------------------------------------------------------------------- */

static json_t *piece_string(specd_engine *e, specd_token t) {
    char piece[256];
    int32_t n = specd_token_to_piece(e, t, piece, (int32_t)sizeof piece);
    char *clean = specd_utf8_sanitize(piece, n > 0 ? (size_t)n : 0);
    json_t *s = json_string(clean ? clean : "");
    free(clean);
    return s;
}

json_t *rpc_method_tokenize(json_t *params, rpc_error *err) {
    rpc_params rp;
    rpc_params_open(&rp, params, "tokenize params", "", err);
    const char *text = NULL;
    bool add_special = true, with_pieces = false, parse_special = false;
    if (rpc_get_string(&rp, "text", &text) < 0 || rpc_get_bool(&rp, "add_special", &add_special) < 0 ||
        rpc_get_bool(&rp, "parse_special", &parse_special) < 0 ||
        rpc_get_bool(&rp, "with_pieces", &with_pieces) < 0 || !rpc_params_finish(&rp))
        return NULL;
    if (!text) {
        rpc_fail(err, RPC_INVALID_PARAMS, "text", "tokenize params: 'text' (a string) is required");
        return NULL;
    }
    specd_engine *e;
    if (!rpc_state_acquire_engine(&e, err)) return NULL;
    specd_token *tokens = NULL;
    int32_t n = 0;
    char *message = NULL;
    json_t *r = NULL;
    if (specd_tokenize_special(e, text, add_special, parse_special, &tokens, &n, &message) != SPECD_OK) {
        rpc_fail(err, RPC_INVALID_PARAMS, "text", "tokenize: %s", message ? message : "failed");
    } else {
        json_t *ids = json_array(), *pieces = with_pieces ? json_array() : NULL;
        for (int32_t i = 0; i < n; i++) {
            json_array_append_new(ids, json_integer(tokens[i]));
            if (pieces) json_array_append_new(pieces, piece_string(e, tokens[i]));
        }
        r = json_pack("{s:o, s:i}", "tokens", ids, "length", n);
        if (r && pieces) json_object_set_new(r, "pieces", pieces);
    }
    rpc_state_release_engine();
    specd_free(tokens);
    specd_free(message);
    return r;
}

json_t *rpc_method_detokenize(json_t *params, rpc_error *err) {
    rpc_params rp;
    rpc_params_open(&rp, params, "detokenize params", "", err);
    json_t *list = rpc_get_value(&rp, "tokens");
    if (!rpc_params_finish(&rp)) return NULL;
    if (!json_is_array(list)) {
        rpc_fail(err, RPC_INVALID_PARAMS, "tokens", "detokenize params: 'tokens' (an array of token ids) is required");
        return NULL;
    }
    specd_engine *e;
    if (!rpc_state_acquire_engine(&e, err)) return NULL;
    size_t n = json_array_size(list);
    specd_token *tokens = malloc((n + 1) * sizeof *tokens);
    int32_t n_vocab = specd_engine_n_vocab(e);
    json_t *r = NULL;
    for (size_t i = 0; tokens && i < n; i++) {
        json_t *v = json_array_get(list, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= n_vocab) {
            rpc_fail(err, RPC_INVALID_PARAMS, "tokens", "detokenize params: tokens[%zu] must be a token id "
                     "from 0 to %d", i, n_vocab - 1);
            goto done;
        }
        tokens[i] = (specd_token)json_integer_value(v);
    }
    char *text = tokens ? specd_detokenize(e, tokens, (int32_t)n) : NULL;
    char *clean = text ? specd_utf8_sanitize(text, strlen(text)) : NULL;
    if (clean) r = json_pack("{s:s}", "content", clean);
    else rpc_fail(err, RPC_INTERNAL_ERROR, "", "detokenize: out of memory");
    specd_free(text);
    free(clean);
done:
    rpc_state_release_engine();
    free(tokens);
    return r;
}

/* ---- shutdown -------------------------------------------------------------------------------- */

/* Stops what runs (G.lock held, released while waiting): aborts a load and waits for it to
 * end, ends every claimed completion (stop_type "shutdown") and waits for them. The load's thread goes to *init. */
static void stop_everything_locked(pthread_t *init, bool *has_init) {
    atomic_store(&G.abort_load, true);
    end_all_locked(RPC_END_SHUTDOWN);
    pthread_cond_broadcast(&G.idle); /* a load waiting to swap in sees the abort */
    while (G.loading) pthread_cond_wait(&G.changed, &G.lock); /* until its next progress call */
    while (G.n_claimed > 0) pthread_cond_wait(&G.idle, &G.lock);
    *init = G.init_thread;
    *has_init = G.has_init_thread;
    G.has_init_thread = false;
}

/* Frees the engine and forgets everything about it and the latest init (G.lock held). The
 * finished jobs stay findable by id, as always: a stream's poller still gets the final update of
 * a completion the shutdown ended. */
static void clear_locked(void) {
    specd_engine_free(G.engine);
    G.engine = NULL;
    replace_string(&G.model, NULL);
    replace_string(&G.alias, NULL);
    replace_string(&G.last_init_error, NULL);
    G.n_parallel = 0;
    free(G.history);
    G.history = NULL;
    G.n_history = 0;
    G.n_ctx = G.n_vocab = 0;
    G.has_draft = false;
    json_decref(G.placement);
    G.placement = NULL;
    replace_string(&G.placement_note, NULL);
}

json_t *rpc_method_shutdown(json_t *params, rpc_error *err) {
    rpc_params rp;
    rpc_params_open(&rp, params, "shutdown params", "", err);
    if (!rpc_params_finish(&rp)) return NULL;
    pthread_mutex_lock(&G.lock);
    while (G.shutting_down) pthread_cond_wait(&G.changed, &G.lock); /* one at a time */
    G.shutting_down = true;
    pthread_t init;
    bool has_init;
    stop_everything_locked(&init, &has_init);
    pthread_mutex_unlock(&G.lock);
    if (has_init) pthread_join(init, NULL);
    pthread_rwlock_wrlock(&G.engine_lock);
    pthread_mutex_lock(&G.lock);
    bool was_loaded = G.engine != NULL;
    clear_locked();
    atomic_store(&G.abort_load, false);
    G.shutting_down = false;
    pthread_cond_broadcast(&G.changed);
    pthread_mutex_unlock(&G.lock);
    pthread_rwlock_unlock(&G.engine_lock);
    return json_pack("{s:b}", "was_loaded", was_loaded);
}
