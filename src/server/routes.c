/* routes.c - the request handler of `specd serve`:
 *   POST /rpc         JSON-RPC 2.0 (single, batch); notifications only -> 204 without a body
 *   POST /completion  a completion request; with "stream": true, Server-Sent Events
 *   POST /infill      llama-server's code completion: a /completion over a fill-in-the-middle prompt
 *                     (infill.c)
 *   GET  / , /health  readiness for anyone; the full status with a valid key
 *   llama-server's /tokenize, /detokenize, /props, /slots, /metrics (llama_routes.c), /apply-template
 *   (openai_chat.c)
 *   OpenAI's /v1/chat/completions, /v1/completions, /v1/models (openai.c; errors in OpenAI's shape)
 *   Anthropic's /v1/messages, /v1/messages/count_tokens (anthropic.c; errors in Anthropic's shape)
 *   OpenAI's Responses API, /v1/responses (responses.c)
 *   llama-server's /embedding, /embeddings, /v1/embeddings, /rerank, /v1/rerank (embeddings.c; errors
 *   in llama-server's shape)
 * Who may do what: with --api-key, /rpc and /completion need that key (401); the admin methods
 * (init, shutdown) need the admin key (--admin-api-key) whatever the route, and with --models-dir
 * init loads only files under it. A key comes as "Authorization: Bearer KEY" or "X-Api-Key: KEY".
 * What can be decided from the headers is (401, 404, 405, 413 on Content-Length), before any of
 * the body is read. Quick calls run inline; completions (their chat templates rendered there too),
 * loads and waiting polls run on a worker (calls.c, in the lane of their kind) while the connection
 * waits suspended. */
#define _POSIX_C_SOURCE 200809L
#include "server.h"

#include "openai.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum route_id { ROUTE_RPC, ROUTE_COMPLETION, ROUTE_LLAMA, ROUTE_OPENAI, ROUTE_APPLY_TEMPLATE, ROUTE_ANTHROPIC,
                       ROUTE_COUNT_TOKENS, ROUTE_RESPONSES, ROUTE_SLOT_ACTION, ROUTE_EMBED } route_id;

/* One HTTP request with a body: /rpc, /completion, /tokenize or /detokenize. */
typedef struct request_state {
    route_id route;
    const char *url;      /* ROUTE_LLAMA, ROUTE_OPENAI, ROUTE_EMBED: which one (a static string) */
    const http_options *options;
    rpc_caller caller;
    char *body;           /* what arrived so far (owned), NUL-terminated */
    size_t len, cap;
    bool too_large;       /* over --max-body: the rest is read and dropped */
    bool large;           /* MEMORY_LARGE_BODY or more arrived: counted by memory.c until done */
    int64_t nul_at;       /* offset of the first NUL byte in the body, -1: none */
    int32_t slot;         /* ROUTE_SLOT_ACTION: the slot and the action (a static string) */
    const char *action;
    deferred_call *call;  /* while a call runs on a worker */
} request_state;

static enum MHD_Result send_no_content(struct MHD_Connection *c) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, r);
    MHD_destroy_response(r);
    return ok;
}

/* /rpc's answer: the JSON-RPC response with 200, or 204 when there is nothing to answer. */
static enum MHD_Result send_rpc_response(struct MHD_Connection *c, json_t *response) {
    return response ? send_json(c, MHD_HTTP_OK, response) : send_no_content(c);
}

/* ---- keys ------------------------------------------------------------------------------------ */

/* Compares in time that depends on the lengths only, not on where the first difference is. */
static bool key_equal(const char *given, const char *key) {
    size_t n = strlen(given), m = strlen(key); /* m > 0: empty keys are refused at start-up */
    volatile unsigned char diff = n != m;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)given[i] ^ (unsigned char)key[i % m];
    return diff == 0;
}

/* The token of "Authorization: Bearer TOKEN" (the scheme in any case), or NULL. */
static const char *bearer_token(const char *authorization) {
    if (!authorization) return NULL;
    while (*authorization == ' ' || *authorization == '\t') authorization++;
    if (strncasecmp(authorization, "Bearer", 6) != 0 || (authorization[6] != ' ' && authorization[6] != '\t'))
        return NULL;
    const char *token = authorization + 6;
    while (*token == ' ' || *token == '\t') token++;
    return token;
}

