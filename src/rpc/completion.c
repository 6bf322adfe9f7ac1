/* completion.c - running a completion request on the engine and shaping the response the old API
 * returned (content, stop flags, timings, prompt_stats, generation_settings) plus `speculative`.
 * Text goes through the text stream: stop strings are cut, UTF-8 is never split, and streamed
 * chunks concatenate to exactly the blocking content. Also the blocking `completion` method. */
#define _POSIX_C_SOURCE 200809L /* strdup, strtok_r */
#include "completion.h"

#include "text_stream.h"
#include "completion_probs.h"
#include "completion_origins.h"
#include "metrics.h"
#include "limits.h"
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct run_state {
    rpc_job *job;
    specd_engine *engine;
    specd_text_stream text;
    bool stream;
    bool out_of_memory;
    const specd_result *result;  /* the one being generated: the probabilities of each step */
    completion_probs probs;      /* n_probs > 0: which tokens' entries were handed out */
    int32_t n_tokens_sent;       /* return_tokens while streaming: ids handed out so far */
    completion_origins origins;  /* return_origins: which bytes came from accepted drafts */
    double first_token_ms;       /* t_max_predict_ms: when the first token came (0: not yet) */
} run_state;

static json_t *sanitized_string(const char *bytes, size_t n) {
    char *clean = specd_utf8_sanitize(bytes, n);
    json_t *s = clean ? json_string(clean) : NULL;
    free(clean);
    return s;
}

static void publish(rpc_job *job, json_t *update) {
    pthread_mutex_lock(&job->lock);
    json_array_append_new(job->updates, update);
    pthread_cond_broadcast(&job->changed);
    pthread_mutex_unlock(&job->lock);
}

static bool push_token(run_state *rs, specd_token token) {
    char small[128];
    int32_t n = specd_token_to_piece(rs->engine, token, small, (int32_t)sizeof small);
    if (n >= 0) return specd_text_stream_push(&rs->text, small, (size_t)n);
    char *big = malloc((size_t)-n); /* a piece longer than 128 bytes: ask again with room */
    bool ok = big && specd_token_to_piece(rs->engine, token, big, -n) == -n &&
              specd_text_stream_push(&rs->text, big, (size_t)-n);
    free(big);
    return ok;
}

static json_t *timings_json(const specd_stats *s);

/* The ids generated since the last ones handed out (return_tokens), new array. */
static json_t *tokens_since(run_state *rs, const specd_result *r) {
    json_t *ids = json_array();
    for (; ids && rs->n_tokens_sent < r->n_tokens; rs->n_tokens_sent++)
        json_array_append_new(ids, json_integer(r->tokens[rs->n_tokens_sent]));
    return ids;
}

/* Per-chunk extras: llama-server's `tokens` (return_tokens) and `timings` (timings_per_token, the
 * figures so far), and specd's `origins` (return_origins) of the chunk's text, bytes [from, to). */
static void add_per_chunk_fields(run_state *rs, json_t *update, size_t from, size_t to) {
    const completion_request *req = rs->job->request;
    if (req->return_origins)
        json_object_set_new(update, "origins", completion_origins_json(&rs->origins, rs->text.buf, from, to));
    if (req->return_tokens) json_object_set_new(update, "tokens", tokens_since(rs, rs->result));
    if (req->timings_per_token) {
        specd_stats now = rs->result->stats;
        now.n_predicted = rs->result->n_tokens;
        json_object_set_new(update, "timings", timings_json(&now));
    }
}

void completion_end_for_time(rpc_job *job, const char *limit) {
    if (rpc_sched_end(job, RPC_END_TIME_LIMIT)) job->time_limit = limit;
}

/* llama-server's t_max_predict_ms: once that long has passed since the first token, the step
 * whose text (from byte `from`) holds a newline is the last. */
static void check_t_max_predict(run_state *rs, size_t from) {
    int64_t limit = rs->job->request->t_max_predict_ms;
    if (limit <= 0) return;
    double now = rpc_now_ms();
    if (!rs->first_token_ms) rs->first_token_ms = now;
    if (now - rs->first_token_ms > (double)limit && rs->text.len > from && memchr(rs->text.buf + from, '\n', rs->text.len - from))
        completion_end_for_time(rs->job, "t_max_predict_ms");
}

