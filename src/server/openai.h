/* openai.h - the OpenAI-compatible routes (openai.c: requests and answers, openai_stream.c: the
 * chunks of a streamed answer). What routes.c and sse.c need of them. */
#ifndef SPECD_SERVER_OPENAI_H
#define SPECD_SERVER_OPENAI_H

#include "server.h"

typedef enum openai_kind { OPENAI_CHAT, OPENAI_TEXT } openai_kind;

/* One OpenAI request's choices that shape its answer (owned by the request, then by its stream). */
typedef struct openai_call {
    openai_kind kind;
    char id[64];          /* chatcmpl-... / cmpl-... */
    json_int_t created;   /* Unix seconds */
    char *model;          /* the model's id as /v1/models gives it (owned) */
    bool stream, include_usage, return_origins, logprobs;
    int top_logprobs;     /* alternatives per token asked for */
    /* streaming state */
    bool role_sent;       /* chat: the first chunk (role) is out */
    json_int_t text_offset; /* /v1/completions logprobs: bytes of text so far */
} openai_call;

/* An error on a /v1 route, in OpenAI's shape. */
typedef struct openai_error {
    unsigned status;
    const char *type;    /* "invalid_request_error", "server_error", ... */
    char param[160];     /* "" = null */
    char message[900];
} openai_error;

/* Whether `url` (any method) is one of the /v1 routes; POST routes with a body / GET routes. */
bool openai_route_post(const char *url);
bool openai_route_get(const char *url);
/* GET /v1/models. */
enum MHD_Result openai_answer_get(struct MHD_Connection *c, const char *url);

/* The body of POST `url` -> the completion method's params (new), with *call (new, free with
 * openai_call_free) describing the answer; NULL with *err set. `chat_template`: --chat-template
 * (NULL: the model's own). */
json_t *openai_completion_params(const char *url, const char *body, size_t len, const char *chat_template,
                                 openai_call **call, openai_error *err);
void openai_call_free(openai_call *call);

/* The completion method's result (borrowed) -> the OpenAI response (new). */
json_t *openai_response(const openai_call *call, json_t *result);
/* OpenAI's finish_reason for a completion's stop_type: "length" for every cut (a limit, the
 * context, a time limit, a shutdown: the text is unfinished), "stop" for the rest. */
const char *openai_finish_reason(const char *stop_type);
/* specd's figures beside OpenAI's fields: speculative and stop_type of a final result (borrowed)
 * into `to`. */
void openai_add_specd_fields(json_t *to, json_t *result);
/* usage {prompt_tokens, completion_tokens, total_tokens} of a final result (borrowed); new. */
json_t *openai_usage(json_t *result);
/* A dispatcher error object (borrowed) -> an openai_error. */
void openai_error_from_rpc(json_t *error, openai_error *err);
enum MHD_Result openai_send_error(struct MHD_Connection *c, const openai_error *err);
enum MHD_Result openai_fail(struct MHD_Connection *c, unsigned status, const char *type, const char *param,
                            const char *message);

/* ---- openai_stream.c -------------------------------------------------------------------------- */
/* The SSE events (new array of objects) for one completion update (borrowed) of a streamed call. */
json_t *openai_stream_events(openai_call *call, json_t *update);
/* The event for a failure in the middle of a stream (the dispatcher's error object, borrowed). */
json_t *openai_stream_error(openai_call *call, json_t *error);
/* Logprobs of one chunk: completion_probabilities (llama shape, borrowed) -> OpenAI's (new). */
json_t *openai_logprobs(const openai_call *call, json_t *probs, json_int_t *text_offset);
/* Answers `c` with the stream of completion `id` as OpenAI chunks; `call` is taken. */
enum MHD_Result openai_stream_respond(struct MHD_Connection *c, json_int_t id, openai_call *call);

#endif
