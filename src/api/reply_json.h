/* reply_json.h - the completion's answer in the JSON API's shape (JSON-RPC's completion methods,
 * the old C ABI, llama-server's POST /completion): the formatter a job runs with (serve/reply.h).
 * Pieces of a streamed answer are {content, stop: false, completion_probabilities?, tokens?,
 * timings?, origins?}; the final answer is the old API's response (content, stop flags, timings,
 * prompt_stats, generation_settings) plus specd's `speculative`, stop_type and stopping_limit. */
#ifndef SPECD_API_REPLY_JSON_H
#define SPECD_API_REPLY_JSON_H

#include "api.h"

#include "../serve/reply.h"

/* What shapes one request's answer, beyond the request itself (request_json.c fills it). */
typedef struct json_reply {
    json_t *prompt;           /* the request's prompt, echoed in the final answer (owned ref) */
    json_t *response_fields;  /* the final answer keeps only these paths ("a/b": b inside a), or NULL */
    bool probs_server_shape;         /* completion_probabilities in llama-server's shape, else the old API's */
    bool return_tokens;       /* `tokens` (ids) in the answer and in streamed pieces */
    bool timings_per_token;   /* `timings` in every streamed piece */
    bool debug;               /* the final answer on stderr (__debug) */
} json_reply;

/* A json_reply (zeroed, owned by the result) to fill; NULL when out of memory. */
json_reply *json_reply_new(void);
/* The job's formatter over `reply` (taken: the job frees it). Items are json_t objects. */
serve_reply json_reply_formatter(json_reply *reply);

/* generation_settings: the request's settings as the answer echoes them, /props's defaults and
 * /slots's params (new reference). `model`: the server's name for its model. */
json_t *reply_json_settings(const serve_request *req, specd_engine *engine, const char *model);
/* prompt_stats {n_ctx, total_prompt_tokens, truncated, n_past, cached, to_eval} (new reference). */
json_t *reply_json_prompt_stats(const serve_request *req);
/* specd's `speculative` figures of a finished completion (new reference), also in OpenAI's answers. */
json_t *reply_json_speculative(const serve_view *view);
/* specd's `origins` [{"text", "draft"}] of the view's piece of text (new reference). */
json_t *reply_json_origins(const serve_view *view);

#endif
