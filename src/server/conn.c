/* conn.c - a deadline per request that a byte trickle cannot extend. libmicrohttpd's own timeout
 * restarts on every byte received, so a client that sends one header byte every few seconds could
 * hold a connection forever, and a thousand such clients lock everybody out. Here every
 * connection gets a deadline when it opens (and again when an answer is done, for the next request
 * on a kept-alive connection): the request's headers and body must be in by then. A sweeper thread
 * shuts down the socket of a connection past its deadline; libmicrohttpd then sees the end of the
 * stream and closes it as usual.
 *
 * Safety of shutdown() on a tracked socket: libmicrohttpd calls NOTIFY_CLOSED (which untracks the
 * connection under the lock below) before it closes the socket, so the sweeper never touches a
 * descriptor that was closed and reused. */
#define _POSIX_C_SOURCE 200809L
#include "server.h"

#include "../serve/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#define SWEEP_PERIOD_MS 100

typedef struct tracked_conn {
    struct tracked_conn *prev, *next;
    int fd;
    int64_t deadline_ms; /* monotonic; 0 while a request is being answered */
    bool shut;           /* shut down by the sweeper */
    uint64_t serial;     /* which connection of the process's it is (1, 2, ...): never reused */
} tracked_conn;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    tracked_conn *head;
    int64_t timeout_ms;
    int64_t n_closed;
    uint64_t n_opened;
    bool quit, running;
    pthread_t sweeper;
} T = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int64_t conn_raise_fd_limit(void) {
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 1024;
    if (r.rlim_cur < r.rlim_max) {
        struct rlimit raised = {.rlim_cur = r.rlim_max, .rlim_max = r.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
    }
    return r.rlim_cur == RLIM_INFINITY || r.rlim_cur > INT32_MAX ? INT32_MAX : (int64_t)r.rlim_cur;
}

void conn_notify(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code) {
    (void)cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        tracked_conn *t = info ? calloc(1, sizeof *t) : NULL;
        *socket_context = t;
        if (!t) return; /* untracked: only libmicrohttpd's idle timeout applies to it */
        t->fd = info->connect_fd;
        pthread_mutex_lock(&T.lock);
        t->deadline_ms = now_ms() + T.timeout_ms;
        t->serial = ++T.n_opened;
        t->next = T.head;
        if (T.head) T.head->prev = t;
        T.head = t;
        pthread_mutex_unlock(&T.lock);
        return;
    }
    tracked_conn *t = *socket_context;
    if (!t) return;
    pthread_mutex_lock(&T.lock);
    if (t->prev) t->prev->next = t->next;
    else T.head = t->next;
    if (t->next) t->next->prev = t->prev;
    pthread_mutex_unlock(&T.lock);
    free(t);
    *socket_context = NULL;
}

static tracked_conn *tracked(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

void conn_request_arrived(struct MHD_Connection *c) {
    tracked_conn *t = tracked(c);
    if (!t) return;
    pthread_mutex_lock(&T.lock);
    t->deadline_ms = 0;
    pthread_mutex_unlock(&T.lock);
}

void conn_request_finished(struct MHD_Connection *c) {
    tracked_conn *t = tracked(c);
    if (!t) return;
    pthread_mutex_lock(&T.lock);
    t->deadline_ms = now_ms() + T.timeout_ms;
    pthread_mutex_unlock(&T.lock);
}

uint64_t conn_serial(struct MHD_Connection *c) {
    tracked_conn *t = tracked(c);
    if (!t) return 0;
    pthread_mutex_lock(&T.lock);
    uint64_t serial = t->serial;
    pthread_mutex_unlock(&T.lock);
    return serial;
}

int64_t conn_closed_by_deadline(void) {
    pthread_mutex_lock(&T.lock);
    int64_t n = T.n_closed;
    pthread_mutex_unlock(&T.lock);
    return n;
}

static void sweep_locked(int64_t now) {
    for (tracked_conn *t = T.head; t; t = t->next) {
        if (t->shut || t->deadline_ms == 0 || now < t->deadline_ms) continue;
        shutdown(t->fd, SHUT_RDWR); /* libmicrohttpd reads the end of the stream and closes it */
        t->shut = true;
        T.n_closed++;
    }
}

static void *sweeper_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&T.lock);
    while (!T.quit) {
        sweep_locked(now_ms());
        struct timespec until = serve_realtime_after_ms(SWEEP_PERIOD_MS);
        int rc = 0;
        while (!T.quit && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&T.wake, &T.lock, &until);
    }
    pthread_mutex_unlock(&T.lock);
    return NULL;
}

bool conn_deadlines_start(int64_t request_timeout_s) {
    T.timeout_ms = request_timeout_s * 1000;
    T.quit = false;
    T.running = pthread_create(&T.sweeper, NULL, sweeper_main, NULL) == 0;
    return T.running;
}

void conn_deadlines_stop(void) {
    if (!T.running) return;
    pthread_mutex_lock(&T.lock);
    T.quit = true;
    pthread_cond_broadcast(&T.wake);
    pthread_mutex_unlock(&T.lock);
    pthread_join(T.sweeper, NULL);
    T.running = false;
}
