/* reply.c - the names of serve_stop (see reply.h). */
#include "reply.h"

const char *serve_stop_name(serve_stop stop) {
    static const char *const names[] = {"eos", "limit", "context", "word", "cancelled", "shutdown", "time_limit"};
    return (unsigned)stop < sizeof names / sizeof *names ? names[stop] : "unknown";
}