typedef struct http_caller {
    bool keyed; /* sent a valid key (the API key or the admin key) */
    bool user;  /* may use the API: a valid key, or no --api-key at all */
    bool admin; /* sent the admin key */
} http_caller;

static http_caller identify(struct MHD_Connection *c, const http_options *o) {
    const char *keys[2] = {
        bearer_token(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION)),
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key"),
    };
    bool api = false, admin = false;
    for (int i = 0; i < 2; i++) {
        if (!keys[i]) continue;
        if (o->admin_key && key_equal(keys[i], o->admin_key)) admin = true;
        if (o->api_key && key_equal(keys[i], o->api_key)) api = true;
    }
    return (http_caller){.keyed = api || admin, .user = api || admin || !o->api_key, .admin = admin};
}

/* ---- routes ---------------------------------------------------------------------------------- */

/* Readiness for anyone ({"status": "ok" | "loading" | "unavailable"}); the full status (model,
 * last load error, ...) only for a caller with a valid key. */
static enum MHD_Result route_health(struct MHD_Connection *c, api_host *host, bool detailed) {
    json_t *status = api_host_status(host);
    const char *state = json_string_value(json_object_get(status, "state"));
    const char *word = !state ? "unavailable" : !strcmp(state, "ready") ? "ok"
                                              : !strcmp(state, "loading") ? "loading" : "unavailable";
    json_t *body = detailed && status ? json_incref(status) : json_object();
    json_decref(status);
    if (body) json_object_set_new(body, "status", json_string(word));
    return send_json(c, strcmp(word, "ok") == 0 ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, body);
}

/* Which workers a JSON-RPC request (one, or a batch) runs on; CALL_LANES: inline, at once. Calls
 * that can take long go to a worker: a completion, embeddings, a poll that waits (the request lane), the admin
 * key's init and shutdown (its own lane: nobody else's calls can hold it), and a large body (a
 * 1 MiB tokenize). The rest (status, tokenize, detokenize, cancel, a poll that does not wait,
 * anything the dispatcher refuses at once) run inline. */
static bool waits(json_t *req) {
    const char *m = json_string_value(json_object_get(req, "method"));
    if (!m) return false;
    if (!strcmp(m, "completion.poll")) {
        json_t *wait = json_object_get(json_object_get(req, "params"), "wait_ms");
        return json_is_integer(wait) && json_integer_value(wait) > 0;
    }
    /* embeddings: as many inputs as the client sends, each a pass */
    return !strcmp(m, "completion") || !strcmp(m, "completion.start") || !strcmp(m, "embeddings") ||
           !strcmp(m, "rerank");
}

static bool admin_work(json_t *req) {
    const char *m = json_string_value(json_object_get(req, "method"));
    return m && (!strcmp(m, "init") || !strcmp(m, "shutdown"));
}

static call_lane rpc_lane(json_t *request, const rpc_caller *caller, bool large) {
    bool wait = false, admin = false;
    size_t i;
    json_t *req;
    if (!json_is_array(request)) wait = waits(request), admin = admin_work(request);
    else json_array_foreach(request, i, req) wait |= waits(req), admin |= admin_work(req);
    if (admin && caller->admin) return CALL_LANE_ADMIN; /* anyone else's init is refused at once */
    if (wait) return CALL_LANE_REQUEST;
    return large ? CALL_LANE_SHORT : CALL_LANES;
}

/* A JSON-RPC request for a worker: the dispatcher on it, as its caller. */
typedef struct dispatch_call {
    api_host *host;
    json_t *request;
    rpc_caller caller;
} dispatch_call;

static json_t *dispatch_run(void *ctx) {
    dispatch_call *d = ctx;
    return rpc_dispatch_as(d->host, d->request, &d->caller);
}

static void dispatch_free(void *ctx) {
    dispatch_call *d = ctx;
    if (d) json_decref(d->request);
    free(d);
}

/* Runs the work on a worker, the connection suspended until the answer is there; 503 when it
 * cannot be queued (in OpenAI's shape on the /v1 routes). */
