/* server.h - what the files of `specd serve` share:
 *   http.c    the daemon, run until a stop is asked for, and the graceful stop (http.h: what
 *             `specd serve`, src/cli/serve.c, starts it with)
 *   stop.c    the stop signals and the watchdog
 *   respond.c answers: JSON bodies, errors, a JSON-RPC outcome on a plain route
 *   routes.c  the request handler: keys, body limits, routes (/rpc, /completion, /health)
 *   completion_call.c  a completion's call: what a reader fills (the request and its reply, or
 *             /completion's body; the shared fields; other choices) for setup_call.c to submit
 *   setup_call.c  a completion request on a call worker: its body read by its API's reader, its
 *             chat template rendered, submitted to the host's server through the API layer, its
 *             answer waited for or streamed (openai.h)
 *   completion_outputs.c  /completion's n_cmpl > 1 and several prompts: one completion each
 *   llama_routes.c  llama-server's other routes (/tokenize, /detokenize, /props, /slots, /metrics)
 *   calls.c   work that can take long (a completion, a load, a waiting poll) on worker threads
 *             while the connection waits suspended (no libmicrohttpd pool thread ever blocks), in
 *             lanes so that no kind of call waits behind another
 *   sse.c     Server-Sent Events streams of a job's pieces, fed by a pump thread per stream
 *   conn.c    per-connection request deadlines that a byte trickle cannot extend
 *   query_args.c  a bound on the query arguments, checked before libmicrohttpd parses them
 *   memory.c  memory that large requests took goes back to the system
 *   embeddings.c  llama-server's /embedding(s), /v1/embeddings and /rerank routes
 *   openai*.c, anthropic*.c, responses*.c  the OpenAI-compatible routes and the other APIs (openai.h)
 * Threads: libmicrohttpd's epoll pool (the handler, readers, notifications), the call workers, the
 * stream pumps, the deadline sweeper, the signal thread. */
#ifndef SPECD_SERVER_H
#define SPECD_SERVER_H

#include "http.h"

#include "../rpc/rpc.h"

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>


/* ---- calls.c ---------------------------------------------------------------------------------- */
/* Full rights: for the server's own calls (start-up load, health, stop). */
extern const rpc_caller serve_self;

/* Work that runs on a call worker while its connection waits suspended. */
typedef struct deferred_call deferred_call;
/* The work: an answer for the handler (a JSON body as the dispatcher answers: {result} or {error};
 * NULL: nothing to answer), from `ctx`. While it runs, api_thread_still_wanted says whether the
 * client is still there. */
typedef json_t *(*call_fn)(void *ctx);

/* Which workers run a call, so that no kind of call waits behind another (calls.c):
 *   SHORT    work the server bounds: /tokenize, /detokenize, /lora-adapters, a large /rpc body
 *   REQUEST  what a client decides the length of: completions (their setup, their wait), waiting
 *            polls, chat templates rendered (/apply-template, count_tokens)
 *   ADMIN    the admin key's init and shutdown (a load, a drain) */
typedef enum call_lane { CALL_LANE_SHORT, CALL_LANE_REQUEST, CALL_LANE_ADMIN, CALL_LANES } call_lane;

bool calls_start(void);
/* Runs run(ctx) on a worker of lane `l`; connection `c` is suspended until the answer is there,
 * then resumed, and the handler collects it with call_result. `ctx` is taken (free_ctx frees it
 * with the call). NULL when it cannot be queued (the lane's queue full, or stopping): *why says
 * so, `c` is not suspended and ctx is freed. Must be called from the handler of `c`. */
deferred_call *call_defer(struct MHD_Connection *c, call_lane l, call_fn run, void *ctx, void (*free_ctx)(void *),
                          const char **why);
/* False until answered. Then *response (taken) is the work's answer with *http_status 0, or the
 * server's own refusal (a JSON body) with that HTTP status. */
bool call_result(deferred_call *call, json_t **response, unsigned *http_status);
/* The call's ctx (for the handler, once answered). */
void *call_context(deferred_call *call);
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

/* ---- completion_call.c ------------------------------------------------------------------------ */
/* A completion for a call worker: either a request already read (OpenAI's: `request` and `reply`
 * taken), or /completion's body (`body`, taken) read in llama-server's dialect. `stream`: answer
 * piece by piece. After the work, `job` is the submitted job (referenced) or NULL.
 * OpenAI's n > 1 (or several prompts): `more` holds the other outputs' calls (each its own
 * request, seed and reply),
 * submitted beside this one as jobs of their own (the slots run them side by side); a blocking
 * answer is this call's with `merge` folding each other output's final answer into it. */
