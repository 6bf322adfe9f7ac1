/* openai_reply.c - an OpenAI answer, built once from the result (views of the running request,
 * serve/reply.h) on the server's thread:
 *  - not streamed: chat.completion / text_completion with choices[0] (message or text,
 *    finish_reason, logprobs), usage, and specd's `speculative`, stop_type (and origins, asked);
 *  - streamed (sse.c sends the chunks): chat, a first chunk with delta {role: "assistant"}, then
 *    {content} deltas (with `origins` beside `choices` when return_origins was asked), a last chunk
 *    with an empty delta, the finish_reason and specd's `speculative` figures, then with
 *    stream_options.include_usage a chunk with choices [] and usage (and speculative again), then
 *    "data: [DONE]"; /v1/completions: text_completion chunks with choices[].text, ending the same
 *    way. */
#include "openai.h"

#include "../api/probs_json.h"
#include "../api/reply_json.h"
#include "../serve/text_stream.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- logprobs -------------------------------------------------------------------------------- */

/* Result token i's alternatives (the top list), at most n_top. */
static const specd_token_prob *top_list(const specd_result *r, int32_t i, int32_t *n) {
    const specd_token_prob *list = r->probs + (size_t)i * (size_t)r->n_probs;
    *n = 0;
    while (*n < r->n_probs && list[*n].token >= 0) (*n)++;
    return list;
}

/* Token i's own probability when it is among the top list, else -1 (unknown). */
static double own_prob(const specd_result *r, int32_t i) {
    int32_t n = 0;
    const specd_token_prob *list = top_list(r, i, &n);
    for (int32_t k = 0; k < n; k++)
        if (list[k].token == r->tokens[i]) return list[k].prob;
    return -1.0;
}

/* Chat's {token, logprob, bytes} of one token. */
static json_t *chat_token(specd_engine *e, specd_token token, double p) {
    json_t *bytes = NULL, *piece = probs_json_piece(e, token, &bytes);
    return json_pack("{s:o, s:o, s:o}", "token", piece, "logprob", probs_json_logprob(p), "bytes", bytes);
}

/* Chat's {content: [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}. */
static json_t *chat_logprobs(const openai_call *call, const serve_view *v) {
    json_t *content = json_array();
    for (int32_t i = v->probs_from; content && i < v->probs_to; i++) {
        json_t *entry = chat_token(v->engine, v->result->tokens[i], own_prob(v->result, i));
        json_t *top = json_array();
        int32_t n = 0;
        const specd_token_prob *list = top_list(v->result, i, &n);
        for (int32_t k = 0; top && k < n && k < call->top_logprobs; k++)
            json_array_append_new(top, chat_token(v->engine, list[k].token, list[k].prob));
        if (entry) json_object_set_new(entry, "top_logprobs", top);
        else json_decref(top);
        json_array_append_new(content, entry);
    }
    return json_pack("{s:o}", "content", content);
}

/* /v1/completions' {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}. */
static json_t *text_logprobs(openai_call *call, const serve_view *v) {
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offsets = json_array();
    for (int32_t i = v->probs_from; i < v->probs_to; i++) {
        json_t *bytes = NULL;
        json_array_append_new(tokens, probs_json_piece(v->engine, v->result->tokens[i], &bytes));
        json_array_append_new(lps, probs_json_logprob(own_prob(v->result, i)));
        json_t *top = json_object();
        int32_t n = 0;
        const specd_token_prob *list = top_list(v->result, i, &n);
        for (int32_t k = 0; top && k < n && k < call->top_logprobs; k++) {
            json_t *piece = probs_json_piece(v->engine, list[k].token, NULL);
            if (json_string_value(piece)) json_object_set_new(top, json_string_value(piece), probs_json_logprob(list[k].prob));
            json_decref(piece);
        }
        json_array_append_new(tops, top);
        json_array_append_new(offsets, json_integer(call->text_offset));
        call->text_offset += (json_int_t)json_array_size(bytes);
        json_decref(bytes);
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offsets);
}

static json_t *logprobs_json(openai_call *call, const serve_view *v) {
    if (!call->logprobs) return json_null();
    return call->kind == OPENAI_TEXT ? text_logprobs(call, v) : chat_logprobs(call, v);
}

/* ---- shared parts ---------------------------------------------------------------------------- */

static json_t *piece_text(const serve_view *v) {
    char *clean = specd_utf8_sanitize(v->text + v->from, v->to - v->from);
    json_t *s = json_string(clean ? clean : "");
    free(clean);
    return s;
}