static enum MHD_Result defer(struct MHD_Connection *c, request_state *rs, call_lane lane, call_fn run, void *ctx,
                             void (*free_ctx)(void *)) {
    const char *why = NULL;
    rs->call = ctx ? call_defer(c, lane, run, ctx, free_ctx, &why) : NULL;
    if (rs->call) return MHD_YES;
    if (!why) why = "out of memory";
    if (rs->route == ROUTE_EMBED) return send_llama_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable_error", why);
    return rs->route == ROUTE_OPENAI ? openai_fail(c, MHD_HTTP_SERVICE_UNAVAILABLE, "server_error", NULL, why)
                                     : send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, API_BUSY, why);
}

static enum MHD_Result route_rpc(struct MHD_Connection *c, request_state *rs) {
    json_error_t jerr;
    json_t *request = json_loadb(rs->body ? rs->body : "", rs->len, JSON_REJECT_DUPLICATES, &jerr);
    if (!request) { /* a JSON-RPC parse error: 200, as the dispatcher answers it over any transport */
        api_error err;
        api_parse_error(rs->body, rs->len, &jerr, &err);
        return send_json(c, MHD_HTTP_OK, json_pack("{s:s, s:n, s:o}", "jsonrpc", "2.0", "id", "error",
                                                   api_error_object(&err)));
    }
    /* a large body may mean long work (a 1 MiB tokenize): never on libmicrohttpd's threads */
    call_lane lane = rpc_lane(request, &rs->caller, rs->large);
    if (lane != CALL_LANES) {
        dispatch_call *d = malloc(sizeof *d);
        if (d) *d = (dispatch_call){rs->options->rpc, request, rs->caller};
        else json_decref(request);
        return defer(c, rs, lane, dispatch_run, d, dispatch_free);
    }
    json_t *response = rpc_dispatch_as(rs->options->rpc, request, &rs->caller);
    json_decref(request);
    return send_rpc_response(c, response);
}

/* POST /slots/ID?action=save|restore|erase with --slot-save-path: run on a worker, which waits for
 * the slot to be idle (llama_routes.c, api/slot_files.c); an empty body is {} (erase needs none). */
static enum MHD_Result route_slot_action(struct MHD_Connection *c, request_state *rs) {
    char message[300];
    json_t *body = rs->len ? route_parse_body("/slots", rs->body, rs->len, message, sizeof message) : json_object();
    if (!body) return send_error(c, MHD_HTTP_BAD_REQUEST, API_PARSE_ERROR, message);
    return defer(c, rs, CALL_LANE_REQUEST, route_slot_action_run,
                 route_slot_action_call(rs->options->rpc, rs->slot, rs->action, body, rs->options->slot_save_path),
                 route_slot_action_free);
}

/* The embedding and rerank routes: the body, whole, to a worker of the request lane (the client
 * decides how many inputs it has), refusals in llama-server's shape (embeddings.c). */
static enum MHD_Result route_embeddings(struct MHD_Connection *c, const http_options *o, request_state *rs) {
    char message[200];
    if (rs->too_large) snprintf(message, sizeof message, "the request body is larger than %lld bytes (--max-body)",
                                (long long)o->max_body);
    else if (rs->nul_at >= 0) snprintf(message, sizeof message, "the request body has a NUL byte at offset %lld: JSON "
                                       "text cannot contain one", (long long)rs->nul_at);
    if (rs->too_large || rs->nul_at >= 0)
        return send_llama_error(c, rs->too_large ? MHD_HTTP_CONTENT_TOO_LARGE : MHD_HTTP_BAD_REQUEST,
                                "invalid_request_error", message);
    embeddings_call *call = embeddings_call_new(rs->options->rpc, rs->url, rs->body, rs->len);
    rs->body = NULL; /* the call's now */
    rs->len = rs->cap = 0;
    return defer(c, rs, CALL_LANE_REQUEST, embeddings_call_run, call, embeddings_call_free);
}

/* /tokenize, /detokenize, POST /lora-adapters: parsed here, run on a worker (llama_routes.c). */
static enum MHD_Result route_llama_post(struct MHD_Connection *c, request_state *rs) {
    char message[300];
    json_t *body = route_parse_body(rs->url, rs->body, rs->len, message, sizeof message);
    if (!body) return send_error(c, MHD_HTTP_BAD_REQUEST, API_PARSE_ERROR, message);
    void *call = route_tokens_call(rs->options->rpc, rs->url, body);
    return defer(c, rs, CALL_LANE_SHORT, route_tokens_run, call, route_tokens_free);
}