typedef struct completion_call {
    api_host *host;
    json_t *body;                   /* /completion's: read whole by the API layer (api_completion_begin) */
    serve_request *request;         /* OpenAI's: its own fields read (openai_build_call) */
    /* the fields this front end shares with the JSON API (OpenAI's temperature, top_p, stop, ...),
     * read over the host's defaults by the API layer as it submits (api_completion_submit) */
    json_t *shared_fields;
    const char *const *shared_names;
    serve_reply reply;
    bool stream;
    serve_job *job;
    struct completion_call **more;  /* owned; n_more of them */
    int n_more;
    bool new_prompt;                /* in `more`: the first choice of another prompt (its tokens count) */
    /* folds other (borrowed) into answer (taken): the answer now (answer itself, or a new value) */
    json_t *(*merge)(json_t *answer, json_t *other, bool new_prompt);
} completion_call;

completion_call *completion_call_new(api_host *host, bool stream);
void completion_call_free(void *call);
/* Adds `other` (taken) as the next choice of `call`; false (other freed) when out of memory. */
bool completion_call_add_choice(completion_call *call, completion_call *other);
/* The body (`fields`, taken) whose fields (`names`) this front end shares with the JSON API, read
 * by the API layer over the host's defaults as it submits. `call` NULL: fields is freed. */
static inline void completion_call_share(completion_call *call, json_t *fields, const char *const *names) {
    if (!call) {
        json_decref(fields);
        return;
    }
    json_decref(call->shared_fields);
    call->shared_fields = fields;
    call->shared_names = names;
}
/* The submitted jobs of every choice in order (borrowed), at most `max`; how many. */
int completion_call_jobs(const completion_call *call, serve_job **jobs, int max);

/* ---- completion_outputs.c --------------------------------------------------------------------- */
/* /completion's (or /infill's) body (taken) -> its call: one completion, or with n_cmpl (n) > 1 or
 * several prompts one per output (in `more`), answered as llama-server's array of results; NULL
 * with *err (a 400 for the client's mistakes). */
completion_call *completion_outputs_call(api_host *host, json_t *body, bool stream, api_error *err);
/* The most outputs (prompts x choices) of one request: each is a job, and their prompts are
 * rendered and tokenized before any runs (here and in openai_choices.c). */
#define COMPLETION_OUTPUTS_MAX 64
/* A request's outputs per prompt (n_cmpl here, OpenAI's n in openai_choices.c): `v` NULL or null is
 * 1; else an integer from 1 to the serving server's slots (1 while none serves: its 503 comes
 * later), each output in a slot of its own. False when it is not (*slots: that bound, for the
 * caller's message in its API's shape). */
bool completion_read_n(api_host *host, json_t *v, int *n, int32_t *slots);
/* Output (prompt p, choice c)'s body, as llama-server's child tasks get theirs: a copy of `body`
 * with prompts[p] as its prompt (prompts NULL: the body's own), seed + c where a seed is given
 * (a random seed stays random for each), and id_slot only for the first output (the others take
 * any other slot). NULL: out of memory. */
json_t *completion_output_body(json_t *body, json_t *prompts, size_t p, int c);
/* Answers `c` with the stream of `call`'s jobs; with several outputs each event has its "index". */
enum MHD_Result completion_stream_respond(struct MHD_Connection *c, const completion_call *call);

/* ---- sse.c ------------------------------------------------------------------------------------ */
/* How a stream ends: the event for a failure (the job's fault; new object), and the data line that
 * follows the last event (NULL: none; OpenAI's "[DONE]"). */
typedef struct sse_format {
    json_t *(*error)(const serve_fault *fault);
    const char *done;
    bool named;   /* each event's "type" also as its SSE "event:" line (Anthropic's streams) */
    bool indexed; /* each event gets "index": its job's position (/completion's several outputs) */
} sse_format;
/* Answers `c` with a stream of `job`'s pieces (referenced by the stream), as its reply made them: a
 * JSON object is one event, an array one event per element. A client that goes away ends the job;
 * when the stream cannot start the job is ended and an error sent instead. */
enum MHD_Result sse_respond(struct MHD_Connection *c, serve_job *job, const sse_format *format);
/* The same for the n jobs of one request's choices (each referenced by the stream): their events
 * as they come, interleaved; it ends when all have finished, or at the first failure (the others
 * are then ended). */
enum MHD_Result sse_respond_jobs(struct MHD_Connection *c, serve_job *const *jobs, int n, const sse_format *format);
/* Streams whose client has not let go yet (or whose pump still runs). */
int sse_live(void);
/* The stop: every stream ends after what it holds; no connection stays suspended. */
void sse_end_all(void);

/* ---- infill.c --------------------------------------------------------------------------------- */
/* POST /infill's body (taken) -> /completion's body (new): input_prefix, input_suffix, input_extra
 * and prompt become the fill-in-the-middle token prompt, laid out with the serving model's FIM
 * tokens; a body that names no drafters gets "speculative": {"type": [what a request drafts with
 * by default, "suffix"]} (model-free drafting of what the file repeats). NULL with *err
 * (API_NO_MODEL when none serves); *not_supported (may be NULL) says the model has no FIM tokens. */
json_t *infill_completion_params(api_host *host, json_t *body, api_error *err, bool *not_supported);

