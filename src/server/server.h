/* server.h - what the files of `specd serve` share:
 *   serve.c   the command: options, start-up, signals, the graceful stop and its watchdog
 *   routes.c  the request handler: keys, body limits, routes (/rpc, /completion, /health)
 *   llama_routes.c  llama-server's other routes (/tokenize, /detokenize, /props, /slots, /metrics)
 *   calls.c   dispatcher calls, and slow ones run on worker threads while the connection waits
 *             suspended (no libmicrohttpd pool thread ever blocks on a completion or a load)
 *   sse.c     Server-Sent Events streams, fed by a pump thread per stream
 *   conn.c    per-connection request deadlines that a byte trickle cannot extend
 *   query_args.c  a bound on the query arguments, checked before libmicrohttpd parses them
 *   memory.c  memory that large requests took goes back to the system
 *   openai.c  the OpenAI-compatible routes (/v1/chat/completions, /v1/completions, /v1/models):
 *             requests -> completion params, results -> OpenAI's responses and errors (openai.h)
 *   openai_stream.c  a streamed OpenAI answer: completion updates -> chat.completion.chunk /
 *             text_completion events, ending with data: [DONE]
 * Threads: libmicrohttpd's epoll pool (the handler, readers, notifications), the call workers, the
 * stream pumps, the deadline sweeper, the signal thread. */
#ifndef SPECD_SERVER_H
#define SPECD_SERVER_H

#include "../rpc/rpc_internal.h"

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct serve_options {
    const char *host;
    int64_t port;
    const char *api_key;   /* NULL: every client may use the API (not the admin methods) */
    const char *admin_key; /* NULL: no client may call init or shutdown over HTTP */
    const char *models_dir_arg;
    char *models_dir;      /* real path of --models-dir (owned), NULL when not given */
    int64_t max_body;
    int64_t max_conns, max_conns_per_ip; /* per IP: 0 = no limit */
    int64_t request_timeout_s;
    int64_t n_predict;     /* -n / --n-predict: -1 none (rpc_limits) */
    int64_t time_limit_s;  /* --time-limit: 0 none */
    int64_t step_limit_ms; /* --step-limit: 0 none */
    int64_t http_threads;
    json_t *init_args;     /* the model options, for init (owned) */
    bool web_page;         /* GET / serves the page (page.c); --no-webui: readiness as /health */
    const char *chat_template; /* --chat-template: a llama.cpp built-in for /v1/chat/completions */
    bool list_devices;     /* --list-devices: print them and exit */
} serve_options;

/* ---- serve.c ---------------------------------------------------------------------------------- */
/* True once a stop was asked for (SIGINT/SIGTERM): new requests are refused with 503. */
bool serve_stopping(void);

/* ---- calls.c ---------------------------------------------------------------------------------- */
/* Calls `method` with `params` (borrowed, may be NULL) as `caller`; returns the whole JSON-RPC
 * response object (new reference; NULL only when out of memory). */
json_t *serve_rpc(const char *method, json_t *params, const rpc_caller *caller);
/* Full rights: for the server's own calls (start-up load, health, stop). */
extern const rpc_caller serve_self;

/* A dispatcher call that runs on a worker while its connection waits suspended. */
typedef struct deferred_call deferred_call;

bool calls_start(int n_workers);
/* Runs `request` (taken) as `caller` on a worker; connection `c` is suspended until the answer is
 * there, then resumed, and the handler collects it with call_result. NULL when it cannot be
 * queued (queue full, or stopping): *why says so and `c` is not suspended. Must be called from
 * the handler of `c`. */
deferred_call *call_defer(struct MHD_Connection *c, json_t *request, const rpc_caller *caller, const char **why);
/* The same with `run` in place of the dispatcher: the worker answers `request` (taken, given back
 * borrowed to `run`) with run(request, caller), a response as the dispatcher's ({result} or
 * {error}). For routes of their own whose work can take long (a 1 MiB /tokenize). */
typedef json_t *(*call_fn)(json_t *request, const rpc_caller *caller);
deferred_call *call_defer_run(struct MHD_Connection *c, call_fn run, json_t *request, const rpc_caller *caller,
                              const char **why);
/* False until answered. Then *response (taken) is the dispatcher's answer (NULL: notifications
 * only) with *http_status 0, or the server's own refusal (a JSON body) with that HTTP status. */
bool call_result(deferred_call *call, json_t **response, unsigned *http_status);
void call_release(deferred_call *call);
/* The stop: refuse new calls; calls still queued are answered with 503 at once instead of run. */
void calls_close_intake(void);
/* Calls not answered yet (queued or running). */
int calls_pending(void);
/* The stop, last step before MHD_stop_daemon: every call not answered yet is answered with 503
 * and its connection resumed (a worker still running it drops its answer). */
void calls_abandon(void);
/* Joins the workers; blocks while one is stuck in a call (the watchdog's case). */
void calls_join(void);

/* ---- sse.c ------------------------------------------------------------------------------------ */
/* Answers `c` with a stream of completion `id`'s updates; on failure the completion is cancelled
 * and an error is sent instead. */