/* The completion routes and /apply-template: the body is read and the prompt made on a worker
 * (setup_call.c), never here, on the threads that answer /health. */
static enum MHD_Result route_set_up(struct MHD_Connection *c, request_state *rs, setup_kind kind) {
    setup_call *s = setup_call_new(kind, rs->options->rpc, &rs->options->chat, rs->body, rs->len);
    rs->body = NULL; /* the call's now */
    rs->len = rs->cap = 0;
    return defer(c, rs, CALL_LANE_REQUEST, setup_call_run, s, setup_call_free);
}

static setup_kind setup_kind_of(const request_state *rs) {
    switch (rs->route) {
    case ROUTE_APPLY_TEMPLATE: return SETUP_APPLY_TEMPLATE;
    case ROUTE_ANTHROPIC: return SETUP_ANTHROPIC;
    case ROUTE_COUNT_TOKENS: return SETUP_COUNT_TOKENS;
    case ROUTE_RESPONSES: return SETUP_RESPONSES;
    case ROUTE_COMPLETION: return rs->url && !strcmp(rs->url, "/infill") ? SETUP_INFILL : SETUP_COMPLETION;
    default: return strcmp(rs->url, "/v1/chat/completions") == 0 ? SETUP_CHAT : SETUP_TEXT;
    }
}

/* /apply-template's refusal in llama-server's shape, as its other routes. */
static enum MHD_Result send_template_error(struct MHD_Connection *c, const openai_error *err) {
    int code = err->status == MHD_HTTP_BAD_REQUEST ? API_INVALID_PARAMS
             : err->status == MHD_HTTP_SERVICE_UNAVAILABLE ? API_NO_MODEL : API_INTERNAL_ERROR;
    api_error rerr; /* data.field: the field at fault */
    api_fail(&rerr, code, err->param, "%s", err->message);
    return send_json(c, err->status, json_pack("{s:o}", "error", api_error_object(&rerr)));
}

static bool anthropic_shaped(route_id route) { return route == ROUTE_ANTHROPIC || route == ROUTE_COUNT_TOKENS; }

/* A /v1 call's refusal in its dialect's shape (the Responses API names the fields its client sent). */
static enum MHD_Result send_v1_error(struct MHD_Connection *c, json_t *error, unsigned http_status, route_id route) {
    openai_error err;
    openai_error_from_rpc(error, &err);
    if (http_status) err.status = http_status;
    if (route == ROUTE_RESPONSES) responses_name_field(&err);
    return anthropic_shaped(route) ? anthropic_send_error(c, &err) : openai_send_error(c, &err);
}

static enum MHD_Result stream_v1(struct MHD_Connection *c, const completion_call *call, route_id route) {
    if (anthropic_shaped(route)) return anthropic_stream_respond(c, call->job);
    return route == ROUTE_RESPONSES ? responses_stream_respond(c, call->job) : openai_stream_respond(c, call);
}

/* A /v1 call's answer in its dialect (OpenAI's, Anthropic's, the Responses API): the result, its
 * stream, or the error. */
static enum MHD_Result finish_v1(struct MHD_Connection *c, completion_call *call, json_t *response,
                                 unsigned http_status, route_id route) {
    json_t *result = json_object_get(response, "result"), *error = json_object_get(response, "error");
    enum MHD_Result ok;
    if (http_status || !result) ok = send_v1_error(c, error, http_status, route);
    else if (call->stream) ok = stream_v1(c, call, route);
    else ok = send_json(c, MHD_HTTP_OK, json_incref(result));
    json_decref(response);
    return ok;
}

/* A /completion call's answer: the result, its stream, or the error. */
static enum MHD_Result finish_completion(struct MHD_Connection *c, completion_call *call, json_t *response) {
    if (!call->stream || !json_object_get(response, "result")) return send_rpc_outcome(c, response);
    json_decref(response);
    return completion_stream_respond(c, call);
}

