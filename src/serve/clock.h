/* clock.h - the clocks of the JSON API's layers (libspecd-rpc reaches libspecd through its public
 * API only, so these are its own): a monotonic one for time limits, and the deadline that
 * pthread_cond_timedwait takes. */
#ifndef SPECD_SERVE_CLOCK_H
#define SPECD_SERVE_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Milliseconds on a monotonic clock (to the microsecond). */
double serve_now_ms(void);
/* The wall-clock time `ms` from now (CLOCK_REALTIME, nanoseconds normalized). */
struct timespec serve_realtime_after_ms(int64_t ms);

#endif