/* The engine's per-step callback: text in, decided text out, stop when a stop string matched,
 * the job was cancelled or a time limit passed (each takes effect after this step). */
static bool on_tokens(const specd_token *tokens, int32_t n, void *user_data) {
    run_state *rs = user_data;
    bool with_probs = rs->result->n_probs > 0, with_origins = rs->job->request->return_origins;
    int32_t n_drafts = with_origins ? completion_origins_step(&rs->origins, rs->result) : 0;
    size_t step_from = rs->text.len;
    for (int32_t i = 0; i < n && !specd_text_stream_stopped(&rs->text); i++) {
        size_t start = rs->text.len;
        if (!push_token(rs, tokens[i]) ||
            (with_probs && !completion_probs_record(&rs->probs, start, rs->text.len > start ? rs->text.len : start)) ||
            (with_origins && !completion_origins_mark(&rs->origins, rs->text.len, i < n_drafts))) {
            rs->out_of_memory = true;
            return false;
        }
    }
    check_t_max_predict(rs, step_from);
    if (rs->stream) {
        size_t len = 0;
        const char *chunk = specd_text_stream_take(&rs->text, false, &len);
        json_t *probs = with_probs ? completion_probs_take(&rs->probs, rs->engine, rs->result, &rs->text, false) : NULL;
        if (with_probs && !probs) {
            rs->out_of_memory = true;
            return false;
        }
        if (len > 0 || json_array_size(probs) > 0) {
            json_t *update = json_pack("{s:o, s:b}", "content", sanitized_string(chunk, len), "stop", 0);
            /* the update owns the list: once published, pollers on other threads free it */
            if (probs) json_object_set_new(update, "completion_probabilities", probs);
            add_per_chunk_fields(rs, update, rs->text.taken - len, rs->text.taken);
            publish(rs->job, update);
        } else {
            json_decref(probs);
        }
    }
    return !specd_text_stream_stopped(&rs->text) && !atomic_load(&rs->job->cancel);
}

/* ---- the response ---------------------------------------------------------------------------- */

/* Why the request ran without speculation (the library decides: specd_generation_drafters), in
 * this API's terms, or NULL when it speculated. */
static const char *spec_off_reason(const completion_request *req, specd_engine *e) {
    specd_spec_type drafters[SPECD_SPEC_MAX_TYPES];
    specd_spec_off why;
    specd_generation_drafters(e, &req->gen, drafters, &why);
    switch (why) {
    case SPECD_SPEC_ON: return NULL;
    case SPECD_SPEC_OFF_MIROSTAT: return "mirostat cannot be verified exactly; speculation was off for this request";
    case SPECD_SPEC_OFF_DRAFT_MAX: return "speculative.n_max is 0";
    case SPECD_SPEC_OFF_NONE: return "speculative.type is none";
    case SPECD_SPEC_OFF_NO_DRAFT:
        return "no draft model is loaded (init with -md FILE) and no model-free drafter was asked for";
    }
    return NULL;
}

/* The drafters a request uses, by name: ["none"] when it runs on the target alone. */
static json_t *spec_types_json(const completion_request *req, specd_engine *e) {
    specd_spec_type drafters[SPECD_SPEC_MAX_TYPES];
    int32_t n = specd_generation_drafters(e, &req->gen, drafters, NULL);
    json_t *a = json_array();
    for (int32_t i = 0; a && i < n; i++) json_array_append_new(a, json_string(specd_spec_type_name(drafters[i])));
    if (a && n == 0) json_array_append_new(a, json_string("none"));
    return a;
}

/* The same as one string, "ngram-simple,draft" (as `specd run --json` reports it). */
static json_t *spec_types_string(const completion_request *req, specd_engine *e) {
    json_t *list = spec_types_json(req, e);
    char buf[256] = "";
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
        if (i) strncat(buf, ",", sizeof buf - strlen(buf) - 1);
        strncat(buf, json_string_value(v), sizeof buf - strlen(buf) - 1);
    }
    json_decref(list);
    return json_string(buf);
}

