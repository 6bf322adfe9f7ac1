/*
 * specd_rpc.h - the JSON API of libspecd: JSON-RPC 2.0 requests answered by an object that holds
 * its own models (specd_rpc_new / specd_rpc_call / specd_rpc_free), the process-wide specd_rpc()
 * on one such object, and the users' old C ABI (init, get_completion, ...) with a specd_ prefix,
 * a thin layer over that same object.
 *
 * Strings: every string these functions return is a heap copy owned by the caller; release it
 * with specd_free() (declared in specd.h). NULL is returned only where documented.
 *
 * An object holds one model pair at a time (init loads another beside it and swaps it in) with
 * n_parallel slots (init's -np, default 1): that many completions run side by side on one
 * scheduler thread; the others wait in a FIFO of n_queue (--queue, default 64), and past it a
 * completion request is answered at once with the busy error (-32001). Objects share nothing but
 * llama.cpp's process-wide logger (init's "verbose": the latest init decides for all): two objects
 * serve two model pairs side by side, each with its own slots, queue and completion ids.
 *
 * Threads: every function may be called from any thread, also at once on one object, except
 * specd_rpc_free (once, after every other call on that object has returned). A blocking
 * `completion` waits in the calling thread until its answer is there. tokenize/detokenize/status/
 * poll/cancel never wait for a running completion.
 *
 * Methods (params are always an object with named fields; unknown fields, wrong
 * types and out-of-range values are -32602 errors naming the field):
 *   init               {"cmd": "-m T.gguf -md D.gguf -c 2048 -t 4"} or {"args": [...]} or
 *                      {"model", "model_draft", "n_ctx", "n_threads", "n_batch", "draft_max",
 *                       "n_parallel", "n_ctx_per_slot", "n_queue", "model_alias", "hostname", "port",
 *                       "verbose"}; "async": true returns at once
 *   status             -> {"state", "init_success", "model", "model_alias", "busy", "n_parallel",
 *                       "n_queued", "queue_max", "slots": [{"id", "state", "id_task", ...}], ...}
 *   tokenize           {"text", "add_special"?, "with_pieces"?} -> {"tokens": [ids], "length"}
 *   detokenize         {"tokens": [ids]} -> {"content"}
 *   completion         the completion request (docs/server.md) -> the response, when done
 *   completion.start   the same request -> {"id", "prompt_stats"} at once
 *   completion.poll    {"id"?, "wait_ms"?} -> {"id", "completion_updates": [...], "finished"}
 *   completion.cancel  {"id"?} -> {"id", "cancelled"} (queued: ends at once; running: at its next step)
 *   lora_adapters      -> [{"id", "path", "scale", ...}]: the target's LoRA adapters
 *   lora_adapters.set  {"adapters": [{"id", "scale"}]}: the scales of requests that send none
 *   shutdown           cancels a running completion and frees the model
 * Error codes: specd_rpc_error_code below (data.field names the offending parameter).
 */
#ifndef SPECD_RPC_H
#define SPECD_RPC_H

#include "specd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The "code" of a JSON-RPC error object: JSON-RPC 2.0's, then specd's own (the -32000..-32099
 * range the specification leaves to servers). */
typedef enum specd_rpc_error_code {
    SPECD_RPC_PARSE_ERROR = -32700,
    SPECD_RPC_INVALID_REQUEST = -32600,
    SPECD_RPC_METHOD_NOT_FOUND = -32601,
    SPECD_RPC_INVALID_PARAMS = -32602,    /* data.field names the parameter */
    SPECD_RPC_INTERNAL_ERROR = -32603,
    SPECD_RPC_NO_MODEL = -32000,          /* no model loaded (yet): call init, or wait for it */
    SPECD_RPC_BUSY = -32001,              /* a completion or a model load is already running */
    SPECD_RPC_MODEL_LOAD = -32002,        /* the model files could not be loaded */
    SPECD_RPC_GENERATION = -32003,        /* generation failed at run time */
    SPECD_RPC_UNKNOWN_JOB = -32004,       /* completion.poll/cancel with an id that is not known */
    SPECD_RPC_FORBIDDEN = -32005,         /* an admin method (init, shutdown) without admin rights */
} specd_rpc_error_code;