static json_t *usage_json(const serve_view *v) {
    json_int_t prompt = v->request->n_tokens, completion = v->result->n_tokens;
    return json_pack("{s:I, s:I, s:I}", "prompt_tokens", prompt, "completion_tokens", completion, "total_tokens",
                     prompt + completion);
}

/* specd's figures beside OpenAI's fields: speculative and stop_type. */
static void add_specd_fields(json_t *to, const serve_view *v) {
    if (!to) return;
    json_object_set_new(to, "speculative", reply_json_speculative(v));
    json_object_set_new(to, "stop_type", json_string(serve_stop_name(v->stop)));
}

static json_t *model_of(const serve_view *v) {
    char *id = openai_model_id(v->model);
    json_t *s = json_string(id ? id : "");
    free(id);
    return s;
}

/* The text generated so far (whole, not this piece), valid UTF-8 (heap). */
char *openai_text_so_far(const serve_view *v) { return specd_utf8_sanitize(v->text, v->to); }

/* ---- the response ---------------------------------------------------------------------------- */

/* The assistant message of a chat through Jinja: the whole text parsed into content,
 * reasoning_content and tool_calls. Output that does not parse in the template's format (the
 * parser is lenient; this is rare) is given as plain content rather than lost. */
json_t *openai_chat_message(openai_call *call, const serve_view *v) {
    char *text = openai_text_so_far(v), *why = NULL;
    json_t *message = NULL;
    if (text && specd_chat_update(call->chat, text, true, NULL, &why) == SPECD_OK)
        message = json_loads(specd_chat_answer(call->chat), 0, NULL);
    specd_free(why);
    if (!message) message = json_pack("{s:s, s:s}", "role", "assistant", "content", text ? text : "");
    free(text);
    return message;
}

static json_t *response(openai_call *call, const serve_view *v) {
    json_t *text = piece_text(v), *logprobs = logprobs_json(call, v);
    const char *finish = openai_finish_reason(v->stop);
    json_t *message = NULL;
    if (call->kind == OPENAI_CHAT && call->chat) {
        message = openai_chat_message(call, v);
        json_decref(text);
        /* a completed answer that calls tools ends in them */
        if (json_array_size(json_object_get(message, "tool_calls")) > 0 && !strcmp(finish, "stop")) finish = "tool_calls";
    } else if (call->kind == OPENAI_CHAT) {
        message = json_pack("{s:s, s:o}", "role", "assistant", "content", text);
    }
    json_t *choice = call->kind == OPENAI_CHAT
        ? json_pack("{s:i, s:o, s:s, s:o}", "index", call->index, "message", message, "finish_reason", finish, "logprobs",
                    logprobs)
        : json_pack("{s:i, s:o, s:s, s:o}", "index", call->index, "text", text, "finish_reason", finish, "logprobs",
                    logprobs);
    json_t *r = json_pack("{s:s, s:s, s:I, s:o, s:[o], s:o}", "id", call->id, "object",
                          call->kind == OPENAI_CHAT ? "chat.completion" : "text_completion", "created", call->created,
                          "model", model_of(v), "choices", choice, "usage", usage_json(v));
    add_specd_fields(r, v);
    if (r && v->origins) json_object_set_new(r, "origins", reply_json_origins(v));
    return r;
}

/* ---- chunks ---------------------------------------------------------------------------------- */

static json_t *chunk(const openai_call *call, const serve_view *v, json_t *choices) {
    return json_pack("{s:s, s:s, s:I, s:o, s:o}", "id", call->id, "object",
                     call->kind == OPENAI_CHAT ? "chat.completion.chunk" : "text_completion", "created", call->created,
                     "model", model_of(v), "choices", choices);
}

/* One choice: chat's {index, delta, finish_reason, logprobs} or text's {index, text, ...}. */
static json_t *choice(const openai_call *call, json_t *delta_or_text, const char *finish, json_t *logprobs) {
    return json_pack("{s:i, s:o, s:o, s:o}", "index", call->index, call->kind == OPENAI_CHAT ? "delta" : "text",
                     delta_or_text,
                     "finish_reason", finish ? json_string(finish) : json_null(), "logprobs",
                     logprobs ? logprobs : json_null());
}

static void add(json_t *events, json_t *event) {
    if (event) json_array_append_new(events, event);
}

