/* openai.c - the OpenAI-compatible routes of `specd serve`:
 *   POST /v1/chat/completions  messages -> a prompt through the model's chat template (or
 *                              --chat-template), then a completion
 *   POST /v1/completions       a prompt string -> a completion
 *   GET  /v1/models            the loaded model
 * Requests are openai_request.c's, answers openai_reply.c's; here: the routes, the model list and
 * errors in OpenAI's shape {"error": {message, type, param, code}}. */
#define _POSIX_C_SOURCE 200809L
#include "openai.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- errors ---------------------------------------------------------------------------------- */

json_t *openai_error_body(const openai_error *err) {
    return json_pack("{s:{s:s, s:s, s:o, s:n}}", "error", "message", err->message, "type", err->type, "param",
                     err->param[0] ? json_string(err->param) : json_null(), "code");
}

enum MHD_Result openai_send_error(struct MHD_Connection *c, const openai_error *err) {
    return send_json(c, err->status, openai_error_body(err));
}

bool openai_fail_with(openai_error *err, unsigned status, const char *type, const char *param, const char *fmt, ...) {
    err->status = status;
    err->type = type;
    va_list ap;
    va_start(ap, fmt);
    serve_format_fault(err->param, sizeof err->param, param, err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return false;
}

enum MHD_Result openai_fail(struct MHD_Connection *c, unsigned status, const char *type, const char *param,
                            const char *message) {
    openai_error err;
    openai_fail_with(&err, status, type, param, "%s", message);
    return openai_send_error(c, &err);
}

/* A JSON API code's status and type. */
static void set_kind(json_int_t code, openai_error *err) {
    bool client = code == API_PARSE_ERROR || code == API_INVALID_REQUEST || code == API_INVALID_PARAMS;
    err->status = client ? MHD_HTTP_BAD_REQUEST
                : code == API_NO_MODEL || code == API_BUSY ? MHD_HTTP_SERVICE_UNAVAILABLE
                : code == API_FORBIDDEN ? MHD_HTTP_FORBIDDEN : MHD_HTTP_INTERNAL_SERVER_ERROR;
    err->type = client ? "invalid_request_error" : "server_error";
}

void openai_error_from(const api_error *rerr, openai_error *err) {
    openai_fail_with(err, 0, "", rerr->field, "%s", rerr->message);
    set_kind(rerr->code, err);
}

void openai_error_from_fault(const serve_fault *fault, openai_error *err) {
    api_error rerr;
    api_error_from_fault(fault, &rerr);
    openai_error_from(&rerr, err);
}

void openai_error_from_rpc(json_t *error, openai_error *err) {
    const char *message = json_string_value(json_object_get(error, "message"));
    const char *field = json_string_value(json_object_get(json_object_get(error, "data"), "field"));
    openai_fail_with(err, 0, "", field, "%s", message ? message : "error");
    set_kind(json_integer_value(json_object_get(error, "code")), err);
}

const char *openai_finish_reason(serve_stop stop) {
    bool cut = stop == SERVE_STOP_LIMIT || stop == SERVE_STOP_CONTEXT || stop == SERVE_STOP_TIME_LIMIT ||
               stop == SERVE_STOP_SHUTDOWN;
    return cut ? "length" : "stop";
}

/* ---- routes ---------------------------------------------------------------------------------- */

bool openai_route_post(const char *url) {
    return strcmp(url, "/v1/chat/completions") == 0 || strcmp(url, "/v1/completions") == 0;
}

bool openai_route_get(const char *url) { return strcmp(url, "/v1/models") == 0; }

char *openai_model_id(const char *name) {
    const char *slash = name ? strrchr(name, '/') : NULL;
    return strdup(slash ? slash + 1 : name ? name : "");
}

static json_int_t started_at(void) {
    static _Atomic json_int_t at;
    json_int_t t = atomic_load(&at);
    if (!t) {
        json_int_t now = (json_int_t)time(NULL);
        atomic_compare_exchange_strong(&at, &t, now);
        t = atomic_load(&at);
    }
    return t;
}

enum MHD_Result openai_answer_get(struct MHD_Connection *c, api_host *host, const char *url) {
    (void)url;
    char *name = api_host_model_name(host);
    char *id = openai_model_id(name);
    free(name);
    json_t *list = json_array();
    if (id && id[0])
        json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:I}", "id", id, "object", "model", "owned_by", "specd",
                                              "created", started_at()));
    free(id);
    return send_json(c, MHD_HTTP_OK, json_pack("{s:s, s:o}", "object", "list", "data", list));
}