static json_t *drafters_json(const specd_stats *s) {
    json_t *a = json_array();
    for (int32_t i = 0; a && i < s->n_drafters; i++) {
        const specd_drafter_stats *d = &s->drafters[i];
        json_array_append_new(a, json_pack("{s:s, s:i, s:i, s:i, s:i, s:f}", "type", specd_spec_type_name(d->type),
                                           "calls", d->n_calls, "chosen", d->n_chosen, "drafted", d->n_drafted,
                                           "accepted", d->n_accepted, "draft_ms", d->draft_ms));
    }
    return a;
}

/* A float setting as the user wrote it (0.95, not 0.949999988079071). */
static double decimal(float v) {
    char text[32];
    snprintf(text, sizeof text, "%.7g", (double)v);
    return strtod(text, NULL);
}

json_t *completion_settings_json(const completion_request *req, specd_engine *e) {
    const specd_sampling_params *s = &req->gen.sampling;
    const specd_spec_params *sp = &req->gen.speculative;
    json_t *spec = json_pack("{s:o, s:i, s:i, s:f, s:i, s:s, s:i, s:f, s:i}", "type", spec_types_json(req, e),
                             "n_max", sp->draft_max, "n_min", sp->draft_min, "p_min", decimal(sp->draft_p_min),
                             "suffix_branches", sp->suffix_branches, "tree", specd_draft_tree_mode_name(sp->tree),
                             "branches", sp->draft_branches, "p_split", decimal(sp->draft_p_split), "tree_nodes",
                             sp->draft_tree_nodes);
    json_t *settings = json_pack(
        "{s:o, s:i, s:i, s:f, s:i, s:f, s:f, s:f, s:f, s:f, s:i, s:f, s:f, s:f, s:i, s:b, s:i, s:I, s:b, s:i}",
        "model", rpc_state_model_name(), "n_ctx", req->n_ctx, "n_predict", req->gen.n_predict, "temperature",
        decimal(s->temperature), "top_k", s->top_k, "top_p", decimal(s->top_p), "min_p", decimal(s->min_p),
        "typical_p", decimal(s->typical_p), "tfs_z", 1.0, "repeat_penalty", decimal(s->repeat_penalty), "repeat_last_n", s->repeat_last_n,
        "presence_penalty", decimal(s->presence_penalty), "frequency_penalty", decimal(s->frequency_penalty),
        "mirostat_tau", decimal(s->mirostat_tau), "mirostat", s->mirostat, "ignore_eos", req->gen.ignore_eos, "n_keep", req->n_keep, "seed",
        (json_int_t)req->seed_requested, "stream", req->stream, "n_probs", req->gen.n_probs);
    if (!settings) return NULL;
    json_object_set_new(settings, "stop", req->stop_list ? json_incref(req->stop_list) : json_array());
    json_object_set_new(settings, "logit_bias", req->logit_bias_json ? json_incref(req->logit_bias_json) : json_array());
    json_object_set_new(settings, "grammar", json_string(req->grammar ? req->grammar : ""));
    json_object_set_new(settings, "mirostat_eta", json_real(decimal(s->mirostat_eta)));
    json_object_set_new(settings, "post_sampling_probs", json_boolean(req->gen.post_sampling_probs));
    json_object_set_new(settings, "speculative", spec);
    return settings;
}

json_t *completion_prompt_stats(const completion_request *req) {
    return json_pack("{s:i, s:i, s:b, s:i, s:i, s:i}", "n_ctx", req->n_ctx, "total_prompt_tokens",
                     req->n_prompt_tokens, "truncated", req->truncated, "n_past", req->n_cached, "cached",
                     req->n_cached, "to_eval", req->n_tokens - req->n_cached);
}

static double per(double a, double b) { return b > 0 ? a / b : 0.0; }

/* llama-server's timings: cache_n (prompt tokens reused), then draft_n / draft_n_accepted when
 * something was drafted. */
static json_t *timings_json(const specd_stats *s) {
    int32_t prompt_n = s->n_prompt - s->n_prompt_cached;
    json_t *t = json_pack("{s:i, s:i, s:f, s:f, s:f, s:i, s:f, s:f, s:f}", "cache_n", s->n_prompt_cached, "prompt_n",
                          prompt_n, "prompt_ms", s->prompt_ms, "prompt_per_token_ms", per(s->prompt_ms, prompt_n),
                          "prompt_per_second", per(prompt_n * 1000.0, s->prompt_ms), "predicted_n", s->n_predicted,
                          "predicted_ms", s->decode_ms, "predicted_per_token_ms", per(s->decode_ms, s->n_predicted),
                          "predicted_per_second", per(s->n_predicted * 1000.0, s->decode_ms));
    if (t && s->n_drafted > 0) {
        json_object_set_new(t, "draft_n", json_integer(s->n_drafted));
        json_object_set_new(t, "draft_n_accepted", json_integer(s->n_accepted));
    }
    return t;
}

