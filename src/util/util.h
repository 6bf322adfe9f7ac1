/* util.h - small helpers shared by every layer: error messages, clocks, checked allocation. */
#ifndef SPECD_UTIL_H
#define SPECD_UTIL_H

#include "specd.h"

#include <stdbool.h>
#include <stddef.h>

#if defined(__GNUC__)
#define SPECD_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define SPECD_PRINTF(fmt_idx, arg_idx)
#endif

/* Stores a heap copy of the formatted message in *error (if error is not NULL). */
void specd_set_error(char **error, const char *fmt, ...) SPECD_PRINTF(2, 3);

/* Monotonic clock in milliseconds. */
double specd_now_ms(void);

/* malloc/calloc/realloc that return NULL for a zero-size request as well as on failure, so
 * callers check one thing. */
/* Whether `key` is one of the NULL-terminated `names` (a NULL key, e.g. a JSON value that is not a
 * string, is none of them). */
bool specd_listed(const char *const *names, const char *key);
void *specd_alloc_array(size_t count, size_t size);
void *specd_grow_array(void *ptr, size_t count, size_t size);

/* A growing list of tokens (a prompt put together piece by piece): {0} is empty; free(v) ends it. */
typedef struct specd_token_list {
    specd_token *v;
    int32_t n, cap;
} specd_token_list;
/* Appends t[0..n); false (the list as it was) when out of memory. */
bool specd_token_list_add(specd_token_list *l, const specd_token *t, int32_t n);

#endif
