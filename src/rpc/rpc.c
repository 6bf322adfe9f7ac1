/* rpc.c - the one JSON-RPC 2.0 dispatcher every transport goes through (C functions, HTTP):
 * framing (single requests, batches, notifications, id echo), the error objects, the table of
 * methods, and the caller's rights (admin methods, the models directory). The methods themselves
 * are methods.h's, on a host's models (host.h). */
#include "methods.h"
#include "rpc.h"

#include <stdio.h>
#include <string.h>

typedef json_t *(*rpc_method_fn)(api_host *host, json_t *params, api_error *err);

/* `admin`: the method loads, replaces or unloads the models, so a caller needs admin rights
 * (any future model-loading method must be marked so too). */
static const struct {
    const char *name;
    rpc_method_fn fn;
    bool admin;
} methods[] = {
    {"init", rpc_method_init, true},
    {"status", rpc_method_status, false},
    {"tokenize", rpc_method_tokenize, false},
    {"detokenize", rpc_method_detokenize, false},
    {"completion", rpc_method_completion, false},
    {"completion.start", rpc_method_completion_start, false},
    {"completion.poll", rpc_method_completion_poll, false},
    {"completion.cancel", rpc_method_completion_cancel, false},
    {"lora_adapters", rpc_method_lora_adapters, false},
    {"lora_adapters.set", rpc_method_lora_adapters_set, false},
    {"embeddings", rpc_method_embeddings, false},
    {"rerank", rpc_method_rerank, false},
    {"shutdown", rpc_method_shutdown, true},
};

static const rpc_caller full_rights = {.admin = true, .models_dir = NULL};
static const rpc_caller least_rights = {.admin = false, .models_dir = NULL};

static json_t *error_response(json_t *id, const api_error *err) {
    json_t *r = json_pack("{s:s, s:o}", "jsonrpc", "2.0", "error", api_error_object(err));
    if (r) json_object_set(r, "id", id ? id : json_null());
    return r;
}

static json_t *error_response_code(json_t *id, int code, const char *field, const char *message) {
    api_error err;
    api_fail(&err, code, field, "%s", message);
    return error_response(id, &err);
}

/* A valid id is a string, a number or null (the specification discourages null and fractions,
 * but allows them). */
static bool valid_id(json_t *id) { return json_is_string(id) || json_is_number(id) || json_is_null(id); }

/* Checks the request object's members; returns false with *err set when it is not a request. */
static bool validate_request(json_t *req, api_error *err) {
    json_t *version = json_object_get(req, "jsonrpc");
    if (!json_is_string(version) || strcmp(json_string_value(version), "2.0") != 0)
        return api_fail(err, API_INVALID_REQUEST, "jsonrpc", "invalid request: \"jsonrpc\" must be \"2.0\"");
    if (!json_is_string(json_object_get(req, "method")))
        return api_fail(err, API_INVALID_REQUEST, "method", "invalid request: \"method\" must be a string");
    json_t *params = json_object_get(req, "params");
    if (params && !json_is_object(params) && !json_is_array(params))
        return api_fail(err, API_INVALID_REQUEST, "params", "invalid request: \"params\" must be an object");
    json_t *id = json_object_get(req, "id");
    if (id && !valid_id(id))
        return api_fail(err, API_INVALID_REQUEST, "id", "invalid request: \"id\" must be a string, a number or null");
    const char *key;
    json_t *value;
    json_object_foreach(req, key, value) {
        (void)value;
        if (strcmp(key, "jsonrpc") && strcmp(key, "method") && strcmp(key, "params") && strcmp(key, "id"))
            return api_fail(err, API_INVALID_REQUEST, key, "invalid request: unknown member \"%s\"", key);
    }
    return true;
}

/* init for a caller confined to a models directory: the same call on params whose model paths
 * are checked and pinned to their real paths. */
static json_t *call_init_confined(api_host *host, json_t *params, const char *models_dir, api_error *err) {
    json_t *confined = api_init_params_confine(params, models_dir, err);
    if (!confined) return NULL;
    json_t *result = rpc_method_init(host, confined, err);
    json_decref(confined);
    return result;
}

