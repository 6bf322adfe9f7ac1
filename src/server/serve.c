/* serve.c - `specd serve`: the JSON API over HTTP with libmicrohttpd. Every route goes through
 * the one JSON-RPC dispatcher (specd_rpc):
 *   POST /rpc         JSON-RPC 2.0 (single, batch); notifications only -> 204 without a body
 *   POST /completion  a completion request; with "stream": true, Server-Sent Events
 *   GET  / , /health  readiness (no API key needed)
 * Binds to 127.0.0.1 by default; bodies over --max-body are refused (413); with --api-key,
 * other routes need "Authorization: Bearer KEY" or "X-Api-Key: KEY" (401 otherwise). */
#define _POSIX_C_SOURCE 200809L
#include "../cli/args.h"
#include "../cli/cli.h"
#include "specd_rpc.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct serve_options {
    const char *host;
    int64_t port;
    const char *api_key;
    int64_t max_body;
    json_t *init_args; /* everything else, for init (owned) */
} serve_options;

/* One HTTP request: its body as it arrives. */
typedef struct request_state {
    char *body;
    size_t len;
    bool too_large;
} request_state;

/* ---- calling the dispatcher ------------------------------------------------------------------ */

/* Calls `method` with `params` (borrowed); returns the whole JSON-RPC response object. */
static json_t *rpc_call(const char *method, json_t *params) {
    json_t *req = json_pack("{s:s, s:i, s:s}", "jsonrpc", "2.0", "id", 1, "method", method);
    if (params) json_object_set(req, "params", params);
    char *text = json_dumps(req, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(req);
    const char *answer = text ? specd_rpc(text) : NULL;
    free(text);
    json_t *response = answer ? json_loads(answer, 0, NULL) : NULL;
    specd_free((void *)answer);
    return response;
}

/* HTTP status for a JSON-RPC error code on the plain (non-/rpc) routes. */
static unsigned http_status_for(json_int_t code) {
    if (code == -32700 || code == -32600 || code == -32602) return MHD_HTTP_BAD_REQUEST;
    if (code == -32000 || code == -32001) return MHD_HTTP_SERVICE_UNAVAILABLE;
    if (code == -32601 || code == -32004) return MHD_HTTP_NOT_FOUND;
    return MHD_HTTP_INTERNAL_SERVER_ERROR;
}

/* ---- responses ------------------------------------------------------------------------------- */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *type, const char *text) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    if (type) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *value) {
    char *text = value ? json_dumps(value, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    json_decref(value);
    enum MHD_Result ok = send_text(c, text ? status : MHD_HTTP_INTERNAL_SERVER_ERROR, "application/json",
                                   text ? text : "{\"error\":{\"code\":-32603,\"message\":\"out of memory\"}}");
    free(text);
    return ok;
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, int code, const char *message) {
    return send_json(c, status, json_pack("{s:{s:i, s:s}}", "error", "code", code, "message", message));
}

/* ---- routes ---------------------------------------------------------------------------------- */

static enum MHD_Result route_health(struct MHD_Connection *c) {
    json_t *response = rpc_call("status", NULL);
    json_t *status = json_incref(json_object_get(response, "result"));
    json_decref(response);
    bool ready = status && json_integer_value(json_object_get(status, "init_success")) == 1;
    if (status) json_object_set_new(status, "status", json_string(ready ? "ok" : "unavailable"));
    return send_json(c, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, status);
}

static enum MHD_Result route_rpc(struct MHD_Connection *c, const request_state *rs) {
    const char *answer = specd_rpc(rs->body ? rs->body : "");
    if (!answer) { /* notifications only: nothing to say */
        struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, r);
        MHD_destroy_response(r);
        return ok;
    }
    enum MHD_Result ok = send_text(c, MHD_HTTP_OK, "application/json", answer);
    specd_free((void *)answer);
    return ok;
}