enum MHD_Result sse_respond(struct MHD_Connection *c, json_int_t id);
/* What a stream makes of the updates (openai_stream.c): each update becomes the events `events`
 * returns (a new array), an error the event `error` returns, and after the last one a `done` data
 * line ("[DONE]") follows. `ctx` is taken: `free` frees it, also when the stream cannot start. */
typedef struct sse_format {
    json_t *(*events)(void *ctx, json_t *update);
    json_t *(*error)(void *ctx, json_t *error);
    const char *done;
    void (*free)(void *ctx);
    void *ctx;
} sse_format;
/* As sse_respond, with the updates formatted (NULL: as they are). */
enum MHD_Result sse_respond_as(struct MHD_Connection *c, json_int_t id, const sse_format *format);
/* Streams whose client has not let go yet (or whose pump still runs). */
int sse_live(void);
/* The stop: every stream ends after what it holds; no connection stays suspended. */
void sse_end_all(void);

/* ---- conn.c ----------------------------------------------------------------------------------- */
/* Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force. */
int64_t conn_raise_fd_limit(void);
bool conn_deadlines_start(int64_t request_timeout_s);
void conn_deadlines_stop(void);
/* MHD_OPTION_NOTIFY_CONNECTION: tracks each connection's socket and deadline. */
void conn_notify(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code);
/* The request on `c` is in (headers and body): its deadline no longer applies. */
void conn_request_arrived(struct MHD_Connection *c);
/* The answer on `c` is done: the next request on this connection gets a fresh deadline. */
void conn_request_finished(struct MHD_Connection *c);
/* How many connections the deadline closed so far. */
int64_t conn_closed_by_deadline(void);

/* ---- query_args.c ----------------------------------------------------------------------------- */
#define QUERY_ARGS_MAX 64
/* MHD_OPTION_URI_LOG_CALLBACK: NULL, or QUERY_ARGS_TOO_MANY for a request with more than
 * QUERY_ARGS_MAX query arguments (then cut off); it is the request's first state (routes.c). */
void *query_args_check(void *cls, const char *uri, struct MHD_Connection *c);
extern void *const QUERY_ARGS_TOO_MANY;

/* ---- memory.c --------------------------------------------------------------------------------- */
#define MEMORY_LARGE_BODY (64 * 1024)
/* At start, before any thread: glibc's thresholds fixed (memory.c says why). */
void memory_settle_start(void);
/* A request whose body reached MEMORY_LARGE_BODY, and its end: when the last such request in
 * flight is done, free memory goes back to the system. */
void memory_large_request_begins(void);
void memory_large_request_done(void);

/* ---- page.c ----------------------------------------------------------------------------------- */
/* GET /: the embedded page (a chat that shows speculation at work). */
enum MHD_Result page_respond(struct MHD_Connection *c);

/* ---- routes.c --------------------------------------------------------------------------------- */
/* MHD_AccessHandlerCallback (cls: the serve_options) and MHD_OPTION_NOTIFY_COMPLETED. */
enum MHD_Result routes_handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state);
void routes_request_done(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode why);
/* Response helpers (value taken). */
enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *value);
enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, int code, const char *message);
/* A plain route's answer from a dispatcher response (taken): the result with 200, or the error
 * object with the HTTP status its code maps to. */
enum MHD_Result send_rpc_outcome(struct MHD_Connection *c, json_t *response);

/* ---- llama_routes.c --------------------------------------------------------------------------- */
/* Whether `url` is one of llama-server's GET routes (/props, /slots, /metrics) / POST routes with
 * a body (/tokenize, /detokenize). */
bool llama_route_get(const char *url);
bool llama_route_post(const char *url);
/* Whether the request is one of llama-server's slot actions (/slots/ID, /slots?action=...), and
 * their answer: 501 naming the action, which specd does not implement. */
bool llama_route_slot_action(struct MHD_Connection *c, const char *url);
enum MHD_Result llama_route_slot_action_refuse(struct MHD_Connection *c);
/* Answers a GET route (the caller checked the key). */
enum MHD_Result llama_route_answer_get(struct MHD_Connection *c, const char *url);
/* A POST route's body (the JSON text): its parsed object (new), or NULL with why in `message`. */
json_t *llama_route_parse_body(const char *body, size_t len, char *message, size_t size);
/* The work of a POST route on its parsed body (borrowed): a response as the dispatcher's. Runs on
 * a call worker (call_fn): tokenizing a large body takes long. */
json_t *llama_route_tokenize(json_t *body, const rpc_caller *caller);
json_t *llama_route_detokenize(json_t *body, const rpc_caller *caller);
/* /completion's body (taken, returned) read as llama-server reads it: null fields are absent, `stop`
 * may be one string, `logit_bias` an object, and completion_probabilities come in llama-server's
 * shape unless probs_format says otherwise. NULL with *err set for what llama-server would read
 * differently from the JSON API (several prompts in one request). */
json_t *llama_completion_params(json_t *params, rpc_error *err);

#endif
