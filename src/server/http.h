/* http.h - the HTTP server of `specd serve` (src/server), as the command (src/cli/serve.c) starts
 * it: its options, the stop signals' watch, and the server run until a stop is asked for. */
#ifndef SPECD_SERVER_HTTP_H
#define SPECD_SERVER_HTTP_H

#include "../api/host.h"

#include <stdbool.h>
#include <stdint.h>

/* How the chat routes make prompts: llama.cpp's Jinja chat code (specd_chat_*: templates, tools,
 * reasoning) by default, as llama-server's --jinja; its older built-in formats with --no-jinja or
 * --chat-template NAME (no tools). */
typedef struct http_chat {
    bool jinja;               /* off: --no-jinja, or --chat-template NAME */
    const char *builtin;      /* --chat-template NAME: one of llama.cpp's built-in formats */
    char *template_src;       /* --chat-template-file: the Jinja source (owned); NULL: the model's */
} http_chat;

typedef struct http_options {
    const char *host;
    int64_t port;
    const char *api_key;   /* NULL: every client may use the API (not the admin methods) */
    const char *admin_key; /* NULL: no client may call init or shutdown over HTTP */
    const char *models_dir_arg;
    char *models_dir;      /* real path of --models-dir (owned), NULL when not given */
    const char *slot_save_path_arg;
    char *slot_save_path;  /* real path of --slot-save-path (owned): where slot actions keep their files;
                            * NULL: the actions are refused (501) */
    int64_t max_body;
    int64_t max_conns, max_conns_per_ip; /* per IP: 0 = no limit */
    int64_t request_timeout_s;
    int64_t n_predict;     /* -n / --n-predict: -1 none (rpc_limits) */
    int64_t time_limit_s;  /* --time-limit: 0 none */
    int64_t step_limit_ms; /* --step-limit: 0 none */
    int64_t http_threads;
    specd_sampling_params sampling; /* --temp, --top-k, ...: a request's defaults (api_host_set_sampling) */
    api_engine_settings models; /* the model options (-m, -md, -np, ...), for the start-up load */
    api_host *rpc;         /* the JSON API's host: the models it serves (owned) */
    bool web_page;         /* GET / serves the page (page.c); --no-webui: readiness as /health */
    http_chat chat;        /* how the chat routes make prompts */
    bool list_devices;     /* --list-devices: print them and exit */
} http_options;

/* At start, before any thread: glibc's memory thresholds fixed (memory.c says why). */
void memory_settle_start(void);
/* Connection limits that fit the open-file limit (raised to its hard limit first). */
void http_fit_connection_limits(http_options *o);

/* ---- stop.c ---------------------------------------------------------------------------------- */
/* Starts the thread that waits for SIGINT/SIGTERM (the stop signals blocked everywhere else); call
 * before any other thread starts. */
bool stop_watch_start(void);
/* True once a stop was asked for (SIGINT/SIGTERM): new requests are refused with 503. */
bool serve_stopping(void);
/* Waits until a stop is asked for or `ms` pass; true when it was asked for. */
bool stop_wait(int64_t ms);

/* Serves the models of o->rpc (loaded) on o->host:o->port until a stop is asked for, then stops
 * gracefully. Returns the exit status (CLI_EXIT_* in util/args.h). */
int http_serve(http_options *o);

#endif