/* /infill on a model without fill-in-the-middle tokens: 501 in llama-server's own error shape, with
 * the refusal's message (which tokens are missing). */
static enum MHD_Result send_not_supported(struct MHD_Connection *c, json_t *response) {
    const char *m = json_string_value(json_object_get(json_object_get(response, "error"), "message"));
    enum MHD_Result ok = send_llama_error(c, MHD_HTTP_NOT_IMPLEMENTED, "not_supported_error", m ? m : "not supported");
    json_decref(response);
    return ok;
}

/* A call set up on a worker (setup_call.c): its refusal, its own answer, or its completion's. */
static enum MHD_Result finish_set_up(struct MHD_Connection *c, request_state *rs, setup_call *s, json_t *response,
                                     unsigned http_status) {
    if (rs->route == ROUTE_COMPLETION) {
        if (http_status) return send_json(c, http_status, response); /* the server's own refusal (stopping) */
        if (setup_call_not_supported(s)) return send_not_supported(c, response);
        completion_call *call = setup_call_completion(s);
        return call ? finish_completion(c, call, response) : send_rpc_outcome(c, response);
    }
    const openai_error *err = http_status ? NULL : setup_call_error(s);
    bool anthropic = anthropic_shaped(rs->route);
    bool llama = rs->route == ROUTE_APPLY_TEMPLATE;
    if (err) {
        json_decref(response);
        return anthropic ? anthropic_send_error(c, err) : llama ? send_template_error(c, err) : openai_send_error(c, err);
    }
    if (!http_status && (llama || rs->route == ROUTE_COUNT_TOKENS)) {
        json_decref(response);
        return send_json(c, MHD_HTTP_OK, setup_call_answer(s));
    }
    if (llama) return send_json(c, http_status, response); /* the server's own refusal (stopping) */
    /* refused by the server itself, the worker may still be at it: only its answer is read */
    completion_call *call = http_status ? NULL : setup_call_completion(s);
    return finish_v1(c, call, response, http_status, rs->route);
}

/* The handler is called again once the worker has answered: send that answer. */
static enum MHD_Result finish_deferred(struct MHD_Connection *c, request_state *rs) {
    json_t *response = NULL;
    unsigned http_status = 0;
    if (!call_result(rs->call, &response, &http_status)) return MHD_NO; /* cannot happen: resumed early */
    void *ctx = call_context(rs->call);
    enum MHD_Result ok;
    if (rs->route == ROUTE_EMBED) ok = embeddings_respond(c, ctx, response, http_status);
    else if (http_status && (rs->route == ROUTE_RPC || rs->route == ROUTE_LLAMA || rs->route == ROUTE_SLOT_ACTION))
        ok = send_json(c, http_status, response);
    else if (rs->route == ROUTE_RPC) ok = send_rpc_response(c, response);
    else if (rs->route == ROUTE_LLAMA || rs->route == ROUTE_SLOT_ACTION) ok = send_rpc_outcome(c, response);
    else ok = finish_set_up(c, rs, ctx, response, http_status);
    call_release(rs->call);
    rs->call = NULL;
    return ok;
}

/* ---- the handler ----------------------------------------------------------------------------- */

/* A refusal in the route's shape: OpenAI's on /v1, else {"error": {code, message}}. */
static enum MHD_Result refuse_bad_body(struct MHD_Connection *c, bool v1, unsigned status, int code, const char *message) {
    return v1 ? openai_fail(c, status, "invalid_request_error", NULL, message) : send_error(c, status, code, message);
}

static enum MHD_Result refuse_too_large(struct MHD_Connection *c, const http_options *o, bool v1) {
    char message[160];
    snprintf(message, sizeof message, "the request body is larger than %lld bytes (--max-body)", (long long)o->max_body);
    return refuse_bad_body(c, v1, MHD_HTTP_CONTENT_TOO_LARGE, API_INVALID_REQUEST, message);
}

/* A Content-Length over the limit, seen before any of the body is read. */
static bool declared_too_large(struct MHD_Connection *c, int64_t limit) {
    const char *value = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (!value) return false;
    errno = 0;
    char *end = NULL;
    unsigned long long n = strtoull(value, &end, 10);
    return end != value && (errno == ERANGE || n > (unsigned long long)limit);
}