/* The piece's text as a chunk (with its logprobs and origins). */
static void add_text(openai_call *call, const serve_view *v, json_t *events) {
    if (v->to == v->from && v->probs_to == v->probs_from) return;
    json_t *logprobs = call->logprobs ? logprobs_json(call, v) : NULL;
    json_t *text = piece_text(v);
    json_t *piece = call->kind == OPENAI_CHAT ? json_pack("{s:o}", "content", text) : text;
    json_t *event = chunk(call, v, json_pack("[o]", choice(call, piece, NULL, logprobs)));
    if (event && v->origins) json_object_set_new(event, "origins", reply_json_origins(v));
    add(events, event);
}

/* The final text did not parse in the template's format: the answer is the raw text, as
 * openai_chat_message gives it, so the stream adds what its content deltas have not sent yet (all
 * of it where the parsed content so far is not where the text starts). */
static json_t *raw_text_deltas(openai_call *call, const char *text) {
    json_t *parsed = json_loads(specd_chat_answer(call->chat), 0, NULL);
    const char *sent = json_string_value(json_object_get(parsed, "content"));
    size_t n = sent ? strlen(sent) : 0;
    const char *rest = n > 0 && strncmp(text, sent, n) == 0 ? text + n : text;
    json_t *deltas = *rest ? json_pack("[{s:s}]", "content", rest) : json_array();
    json_decref(parsed);
    return deltas;
}

/* A chat through Jinja: the text so far parsed again; what changed (content, reasoning_content,
 * tool-call names and arguments) as one chunk each, in OpenAI's delta shape, the piece's logprobs
 * and origins on the first. A final text that does not parse comes out raw (raw_text_deltas). */
json_t *openai_chat_deltas(openai_call *call, const serve_view *v) {
    char *text = openai_text_so_far(v), *deltas_text = NULL, *why = NULL;
    json_t *deltas = NULL;
    if (text && specd_chat_update(call->chat, text, v->final, &deltas_text, &why) == SPECD_OK)
        deltas = json_loads(deltas_text, 0, NULL);
    else if (text && v->final)
        deltas = raw_text_deltas(call, text);
    free(text);
    specd_free(deltas_text);
    specd_free(why);
    return deltas;
}

static void add_parsed(openai_call *call, const serve_view *v, json_t *events) {
    json_t *deltas = openai_chat_deltas(call, v);
    json_t *logprobs = call->logprobs && v->probs_to > v->probs_from ? logprobs_json(call, v) : NULL;
    if (json_array_size(deltas) == 0 && logprobs) {
        json_decref(deltas);
        deltas = json_pack("[{s:s}]", "content", ""); /* the tokens' logprobs still go out */
    }
    size_t i;
    json_t *delta;
    json_array_foreach(deltas, i, delta) {
        if (json_object_get(delta, "tool_calls")) call->tool_calls_seen = true;
        json_t *event = chunk(call, v, json_pack("[o]", choice(call, json_incref(delta), NULL, i == 0 ? logprobs : NULL)));
        if (event && i == 0 && v->origins) json_object_set_new(event, "origins", reply_json_origins(v));
        add(events, event);
    }
    if (json_array_size(deltas) == 0) json_decref(logprobs);
    json_decref(deltas);
}

/* The usage chunk: with n > 1 (or several prompts) one for the request, after its last output,
 * the tokens summed (each prompt's once); NULL before that. */
static json_t *usage_chunk(openai_call *call, const serve_view *v) {
    json_t *usage = usage_json(v);
    json_int_t prompt = 0, completion = 0;
    if (call->choices && !openai_choices_final(call->choices, call->counts_prompt ? v->request->n_tokens : 0,
                                               v->result->n_tokens, &prompt, &completion)) {
        json_decref(usage);
        return NULL;
    }
    if (call->choices && usage) {
        json_object_set_new(usage, "prompt_tokens", json_integer(prompt));
        json_object_set_new(usage, "completion_tokens", json_integer(completion));
        json_object_set_new(usage, "total_tokens", json_integer(prompt + completion));
    }
    json_t *event = chunk(call, v, json_array());
    if (event) json_object_set_new(event, "usage", usage);
    else json_decref(usage);
    return event;
}

/* The end: finish_reason and speculative; then usage when asked. */
static void add_finish(openai_call *call, const serve_view *v, json_t *events) {
    json_t *empty = call->kind == OPENAI_CHAT ? json_object() : json_string("");
    const char *finish = openai_finish_reason(v->stop);
    if (call->tool_calls_seen && !strcmp(finish, "stop")) finish = "tool_calls";
    json_t *event = chunk(call, v, json_pack("[o]", choice(call, empty, finish, NULL)));
    add_specd_fields(event, v);
    add(events, event);
    if (!call->include_usage) return;
    event = usage_chunk(call, v);
    if (!call->choices) add_specd_fields(event, v); /* n > 1: each choice's are in its finish chunk */
    add(events, event);
}