/* A plain route's answer: the result with 200, or the error object with a matching status. */
static enum MHD_Result send_rpc_outcome(struct MHD_Connection *c, json_t *response) {
    json_t *result = json_object_get(response, "result"), *error = json_object_get(response, "error");
    if (result) {
        enum MHD_Result ok = send_json(c, MHD_HTTP_OK, json_incref(result));
        json_decref(response);
        return ok;
    }
    unsigned status = http_status_for(json_integer_value(json_object_get(error, "code")));
    json_t *body = json_pack("{s:O}", "error", error ? error : json_null());
    json_decref(response);
    return send_json(c, status, body);
}

/* Server-Sent Events for one async completion: each poll's updates become "data: {...}" events. */
typedef struct sse_stream {
    json_int_t id;
    char *pending; /* formatted events not sent yet (owned) */
    size_t len, sent;
    bool finished;
} sse_stream;

static void sse_append(sse_stream *s, json_t *event) {
    char *text = json_dumps(event, JSON_COMPACT | JSON_REAL_PRECISION(15));
    if (!text) return;
    size_t n = strlen(text);
    char *grown = realloc(s->pending, s->len + n + 9);
    if (grown) {
        s->pending = grown;
        memcpy(s->pending + s->len, "data: ", 6);
        memcpy(s->pending + s->len + 6, text, n);
        memcpy(s->pending + s->len + 6 + n, "\n\n", 3);
        s->len += n + 8;
    }
    free(text);
}

static void sse_poll(sse_stream *s) {
    json_t *params = json_pack("{s:I, s:i}", "id", s->id, "wait_ms", 500);
    json_t *response = rpc_call("completion.poll", params);
    json_decref(params);
    json_t *result = json_object_get(response, "result");
    size_t i;
    json_t *update;
    json_array_foreach(json_object_get(result, "completion_updates"), i, update) sse_append(s, update);
    json_t *error = result ? json_object_get(result, "error") : json_object_get(response, "error");
    if (error) {
        json_t *event = json_pack("{s:O}", "error", error);
        sse_append(s, event);
        json_decref(event);
    }
    s->finished = !result || json_is_true(json_object_get(result, "finished"));
    json_decref(response);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    sse_stream *s = cls;
    while (s->sent == s->len && !s->finished) sse_poll(s); /* blocks this connection's thread only */
    if (s->sent == s->len) return MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = s->len - s->sent < max ? s->len - s->sent : max;
    memcpy(buf, s->pending + s->sent, n);
    s->sent += n;
    return (ssize_t)n;
}

/* The client went away (or the stream ended): a completion still running is cancelled. */
static void sse_free(void *cls) {
    sse_stream *s = cls;
    if (!s->finished) {
        json_t *params = json_pack("{s:I}", "id", s->id);
        json_decref(rpc_call("completion.cancel", params));
        json_decref(params);
    }
    free(s->pending);
    free(s);
}

