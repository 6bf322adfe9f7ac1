/* state.c - the global engine of the JSON API and the methods that manage it: init (blocking or
 * on a background thread), status, tokenize, detokenize, shutdown. Locking rules in state.h. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "state.h"

#include "text_stream.h"

#include <stdlib.h>
#include <string.h>

typedef enum load_state { STATE_NONE, STATE_LOADING, STATE_READY, STATE_FAILED } load_state;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t idle;          /* signalled when the running completion ends */
    pthread_rwlock_t engine_lock; /* read: using the engine; write: replacing or freeing it */
    specd_engine *engine;
    load_state state;
    char *model, *alias, *error;  /* owned: the loaded (or failed) model's path, alias, failure */
    int32_t n_ctx, n_vocab, draft_max;
    bool has_draft;
    pthread_t init_thread;
    bool has_init_thread;
    rpc_job *running;             /* referenced while a completion runs */
    rpc_job *async;               /* referenced: the latest async job */
    pthread_t worker;
    bool has_worker;
    int64_t next_id;
    specd_token *history;         /* the last completion's prompt + output (owned) */
    int32_t n_history;
} G = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .idle = PTHREAD_COND_INITIALIZER,
    .engine_lock = PTHREAD_RWLOCK_INITIALIZER,
    .next_id = 1,
};

static const char *state_name(load_state s) {
    switch (s) {
    case STATE_NONE: return "uninitialized";
    case STATE_LOADING: return "loading";
    case STATE_READY: return "ready";
    case STATE_FAILED: return "failed";
    }
    return "unknown";
}

/* ---- jobs ------------------------------------------------------------------------------------ */

