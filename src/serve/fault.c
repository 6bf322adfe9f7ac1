/* fault.c - see fault.h. */
#include "fault.h"

#include <stdarg.h>
#include <stdio.h>

bool serve_fail(serve_fault *fault, serve_fault_kind kind, const char *field, const char *fmt, ...) {
    fault->kind = kind;
    snprintf(fault->field, sizeof fault->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fault->message, sizeof fault->message, fmt, ap);
    va_end(ap);
    return false;
}
