/* embeddings.c - llama-server's embedding and rerank routes (server.h): POST /embedding,
 * /embeddings, /v1/embeddings, /rerank, /reranking, /v1/rerank, /v1/reranking. The body is parsed
 * and the inputs embedded on a worker of the request lane (a client decides how many there are);
 * the answer, or the refusal in llama-server's error shape, is sent when it is done
 * (src/api/embed_json.h does the reading and the computing). */
#define _POSIX_C_SOURCE 200809L
#include "server.h"

#include "openai.h"

#include "../api/embed_json.h"

#include <stdlib.h>
#include <string.h>

typedef enum embed_route { ROUTE_EMBED_LLAMA, ROUTE_EMBED_OPENAI, ROUTE_RERANK } embed_route;

static const struct {
    const char *url;
    embed_route route;
} routes[] = {{"/embedding", ROUTE_EMBED_LLAMA}, {"/embeddings", ROUTE_EMBED_LLAMA}, {"/v1/embeddings", ROUTE_EMBED_OPENAI},
              {"/rerank", ROUTE_RERANK},         {"/reranking", ROUTE_RERANK},       {"/v1/rerank", ROUTE_RERANK},
              {"/v1/reranking", ROUTE_RERANK}};

const char *embeddings_route(const char *url) {
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++)
        if (!strcmp(url, routes[i].url)) return routes[i].url;
    return NULL;
}

static embed_route route_of(const char *url) {
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++)
        if (!strcmp(url, routes[i].url)) return routes[i].route;
    return ROUTE_EMBED_LLAMA;
}

struct embeddings_call {
    api_host *host;
    embed_route route;
    char *body; /* owned */
    size_t len;
    json_t *answer;  /* after the run: the answer, or NULL with err */
    embed_error err;
};

embeddings_call *embeddings_call_new(api_host *host, const char *url, char *body, size_t len) {
    embeddings_call *call = calloc(1, sizeof *call);
    if (!call) {
        free(body);
        return NULL;
    }
    *call = (embeddings_call){.host = host, .route = route_of(url), .body = body, .len = len};
    return call;
}

void embeddings_call_free(void *ctx) {
    embeddings_call *call = ctx;
    if (!call) return;
    free(call->body);
    json_decref(call->answer);
    free(call);
}

/* The body as a JSON object, or NULL with the refusal in call->err. */
static json_t *parse_body(embeddings_call *call) {
    json_error_t jerr;
    json_t *body = json_loadb(call->body ? call->body : "", call->len, JSON_REJECT_DUPLICATES, &jerr);
    if (json_is_object(body)) return body;
    embed_fail(&call->err, "invalid_request_error", "the body must be a JSON object (%s at line %d, column %d)",
               body ? "not an object" : jerr.text, jerr.line, jerr.column);
    json_decref(body);
    return NULL;
}

/* The call_fn: the work, its outcome kept in the call; the value returned only says it ran. */
json_t *embeddings_call_run(void *ctx) {
    embeddings_call *call = ctx;
    json_t *body = parse_body(call);
    char *name = body ? api_host_model_name(call->host) : NULL;
    char *model = name ? openai_model_id(name) : NULL; /* llama-server's model name: the file's, or the alias */
    if (body && !model) embed_fail(&call->err, "server_error", "out of memory");
    else if (body && call->route == ROUTE_RERANK) call->answer = embed_json_rerank(call->host, body, model, &call->err);
    else if (body)
        call->answer = embed_json_embeddings(call->host, body,
                                             call->route == ROUTE_EMBED_OPENAI ? EMBED_OPENAI : EMBED_LLAMA, model,
                                             &call->err);
    free(name);
    free(model);
    json_decref(body);
    return json_true();
}

enum MHD_Result embeddings_respond(struct MHD_Connection *c, embeddings_call *call, json_t *response,
                                   unsigned http_status) {
    json_t *error = json_object_get(response, "error");
    const char *why = json_string_value(json_object_get(error, "message"));
    enum MHD_Result ok;
    if (http_status) /* the server's own refusal (stopping, queue full): the worker never ran it */
        ok = send_llama_error(c, http_status, http_status == MHD_HTTP_SERVICE_UNAVAILABLE ? "unavailable_error"
                                                                                         : "server_error",
                              why ? why : "the server refused the call");
    else if (call->answer) ok = send_json_exact(c, MHD_HTTP_OK, json_incref(call->answer));
    else ok = send_json(c, call->err.status, embed_error_json(&call->err));
    json_decref(response);
    return ok;
}