static request_state *new_request_state(route_id route, const char *url, http_caller who, const http_options *o) {
    request_state *rs = calloc(1, sizeof *rs);
    if (!rs) return NULL;
    rs->route = route;
    rs->url = url;
    rs->options = o;
    rs->caller = (rpc_caller){.admin = who.admin, .models_dir = o->models_dir};
    rs->nul_at = -1;
    return rs;
}

/* llama-server's slot actions: refused by name without --slot-save-path (501, as llama-server);
 * with it, POST /slots/ID?action=... reads its body (a filename) and runs on a worker. */
static enum MHD_Result begin_slot_action(struct MHD_Connection *c, const http_options *o, const char *url, bool post,
                                         http_caller who, void **state) {
    if (!o->slot_save_path) return route_refuse_slot_action(c);
    if (!post) return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, API_INVALID_REQUEST, "use POST");
    char message[300];
    int32_t slot = 0;
    const char *action = NULL;
    if (!route_slot_action_target(c, url, &slot, &action, message, sizeof message))
        return send_error(c, MHD_HTTP_BAD_REQUEST, API_INVALID_PARAMS, message);
    if (declared_too_large(c, o->max_body)) return refuse_too_large(c, o, false);
    if (serve_stopping()) return send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, API_BUSY, "the server is stopping");
    request_state *rs = new_request_state(ROUTE_SLOT_ACTION, NULL, who, o);
    if (!rs) return MHD_NO;
    rs->slot = slot;
    rs->action = action;
    *state = rs;
    return MHD_YES;
}

/* llama-server's embedding and rerank routes (`url`: which), refused in its shape. */
static enum MHD_Result begin_embeddings(struct MHD_Connection *c, const http_options *o, const char *url, bool post,
                                        http_caller who, void **state) {
    if (!post) return send_llama_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", "use POST");
    if (declared_too_large(c, o->max_body)) {
        char message[160];
        snprintf(message, sizeof message, "the request body is larger than %lld bytes (--max-body)",
                 (long long)o->max_body);
        return send_llama_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "invalid_request_error", message);
    }
    if (serve_stopping()) return send_llama_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable_error",
                                                  "the server is stopping");
    request_state *rs = new_request_state(ROUTE_EMBED, url, who, o);
    if (!rs) return MHD_NO;
    *state = rs;
    return MHD_YES;
}

