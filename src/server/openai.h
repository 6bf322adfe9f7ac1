/* openai.h - the OpenAI-compatible routes: openai.c (the routes, GET /v1/models, errors),
 * openai_request.c (a request's body into the server's typed request), openai_reply.c (the
 * answer built from the result in OpenAI's shape: a response, or chunks of a stream). What
 * routes.c needs of them. */
#ifndef SPECD_SERVER_OPENAI_H
#define SPECD_SERVER_OPENAI_H

#include "server.h"

typedef enum openai_kind { OPENAI_CHAT, OPENAI_TEXT } openai_kind;

/* One OpenAI request's choices that shape its answer: its reply's context (owned by the job). */
typedef struct openai_call {
    openai_kind kind;
    char id[64];          /* chatcmpl-... / cmpl-... */
    json_int_t created;   /* Unix seconds */
    bool stream, include_usage, return_origins, logprobs;
    int top_logprobs;     /* alternatives per token asked for */
    /* streaming state (the server's thread only) */
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

/* ---- openai.c -------------------------------------------------------------------------------- */
/* Whether `url` (any method) is one of the /v1 routes; POST routes with a body / GET routes. */
bool openai_route_post(const char *url);
bool openai_route_get(const char *url);
/* GET /v1/models. */
enum MHD_Result openai_answer_get(struct MHD_Connection *c, rpc_host *host, const char *url);
/* A model's id as /v1/models lists it: the name's file name (heap). */
char *openai_model_id(const char *name);
/* OpenAI's finish_reason for a completion's stop: "length" for every cut (a limit, the context, a
 * time limit, a shutdown: the text is unfinished), "stop" for the rest. */
const char *openai_finish_reason(serve_stop stop);
/* A dispatcher error object (borrowed) -> an openai_error. */
void openai_error_from_rpc(json_t *error, openai_error *err);
/* A JSON API error -> an openai_error (a 400 for the client's mistakes). */
void openai_error_from(const rpc_error *rerr, openai_error *err);
/* The error body {"error": {message, type, param, code}} (new). */
json_t *openai_error_body(const openai_error *err);
bool openai_fail_with(openai_error *err, unsigned status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
enum MHD_Result openai_send_error(struct MHD_Connection *c, const openai_error *err);
enum MHD_Result openai_fail(struct MHD_Connection *c, unsigned status, const char *type, const char *param,
                            const char *message);

/* ---- openai_request.c ------------------------------------------------------------------------ */
/* The body of POST `url` -> a completion for a call worker (server.h), its request read and its
 * reply OpenAI's; NULL with *err set. `chat_template`: --chat-template (NULL: the model's own). */
completion_call *openai_completion_call(rpc_host *host, const char *url, const char *body, size_t len,
                                        const char *chat_template, openai_error *err);

/* ---- openai_reply.c -------------------------------------------------------------------------- */
/* The job's formatter over `call` (taken): the final answer is OpenAI's response object; with
 * stream, every piece is an array of chunk events (the final one ends with finish_reason and,
 * with include_usage, usage). */
serve_reply openai_reply_formatter(openai_call *call);
/* Answers `c` with the stream of `job`'s chunks, ending with data: [DONE]. */
enum MHD_Result openai_stream_respond(struct MHD_Connection *c, serve_job *job);

#endif