/* The events of one piece (the final one ends the stream). */
static json_t *stream_events(openai_call *call, const serve_view *v) {
    json_t *events = json_array();
    if (!events) return NULL;
    if (call->kind == OPENAI_CHAT && !call->role_sent) {
        call->role_sent = true;
        json_t *delta = json_pack("{s:s, s:s}", "role", "assistant", "content", "");
        add(events, chunk(call, v, json_pack("[o]", choice(call, delta, NULL, NULL))));
    }
    if (call->chat) add_parsed(call, v, events);
    else add_text(call, v, events);
    if (v->final) add_finish(call, v, events);
    return events;
}

/* ---- n > 1: the choices' shared count ---------------------------------------------------------- */

struct openai_choices {
    atomic_int refs;
    pthread_mutex_t lock;
    int n, n_final;
    json_int_t prompt_tokens, completion_tokens;
};

openai_choices *openai_choices_new(int n) {
    openai_choices *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    atomic_init(&g->refs, 1);
    pthread_mutex_init(&g->lock, NULL);
    g->n = n;
    return g;
}

openai_choices *openai_choices_ref(openai_choices *g) {
    atomic_fetch_add(&g->refs, 1);
    return g;
}

void openai_choices_unref(openai_choices *g) {
    if (!g || atomic_fetch_sub(&g->refs, 1) != 1) return;
    pthread_mutex_destroy(&g->lock);
    free(g);
}

bool openai_choices_final(openai_choices *g, json_int_t prompt_tokens, json_int_t completion_tokens,
                          json_int_t *prompt_sum, json_int_t *completion_sum) {
    pthread_mutex_lock(&g->lock);
    g->prompt_tokens += prompt_tokens;
    g->completion_tokens += completion_tokens;
    bool last = ++g->n_final == g->n;
    *prompt_sum = g->prompt_tokens;
    *completion_sum = g->completion_tokens;
    pthread_mutex_unlock(&g->lock);
    return last;
}

/* ---- the formatter --------------------------------------------------------------------------- */

/* The three /v1 dialects differ only in their shape's two builders; the job's callbacks are these. */
static void *update_cb(void *ctx, const serve_view *v) {
    openai_call *call = ctx;
    return call->shape->events(call, v);
}

static void *final_cb(void *ctx, const serve_view *v) {
    openai_call *call = ctx;
    return call->stream ? call->shape->events(call, v) : call->shape->whole(call, v);
}

static void free_item(void *item) { json_decref(item); }

void openai_call_free(void *ctx) {
    openai_call *call = ctx;
    if (call) {
        specd_chat_free(call->chat);
        openai_choices_unref(call->choices);
        json_decref(call->item); /* the Responses API's open item; NULL for the others */
    }
    free(call);
}

serve_reply openai_shape_reply(openai_call *call, const openai_shape *shape) {
    call->shape = shape;
    return (serve_reply){.update = update_cb, .final = final_cb, .free_item = free_item, .free_ctx = openai_call_free,
                         .ctx = call};
}

serve_reply openai_reply_formatter(openai_call *call) {
    static const openai_shape shape = {.events = stream_events, .whole = response};
    return openai_shape_reply(call, &shape);
}

/* A failure in the middle of a stream, in OpenAI's shape. */
static json_t *stream_error(const serve_fault *fault) {
    openai_error err;
    openai_error_from_fault(fault, &err);
    return openai_error_body(&err);
}

enum MHD_Result openai_stream_respond(struct MHD_Connection *c, const completion_call *call) {
    static const sse_format format = {.error = stream_error, .done = "[DONE]"};
    int n = 1 + call->n_more;
    serve_job **jobs = malloc((size_t)n * sizeof *jobs);
    if (!jobs) { /* nothing will read the jobs: they end */
        serve_job_end(call->job, SERVE_END_CANCELLED);
        for (int i = 0; i < call->n_more; i++) serve_job_end(call->more[i]->job, SERVE_END_CANCELLED);
        return openai_fail(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
    }
    enum MHD_Result ok = sse_respond_jobs(c, jobs, completion_call_jobs(call, jobs, n), &format);
    free(jobs);
    return ok;
}
