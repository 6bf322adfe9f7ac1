/* fault.c - see fault.h. */
#include "fault.h"

#include <stdarg.h>
#include <stdio.h>

void serve_format_fault(char *field, size_t field_size, const char *name, char *message, size_t message_size,
                        const char *fmt, va_list ap) {
    snprintf(field, field_size, "%s", name ? name : "");
    vsnprintf(message, message_size, fmt, ap);
}

bool serve_fail(serve_fault *fault, serve_fault_kind kind, const char *field, const char *fmt, ...) {
    fault->kind = kind;
    va_list ap;
    va_start(ap, fmt);
    serve_format_fault(fault->field, sizeof fault->field, field, fault->message, sizeof fault->message, fmt, ap);
    va_end(ap);
    return false;
}
