/* run.c - a job running in a slot (see run.h). Text goes through the text stream: stop strings are
 * cut, UTF-8 is never split, and streamed pieces concatenate to exactly the blocking text. Each
 * piece and the final answer are views (reply.h) that the job's API turns into its own shape. */
#include "run.h"

#include "clock.h"
#include "probs_window.h"
#include "text_stream.h"

#include <stdlib.h>
#include <string.h>

struct serve_run {
    serve_job *job;
    run_env env;
    specd_text_stream text;
    bool out_of_memory;
    const specd_result *result;  /* the one being generated */
    probs_window probs;          /* n_probs > 0: which tokens' entries were handed out */
    int32_t n_tokens_sent;       /* token ids handed out so far */
    serve_origins origins;       /* return_origins: which bytes came from accepted drafts */
    double first_token_ms;       /* t_max_predict_ms: when the first token came (0: not yet) */
    double deadline_ms;          /* the server's time limit, on serve_now_ms (0: none) */
    specd_session *session;      /* NULL until opened (a job ended in the queue never is) */
    specd_result empty;          /* the result of a job that never ran */
    specd_status status;         /* the first failure */
    char *message;               /* its message (owned) */
};

/* ---- the text, as it comes ------------------------------------------------------------------- */

/* A preserved token (a chat format's control-token marker) shows its text; other control tokens none. */
static bool push_token(serve_run *x, specd_token token) {
    char small[128];
    bool special = serve_request_preserves(&x->job->request, token);
    int32_t n = specd_token_to_piece_special(x->env.engine, token, special, small, (int32_t)sizeof small);
    if (n >= 0) return specd_text_stream_push(&x->text, small, (size_t)n);
    char *big = malloc((size_t)-n); /* a piece longer than 128 bytes: ask again with room */
    bool ok = big && specd_token_to_piece_special(x->env.engine, token, special, big, -n) == -n &&
              specd_text_stream_push(&x->text, big, (size_t)-n);
    free(big);
    return ok;
}

void serve_run_end_for_time(serve_job *job, const char *limit) {
    if (serve_job_end(job, SERVE_END_TIME_LIMIT)) job->time_limit = limit;
}

/* llama-server's t_max_predict_ms: once that long has passed since the first token, the step
 * whose text (from byte `from`) holds a newline is the last. */
static void check_t_max_predict(serve_run *x, size_t from) {
    int64_t limit = x->job->request.t_max_predict_ms;
    if (limit <= 0) return;
    double now = serve_now_ms();
    if (!x->first_token_ms) x->first_token_ms = now;
    if (now - x->first_token_ms > (double)limit && x->text.len > from &&
        memchr(x->text.buf + from, '\n', x->text.len - from))
        serve_run_end_for_time(x->job, "t_max_predict_ms");
}

/* A view of the run for its reply: the text [from, to), the tokens handed out with it. */
static serve_view view_of(serve_run *x, size_t from, size_t to, bool final) {
    serve_view v = {.request = &x->job->request, .engine = x->env.engine, .model = x->env.model, .id = x->job->id,
                    .slot = x->env.slot, .result = x->result, .text = x->text.buf ? x->text.buf : "", .from = from, .to = to,
                    .tokens_from = x->n_tokens_sent, .tokens_to = x->result->n_tokens, .final = final,
                    .origins = x->job->request.return_origins ? &x->origins : NULL};
    x->n_tokens_sent = x->result->n_tokens;
    probs_window_take(&x->probs, x->result->n_probs > 0 ? x->result->n_tokens : 0, &x->text, final, &v.probs_from,
                      &v.probs_to);
    return v;
}

/* With stream: the text decided since the last piece, as the reply's item. */
static void publish_piece(serve_run *x) {
    size_t len = 0;
    specd_text_stream_take(&x->text, false, &len);
    size_t to = x->text.taken, from = to - len;
    serve_view v = view_of(x, from, to, false);
    if (len == 0 && v.probs_to == v.probs_from) { /* nothing new: the token ids wait for the next piece */
        x->n_tokens_sent = v.tokens_from;
        return;
    }
    void *item = x->job->reply.update ? x->job->reply.update(x->job->reply.ctx, &v) : NULL;
    if (item) serve_job_publish(x->job, item);
}

/* The engine's per-step callback: text in, decided text out, stop when a stop string matched,
 * the job was ended or a time limit passed (each takes effect after this step). */
static bool on_tokens(const specd_token *tokens, int32_t n, void *user_data) {
    serve_run *x = user_data;
    bool with_probs = x->result->n_probs > 0, with_origins = x->job->request.return_origins;
    int32_t n_drafts = with_origins ? serve_origins_step(&x->origins, x->result) : 0;
    size_t step_from = x->text.len;
    for (int32_t i = 0; i < n && !specd_text_stream_stopped(&x->text); i++) {
        size_t start = x->text.len;
        if (!push_token(x, tokens[i]) ||
            (with_probs && !probs_window_record(&x->probs, start, x->text.len > start ? x->text.len : start)) ||
            (with_origins && !serve_origins_mark(&x->origins, x->text.len, i < n_drafts))) {
            x->out_of_memory = true;
            return false;
        }
    }
    check_t_max_predict(x, step_from);
    if (x->job->request.stream) publish_piece(x);
    return !specd_text_stream_stopped(&x->text) && !atomic_load(&x->job->cancel);
}

