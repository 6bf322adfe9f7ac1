/* errors.c - the JSON API's errors: the error objects it answers with, and the server's faults
 * (src/serve/fault.h) in its codes. */
#include "api.h"

#include <stdarg.h>

bool api_fail(api_error *err, int code, const char *field, const char *fmt, ...) {
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    serve_format_fault(err->field, sizeof err->field, field, err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return false;
}

json_t *api_error_object(const api_error *err) {
    json_t *e = json_pack("{s:i, s:s}", "code", err->code, "message", err->message);
    if (e && err->field[0]) json_object_set_new(e, "data", json_pack("{s:s}", "field", err->field));
    return e;
}

void api_error_from_fault(const serve_fault *fault, api_error *err) {
    static const int codes[] = {
        [SERVE_INVALID] = API_INVALID_PARAMS,
        [SERVE_BUSY] = API_BUSY,
        [SERVE_GENERATION] = API_GENERATION,
        [SERVE_INTERNAL] = API_INTERNAL_ERROR,
    };
    api_fail(err, codes[fault->kind], fault->field, "%s", fault->message);
}
