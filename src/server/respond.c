/* respond.c - the answers every route sends: a JSON body, an error {"error": {code, message}}, and
 * a JSON-RPC outcome on a plain route (the result with 200, the error with the HTTP status its
 * code maps to). */
#include "server.h"

#include <stdlib.h>
#include <string.h>

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *type, const char *text) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    if (type) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    /* busy (every slot and the queue full), loading, stopping: worth retrying soon */
    if (status == MHD_HTTP_SERVICE_UNAVAILABLE) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_json_digits(struct MHD_Connection *c, unsigned status, json_t *value, int digits) {
    char *text = value ? json_dumps(value, JSON_COMPACT | JSON_REAL_PRECISION(digits)) : NULL;
    json_decref(value);
    enum MHD_Result ok = send_text(c, text ? status : MHD_HTTP_INTERNAL_SERVER_ERROR, "application/json",
                                   text ? text : "{\"error\":{\"code\":-32603,\"message\":\"out of memory\"}}");
    free(text);
    return ok;
}

enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *value) {
    return send_json_digits(c, status, value, 15);
}

enum MHD_Result send_json_exact(struct MHD_Connection *c, unsigned status, json_t *value) {
    return send_json_digits(c, status, value, 17);
}

enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, int code, const char *message) {
    return send_json(c, status, json_pack("{s:{s:i, s:s}}", "error", "code", code, "message", message));
}

enum MHD_Result send_llama_error(struct MHD_Connection *c, unsigned status, const char *type, const char *message) {
    return send_json(c, status, json_pack("{s:{s:i, s:s, s:s}}", "error", "code", (int)status, "message", message,
                                          "type", type));
}

unsigned http_status_for(json_int_t code) {
    if (code == API_PARSE_ERROR || code == API_INVALID_REQUEST || code == API_INVALID_PARAMS)
        return MHD_HTTP_BAD_REQUEST;
    if (code == API_NO_MODEL || code == API_BUSY) return MHD_HTTP_SERVICE_UNAVAILABLE;
    if (code == API_METHOD_NOT_FOUND || code == API_UNKNOWN_JOB) return MHD_HTTP_NOT_FOUND;
    if (code == API_FORBIDDEN) return MHD_HTTP_FORBIDDEN;
    return MHD_HTTP_INTERNAL_SERVER_ERROR;
}

/* A plain route's answer: the result with 200, or the error object with a matching status. */
enum MHD_Result send_rpc_outcome(struct MHD_Connection *c, json_t *response) {
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