/* `enabled`, and when it is false the `reason`, before the statistics. */
static json_t *speculative_json(json_t *type, const char *off_reason, const specd_stats *s) {
    json_t *sp = json_pack("{s:b, s:o, s:o, s:i, s:i, s:i, s:f, s:f, s:f, s:f}", "enabled", off_reason == NULL, "type",
                           type, "drafters", drafters_json(s), "steps", s->n_steps, "drafted", s->n_drafted, "accepted",
                           s->n_accepted, "acceptance_rate", specd_stats_acceptance_rate(s), "mean_accepted_per_step",
                           specd_stats_mean_accepted_per_step(s), "draft_ms", s->draft_ms, "verify_ms", s->verify_ms);
    if (sp && off_reason) json_object_set_new(sp, "reason", json_string(off_reason));
    if (sp) { /* draft trees: steps that verified several branches, their drafts and accepted */
        json_object_set_new(sp, "tree_steps", json_integer(s->n_tree_steps));
        json_object_set_new(sp, "tree_drafted", json_integer(s->n_tree_drafted));
        json_object_set_new(sp, "tree_accepted", json_integer(s->n_tree_accepted));
    }
    return sp;
}

/* A job asked to end before it finished: why, as its stop_type. */
static const char *ended_early_type(int why) {
    switch (why) {
    case RPC_END_SHUTDOWN: return "shutdown";
    case RPC_END_TIME_LIMIT: return "time_limit";
    default: return "cancelled";
    }
}

static const char *stop_type(const run_state *rs, const specd_result *r) {
    if (specd_text_stream_stopped(&rs->text)) return "word";
    switch (r->stop_reason) {
    case SPECD_STOP_EOG: return "eos";
    case SPECD_STOP_LIMIT: return "limit";
    case SPECD_STOP_CONTEXT: return "context";
    case SPECD_STOP_CALLBACK: return ended_early_type(atomic_load(&rs->job->end_reason));
    }
    return "unknown";
}

/* Which limit ended the completion (stop_type limit, context or time_limit), by the name that set
 * it: the request's field or the server's flag; "" when none did. */
static const char *stopping_limit(const completion_request *req, const run_state *rs, const specd_result *r) {
    if (specd_text_stream_stopped(&rs->text)) return "";
    switch (r->stop_reason) {
    case SPECD_STOP_LIMIT:
        return req->n_predict_by_server ? "--n-predict" : req->n_predict_field ? req->n_predict_field : "n_predict";
    case SPECD_STOP_CONTEXT: return "context";
    case SPECD_STOP_CALLBACK:
        return atomic_load(&rs->job->end_reason) == RPC_END_TIME_LIMIT && rs->job->time_limit ? rs->job->time_limit : "";
    default: return "";
    }
}

/* As llama-server reports it: the context ran out, so the prompt was cut, the context shifted, or
 * generation stopped at its end. */
static bool truncated(const completion_request *req, const specd_result *r) {
    return req->truncated || r->stats.n_context_shifts > 0 || r->stop_reason == SPECD_STOP_CONTEXT;
}

/* response_fields: the paths of `fields` found in `resp` (taken), each under its path. */
static json_t *only_fields(json_t *resp, json_t *fields) {
    json_t *kept = json_object();
    size_t i;
    json_t *path;
    json_array_foreach(fields, i, path) {
        char *copy = strdup(json_string_value(path)), *save = NULL;
        json_t *at = resp;
        for (char *key = copy ? strtok_r(copy, "/", &save) : NULL; key && at; key = strtok_r(NULL, "/", &save))
            at = json_is_object(at) ? json_object_get(at, key) : NULL;
        if (at && at != resp) json_object_set(kept, json_string_value(path), at);
        free(copy);
    }
    json_decref(resp);
    return kept;
}

