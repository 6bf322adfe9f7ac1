/* args.c - strict parsing of flag values. */
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

bool cli_fail(cli_args *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->error, sizeof a->error, fmt, ap);
    va_end(ap);
    return false;
}

const char *cli_value(cli_args *a, const char *flag) {
    if (a->i >= a->argc) {
        cli_fail(a, "%s needs a value", flag);
        return NULL;
    }
    return a->argv[a->i++];
}

bool cli_int(cli_args *a, const char *flag, int64_t min, int64_t max, int64_t *out) {
    const char *s = cli_value(a, flag);
    if (!s) return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0')
        return cli_fail(a, "%s expects an integer, got '%s'", flag, s);
    if (v < min || v > max)
        return cli_fail(a, "%s must be between %lld and %lld, got %lld", flag, (long long)min,
                        (long long)max, v);
    *out = v;
    return true;
}

bool cli_float(cli_args *a, const char *flag, double min, double max, double *out) {
    const char *s = cli_value(a, flag);
    if (!s) return false;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || isnan(v))
        return cli_fail(a, "%s expects a number, got '%s'", flag, s);
    if (v < min || v > max) return cli_fail(a, "%s must be between %g and %g, got %g", flag, min, max, v);
    *out = v;
    return true;
}