/* The /v1 routes, refused in OpenAI's shape. */
static enum MHD_Result begin_openai(struct MHD_Connection *c, const http_options *o, const char *url,
                                    const char *method, http_caller who, void **state) {
    bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    if (anthropic_route(url)) {
        openai_error err = {.status = MHD_HTTP_METHOD_NOT_ALLOWED, .type = "invalid_request_error"};
        snprintf(err.message, sizeof err.message, "use POST");
        if (!post) return anthropic_send_error(c, &err);
        if (declared_too_large(c, o->max_body)) return refuse_too_large(c, o, true);
        if (serve_stopping()) {
            err.status = MHD_HTTP_SERVICE_UNAVAILABLE;
            snprintf(err.message, sizeof err.message, "the server is stopping");
            return anthropic_send_error(c, &err);
        }
        bool count = strcmp(url, "/v1/messages/count_tokens") == 0;
        request_state *rs = new_request_state(count ? ROUTE_COUNT_TOKENS : ROUTE_ANTHROPIC, NULL, who, o);
        if (!rs) return MHD_NO;
        *state = rs;
        return MHD_YES;
    }
    if (responses_route(url)) {
        if (!post) return openai_fail(c, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", NULL, "use POST");
        if (declared_too_large(c, o->max_body)) return refuse_too_large(c, o, true);
        if (serve_stopping())
            return openai_fail(c, MHD_HTTP_SERVICE_UNAVAILABLE, "server_error", NULL, "the server is stopping");
        request_state *rs = new_request_state(ROUTE_RESPONSES, NULL, who, o);
        if (!rs) return MHD_NO;
        *state = rs;
        return MHD_YES;
    }
    if (openai_route_get(url))
        return get ? openai_answer_get(c, o->rpc, url)
                   : openai_fail(c, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", NULL, "use GET");
    if (!openai_route_post(url))
        return openai_fail(c, MHD_HTTP_NOT_FOUND, "invalid_request_error", NULL, "not found: POST /v1/chat/completions, "
                           "POST /v1/completions, GET /v1/models, POST /v1/responses, POST /v1/messages, "
                           "POST /v1/messages/count_tokens, POST /v1/embeddings, POST /v1/rerank");
    if (!post) return openai_fail(c, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", NULL, "use POST");
    if (declared_too_large(c, o->max_body)) return refuse_too_large(c, o, true);
    if (serve_stopping())
        return openai_fail(c, MHD_HTTP_SERVICE_UNAVAILABLE, "server_error", NULL, "the server is stopping");
    const char *which = strcmp(url, "/v1/chat/completions") == 0 ? "/v1/chat/completions" : "/v1/completions";
    request_state *rs = new_request_state(ROUTE_OPENAI, which, who, o);
    if (!rs) return MHD_NO;
    *state = rs;
    return MHD_YES;
}

/* 414 at once for a request line with too many query arguments (query_args.c cut them off). */
static enum MHD_Result refuse_too_many_query_args(struct MHD_Connection *c, const char *url) {
    char message[200];
    snprintf(message, sizeof message, "the URL has more than %d query arguments (after '?'): send the "
             "parameters in the request body", QUERY_ARGS_MAX);
    return refuse_bad_body(c, strncmp(url, "/v1/", 4) == 0, MHD_HTTP_URI_TOO_LONG, API_INVALID_REQUEST, message);
}

/* The first call, with the headers only: everything that can be refused is, before the body. */
static enum MHD_Result begin_request(struct MHD_Connection *c, const http_options *o, const char *url,
                                     const char *method, void **state) {
    bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    http_caller who = identify(c, o);
    /* Answers from the headers keep the request's deadline: they are sent at once, and a body
     * that a client trickles after them does not hold the connection past it. */
    if (get && (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0) && o->web_page) return page_respond(c);
    bool health = strcmp(url, "/") == 0 || strcmp(url, "/health") == 0;
    if ((get || strcmp(method, "HEAD") == 0) && health) return route_health(c, o->rpc, who.keyed);
    if (health) /* the route exists for GET only: 405, as for every other route and method */
        return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, API_INVALID_REQUEST, "use GET");
    bool v1 = strncmp(url, "/v1/", 4) == 0;
    if (!who.user && v1)
        return openai_fail(c, MHD_HTTP_UNAUTHORIZED, "invalid_request_error", NULL, "unauthorized: send the API key "
                           "as 'Authorization: Bearer KEY' (the OpenAI clients' api_key) or 'X-Api-Key: KEY'");
    if (!who.user)
        return send_error(c, MHD_HTTP_UNAUTHORIZED, API_NO_MODEL, "unauthorized: send the API key as "
                          "'Authorization: Bearer KEY' or 'X-Api-Key: KEY'");
    if (route_is_slot_action(c, url)) return begin_slot_action(c, o, url, post, who, state);
    const char *embeddings = embeddings_route(url);
    if (embeddings) return begin_embeddings(c, o, embeddings, post, who, state);
    if (route_is_llama_get(url) && (get || !route_is_llama_post(url))) /* /lora-adapters takes both */
        return get ? route_llama_get(c, o->rpc, &o->chat, url)
                   : send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, API_INVALID_REQUEST, "use GET");
    if (v1) return begin_openai(c, o, url, method, who, state);
    bool rpc = strcmp(url, "/rpc") == 0, infill = strcmp(url, "/infill") == 0;
    bool completion = strcmp(url, "/completion") == 0 || infill, llama = route_is_llama_post(url);
    bool apply = strcmp(url, "/apply-template") == 0;
    if (!rpc && !completion && !llama && !apply)
        return send_error(c, MHD_HTTP_NOT_FOUND, API_METHOD_NOT_FOUND, "not found: POST /rpc, POST /completion, "
                          "POST /infill, POST /tokenize, POST /detokenize, POST /apply-template, GET /health, GET /props, "
                          "GET /slots, GET /metrics, GET and POST /lora-adapters, POST /embedding, POST /embeddings, "
                          "POST /rerank");
    if (!post) return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, API_INVALID_REQUEST, "use POST");
    if (declared_too_large(c, o->max_body)) return refuse_too_large(c, o, false);
    if (serve_stopping()) return send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, API_BUSY, "the server is stopping");
    request_state *rs = new_request_state(rpc ? ROUTE_RPC : completion ? ROUTE_COMPLETION
                                          : apply ? ROUTE_APPLY_TEMPLATE : ROUTE_LLAMA,
                                          llama ? (strcmp(url, "/tokenize") == 0     ? "/tokenize"
                                                   : strcmp(url, "/detokenize") == 0 ? "/detokenize"
                                                                                      : "/lora-adapters")
                                          : infill ? "/infill" : NULL,
                                          who, o);
    if (!rs) return MHD_NO;
    *state = rs;
    return MHD_YES;
}