static json_t *final_response(const completion_request *req, run_state *rs, const specd_result *r) {
    size_t len = 0;
    const char *text = rs->stream ? specd_text_stream_take(&rs->text, true, &len) : specd_text_stream_text(&rs->text, &len);
    const char *type = stop_type(rs, r), *limit = stopping_limit(req, rs, r);
    bool word = strcmp(type, "word") == 0;
    json_t *resp = json_pack(
        "{s:o, s:b, s:o, s:i, s:i, s:o, s:O, s:b, s:b, s:b, s:b, s:s, s:s, s:i, s:o, s:i, s:o, s:o}", "content",
        sanitized_string(text, len), "stop", 1, "model", rpc_state_model_name(), "tokens_predicted", r->n_tokens,
        "tokens_evaluated", req->n_tokens, "generation_settings", completion_settings_json(req, rs->engine),
        "prompt", req->prompt, "truncated", truncated(req, r), "stopped_eos", strcmp(type, "eos") == 0,
        "stopped_word", word, "stopped_limit", *limit != '\0',
        "stopping_word", word ? req->stops[rs->text.stop_index] : "", "stop_type", type, "tokens_cached",
        r->stats.n_prompt + r->n_tokens, "timings", timings_json(&r->stats), "status", 200, "prompt_stats",
        completion_prompt_stats(req), "speculative", speculative_json(spec_types_string(req, rs->engine), spec_off_reason(req, rs->engine), &r->stats));
    if (resp) json_object_set_new(resp, "stopping_limit", json_string(limit));
    if (resp && req->gen.n_probs > 0)
        json_object_set_new(resp, "completion_probabilities",
                            completion_probs_take(&rs->probs, rs->engine, r, &rs->text, true));
    if (resp && req->return_tokens) json_object_set_new(resp, "tokens", tokens_since(rs, r));
    if (resp && req->return_origins) {
        size_t from = rs->stream ? rs->text.taken - len : 0;
        json_object_set_new(resp, "origins", completion_origins_json(&rs->origins, rs->text.buf, from, from + len));
    }
    return req->response_fields && resp ? only_fields(resp, req->response_fields) : resp;
}

/* ---- running --------------------------------------------------------------------------------- */

/* What the engine's cache starts with after the generation: prompt and output, or after context
 * shifts only the tokens they kept (what followed them has moved). */
static void remember_history(const completion_request *req, const specd_result *r) {
    int32_t n_prompt = req->n_tokens, n_out = r->n_tokens;
    if (r->stats.n_context_shifts > 0) {
        int32_t kept = r->stats.n_context_kept;
        if (n_prompt > kept) n_prompt = kept;
        if (n_out > kept - n_prompt) n_out = kept - n_prompt;
    }
    rpc_state_remember_history(req->tokens, n_prompt, r->tokens, n_out);
}

/* The drafter a request used when it used exactly one, else NONE (for the per-drafter metrics). */
static specd_spec_type single_drafter(const completion_request *req, specd_engine *e) {
    specd_spec_type drafters[SPECD_SPEC_MAX_TYPES];
    return specd_generation_drafters(e, &req->gen, drafters, NULL) == 1 ? drafters[0] : SPECD_SPEC_NONE;
}

static void fail_job(rpc_job *job, const rpc_error *err) {
    pthread_mutex_lock(&job->lock);
    job->failed = true;
    job->error = *err;
    pthread_mutex_unlock(&job->lock);
}

static void debug_log(const completion_request *req, const char *what, json_t *value) {
    if (!req->debug || !value) return;
    char *text = json_dumps(value, JSON_COMPACT | JSON_REAL_PRECISION(15));
    fprintf(stderr, "specd rpc: %s %s\n", what, text ? text : "?");
    free(text);
}

/* A completion running in a slot, driven step by step by the scheduler. */
struct completion_exec {
    run_state rs;
    double deadline_ms;          /* the server's --time-limit, on rpc_now_ms (0: none) */
    specd_session *session;      /* NULL until opened (a job cancelled in the queue never is) */
    specd_result empty;          /* the result of a job that never ran */
    specd_status status;         /* the first failure */
    char *message;               /* its message (owned) */
};