static enum MHD_Result route_completion(struct MHD_Connection *c, const request_state *rs) {
    json_error_t jerr;
    json_t *params = json_loads(rs->body ? rs->body : "", JSON_REJECT_DUPLICATES, &jerr);
    if (!params) {
        char message[300];
        snprintf(message, sizeof message, "parse error: %s at line %d, column %d", jerr.text, jerr.line, jerr.column);
        return send_error(c, MHD_HTTP_BAD_REQUEST, -32700, message);
    }
    bool stream = json_is_true(json_object_get(params, "stream"));
    json_t *response = rpc_call(stream ? "completion.start" : "completion", params);
    json_decref(params);
    json_t *result = json_object_get(response, "result");
    if (!stream || !result) return send_rpc_outcome(c, response);
    sse_stream *s = calloc(1, sizeof *s);
    if (!s) {
        json_decref(response);
        return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603, "out of memory");
    }
    s->id = json_integer_value(json_object_get(result, "id"));
    json_decref(response);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, s, sse_free);
    if (!r) {
        sse_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

/* ---- the request handler --------------------------------------------------------------------- */

static bool authorized(struct MHD_Connection *c, const char *key) {
    if (!key) return true;
    const char *bearer = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *plain = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key");
    if (plain && strcmp(plain, key) == 0) return true;
    return bearer && strncmp(bearer, "Bearer ", 7) == 0 && strcmp(bearer + 7, key) == 0;
}

/* Collects the body; false once it is over the limit (the rest is read and dropped). */
static void collect_body(request_state *rs, const char *data, size_t n, int64_t limit) {
    if (rs->too_large || rs->len + n > (size_t)limit) {
        rs->too_large = true;
        return;
    }
    char *grown = realloc(rs->body, rs->len + n + 1);
    if (!grown) {
        rs->too_large = true;
        return;
    }
    rs->body = grown;
    memcpy(rs->body + rs->len, data, n);
    rs->len += n;
    rs->body[rs->len] = '\0';
}

static enum MHD_Result route(struct MHD_Connection *c, const serve_options *o, const char *url, const char *method,
                             const request_state *rs) {
    bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    if (get && (strcmp(url, "/") == 0 || strcmp(url, "/health") == 0)) return route_health(c);
    if (!authorized(c, o->api_key))
        return send_error(c, MHD_HTTP_UNAUTHORIZED, -32000, "unauthorized: send the API key as 'Authorization: "
                          "Bearer KEY' or 'X-Api-Key: KEY'");
    if (rs->too_large) {
        char message[160];
        snprintf(message, sizeof message, "the request body is larger than %lld bytes (--max-body)", (long long)o->max_body);
        return send_error(c, MHD_HTTP_CONTENT_TOO_LARGE, -32600, message);
    }
    bool known = strcmp(url, "/rpc") == 0 || strcmp(url, "/completion") == 0;
    if (known && !post) return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, -32600, "use POST");
    if (!known) return send_error(c, MHD_HTTP_NOT_FOUND, -32601, "not found: POST /rpc, POST /completion, GET /health");
    return strcmp(url, "/rpc") == 0 ? route_rpc(c, rs) : route_completion(c, rs);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state) {
    (void)version;
    const serve_options *o = cls;
    if (!*state) { /* first call: headers only */
        *state = calloc(1, sizeof(request_state));
        return *state ? MHD_YES : MHD_NO;
    }
    request_state *rs = *state;
    if (*upload_size > 0) {
        collect_body(rs, upload, *upload_size, o->max_body);
        *upload_size = 0;
        return MHD_YES;
    }
    return route(c, o, url, method, rs);
}

static void request_done(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode why) {
    (void)cls;
    (void)c;
    (void)why;
    request_state *rs = *state;
    if (rs) free(rs->body);
    free(rs);
    *state = NULL;
}

/* ---- the command ----------------------------------------------------------------------------- */

static void serve_usage(FILE *out) {
    fputs("usage: specd serve -m TARGET [-md DRAFT] [options]\n"
          "\n"
          "  --host ADDR       IPv4 or IPv6 address to listen on (default 127.0.0.1; 0.0.0.0 or :: =\n"
          "                    everywhere)\n"
          "  --port N          port (default 8080; 0 = any free port, printed at start)\n"
          "  --api-key KEY     require 'Authorization: Bearer KEY' (or X-Api-Key) except on /health\n"
          "  --max-body BYTES  largest request body (default 1048576)\n"
          "  model options as for init: -m, -md, -c, -t, -b, --draft-max, -fa on|off|auto,\n"
          "                    -ctv f16|f32, -a ALIAS, --verbose\n"
          "\n"
          "routes: POST /rpc (JSON-RPC 2.0), POST /completion (\"stream\": true for SSE), GET /health\n",
          out);
}

