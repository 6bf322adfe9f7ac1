/* rpc.h - the JSON-RPC transport (src/rpc/): the dispatcher and who calls it, the JSON API object
 * of specd_rpc_new and the process's one (under specd_rpc() and the old ABI). What it shares with
 * the HTTP routes (the host, the readers, the reply shapes) is src/api/'s. */
#ifndef SPECD_RPC_RPC_H
#define SPECD_RPC_RPC_H

#include "../api/host.h"

/* Who is calling the dispatcher. A library user (specd_rpc, the C ABI) is trusted: full rights.
 * `specd serve` gives an HTTP client admin rights only when it sends the admin key. */
typedef struct rpc_caller {
    bool admin;             /* may call the admin methods, which load or unload models (init, shutdown) */
    const char *models_dir; /* when not NULL: init may load only regular files under this directory
                             * (a real path, see api_init_params_confine) */
} rpc_caller;

/* The host of the process's JSON API object (rpc_api.c), made on first use (specd_rpc, the old ABI). */
api_host *rpc_host_default(void);

/* The dispatcher on a parsed request (object or batch, borrowed) for the models of `host`: the
 * response, or NULL when there is nothing to answer (notifications only). */
json_t *rpc_dispatch_as(api_host *host, json_t *request, const rpc_caller *caller);
/* A batch's bounds: its calls (more: the batch is refused, none run), and the size of its answers
 * (past it the calls left are refused, not run), so that one batch cannot make a server answer
 * for ever or with gigabytes. */
#define RPC_BATCH_MAX_CALLS 256
#define RPC_BATCH_MAX_ANSWER (4 * 1024 * 1024)
/* rpc_dispatch_as with a library user's full rights (specd_rpc_call, the old ABI). */
json_t *rpc_dispatch_trusted(api_host *host, json_t *request);
/* The response to a request that could not be read (no id): {"jsonrpc", "error", "id": null}. */
json_t *rpc_error_response(const api_error *err);

/* ---- the JSON API object (rpc_api.c) -----------------------------------------------------------
 * What specd_rpc_new makes (specd_rpc.h): a host of its own. specd_rpc() and the old ABI use the
 * process's one object, made on first use and kept until the process ends. */
struct specd_rpc_api {
    api_host *host;
};
specd_rpc_api *rpc_api_process(void);
/* `method` with `params` (borrowed, may be NULL) on api's host: the result (new reference), or
 * NULL with *error the JSON-RPC error object (new reference). */
json_t *rpc_api_call_method(specd_rpc_api *api, const char *method, json_t *params, json_t **error);
/* init's argument as text: a JSON object of settings (NULL when it starts with '{' but does not
 * parse), or a command line, as {"cmd": text}. */
json_t *rpc_init_params_text(const char *text);
/* JSON text of value (stolen), compact, NULL for NULL; heap (specd_free). */
char *rpc_dump(json_t *value);

#endif
