/* limits.h - the work one completion may ask for, set once by whoever serves the JSON API (specd
 * serve: -n / --n-predict, --time-limit, --step-limit); the library itself sets none. Read by the
 * request parser (n_predict) and the scheduler (the time limits), from any thread. */
#ifndef SPECD_RPC_LIMITS_H
#define SPECD_RPC_LIMITS_H

#include <stdint.h>

typedef struct rpc_limits {
    int32_t n_predict_max; /* -1: none; else a request's n_predict when it gives none (or -1), and its ceiling */
    int64_t time_limit_ms; /* 0: none; else how long a completion may run in its slot (prompt included) */
    int64_t step_limit_ms; /* 0: none; else the floor of a heavy slot's step limit (heavy.h) */
} rpc_limits;

void rpc_limits_set(rpc_limits limits);
rpc_limits rpc_limits_get(void);
/* Milliseconds on a monotonic clock (to the microsecond), for the time limits. */
double rpc_now_ms(void);

#endif
