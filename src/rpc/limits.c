/* limits.c - see limits.h. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "limits.h"

#include <stdatomic.h>
#include <time.h>

static _Atomic int32_t n_predict_max = -1;
static _Atomic int64_t time_limit_ms;
static _Atomic int64_t step_limit_ms;

void rpc_limits_set(rpc_limits limits) {
    atomic_store(&n_predict_max, limits.n_predict_max);
    atomic_store(&time_limit_ms, limits.time_limit_ms);
    atomic_store(&step_limit_ms, limits.step_limit_ms);
}

rpc_limits rpc_limits_get(void) {
    return (rpc_limits){.n_predict_max = atomic_load(&n_predict_max), .time_limit_ms = atomic_load(&time_limit_ms),
                        .step_limit_ms = atomic_load(&step_limit_ms)};
}

double rpc_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1000.0 + (double)t.tv_nsec / 1e6;
}