/* ---- the JSON API object ------------------------------------------------------------------- */

typedef struct specd_rpc_api specd_rpc_api;

/* Makes an object with models of its own. `init`: NULL or "" loads nothing (send "init" later);
 * else init's params, loaded before this returns: a JSON object as the "init" method takes
 * ({"model": "T.gguf", "model_draft": "D.gguf", "n_ctx": 2048}, {"cmd": "-m T.gguf -md D.gguf"};
 * with "async": true it returns once the load has started, and "status" follows it) or a command
 * line ("-m T.gguf -md D.gguf -c 2048"). Returns the object, or NULL when the settings are wrong,
 * the models do not load or memory runs out: then *error (when not NULL) is the JSON-RPC error
 * object as text, {"code": -32602 or -32002 ..., "message", "data": {"field"}} (free with
 * specd_free); on success *error is NULL. */
SPECD_API specd_rpc_api *specd_rpc_new(const char *init, char **error);

/* Answers a JSON-RPC 2.0 request or batch (text) on api's models: the response text (free with
 * specd_free), or NULL when there is nothing to answer (a notification, or a batch of
 * notifications only). Every failure is an answer: text that is not JSON, a bad request or params
 * (with data.field), no model loaded, a failed generation; a NULL api or request is answered with
 * an invalid-request error. The caller has every right (init and shutdown included). */
SPECD_API char *specd_rpc_call(specd_rpc_api *api, const char *request);

/* Ends what runs (a completion stops with stop_type "shutdown"), unloads the models and frees the
 * object. NULL is fine. */
SPECD_API void specd_rpc_free(specd_rpc_api *api);

/* specd_rpc_call on the process's object, made at the first call and kept until the process
 * ends; the old ABI below uses the same object. */
SPECD_API const char *specd_rpc(const char *request);

/* ---- the old ABI, specd_-prefixed: methods of the process's object (the one specd_rpc uses) ---- */

/* Loads the model(s). `cmd` is a command line ("-m model.gguf -c 2048 ...") or a JSON object of
 * settings. Returns 0 on success, else the (negative) JSON-RPC error code; the message is in
 * specd_poll_system_status()'s "error". */
SPECD_API int specd_init(const char *cmd);
/* The same on a background thread; follow it with specd_poll_system_status(). */
SPECD_API void specd_init_async(const char *cmd);
/* {"init_success": 0 loading or not started / 1 ready / -1 failed, "model", "model_alias", ...} */
SPECD_API const char *specd_poll_system_status(void);
/* {"text": "..."} -> {"success": true, "tokens": [piece strings], "length": n} (BOS added) */
SPECD_API const char *specd_tokenize_json(const char *request);
/* A blocking completion: the response object, or {"success": false, "error": {code, message}}. */
SPECD_API const char *specd_get_completion(const char *request);
/* Starts a completion; {"success": true, "id", "prompt_stats": {...}} at once. */
SPECD_API const char *specd_async_completion_init(const char *request);
/* {"success": true, "completion_updates": [...], "finished": bool}; `cmd` may be NULL, "" or
 * {"id": n, "wait_ms": ms}. */
SPECD_API const char *specd_async_completion_poll(const char *cmd);
/* Asks the running completion to stop (within one speculative step); {"success": true}. */
SPECD_API const char *specd_async_completion_cancel(const char *request);
/* Cancels what runs and frees everything. specd_init may be called again afterwards. */
SPECD_API void specd_deinit(void);

#ifdef __cplusplus
}
#endif

#endif /* SPECD_RPC_H */
