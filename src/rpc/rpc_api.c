/* rpc_api.c - the JSON API as an object (specd_rpc.h): specd_rpc_new / specd_rpc_call /
 * specd_rpc_free, each object a host of its own (host.h) behind the one dispatcher (rpc.c); and
 * the process's object, which specd_rpc() and the old ABI (abi.c) share. */
#include "rpc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

char *rpc_dump(json_t *value) {
    char *text = value ? json_dumps(value, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    json_decref(value);
    return text;
}

json_t *rpc_init_params_text(const char *text) {
    const char *p = text ? text : "";
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    if (*p == '{') return json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    return json_pack("{s:s}", "cmd", text ? text : "");
}

/* (api NULL: the process's object could not be made; answered as out of memory) */
json_t *rpc_api_call_method(specd_rpc_api *api, const char *method, json_t *params, json_t **error) {
    json_t *request = json_pack("{s:s, s:s, s:i}", "jsonrpc", "2.0", "method", method, "id", 1);
    if (request && params) json_object_set(request, "params", params);
    json_t *response = request && api ? rpc_dispatch_trusted(api->host, request) : NULL;
    json_decref(request);
    json_t *result = json_incref(json_object_get(response, "result"));
    *error = result ? NULL : json_incref(json_object_get(response, "error"));
    if (!result && !*error) *error = json_pack("{s:i, s:s}", "code", API_INTERNAL_ERROR, "message", "out of memory");
    json_decref(response);
    return result;
}

static void set_error_text(char **error, json_t *object) {
    if (error) *error = rpc_dump(json_incref(object));
}

/* init with `init`'s settings; false with *error set (the error object's text). */
static bool init_api(specd_rpc_api *api, const char *init, char **error) {
    json_t *params = rpc_init_params_text(init), *failure = NULL;
    if (!params) {
        api_error err;
        api_fail(&err, API_PARSE_ERROR, "", "init: the settings start with '{' but are not valid JSON");
        failure = api_error_object(&err);
    } else {
        json_decref(rpc_api_call_method(api, "init", params, &failure));
    }
    json_decref(params);
    set_error_text(error, failure);
    json_decref(failure);
    return failure == NULL;
}

specd_rpc_api *specd_rpc_new(const char *init, char **error) {
    if (error) *error = NULL;
    specd_rpc_api *api = calloc(1, sizeof *api);
    if (api) api->host = api_host_new();
    if (!api || !api->host) {
        free(api);
        api_error err;
        api_fail(&err, API_INTERNAL_ERROR, "", "out of memory for the JSON API object");
        json_t *object = api_error_object(&err);
        set_error_text(error, object);
        json_decref(object);
        return NULL;
    }
    if (init && *init && !init_api(api, init, error)) {
        specd_rpc_free(api);
        return NULL;
    }
    return api;
}

char *specd_rpc_call(specd_rpc_api *api, const char *request) {
    api_error err;
    if (!api || !request) {
        api_fail(&err, API_INVALID_REQUEST, "", "invalid request: %s is NULL", api ? "the request" : "the object");
        return rpc_dump(rpc_error_response(&err));
    }
    json_error_t jerr;
    json_t *parsed = json_loads(request, JSON_REJECT_DUPLICATES, &jerr);
    if (!parsed) {
        api_parse_error(request, strlen(request), &jerr, &err);
        return rpc_dump(rpc_error_response(&err));
    }
    json_t *response = rpc_dispatch_trusted(api->host, parsed);
    json_decref(parsed);
    return rpc_dump(response);
}

void specd_rpc_free(specd_rpc_api *api) {
    if (!api) return;
    api_host_free(api->host);
    free(api);
}

/* The process's object lives as long as the process: the old ABI has no call that would free it
 * (specd_deinit only unloads its models). NULL only when it could not be made (out of memory). */
static specd_rpc_api *process_api;
static void make_process_api(void) { process_api = specd_rpc_new(NULL, NULL); }

specd_rpc_api *rpc_api_process(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_process_api);
    return process_api;
}

api_host *rpc_host_default(void) {
    specd_rpc_api *api = rpc_api_process();
    return api ? api->host : NULL;
}

const char *specd_rpc(const char *request) { return specd_rpc_call(rpc_api_process(), request); }
