/* methods_embed.c - embeddings and rerank as JSON-RPC methods (embed_json.h), so that the JSON
 * API's users (specd_rpc, libspecd-rpc, POST /rpc) have them too: the params are /v1/embeddings'
 * body (or /embedding's, with "content") and /rerank's, the result the same answer; a refusal in
 * this API's codes, llama-server's error type kept in the message. */
#define _POSIX_C_SOURCE 200809L
#include "../api/embed_json.h"
#include "methods.h"

#include <stdlib.h>
#include <string.h>

static void rpc_error_of(const embed_error *e, api_error *err) {
    int code = e->status == 400 ? API_INVALID_PARAMS : e->status == 503 ? API_NO_MODEL
             : e->status == 501 ? API_INVALID_REQUEST : API_INTERNAL_ERROR;
    api_fail(err, code, "", "%s (%s)", e->message, e->type);
}

/* The answers' "model": the alias, or the model file's name without its directories. */
static char *model_name(api_host *h) {
    char *name = api_host_model_name(h);
    const char *slash = name ? strrchr(name, '/') : NULL;
    if (slash) memmove(name, slash + 1, strlen(slash));
    return name;
}

static json_t *run(api_host *h, json_t *params, bool rerank, api_error *err) {
    if (!json_is_object(params)) {
        api_fail(err, API_INVALID_PARAMS, "", "%s params: an object, as the body of %s", rerank ? "rerank" : "embeddings",
                 rerank ? "POST /rerank" : "POST /v1/embeddings");
        return NULL;
    }
    char *name = model_name(h);
    embed_error e;
    json_t *answer = rerank ? embed_json_rerank(h, params, name, &e)
                            : embed_json_embeddings(h, params, EMBED_OPENAI, name, &e);
    free(name);
    if (!answer) rpc_error_of(&e, err);
    return answer;
}

json_t *rpc_method_embeddings(api_host *h, json_t *params, api_error *err) { return run(h, params, false, err); }

json_t *rpc_method_rerank(api_host *h, json_t *params, api_error *err) { return run(h, params, true, err); }