/* Collects the body; past the limit it is dropped (the answer is 413). */
static void collect_body(request_state *rs, const char *data, size_t n, int64_t limit) {
    if (rs->too_large) return;
    if (rs->len + n > (size_t)limit) {
        rs->too_large = true;
        free(rs->body);
        rs->body = NULL;
        rs->len = rs->cap = 0;
        return;
    }
    const char *nul = memchr(data, '\0', n);
    if (nul && rs->nul_at < 0) rs->nul_at = (int64_t)(rs->len + (size_t)(nul - data));
    if (rs->len + n + 1 > rs->cap) {
        size_t cap = rs->cap ? rs->cap : 4096;
        while (cap < rs->len + n + 1) cap *= 2;
        char *grown = realloc(rs->body, cap);
        if (!grown) {
            rs->too_large = true; /* out of memory: refused as too large */
            return;
        }
        rs->body = grown;
        rs->cap = cap;
    }
    memcpy(rs->body + rs->len, data, n);
    rs->len += n;
    rs->body[rs->len] = '\0';
    if (!rs->large && rs->len >= MEMORY_LARGE_BODY) {
        rs->large = true;
        memory_large_request_begins();
    }
}

/* The whole body is in. */
static enum MHD_Result run_request(struct MHD_Connection *c, const http_options *o, request_state *rs) {
    conn_request_arrived(c); /* in time: from here on the deadline no longer applies */
    if (rs->route == ROUTE_EMBED) return route_embeddings(c, o, rs);
    bool v1 = rs->route == ROUTE_OPENAI || rs->route == ROUTE_ANTHROPIC || rs->route == ROUTE_COUNT_TOKENS ||
              rs->route == ROUTE_RESPONSES;
    if (rs->too_large) return refuse_too_large(c, o, v1);
    if (rs->nul_at >= 0) {
        char message[200];
        snprintf(message, sizeof message, "the request body has a NUL byte at offset %lld: JSON text cannot "
                 "contain one", (long long)rs->nul_at);
        return refuse_bad_body(c, v1, MHD_HTTP_BAD_REQUEST, API_PARSE_ERROR, message);
    }
    if (rs->route == ROUTE_LLAMA) return route_llama_post(c, rs);
    if (rs->route == ROUTE_SLOT_ACTION) return route_slot_action(c, rs);
    return rs->route == ROUTE_RPC ? route_rpc(c, rs) : route_set_up(c, rs, setup_kind_of(rs));
}

enum MHD_Result routes_handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state) {
    (void)version;
    const http_options *o = cls;
    if (*state == QUERY_ARGS_TOO_MANY) {
        *state = NULL;
        return refuse_too_many_query_args(c, url);
    }
    request_state *rs = *state;
    if (!rs) return begin_request(c, o, url, method, state);
    if (rs->call) return finish_deferred(c, rs);
    if (*upload_size > 0) {
        collect_body(rs, upload, *upload_size, o->max_body);
        *upload_size = 0;
        return MHD_YES;
    }
    return run_request(c, o, rs);
}

void routes_request_done(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode why) {
    (void)cls;
    (void)why;
    request_state *rs = *state == QUERY_ARGS_TOO_MANY ? NULL : *state; /* refused before it was answered */
    bool large = rs && rs->large;
    if (rs) {
        call_release(rs->call);
        free(rs->body);
        free(rs);
    }
    *state = NULL;
    conn_request_finished(c);
    if (large) memory_large_request_done();
}
