/* http.c - the HTTP server of `specd serve` on libmicrohttpd (routes and who may call what:
 * routes.c): the daemon (epoll, a thread pool, connection limits within the open-file limit), run
 * until a stop is asked for (stop.c), then the graceful stop: new work refused, what runs cancelled,
 * open streams and calls let end, every suspended connection resumed, the daemon stopped. */
#define _XOPEN_SOURCE 700
#include "server.h"

#include "../util/args.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DRAIN_MS 3000           /* how long the stop waits for running calls and streams to end */
#define DEFAULT_MAX_CONNS 4096
#define FDS_KEPT 64             /* descriptors kept for models, logs and the listening socket */

/* Graceful stop of a running daemon; every step is bounded except joining a worker stuck in a
 * call (a model load), which is the watchdog's case. */
static void stop_daemon(struct MHD_Daemon *d, api_host *host) {
    MHD_socket listen_fd = MHD_quiesce_daemon(d); /* no new connections */
    if (listen_fd != MHD_INVALID_SOCKET) close(listen_fd);
    calls_close_intake();
    /* Every completion, running or queued, ends at its next step with stop_type "shutdown" (a
     * blocking one that never ran: 503), and no new one can start; then the calls and streams
     * end by themselves, with those final answers. */
    api_host_close(host);
    for (int waited = 0; waited < DRAIN_MS && (calls_pending() > 0 || sse_live() > 0); waited += 20) {
        struct timespec t = {.tv_sec = 0, .tv_nsec = 20 * 1000000L};
        nanosleep(&t, NULL);
    }
    /* What is left is ended: no connection may stay suspended when the daemon stops. */
    calls_abandon();
    sse_end_all();
    MHD_stop_daemon(d);
    conn_deadlines_stop();
    calls_join();
    for (int waited = 0; waited < 2000 && sse_live() > 0; waited += 20) { /* pumps notice within 200 ms */
        struct timespec t = {.tv_sec = 0, .tv_nsec = 20 * 1000000L};
        nanosleep(&t, NULL);
    }
}

/* Connection limits that fit the open-file limit (raised to its hard limit first). */
void http_fit_connection_limits(http_options *o) {
    int64_t fds = conn_raise_fd_limit();
    int64_t room = fds > FDS_KEPT + 16 ? fds - FDS_KEPT : 16;
    if (o->max_conns == 0) o->max_conns = DEFAULT_MAX_CONNS < room ? DEFAULT_MAX_CONNS : room;
    else if (o->max_conns > room)
        fprintf(stderr, "specd: warning: --max-conns %lld is more than the open-file limit (%lld) allows; "
                "connections past about %lld will fail\n", (long long)o->max_conns, (long long)fds, (long long)room);
}

/* libmicrohttpd's messages, at most one a second: under a flood of bad clients it would write a
 * line per connection (each one the deadline closes, each one over a limit). */
static void log_http(void *cls, const char *format, va_list ap) {
    (void)cls;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static time_t last;
    static long dropped;
    pthread_mutex_lock(&lock);
    time_t now = time(NULL);
    if (now == last) {
        dropped++;
    } else {
        char line[400];
        vsnprintf(line, sizeof line, format, ap);
        line[strcspn(line, "\n")] = '\0';
        if (dropped) fprintf(stderr, "specd: http: %s (%ld more such messages in the second before)\n", line, dropped);
        else fprintf(stderr, "specd: http: %s\n", line);
        last = now;
        dropped = 0;
    }
    pthread_mutex_unlock(&lock);
}

/* Fills `addr` from --host (an IPv4 or IPv6 literal); returns its size, or 0 when it is neither. */
static socklen_t host_address(const http_options *o, struct sockaddr_storage *addr) {
    memset(addr, 0, sizeof *addr);
    struct sockaddr_in *v4 = (struct sockaddr_in *)addr;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)addr;
    if (inet_pton(AF_INET, o->host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)o->port);
        return sizeof *v4;
    }
    if (inet_pton(AF_INET6, o->host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)o->port);
        return sizeof *v6;
    }
    return 0;
}

static struct MHD_Daemon *start_daemon(http_options *o) {
    struct sockaddr_storage addr;
    if (host_address(o, &addr) == 0) {
        fprintf(stderr, "specd: error: --host must be an IPv4 or IPv6 address such as 127.0.0.1 or ::1, "
                "got '%s'\n", o->host);
        return NULL;
    }
    /* epoll with a pool of threads; suspend/resume so that slow calls wait off those threads.
     * libmicrohttpd needs to be told that the address it is given is an IPv6 one. */
    unsigned polling = MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES ? MHD_USE_EPOLL_INTERNAL_THREAD
                                                                             : MHD_USE_AUTO_INTERNAL_THREAD;
    unsigned flags = polling | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                     (addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    struct MHD_OptionItem options[] = {
        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)log_http, NULL}, /* first, or some go to the default one */
        {MHD_OPTION_SOCK_ADDR, 0, &addr},
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)o->max_conns, NULL},
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT, (intptr_t)o->max_conns_per_ip, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)o->request_timeout_s, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)routes_request_done, NULL},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)conn_notify, NULL},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)query_args_check, NULL},
        /* with one thread, the daemon's own polling thread serves alone: no pool (of 1) */
        {o->http_threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, (intptr_t)o->http_threads, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    struct MHD_Daemon *d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, routes_handle, o,
                                            MHD_OPTION_ARRAY, options, MHD_OPTION_END);
    if (!d) fprintf(stderr, "specd: error: cannot listen on %s port %lld (in use, or not an address of this "
                    "machine?)\n", o->host, (long long)o->port);
    return d;
}

int http_serve(http_options *o) {
    if (!conn_deadlines_start(o->request_timeout_s) || !calls_start()) {
        fprintf(stderr, "specd: error: could not start the server's threads\n");
        return CLI_EXIT_RUNTIME;
    }
    struct MHD_Daemon *d = start_daemon(o);
    if (!d) {
        conn_deadlines_stop();
        calls_join();
        return CLI_EXIT_USAGE;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    bool v6 = strchr(o->host, ':') != NULL; /* URLs put IPv6 literals in brackets */
    printf("specd: listening on http://%s%s%s:%u\n", v6 ? "[" : "", o->host, v6 ? "]" : "",
           info ? (unsigned)info->port : (unsigned)o->port);
    fflush(stdout);
    while (!stop_wait(60000)) continue;
    stop_daemon(d, o->rpc);
    return 0;
}

