/* abi.c - the users' old C ABI with a specd_ prefix (init, get_completion, ...), each a thin
 * wrapper that calls a method of the process's JSON API object (rpc_api.c) and reshapes its answer
 * the way the old functions answered: {"success": true, ...} or {"success": false, "error":
 * {code, message, data}}. */
#include "specd_rpc.h"

#include "rpc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static json_t *failure(json_t *error) {
    return json_pack("{s:b, s:o}", "success", 0, "error", error);
}

/* Parses the caller's text as the params object; NULL or "" means no params. */
static bool parse_params(const char *text, json_t **params, json_t **error) {
    *params = NULL;
    *error = NULL;
    if (!text || !text[0]) return true;
    json_error_t jerr;
    *params = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (*params) return true;
    api_error err;
    api_fail(&err, API_PARSE_ERROR, "", "parse error: %s at line %d, column %d", jerr.text, jerr.line, jerr.column);
    *error = api_error_object(&err);
    return false;
}

/* Calls `method` on the process's object; returns the result, or NULL with *error set. */
static json_t *call(const char *method, json_t *params, json_t **error) {
    return rpc_api_call_method(rpc_api_process(), method, params, error);
}

/* method(text as params) -> result with "success": true, or the failure object. */
static json_t *call_text(const char *method, const char *text) {
    json_t *params, *error;
    if (!parse_params(text, &params, &error)) return failure(error);
    json_t *result = call(method, params, &error);
    json_decref(params);
    if (!result) return failure(error);
    if (json_is_object(result)) json_object_set_new(result, "success", json_true());
    return result;
}

/* Why the last specd_init failed before any model was tried (a bad flag, malformed JSON): the
 * status then reports it, since specd_init itself can only return a code. */
static pthread_mutex_t init_error_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *init_error;

static void set_init_error(json_t *error) {
    pthread_mutex_lock(&init_error_lock);
    json_decref(init_error);
    init_error = json_incref(error);
    pthread_mutex_unlock(&init_error_lock);
}

static int init_with(const char *cmd, bool async) {
    json_t *params = rpc_init_params_text(cmd), *error = NULL, *result = NULL;
    if (!params) {
        api_error err;
        api_fail(&err, API_PARSE_ERROR, "", "init: the settings start with '{' but are not valid JSON");
        error = api_error_object(&err);
    } else {
        if (async) json_object_set_new(params, "async", json_true());
        result = call("init", params, &error);
    }
    set_init_error(error);
    json_decref(params);
    int code = result ? 0 : (int)json_integer_value(json_object_get(error, "code"));
    json_decref(result);
    json_decref(error);
    return code;
}

int specd_init(const char *cmd) { return init_with(cmd, false); }

void specd_init_async(const char *cmd) { (void)init_with(cmd, true); }

const char *specd_poll_system_status(void) {
    json_t *status = call_text("status", NULL);
    pthread_mutex_lock(&init_error_lock);
    if (init_error) { /* the latest init failed before loading: that is the news, not an older load */
        json_object_set(status, "error", json_object_get(init_error, "message"));
        json_object_set_new(status, "init_success", json_integer(-1));
    }
    pthread_mutex_unlock(&init_error_lock);
    return rpc_dump(status);
}

const char *specd_tokenize_json(const char *request) {
    json_t *params, *error;
    if (!parse_params(request, &params, &error)) return rpc_dump(failure(error));
    if (json_is_object(params)) json_object_set_new(params, "with_pieces", json_true());
    json_t *result = call("tokenize", params, &error);
    json_decref(params);
    if (!result) return rpc_dump(failure(error));
    json_t *old = json_pack("{s:b, s:O, s:O}", "success", 1, "tokens", json_object_get(result, "pieces"), "length",
                            json_object_get(result, "length"));
    json_decref(result);
    return rpc_dump(old);
}

const char *specd_get_completion(const char *request) { return rpc_dump(call_text("completion", request)); }

const char *specd_async_completion_init(const char *request) { return rpc_dump(call_text("completion.start", request)); }

const char *specd_async_completion_poll(const char *cmd) {
    json_t *r = call_text("completion.poll", cmd);
    json_object_del(r, "id");
    return rpc_dump(r);
}

const char *specd_async_completion_cancel(const char *request) { return rpc_dump(call_text("completion.cancel", request)); }

void specd_deinit(void) {
    set_init_error(NULL);
    json_t *error = NULL;
    json_decref(call("shutdown", NULL, &error));
    json_decref(error);
}
