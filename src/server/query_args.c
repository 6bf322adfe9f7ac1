/* query_args.c - a bound on a request's query arguments, checked before libmicrohttpd parses them.
 * libmicrohttpd 0.9.75 stores each argument of the request line in the connection's small memory
 * pool; when the pool runs out (about 500 arguments, "/health?a=b&a=b&..."), it queues a 431 but
 * then goes on waiting for header lines that were already read, so the client gets nothing until
 * the request timeout. MHD_OPTION_URI_LOG_CALLBACK sees the request line first: past the bound
 * its arguments are cut off (libmicrohttpd then parses none) and the request is marked, so the
 * handler answers 414 at once, before any key or route is looked at. */
#include "server.h"

#include <string.h>

/* The marker a refused request carries as its request state until the handler answers it. */
static char too_many_marker;
void *const QUERY_ARGS_TOO_MANY = &too_many_marker;

/* The arguments of a query string as libmicrohttpd splits them: one per '&'-separated piece. */
static size_t count_query_args(const char *query) {
    if (!*query) return 0;
    size_t n = 1;
    for (const char *p = query; *p; p++) n += *p == '&';
    return n;
}

void *query_args_check(void *cls, const char *uri, struct MHD_Connection *c) {
    (void)cls;
    (void)c;
    char *question = strchr(uri, '?');
    if (!question || count_query_args(question + 1) <= QUERY_ARGS_MAX) return NULL;
    /* `uri` points into libmicrohttpd's own, writable read buffer; the arguments are parsed from
     * there right after this call, so an empty query leaves nothing to parse. */
    question[1] = '\0';
    return QUERY_ARGS_TOO_MANY;
}