rpc_job *rpc_job_new(void) {
    rpc_job *job = calloc(1, sizeof *job);
    if (!job) return NULL;
    atomic_init(&job->refs, 1);
    atomic_init(&job->cancel, false);
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

bool rpc_state_claim(rpc_job *job, rpc_error *err) {
    pthread_mutex_lock(&G.lock);
    bool ok = G.state == STATE_READY && !G.running;
    if (G.state != STATE_READY)
        rpc_fail(err, RPC_NO_MODEL, "", G.state == STATE_LOADING ? "the model is still loading: poll status"
                                                                 : "no model loaded: call init first");
    else if (G.running)
        rpc_fail(err, RPC_BUSY, "", "busy: completion %lld is running (one at a time); poll it, wait for "
                 "it to finish, or cancel it", (long long)G.running->id);
    if (ok) {
        job->id = G.next_id++;
        rpc_job_ref(job);
        G.running = job;
    }
    pthread_mutex_unlock(&G.lock);
    return ok;
}

void rpc_state_unclaim(rpc_job *job) {
    pthread_mutex_lock(&G.lock);
    if (G.running == job) {
        G.running = NULL;
        rpc_job_unref(job);
    }
    pthread_cond_broadcast(&G.idle);
    pthread_mutex_unlock(&G.lock);
}

void rpc_state_set_async(rpc_job *job, pthread_t worker) {
    pthread_mutex_lock(&G.lock);
    if (G.has_worker) pthread_join(G.worker, NULL); /* finished: only one completion runs */
    rpc_job_unref(G.async);
    rpc_job_ref(job);
    G.async = job;
    G.worker = worker;
    G.has_worker = true;
    pthread_mutex_unlock(&G.lock);
}

rpc_job *rpc_state_find_job(json_t *id, rpc_error *err) {
    pthread_mutex_lock(&G.lock);
    rpc_job *found = NULL;
    if (!id) found = G.running ? G.running : G.async;
    else if (G.running && json_integer_value(id) == G.running->id) found = G.running;
    else if (G.async && json_integer_value(id) == G.async->id) found = G.async;
    if (found) rpc_job_ref(found);
    pthread_mutex_unlock(&G.lock);
    if (!found && id)
        rpc_fail(err, RPC_UNKNOWN_JOB, "id", "no completion with id %lld: only the running or latest "
                 "started one can be polled or cancelled", (long long)json_integer_value(id));
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

static load_state current_state(specd_engine **engine) {
    pthread_mutex_lock(&G.lock);
    load_state s = G.state;
    *engine = G.engine;
    pthread_mutex_unlock(&G.lock);
    return s;
}

bool rpc_state_acquire_engine(specd_engine **engine, rpc_error *err) {
    /* Look first, so a call during a load fails at once instead of waiting for the write lock;
     * look again under the read lock, which is what keeps the engine alive. */
    load_state s = current_state(engine);
    if (s == STATE_READY) {
        pthread_rwlock_rdlock(&G.engine_lock);
        s = current_state(engine);
        if (s == STATE_READY && *engine) return true;
        pthread_rwlock_unlock(&G.engine_lock);
    }
    if (s == STATE_LOADING) return rpc_fail(err, RPC_NO_MODEL, "", "the model is still loading: poll status");
    return rpc_fail(err, RPC_NO_MODEL, "", "no model loaded: call init first");
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

/* Loads the models described by `s` in place of the current ones (if any). */
static bool load_engine(const rpc_engine_settings *s, rpc_error *err) {
    pthread_rwlock_wrlock(&G.engine_lock);
    specd_engine_free(G.engine);
    G.engine = NULL;
    specd_engine *engine = NULL;
    char *message = NULL;
    specd_status st = specd_engine_new(&s->params, &engine, &message);
    pthread_mutex_lock(&G.lock);
    G.engine = engine;
    G.state = st == SPECD_OK ? STATE_READY : STATE_FAILED;
    replace_string(&G.model, s->model);
    replace_string(&G.alias, s->alias);
    replace_string(&G.error, message);
    G.n_ctx = engine ? specd_engine_n_ctx(engine) : 0;
    G.n_vocab = engine ? specd_engine_n_vocab(engine) : 0;
    G.has_draft = engine && specd_engine_has_draft(engine);
    G.draft_max = s->params.draft_max > 0 ? s->params.draft_max : 16; /* the engine's default */
    free(G.history);
    G.history = NULL;
    G.n_history = 0;
    pthread_mutex_unlock(&G.lock);
    pthread_rwlock_unlock(&G.engine_lock);
    if (st != SPECD_OK) rpc_fail(err, RPC_MODEL_LOAD, "model", "init: %s", message ? message : "loading failed");
    specd_free(message);
    return st == SPECD_OK;
}

static void *init_thread_main(void *arg) {
    rpc_engine_settings *s = arg;
    rpc_error err;
    load_engine(s, &err);
    rpc_engine_settings_free(s);
    free(s);
    return NULL;
}

/* Marks a load as started; false (busy) while a load or a completion runs. */
static bool begin_loading(rpc_error *err) {
    pthread_mutex_lock(&G.lock);
    bool ok = G.state != STATE_LOADING && !G.running;
    if (G.state == STATE_LOADING) rpc_fail(err, RPC_BUSY, "", "busy: a model is already loading; poll status");
    else if (G.running)
        rpc_fail(err, RPC_BUSY, "", "busy: completion %lld is running; cancel it or wait before init",
                 (long long)G.running->id);
    if (ok) {
        if (G.has_init_thread) pthread_join(G.init_thread, NULL); /* finished: state is not loading */
        G.has_init_thread = false;
        G.state = STATE_LOADING;
    }
    pthread_mutex_unlock(&G.lock);
    return ok;
}

static bool start_init_thread(rpc_engine_settings *settings, rpc_error *err) {
    rpc_engine_settings *copy = malloc(sizeof *copy);
    if (copy) *copy = *settings; /* the thread owns the strings now */
    pthread_mutex_lock(&G.lock);
    bool ok = copy && pthread_create(&G.init_thread, NULL, init_thread_main, copy) == 0;
    G.has_init_thread = ok;
    if (!ok) G.state = STATE_FAILED;
    pthread_mutex_unlock(&G.lock);
    if (ok) return true;
    if (copy) rpc_engine_settings_free(copy);
    free(copy);
    return rpc_fail(err, RPC_INTERNAL_ERROR, "", "init: could not start the loading thread");
}

json_t *rpc_method_init(json_t *params, rpc_error *err) {
    rpc_engine_settings s;
    if (!rpc_engine_settings_parse(params, &s, err)) return NULL;
    if (!begin_loading(err)) {
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
    int init_success = G.state == STATE_READY ? 1 : G.state == STATE_FAILED ? -1 : 0;
    json_t *r = json_pack("{s:s, s:i, s:s, s:s, s:b, s:b, s:i, s:i, s:s}", "state", state_name(G.state),
                          "init_success", init_success, "model", G.model ? G.model : "", "model_alias",
                          G.alias ? G.alias : "", "busy", G.running != NULL, "has_draft", G.has_draft,
                          "n_ctx", G.n_ctx, "n_vocab", G.n_vocab, "version", specd_version());
    if (r && G.state == STATE_FAILED && G.error) json_object_set_new(r, "error", json_string(G.error));
    pthread_mutex_unlock(&G.lock);
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
    bool add_special = true, with_pieces = false;
    if (rpc_get_string(&rp, "text", &text) < 0 || rpc_get_bool(&rp, "add_special", &add_special) < 0 ||
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
    if (specd_tokenize(e, text, add_special, &tokens, &n, &message) != SPECD_OK) {
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

static void cancel_job(rpc_job *job) {
    if (!job) return;
    atomic_store(&job->cancel, true);
    pthread_mutex_lock(&job->lock);
    if (job->engine) specd_engine_request_stop(job->engine);
    pthread_mutex_unlock(&job->lock);
}

json_t *rpc_method_shutdown(json_t *params, rpc_error *err) {
    rpc_params rp;
    rpc_params_open(&rp, params, "shutdown params", "", err);
    if (!rpc_params_finish(&rp)) return NULL;
    pthread_mutex_lock(&G.lock);
    bool has_init = G.has_init_thread;
    pthread_t init_thread = G.init_thread;
    G.has_init_thread = false;
    pthread_mutex_unlock(&G.lock);
    if (has_init) pthread_join(init_thread, NULL); /* a load in progress finishes first */
    pthread_mutex_lock(&G.lock);
    cancel_job(G.running);
    while (G.running) pthread_cond_wait(&G.idle, &G.lock);
    if (G.has_worker) pthread_join(G.worker, NULL);
    G.has_worker = false;
    rpc_job_unref(G.async);
    G.async = NULL;
    pthread_mutex_unlock(&G.lock);
    pthread_rwlock_wrlock(&G.engine_lock);
    pthread_mutex_lock(&G.lock);
    bool was_loaded = G.engine != NULL;
    specd_engine_free(G.engine);
    G.engine = NULL;
    G.state = STATE_NONE;
    replace_string(&G.model, NULL);
    replace_string(&G.alias, NULL);
    replace_string(&G.error, NULL);
    free(G.history);
    G.history = NULL;
    G.n_history = 0;
    G.n_ctx = G.n_vocab = 0;
    G.has_draft = false;
    pthread_mutex_unlock(&G.lock);
    pthread_rwlock_unlock(&G.engine_lock);
    return json_pack("{s:b}", "was_loaded", was_loaded);
}
