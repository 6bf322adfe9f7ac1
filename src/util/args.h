/* args.h - strict command-line value parsing: a bad value is an error naming the flag, never a
 * silent default. */
#ifndef SPECD_CLI_ARGS_H
#define SPECD_CLI_ARGS_H

#include <stdbool.h>
#include <stdint.h>

/* Exit codes of the specd program: 0 success, 1 failed at run time, 2 bad arguments or models. */
#define CLI_EXIT_RUNTIME 1
#define CLI_EXIT_USAGE 2

typedef struct cli_args {
    int argc;
    char **argv;
    int i;           /* next argument */
    char error[512]; /* set when a parse fails */
} cli_args;

/* The value after flag argv[i]; NULL (and error set) when missing. Advances i. */
const char *cli_value(cli_args *a, const char *flag);
bool cli_int(cli_args *a, const char *flag, int64_t min, int64_t max, int64_t *out);
bool cli_float(cli_args *a, const char *flag, double min, double max, double *out);
bool cli_fail(cli_args *a, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