/* ---- embeddings.c ----------------------------------------------------------------------------- */
/* `url` as one of llama-server's embedding and rerank routes (/embedding, /embeddings,
 * /v1/embeddings, /rerank, /reranking, /v1/rerank, /v1/reranking; a static string), or NULL. */
const char *embeddings_route(const char *url);
/* The work of one such request on a call worker: its context (`body`, len bytes, taken; NULL when
 * out of memory), the call_fn (its outcome stays in the context) and the context's free. */
typedef struct embeddings_call embeddings_call;
embeddings_call *embeddings_call_new(api_host *host, const char *url, char *body, size_t len);
json_t *embeddings_call_run(void *call);
void embeddings_call_free(void *call);
/* Answers `c` once the call ran (response and http_status from call_result, response taken): the
 * answer, or the refusal in llama-server's error shape ({"error": {code, message, type}}). */
enum MHD_Result embeddings_respond(struct MHD_Connection *c, embeddings_call *call, json_t *response,
                                   unsigned http_status);

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
/* Which connection `c` is (1, 2, ..., never reused; 0: untracked): the client its calls'
 * completions count against (api_client_thread). */
uint64_t conn_serial(struct MHD_Connection *c);
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
/* A request whose body reached MEMORY_LARGE_BODY, and its end: when the last such request in
 * flight is done, free memory goes back to the system. */
void memory_large_request_begins(void);
void memory_large_request_done(void);

/* ---- page.c ----------------------------------------------------------------------------------- */
/* GET /: the embedded page (a chat that shows speculation at work). */
enum MHD_Result page_respond(struct MHD_Connection *c);

/* ---- routes.c --------------------------------------------------------------------------------- */
/* MHD_AccessHandlerCallback (cls: the http_options) and MHD_OPTION_NOTIFY_COMPLETED. */
enum MHD_Result routes_handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state);
void routes_request_done(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode why);
/* Response helpers (value taken). */
enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *value);
/* The same with every number's 17 digits (send_json rounds to 15): a float's exact value, as
 * llama-server prints embeddings and scores, so a client reads the very floats. */
enum MHD_Result send_json_exact(struct MHD_Connection *c, unsigned status, json_t *value);
enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, int code, const char *message);
/* An error in llama-server's own shape, {"error": {code: the HTTP status, message, type}}, for what
 * llama-server answers with a type of its own (not_supported_error: 501). */
enum MHD_Result send_llama_error(struct MHD_Connection *c, unsigned status, const char *type, const char *message);
/* A plain route's answer from a dispatcher response (taken): the result with 200, or the error
 * object with the HTTP status its code maps to. */
enum MHD_Result send_rpc_outcome(struct MHD_Connection *c, json_t *response);
/* The HTTP status of a JSON-RPC error code on the plain (non-/rpc) routes. */
unsigned http_status_for(json_int_t code);

/* ---- llama_routes.c --------------------------------------------------------------------------- */
/* Whether `url` is one of llama-server's GET routes (/props, /slots, /metrics, /lora-adapters) /
 * POST routes with a body (/tokenize, /detokenize, /lora-adapters). */
bool route_is_llama_get(const char *url);
bool route_is_llama_post(const char *url);
/* Whether the request is one of llama-server's slot actions (/slots/ID, /slots?action=...), and
 * their answer without --slot-save-path: 501 naming the action, as llama-server. */
bool route_is_slot_action(struct MHD_Connection *c, const char *url);
enum MHD_Result route_refuse_slot_action(struct MHD_Connection *c);
/* The slot and the action of POST /slots/ID?action=save|restore|erase: true with *slot and *action
 * (a static string), else false with why in `message`. */
bool route_slot_action_target(struct MHD_Connection *c, const char *url, int32_t *slot, const char **action,
                              char *message, size_t size);
/* The work of a slot action on a call worker (it waits for the slot to be idle): a context (the
 * body taken; `dir` the real --slot-save-path) and its call_fn, whose answer is as the dispatcher's. */
void *route_slot_action_call(api_host *host, int32_t slot, const char *action, json_t *body, const char *dir);
json_t *route_slot_action_run(void *ctx);
void route_slot_action_free(void *ctx);
/* Answers a GET route (the caller checked the key). */
enum MHD_Result route_llama_get(struct MHD_Connection *c, api_host *host, const http_chat *chat, const char *url);
/* A POST route's body (the JSON text): its parsed object (new), or NULL with why in `message`.
 * /lora-adapters takes llama-server's list itself, [{id, scale}], returned as {adapters: list}. */
json_t *route_parse_body(const char *url, const char *body, size_t len, char *message, size_t size);
/* The work of /tokenize, /detokenize or POST /lora-adapters (`url`) on a call worker (tokenizing a
 * large body takes long): a context (the body taken) and its call_fn, whose answer is as the
 * dispatcher's. */
void *route_tokens_call(api_host *host, const char *url, json_t *body);
json_t *route_tokens_run(void *ctx);
void route_tokens_free(void *ctx);

#endif
