/* deadline.c - the deadline pthread_cond_timedwait takes, for the JSON API's and the server's
 * timed waits (poll's wait_ms, the disconnect watch, the deadline sweeper, the stop). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "rpc_internal.h"

#include <time.h>

struct timespec rpc_realtime_after_ms(int64_t ms) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += (time_t)(ms / 1000);
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}