completion_exec *completion_exec_new(rpc_job *job, specd_engine *engine) {
    completion_exec *x = calloc(1, sizeof *x);
    if (!x) {
        rpc_error err;
        rpc_fail(&err, RPC_INTERNAL_ERROR, "", "completion: out of memory");
        fail_job(job, &err);
        return NULL;
    }
    completion_request *req = job->request;
    x->rs = (run_state){.job = job, .engine = engine, .stream = job->stream,
                        .probs = {.llama = req->llama_probs, .post_sampling = req->gen.post_sampling_probs}};
    specd_text_stream_init(&x->rs.text, req->stops, req->n_stops);
    x->empty.stop_reason = SPECD_STOP_CALLBACK;
    x->empty.stats.n_prompt = req->n_tokens;
    x->rs.result = &x->empty;
    req->gen.on_tokens = on_tokens;
    req->gen.user_data = &x->rs;
    return x;
}

bool completion_exec_open(completion_exec *x, int32_t slot) {
    completion_request *req = x->rs.job->request;
    if (!req->cache_prompt) specd_engine_slot_forget(x->rs.engine, slot); /* decoded in full, as llama-server */
    /* the prompt goes in by chunks that join the rounds' passes (specd_sessions_verify) */
    int64_t limit = rpc_limits_get().time_limit_ms;
    x->deadline_ms = limit > 0 ? rpc_now_ms() + (double)limit : 0.0; /* its time in the slot, prompt included */
    x->status = specd_session_begin_in_slot(x->rs.engine, slot, req->tokens, req->n_tokens, &req->gen, &x->session,
                                            &x->message);
    if (x->status == SPECD_OK) x->rs.result = specd_session_result(x->session);
    return x->status == SPECD_OK;
}

/* A failure of this exec's step (the message taken). */
static void exec_failed(completion_exec *x, specd_status st, char *message) {
    x->status = st;
    specd_free(x->message);
    x->message = message;
}

/* Whether the exec is over (finished, failed, or out of memory). */
static bool exec_over(const completion_exec *x) {
    return !x->session || x->status != SPECD_OK || x->rs.out_of_memory || specd_session_done(x->session);
}

void completion_execs_step(completion_exec **xs, int32_t n, bool *done) {
    specd_session *verify[SPECD_MAX_PARALLEL] = {0};
    completion_exec *owners[SPECD_MAX_PARALLEL] = {0};
    bool ingesting[SPECD_MAX_PARALLEL] = {0};
    int32_t m = 0;
    specd_session *drafting[SPECD_MAX_PARALLEL] = {0};
    completion_exec *drafters[SPECD_MAX_PARALLEL] = {0};
    int32_t d = 0;
    for (int32_t i = 0; i < n && d < SPECD_MAX_PARALLEL; i++) {
        completion_exec *x = xs[i];
        if (exec_over(x)) continue;
        if (x->deadline_ms && rpc_now_ms() >= x->deadline_ms) completion_end_for_time(x->rs.job, "--time-limit");
        if (atomic_load(&x->rs.job->cancel)) specd_session_request_stop(x->session);
        drafting[d] = x->session;
        drafters[d++] = x;
    }
    specd_status status[SPECD_MAX_PARALLEL];
    char *errors[SPECD_MAX_PARALLEL] = {0};
    specd_sessions_draft(drafting, d, status, errors); /* each knows what the others add to the pass */
    for (int32_t j = 0; j < d; j++) {
        completion_exec *x = drafters[j];
        if (status[j] != SPECD_OK) exec_failed(x, status[j], errors[j]);
        else specd_free(errors[j]);
        if (!exec_over(x)) {
            ingesting[m] = specd_session_pending_prompt(x->session) > 0; /* adds a prompt chunk, nothing to accept */
            verify[m] = x->session;
            owners[m++] = x;
        }
    }
    char *verify_errors[SPECD_MAX_PARALLEL] = {0};
    specd_sessions_verify(verify, m, NULL, status, verify_errors); /* ONE target pass for all */
    for (int32_t j = 0; j < m; j++) {
        completion_exec *x = owners[j];
        if (status[j] != SPECD_OK) {
            exec_failed(x, status[j], verify_errors[j]);
            continue;
        }
        specd_free(verify_errors[j]);
        if (ingesting[j]) continue;
        char *accept_message = NULL;
        specd_status sa = specd_session_accept(x->session, NULL, &accept_message);
        if (sa != SPECD_OK) exec_failed(x, sa, accept_message);
        else specd_free(accept_message);
    }
    for (int32_t i = 0; i < n; i++) done[i] = exec_over(xs[i]);
}

