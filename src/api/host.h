/* host.h - the JSON API's models: a host holds the serving model pair as a server (src/serve/server.h,
 * which owns the engine), loads another beside it and swaps it in (init), unloads it (shutdown),
 * and hands completions to the serving one. An object: each JSON API object (specd_rpc_new) has
 * one, specd_rpc() and the users' old C ABI share the process's (rpc_host_default), `specd serve`
 * makes its own, and two hosts serve two model pairs side by side.
 *
 * Threads: every function is safe from any thread, except api_host_free (once, with no call in
 * flight). A completion is claimed (completion.c) from before its request is read until it has
 * been handed to the server; a swap waits until none is claimed and the serving server is idle,
 * and new claims are refused as busy (API_BUSY) meanwhile. */
#ifndef SPECD_API_HOST_H
#define SPECD_API_HOST_H

#include "api.h"

#include "../serve/server.h"

api_host *api_host_new(void);
/* Cancels what runs, unloads the models, frees the host. */
void api_host_free(api_host *h);

/* What one request may ask of the servers this host makes from now on (specd serve's -n,
 * --time-limit, --step-limit; none by default). */
void api_host_set_limits(api_host *h, serve_limits limits);
/* How a request that sets no sampling field samples (specd serve's --temp, --top-k, ...: llama-
 * server's defaults given at start); the library's defaults until set. */
void api_host_set_sampling(api_host *h, const specd_sampling_params *sampling);
/* A request's starting point: `r`, just initialized, takes the host's sampling defaults and the
 * serving model's drafting defaults and context shift (its init's --spec-type, --spec-draft-n-max,
 * ..., --context-shift); what the request gives is read over them. A completion takes them once,
 * before its fields are read (completion.c, where this is defined); /props and /infill show them. */
void api_host_request_defaults(api_host *h, serve_request *r);
/* How an embedding request that gives no embd_normalize normalizes: the serving model's
 * --embd-normalize (2, euclidean, by default). */
int32_t api_host_embd_normalize(api_host *h);

/* ---- the models (host_load.c) ---------------------------------------------------------------- */

/* Loads the models `s` describes (taken) beside the serving ones and swaps them in once no
 * completion runs; with s->async on a thread of its own (follow it with the status). False with
 * *err set when it cannot start (busy: a load or a shutdown runs) or, blocking, when it failed. */
bool api_host_load(api_host *h, api_engine_settings *s, api_error *err);
/* Stops what runs: aborts a load (through llama.cpp's progress callback, so it returns in bounded
 * time), ends every completion (stop_type "shutdown") and unloads the models. *was_loaded: a
 * model was serving. */
void api_host_shutdown(api_host *h, bool *was_loaded);
/* The program is stopping for good: every completion ends (shutdown), new ones are refused (busy). */
void api_host_close(api_host *h);
/* Test-only: called from llama.cpp's progress callback each time a load reads a tensor, before
 * the callback checks for an abort (a test makes loads slow with it, as a slow disk would). NULL
 * removes it. */
typedef void (*api_host_load_hook)(float progress, void *user_data);
void api_host_set_load_hook(api_host *h, api_host_load_hook hook, void *user_data);

/* ---- completions (host.c; claimed, submitted and waited for by completion.h) ------------------ */

/* The job with this id (id < 0: the latest claimed), referenced; NULL with *err set. */
serve_job *api_host_find_job(api_host *h, int64_t id, api_error *err);
/* Finished jobs kept findable by id, beyond those running. */
#define API_KEEP_JOBS 256

/* The serving engine for a short call (tokenize, detokenize, /props): read-locked until
 * api_host_release_engine. False with *err set when none serves. */
bool api_host_acquire_engine(api_host *h, specd_engine **engine, api_error *err);
void api_host_release_engine(api_host *h);
/* The serving server, read-locked as the engine is (release with api_host_release_engine). */
bool api_host_acquire_server(api_host *h, serve_server **server, api_error *err);
/* The model's alias, or its path (heap copy; "" when none serves). */
char *api_host_model_name(api_host *h);

/* ---- status (host_status.c) ------------------------------------------------------------------ */

/* {state, init_success, model, model_alias, loading_model, busy, has_draft, n_ctx, n_vocab,
 * version, n_parallel, last_init_error?, placement?, placement_note?, batch_invariant?, error?, slots, n_queued,
 * queue_max} (new reference). */
json_t *api_host_status(api_host *h);

#endif
