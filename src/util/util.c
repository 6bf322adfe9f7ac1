/* util.c - error messages, clocks and checked allocation. */
#define _POSIX_C_SOURCE 200809L
#include "util.h"

#include "specd.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void specd_set_error(char **error, const char *fmt, ...) {
    if (!error) return;
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len < 0) len = 0;
    char *msg = malloc((size_t)len + 1);
    if (msg) {
        va_start(ap, fmt);
        vsnprintf(msg, (size_t)len + 1, fmt, ap);
        va_end(ap);
    }
    *error = msg;
}

double specd_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void *specd_alloc_array(size_t count, size_t size) {
    if (count == 0 || size == 0 || count > SIZE_MAX / size) return NULL;
    return calloc(count, size);
}

void *specd_grow_array(void *ptr, size_t count, size_t size) {
    if (count == 0 || size == 0 || count > SIZE_MAX / size) return NULL;
    return realloc(ptr, count * size);
}

bool specd_token_list_add(specd_token_list *l, const specd_token *t, int32_t n) {
    if (n <= 0) return true;
    if (l->n + n > l->cap) {
        int32_t cap = l->cap ? l->cap : 256;
        while (cap < l->n + n) cap *= 2;
        specd_token *grown = specd_grow_array(l->v, (size_t)cap, sizeof *grown);
        if (!grown) return false;
        l->v = grown;
        l->cap = cap;
    }
    memcpy(l->v + l->n, t, (size_t)n * sizeof *t);
    l->n += n;
    return true;
}

void specd_free(void *ptr) { free(ptr); }

bool specd_listed(const char *const *names, const char *key) {
    for (; key && *names; names++)
        if (strcmp(*names, key) == 0) return true;
    return false;
}

const char *specd_status_str(specd_status status) {
    switch (status) {
    case SPECD_OK: return "ok";
    case SPECD_ERR_INVALID_ARGUMENT: return "invalid argument";
    case SPECD_ERR_MODEL_LOAD: return "model load failed";
    case SPECD_ERR_INCOMPATIBLE: return "incompatible models";
    case SPECD_ERR_CONTEXT: return "context error";
    case SPECD_ERR_DECODE: return "decode failed";
    case SPECD_ERR_NO_MEMORY: return "out of memory";
    case SPECD_ERR_CANCELLED: return "cancelled";
    }
    return "unknown status";
}