const specd_result *completion_exec_result(const completion_exec *x) { return x->rs.result; }

json_t *completion_exec_end(completion_exec *x) {
    rpc_job *job = x->rs.job;
    completion_request *req = job->request;
    specd_result r = {0};
    if (x->session) specd_session_take_result(x->session, &r);
    else r = x->empty;
    x->rs.result = &r;
    json_t *resp = NULL;
    if (x->status != SPECD_OK || x->rs.out_of_memory) {
        rpc_error err;
        rpc_fail(&err, x->status == SPECD_ERR_INVALID_ARGUMENT ? RPC_INVALID_PARAMS : RPC_GENERATION, "",
                 "completion: %s", x->message ? x->message : "out of memory for the generated text");
        fail_job(job, &err);
    } else {
        if (x->session) {
            remember_history(req, &r);
            rpc_metrics_record(&r.stats, single_drafter(req, x->rs.engine));
        }
        resp = final_response(req, &x->rs, &r);
        debug_log(req, "response", resp);
    }
    specd_session_free(x->session);
    specd_text_stream_free(&x->rs.text);
    completion_probs_free(&x->rs.probs);
    completion_origins_free(&x->rs.origins);
    if (x->session) specd_result_clear(&r);
    specd_free(x->message);
    free(x);
    return resp;
}

/* Claims the one completion slot for `job` and parses its request (tokenizing the prompt). */
void completion_end_unrun(rpc_job *job, const rpc_error *err) {
    pthread_mutex_lock(&job->lock);
    job->failed = true;
    job->error = *err;
    job->finished = true;
    pthread_cond_broadcast(&job->changed);
    pthread_mutex_unlock(&job->lock);
    rpc_state_unclaim(job);
}

bool completion_claim_and_parse(rpc_job *job, json_t *params, rpc_error *err) {
    if (!rpc_state_claim(job, err)) return false;
    specd_engine *e;
    if (!rpc_state_acquire_engine(&e, err)) {
        completion_end_unrun(job, err);
        return false;
    }
    job->request = completion_request_parse(params, e, err);
    if (job->request)
        rpc_metrics_begin(job->id, job->request->n_tokens, job->request->n_ctx,
                          completion_settings_json(job->request, e));
    rpc_state_release_engine();
    if (!job->request) {
        completion_end_unrun(job, err); /* claimed, so a poll of the latest job finds it: ended, not pending */
        return false;
    }
    debug_log(job->request, "request", params);
    return true;
}

/* Waits until the job finishes (job->lock held); cancels it when the caller no longer wants the
 * answer (rpc_watch_thread: an HTTP client that went away). */
static void wait_watching(rpc_job *job) {
    bool cancelled = false;
    while (!job->finished) {
        struct timespec deadline = rpc_realtime_after_ms(RPC_WATCH_MS);
        pthread_cond_timedwait(&job->changed, &job->lock, &deadline);
        if (job->finished || cancelled) continue;
        pthread_mutex_unlock(&job->lock); /* the check may take time: never hold the job's lock in it */
        cancelled = !rpc_thread_still_wanted();
        if (cancelled) rpc_sched_cancel(job);
        pthread_mutex_lock(&job->lock);
    }
}

json_t *rpc_method_completion(json_t *params, rpc_error *err) {
    rpc_job *job = rpc_job_new();
    if (!job) {
        rpc_fail(err, RPC_INTERNAL_ERROR, "", "out of memory for the completion");
        return NULL;
    }
    json_t *resp = NULL;
    if (completion_claim_and_parse(job, params, err)) {
        if (rpc_sched_submit(job, err)) {
            pthread_mutex_lock(&job->lock);
            wait_watching(job);
            resp = job->response;
            job->response = NULL;
            if (!resp) *err = job->error;
            pthread_mutex_unlock(&job->lock);
        } else {
            completion_end_unrun(job, err);
        }
    }
    rpc_job_unref(job);
    return resp;
}