/* ---- the final answer ------------------------------------------------------------------------ */

static serve_stop ended_early(int why) {
    switch (why) {
    case SERVE_END_SHUTDOWN: return SERVE_STOP_SHUTDOWN;
    case SERVE_END_TIME_LIMIT: return SERVE_STOP_TIME_LIMIT;
    default: return SERVE_STOP_CANCELLED;
    }
}

static serve_stop stop_of(const serve_run *x, const specd_result *r) {
    if (specd_text_stream_stopped(&x->text)) return SERVE_STOP_WORD;
    switch (r->stop_reason) {
    case SPECD_STOP_EOG: return SERVE_STOP_EOS;
    case SPECD_STOP_LIMIT: return SERVE_STOP_LIMIT;
    case SPECD_STOP_CONTEXT: return SERVE_STOP_CONTEXT;
    case SPECD_STOP_CALLBACK: break;
    }
    return ended_early(atomic_load(&x->job->end_reason));
}

/* Which limit ended the completion (stop limit, context or time_limit), by the name that set it:
 * the request's field or the server's flag; "" when none did. */
static const char *stopping_limit(const serve_run *x, const specd_result *r) {
    const serve_request *req = &x->job->request;
    if (specd_text_stream_stopped(&x->text)) return "";
    switch (r->stop_reason) {
    case SPECD_STOP_LIMIT:
        return req->n_predict_by_server ? "--n-predict" : req->n_predict_field ? req->n_predict_field : "n_predict";
    case SPECD_STOP_CONTEXT: return "context";
    case SPECD_STOP_CALLBACK:
        return atomic_load(&x->job->end_reason) == SERVE_END_TIME_LIMIT && x->job->time_limit ? x->job->time_limit : "";
    default: return "";
    }
}

/* As llama-server reports it: the context ran out, so the prompt was cut, the context shifted, or
 * generation stopped at its end. */
static bool truncated(const serve_request *req, const specd_result *r) {
    return req->truncated || r->stats.n_context_shifts > 0 || r->stop_reason == SPECD_STOP_CONTEXT;
}

static void *final_answer(serve_run *x, const specd_result *r) {
    size_t len = 0;
    const char *text = x->job->request.stream ? specd_text_stream_take(&x->text, true, &len)
                                              : specd_text_stream_text(&x->text, &len);
    size_t to = (size_t)(text - (x->text.buf ? x->text.buf : text)) + len;
    serve_view v = view_of(x, to - len, to, true);
    v.stop = stop_of(x, r);
    v.stopping_limit = stopping_limit(x, r);
    v.stopping_word = v.stop == SERVE_STOP_WORD ? x->job->request.stops[x->text.stop_index] : "";
    v.truncated = truncated(&x->job->request, r);
    return x->job->reply.final(x->job->reply.ctx, &v);
}

/* What the engine's cache starts with after the generation: prompt and output, or after context
 * shifts only the tokens they kept (what followed them has moved). */
static void remember_history(serve_run *x, const specd_result *r) {
    const serve_request *req = &x->job->request;
    int32_t n_prompt = req->n_tokens, n_out = r->n_tokens;
    if (r->stats.n_context_shifts > 0) {
        int32_t kept = r->stats.n_context_kept;
        if (n_prompt > kept) n_prompt = kept;
        if (n_out > kept - n_prompt) n_out = kept - n_prompt;
    }
    serve_history_remember(x->env.history, req->tokens, n_prompt, r->tokens, n_out);
}

/* The drafter a request used when it used exactly one, else NONE (for the per-drafter metrics). */
static specd_spec_type single_drafter(const serve_request *req, specd_engine *e) {
    specd_spec_type drafters[SPECD_SPEC_MAX_TYPES];
    return specd_generation_drafters(e, &req->gen, drafters, NULL) == 1 ? drafters[0] : SPECD_SPEC_NONE;
}

/* ---- running --------------------------------------------------------------------------------- */

serve_run *serve_run_new(serve_job *job, const run_env *env) {
    serve_run *x = calloc(1, sizeof *x);
    if (!x) {
        serve_fault fault;
        serve_fail(&fault, SERVE_INTERNAL, "", "completion: out of memory");
        serve_job_set_fault(job, &fault);
        return NULL;
    }
    serve_request *req = &job->request;
    x->job = job;
    x->env = *env;
    specd_text_stream_init(&x->text, (const char *const *)req->stops, req->n_stops);
    x->empty.stop_reason = SPECD_STOP_CALLBACK;
    x->empty.stats.n_prompt = req->n_tokens;
    x->result = &x->empty;
    req->gen.on_tokens = on_tokens;
    req->gen.user_data = x;
    int64_t limit = env->limits->time_limit_ms;
    x->deadline_ms = limit > 0 ? serve_now_ms() + (double)limit : 0.0; /* its time in the slot, prompt included */
    return x;
}