/* Returns 0 ok, 1 help, -1 error (in a->error). */
static int parse_serve_options(cli_args *a, serve_options *o) {
    o->init_args = json_array();
    while (a->i < a->argc) {
        const char *f = a->argv[a->i++];
        bool ok = true;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) return 1;
        if (!strcmp(f, "--host")) ok = (o->host = cli_value(a, f)) != NULL;
        else if (!strcmp(f, "--port")) ok = cli_int(a, f, 0, 65535, &o->port);
        else if (!strcmp(f, "--api-key")) ok = (o->api_key = cli_value(a, f)) != NULL;
        else if (!strcmp(f, "--max-body")) ok = cli_int(a, f, 1, INT32_MAX, &o->max_body);
        else json_array_append_new(o->init_args, json_string(f)); /* init checks the rest */
        if (!ok) return -1;
    }
    if (strcmp(o->host, "localhost") == 0) o->host = "127.0.0.1";
    return 0;
}

static int load_models(json_t *args) {
    json_t *params = json_pack("{s:O}", "args", args);
    json_t *response = rpc_call("init", params);
    json_decref(params);
    json_t *error = json_object_get(response, "error");
    if (error) fprintf(stderr, "specd: error: %s\n", json_string_value(json_object_get(error, "message")));
    int rc = response && !error ? 0 : CLI_EXIT_USAGE;
    json_decref(response);
    return rc;
}

/* Fills `addr` from --host (an IPv4 or IPv6 literal); returns its size, or 0 when it is neither. */
static socklen_t host_address(const serve_options *o, struct sockaddr_storage *addr) {
    memset(addr, 0, sizeof *addr);
    struct sockaddr_in *v4 = (struct sockaddr_in *)addr;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)addr;
    if (inet_pton(AF_INET, o->host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)o->port);
        return sizeof *v4;
    }
    if (inet_pton(AF_INET6, o->host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)o->port);
        return sizeof *v6;
    }
    return 0;
}

static struct MHD_Daemon *start_daemon(serve_options *o) {
    struct sockaddr_storage addr;
    socklen_t len = host_address(o, &addr);
    if (len == 0) {
        fprintf(stderr, "specd: error: --host must be an IPv4 or IPv6 address such as 127.0.0.1 or ::1, "
                "got '%s'\n", o->host);
        return NULL;
    }
    /* libmicrohttpd needs to be told that the address it is given is an IPv6 one. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG |
                     (addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)o->port, NULL, NULL, handle, o, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_NOTIFY_COMPLETED, request_done, NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_END);
    if (!d) fprintf(stderr, "specd: error: cannot listen on %s port %lld (in use, or not an address of this "
                    "machine?)\n", o->host, (long long)o->port);
    return d;
}

/* Serves until SIGINT or SIGTERM. */
static void wait_for_signal(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    sigwait(&set, &sig);
}

int cli_serve(int argc, char **argv) {
    serve_options o = {.host = "127.0.0.1", .port = 8080, .max_body = 1 << 20};
    cli_args a = {.argc = argc, .argv = argv};
    int parsed = parse_serve_options(&a, &o);
    if (parsed != 0) {
        if (parsed == 1) serve_usage(stdout);
        else fprintf(stderr, "specd: error: %s\n", a.error);
        json_decref(o.init_args);
        return parsed == 1 ? 0 : CLI_EXIT_USAGE;
    }
    /* Block the stop signals before any thread starts, so only sigwait sees them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    int rc = load_models(o.init_args);
    struct MHD_Daemon *d = rc == 0 ? start_daemon(&o) : NULL;
    if (d) {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        bool v6 = strchr(o.host, ':') != NULL; /* URLs put IPv6 literals in brackets */
        printf("specd: listening on http://%s%s%s:%u\n", v6 ? "[" : "", o.host, v6 ? "]" : "",
               info ? (unsigned)info->port : (unsigned)o.port);
        fflush(stdout);
        wait_for_signal();
        json_decref(rpc_call("completion.cancel", NULL)); /* open streams end after this step */
        MHD_stop_daemon(d);
    } else if (rc == 0) {
        rc = CLI_EXIT_USAGE;
    }
    specd_deinit();
    json_decref(o.init_args);
    return rc;
}
