/* fault.h - why the server refused or failed a request, in its own terms: each API maps the kind
 * onto its codes (JSON-RPC error codes, HTTP statuses, OpenAI's error types) and names the field
 * as it spells it. */
#ifndef SPECD_SERVE_FAULT_H
#define SPECD_SERVE_FAULT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum serve_fault_kind {
    SERVE_INVALID,    /* the request is wrong: `field` names what */
    SERVE_BUSY,       /* every slot and the queue are full, or the server is stopping: retry later */
    SERVE_GENERATION, /* generation failed at run time */
    SERVE_INTERNAL,   /* out of memory, or no thread could start */
} serve_fault_kind;

typedef struct serve_fault {
    serve_fault_kind kind;
    char field[160];   /* the request field (or flag) at fault, as the API that made it spells it; "" */
    char message[768];
} serve_fault;

/* A failure's field and message, each cut to its buffer: `field` the name of what is at fault (""
 * for a NULL name), `message` fmt formatted; what serve_fail records, and the APIs' errors above it
 * (api_fail, openai_fail_with) theirs. */
void serve_format_fault(char *field, size_t field_size, const char *name, char *message, size_t message_size,
                        const char *fmt, va_list ap)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 0)))
#endif
    ;

/* Sets *fault and returns false, so that callers can `return serve_fail(...)`. */
bool serve_fail(serve_fault *fault, serve_fault_kind kind, const char *field, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#endif