bool serve_run_open(serve_run *x, specd_status status, specd_session *session, char *message) {
    x->status = status;
    x->session = session;
    x->message = message;
    if (x->status == SPECD_OK) x->result = specd_session_result(x->session);
    return x->status == SPECD_OK;
}

/* A failure of this run's step (the message taken). */
static void run_failed(serve_run *x, specd_status st, char *message) {
    x->status = st;
    specd_free(x->message);
    x->message = message;
}

/* Whether the run is over (finished, failed, or out of memory). */
static bool run_over(const serve_run *x) {
    return !x->session || x->status != SPECD_OK || x->out_of_memory || specd_session_done(x->session);
}

/* The runs that draft this step (a time limit or an end asked for stops them there). */
static int32_t drafting_runs(serve_run **xs, int32_t n, specd_session **sessions, serve_run **owners) {
    int32_t d = 0;
    for (int32_t i = 0; i < n && d < SPECD_MAX_PARALLEL; i++) {
        serve_run *x = xs[i];
        if (run_over(x)) continue;
        if (x->deadline_ms && serve_now_ms() >= x->deadline_ms) serve_run_end_for_time(x->job, "--time-limit");
        if (atomic_load(&x->job->cancel)) specd_session_request_stop(x->session);
        sessions[d] = x->session;
        owners[d++] = x;
    }
    return d;
}

void serve_runs_step(serve_run **xs, int32_t n, bool *done) {
    specd_session *drafting[SPECD_MAX_PARALLEL] = {0}, *verify[SPECD_MAX_PARALLEL] = {0};
    serve_run *drafters[SPECD_MAX_PARALLEL] = {0}, *owners[SPECD_MAX_PARALLEL] = {0};
    bool ingesting[SPECD_MAX_PARALLEL] = {0};
    int32_t d = drafting_runs(xs, n, drafting, drafters), m = 0;
    specd_status status[SPECD_MAX_PARALLEL];
    char *errors[SPECD_MAX_PARALLEL] = {0};
    specd_sessions_draft(drafting, d, status, errors); /* each knows what the others add to the pass */
    for (int32_t j = 0; j < d; j++) {
        serve_run *x = drafters[j];
        if (status[j] != SPECD_OK) run_failed(x, status[j], errors[j]);
        else specd_free(errors[j]);
        if (run_over(x)) continue;
        ingesting[m] = specd_session_pending_prompt(x->session) > 0; /* adds a prompt chunk, nothing to accept */
        verify[m] = x->session;
        owners[m++] = x;
    }
    char *verify_errors[SPECD_MAX_PARALLEL] = {0};
    specd_sessions_verify(verify, m, NULL, status, verify_errors); /* ONE target pass for all */
    for (int32_t j = 0; j < m; j++) {
        serve_run *x = owners[j];
        if (status[j] != SPECD_OK) {
            run_failed(x, status[j], verify_errors[j]);
            continue;
        }
        specd_free(verify_errors[j]);
        if (ingesting[j]) continue;
        char *accept_message = NULL;
        specd_status sa = specd_session_accept(x->session, NULL, &accept_message);
        if (sa != SPECD_OK) run_failed(x, sa, accept_message);
        else specd_free(accept_message);
    }
    for (int32_t i = 0; i < n; i++) done[i] = run_over(xs[i]);
}

const specd_result *serve_run_result(const serve_run *x) { return x->result; }

int32_t serve_run_pending_prompt(const serve_run *x) {
    return x && x->session ? specd_session_pending_prompt(x->session) : 0;
}

void *serve_run_end(serve_run *x) {
    serve_job *job = x->job;
    specd_result r = {0};
    if (x->session) specd_session_take_result(x->session, &r);
    else r = x->empty;
    x->result = &r;
    void *answer = NULL;
    if (x->status != SPECD_OK || x->out_of_memory) {
        serve_fault fault;
        serve_fail(&fault, x->status == SPECD_ERR_INVALID_ARGUMENT ? SERVE_INVALID : SERVE_GENERATION, "",
                   "completion: %s", x->message ? x->message : "out of memory for the generated text");
        serve_job_set_fault(job, &fault);
    } else {
        if (x->session) {
            remember_history(x, &r);
            metrics_counter_record(x->env.metrics, &r.stats, single_drafter(&job->request, x->env.engine));
        }
        answer = final_answer(x, &r);
    }
    specd_session_free(x->session);
    specd_text_stream_free(&x->text);
    probs_window_free(&x->probs);
    serve_origins_free(&x->origins);
    if (x->session) specd_result_clear(&r);
    specd_free(x->message);
    free(x);
    return answer;
}
