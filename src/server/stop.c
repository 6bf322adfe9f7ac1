/* stop.c - the stop of `specd serve`: the first SIGINT or SIGTERM asks for a graceful stop (new
 * requests are refused with 503, serve.c drains the rest); a second signal, or WATCHDOG_S seconds
 * without the stop finishing (a model load that does not end, a stuck call), exits at once. */
#define _POSIX_C_SOURCE 200809L
#include "server.h"

#include "../serve/clock.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define WATCHDOG_S 10 /* a graceful stop that takes longer ends with _exit */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t asked;
    atomic_bool stopping;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER, .asked = PTHREAD_COND_INITIALIZER};

bool serve_stopping(void) { return atomic_load(&S.stopping); }

static void stop_signals(sigset_t *set) {
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
}

/* True when one of `set` arrives within `seconds`. An interrupted wait goes on (the leak checker
 * of a sanitizer build interrupts it while the process exits). */
static bool second_signal_within(const sigset_t *set, int seconds) {
    struct timespec now, end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += seconds;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t left_ns = (int64_t)(end.tv_sec - now.tv_sec) * 1000000000 + (end.tv_nsec - now.tv_nsec);
        if (left_ns <= 0) return false;
        struct timespec left = {.tv_sec = left_ns / 1000000000, .tv_nsec = left_ns % 1000000000};
        siginfo_t info;
        if (sigtimedwait(set, &info, &left) > 0) return true;
        if (errno != EINTR) return false;
    }
}

/* The first SIGINT/SIGTERM asks for a graceful stop; then a second signal, or WATCHDOG_S seconds
 * without the stop finishing (a model load that does not end, a stuck call), exit at once. */
static void *signal_thread_main(void *arg) {
    (void)arg;
    sigset_t set;
    stop_signals(&set);
    int sig = 0;
    if (sigwait(&set, &sig) != 0) return NULL;
    pthread_mutex_lock(&S.lock);
    atomic_store(&S.stopping, true);
    pthread_cond_broadcast(&S.asked);
    pthread_mutex_unlock(&S.lock);
    if (second_signal_within(&set, WATCHDOG_S))
        fprintf(stderr, "specd: a second stop signal: exiting at once\n");
    else
        fprintf(stderr, "specd: the stop did not finish within %d s (a model load or a call that does not "
                "end); exiting anyway\n", WATCHDOG_S);
    _exit(1);
}

bool stop_wait(int64_t ms) {
    struct timespec until = serve_realtime_after_ms(ms);
    pthread_mutex_lock(&S.lock);
    while (!atomic_load(&S.stopping))
        if (pthread_cond_timedwait(&S.asked, &S.lock, &until) != 0) break;
    bool asked = atomic_load(&S.stopping);
    pthread_mutex_unlock(&S.lock);
    return asked;
}

bool stop_watch_start(void) {
    /* Block the stop signals before any other thread starts, so only the signal thread sees them. */
    sigset_t set;
    stop_signals(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_t thread;
    if (pthread_create(&thread, NULL, signal_thread_main, NULL) != 0) return false;
    pthread_detach(thread);
    return true;
}