static json_t *call_method(api_host *host, const char *name, json_t *params, const rpc_caller *caller,
                           api_error *err) {
    if (json_is_array(params)) {
        api_fail(err, API_INVALID_PARAMS, "params",
                 "%s: params must be an object with named fields, not an array", name);
        return NULL;
    }
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        if (strcmp(methods[i].name, name) != 0) continue;
        if (methods[i].admin && !caller->admin) {
            api_fail(err, API_FORBIDDEN, "method",
                     "forbidden: '%s' loads or unloads models and needs admin rights (over HTTP: the "
                     "admin key that specd serve was started with, --admin-api-key)", name);
            return NULL;
        }
        /* A future model-loading method needs its paths confined here too. */
        if (methods[i].fn == rpc_method_init && caller->models_dir)
            return call_init_confined(host, params, caller->models_dir, err);
        return methods[i].fn(host, params, err);
    }
    api_fail(err, API_METHOD_NOT_FOUND, "method",
             "method not found: '%s' (methods: init, status, tokenize, detokenize, completion, "
             "completion.start, completion.poll, completion.cancel, shutdown)", name);
    return NULL;
}

/* One request object; NULL when it is a notification (no id member). */
static json_t *dispatch_one(api_host *host, json_t *req, const rpc_caller *caller) {
    if (!json_is_object(req))
        return error_response_code(NULL, API_INVALID_REQUEST, "", "invalid request: a request must be a JSON object");
    json_t *id = json_object_get(req, "id");
    api_error err;
    if (!validate_request(req, &err)) return error_response(id && valid_id(id) ? id : NULL, &err);
    json_t *result = call_method(host, json_string_value(json_object_get(req, "method")),
                                 json_object_get(req, "params"), caller, &err);
    if (!id) { /* a notification: done, whatever happened */
        json_decref(result);
        return NULL;
    }
    if (!result) return error_response(id, &err);
    json_t *r = json_pack("{s:s, s:o}", "jsonrpc", "2.0", "result", result);
    if (r) json_object_set(r, "id", id);
    return r;
}

/* The refusal of a batch's call that was not run: the answers before it reached the limit. */
static json_t *not_run(json_t *req) {
    json_t *id = json_is_object(req) ? json_object_get(req, "id") : NULL;
    if (json_is_object(req) && !id) return NULL; /* a notification: nothing to answer */
    char message[200];
    snprintf(message, sizeof message, "batch: the answers before this call passed %d bytes, the most one batch may "
             "get; it was not run: send it in another batch", RPC_BATCH_MAX_ANSWER);
    return error_response_code(id && valid_id(id) ? id : NULL, API_INVALID_REQUEST, "", message);
}

/* Every call in order, their answers together; once the answers pass RPC_BATCH_MAX_ANSWER bytes
 * the rest are refused, not run (12000 status calls made a 14 MB answer). */
static json_t *dispatch_batch(api_host *host, json_t *batch, const rpc_caller *caller) {
    size_t n = json_array_size(batch);
    if (n == 0) return error_response_code(NULL, API_INVALID_REQUEST, "", "invalid request: an empty batch");
    if (n > RPC_BATCH_MAX_CALLS) {
        char message[200];
        snprintf(message, sizeof message, "invalid request: a batch of %zu calls; at most %d per batch: send the "
                 "rest in another batch", n, RPC_BATCH_MAX_CALLS);
        return error_response_code(NULL, API_INVALID_REQUEST, "", message);
    }
    json_t *responses = json_array();
    size_t i, answered = 0;
    json_t *req;
    json_array_foreach(batch, i, req) {
        json_t *r = answered > RPC_BATCH_MAX_ANSWER ? not_run(req) : dispatch_one(host, req, caller);
        if (r) answered += json_dumpb(r, NULL, 0, JSON_COMPACT) + 1;
        if (r) json_array_append_new(responses, r);
    }
    if (json_array_size(responses) == 0) { /* only notifications: nothing at all is returned */
        json_decref(responses);
        return NULL;
    }
    return responses;
}

json_t *rpc_dispatch_as(api_host *host, json_t *request, const rpc_caller *caller) {
    if (!caller) caller = &least_rights; /* forgetting the caller must not grant anything */
    return json_is_array(request) ? dispatch_batch(host, request, caller) : dispatch_one(host, request, caller);
}

json_t *rpc_dispatch_trusted(api_host *host, json_t *request) { return rpc_dispatch_as(host, request, &full_rights); }

json_t *rpc_error_response(const api_error *err) { return error_response(NULL, err); }
