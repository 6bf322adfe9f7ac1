/* calls.c - running the work that can take long (a blocking completion, a large prompt's
 * tokenization, init, shutdown, a poll that waits) on worker threads while the HTTP connection
 * waits suspended, so that libmicrohttpd's pool threads only ever do quick work.
 *
 * The workers come in lanes (server.h, call_lane), each with its own queue and threads, so that
 * work whose length a client decides (a completion that runs for minutes, a poll that waits, a
 * large chat template) never holds the threads that /tokenize or the admin calls need. A lane
 * starts a few threads and adds one whenever a call arrives with none idle, up to its most; past
 * that its calls wait in its queue, which is bounded: past it a request gets 503 at once.
 *
 * Locks: a call's own lock, then the pool lock (call_defer); never the other way round. */
#define _GNU_SOURCE /* POLLRDHUP */
#include "server.h"

#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdatomic.h>
#include <stdlib.h>

#define CALL_QUEUE_MAX 64

/* Threads per lane at start and at most: the request lane's calls mostly wait (a blocking
 * completion for its slot and its tokens, a poll for wait_ms), so each gets a thread of its own;
 * the short lane's calls work (a 1 MiB tokenize), so a few threads share them. */
static const struct { int start, most; } lane_threads[CALL_LANES] = {
    [CALL_LANE_SHORT] = {2, 4},
    [CALL_LANE_REQUEST] = {4, 128},
    [CALL_LANE_ADMIN] = {1, 2},
};

const rpc_caller serve_self = {.admin = true, .models_dir = NULL};

struct deferred_call {
    pthread_mutex_t lock;
    int refs;                  /* under pool.lock: the handler's and the worker's */
    call_fn run;               /* the work */
    void *ctx;                 /* its context (owned) */
    void (*free_ctx)(void *ctx);
    bool taken;                /* a worker took it (or it was answered before) */
    int fd;                    /* the client's socket (-1: unknown), to notice it going away */
    uint64_t client;           /* its connection (conn_serial): its completions count against it */
    struct MHD_Connection *connection;
    bool suspended;            /* the connection waits for this answer */
    bool answered;
    json_t *response;          /* owned until call_result */
    unsigned http_status;      /* 0: the dispatcher's answer */
    deferred_call *next_queued;
    deferred_call *prev, *next; /* the live calls */
};

/* One lane: its queue and its threads (under pool.lock). */
typedef struct call_lane_state {
    pthread_cond_t work;
    deferred_call *head, *tail; /* the queue */
    int queued;
    int idle;                   /* workers waiting for a call */
    pthread_t *workers;         /* lane_threads[].most of them at most */
    int n_workers;
} call_lane_state;

static struct {
    pthread_mutex_t lock;
    call_lane_state lanes[CALL_LANES];
    deferred_call *live;        /* every call not released yet */
    bool intake_closed, quit;
    atomic_int unanswered;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

static json_t *refusal(const char *message) {
    return json_pack("{s:{s:i, s:s}}", "error", "code", API_BUSY, "message", message);
}

static void call_unref(deferred_call *call) {
    pthread_mutex_lock(&pool.lock);
    bool last = --call->refs == 0;
    if (last) {
        if (call->prev) call->prev->next = call->next;
        else pool.live = call->next;
        if (call->next) call->next->prev = call->prev;
    }
    pthread_mutex_unlock(&pool.lock);
    if (!last) return;
    if (call->free_ctx) call->free_ctx(call->ctx);
    json_decref(call->response);
    pthread_mutex_destroy(&call->lock);
    free(call);
}

void call_release(deferred_call *call) {
    if (call) call_unref(call);
}

/* Stores the answer once and wakes the connection; a later answer (from a worker whose call was
 * abandoned at the stop) is dropped. Called with call->lock held. */
static void answer_locked(deferred_call *call, json_t *response, unsigned http_status) {
    if (call->answered) {
        json_decref(response);
        return;
    }
    call->answered = true;
    atomic_fetch_sub(&pool.unanswered, 1);
    call->response = response;
    call->http_status = http_status;
    if (call->suspended) {
        call->suspended = false;
        MHD_resume_connection(call->connection);
    }
}

/* The next call of `lane` to run; NULL when the workers should quit. */
static deferred_call *next_call(call_lane_state *lane) {
    for (;;) {
        pthread_mutex_lock(&pool.lock);
        lane->idle++;
        while (!lane->head && !pool.quit) pthread_cond_wait(&lane->work, &pool.lock);
        lane->idle--;
        deferred_call *call = lane->head;
        if (call) {
            lane->head = call->next_queued;
            if (!lane->head) lane->tail = NULL;
            lane->queued--;
        }
        bool refuse = pool.intake_closed; /* stopping: what still waits is refused, not run */
        pthread_mutex_unlock(&pool.lock);
        if (!call || !refuse) return call;
        pthread_mutex_lock(&call->lock);
        answer_locked(call, refusal("the server is stopping"), MHD_HTTP_SERVICE_UNAVAILABLE);
        pthread_mutex_unlock(&call->lock);
        call_unref(call);
    }
}

/* Whether the suspended connection's client is still there: its socket has not been closed by
 * the peer (a read would not return end-of-file). Pipelined bytes count as there. */
static bool client_still_there(void *user_data) {
    const deferred_call *call = user_data;
    if (call->fd < 0) return true;
    struct pollfd p = {.fd = call->fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return true;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP)) return false;
    char byte;
    return recv(call->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) != 0;
}

static void *worker_main(void *arg) {
    call_lane_state *lane = arg;
    deferred_call *call;
    while ((call = next_call(lane)) != NULL) {
        pthread_mutex_lock(&call->lock);
        bool run = !call->answered && !call->taken;
        call->taken = true;
        pthread_mutex_unlock(&call->lock);
        api_watch_thread(client_still_there, call); /* a blocking completion ends when its client goes */
        api_client_thread(call->client);
        json_t *response = run ? call->run(call->ctx) : NULL;
        api_client_thread(0);
        api_watch_thread(NULL, NULL);
        pthread_mutex_lock(&call->lock);
        answer_locked(call, response, 0);
        pthread_mutex_unlock(&call->lock);
        call_unref(call);
    }
    return NULL;
}

/* One more worker for lane `l` (pool.lock held); false when it has its most or none could start. */
static bool add_worker_locked(call_lane l) {
    call_lane_state *lane = &pool.lanes[l];
    if (pool.quit || lane->n_workers >= lane_threads[l].most) return false;
    if (pthread_create(&lane->workers[lane->n_workers], NULL, worker_main, lane) != 0) return false;
    lane->n_workers++;
    return true;
}

bool calls_start(void) {
    bool ok = true;
    pthread_mutex_lock(&pool.lock);
    for (int l = 0; l < CALL_LANES; l++) { /* every lane ready first: calls_join goes through them all */
        pthread_cond_init(&pool.lanes[l].work, NULL);
        pool.lanes[l].workers = calloc((size_t)lane_threads[l].most, sizeof *pool.lanes[l].workers);
        ok = ok && pool.lanes[l].workers != NULL;
    }
    for (int l = 0; l < CALL_LANES && ok; l++)
        while (ok && pool.lanes[l].n_workers < lane_threads[l].start) ok = add_worker_locked((call_lane)l);
    pthread_mutex_unlock(&pool.lock);
    return ok;
}

deferred_call *call_defer(struct MHD_Connection *c, call_lane l, call_fn run, void *ctx, void (*free_ctx)(void *),
                          const char **why) {
    deferred_call *call = calloc(1, sizeof *call);
    if (!call) {
        if (free_ctx) free_ctx(ctx);
        *why = "out of memory";
        return NULL;
    }
    pthread_mutex_init(&call->lock, NULL);
    call->refs = 2;
    call->run = run;
    call->ctx = ctx;
    call->free_ctx = free_ctx;
    call->connection = c;
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    call->fd = info ? info->connect_fd : -1;
    call->client = conn_serial(c);
    /* Hold the call's lock until the connection is suspended, so that a worker that finishes
     * first cannot resume a connection that is not suspended yet. */
    pthread_mutex_lock(&call->lock);
    pthread_mutex_lock(&pool.lock);
    call_lane_state *lane = &pool.lanes[l];
    bool ok = !pool.intake_closed && lane->queued < CALL_QUEUE_MAX;
    if (ok) {
        if (lane->tail) lane->tail->next_queued = call;
        else lane->head = call;
        lane->tail = call;
        lane->queued++;
        call->next = pool.live;
        if (pool.live) pool.live->prev = call;
        pool.live = call;
        atomic_fetch_add(&pool.unanswered, 1);
        if (lane->idle < lane->queued) add_worker_locked(l); /* none free: one more, up to the most */
        pthread_cond_signal(&lane->work);
    }
    pthread_mutex_unlock(&pool.lock);
    if (!ok) {
        pthread_mutex_unlock(&call->lock);
        *why = pool.intake_closed ? "the server is stopping"
                                  : "the server is busy: too many calls are waiting; try again later";
        if (free_ctx) free_ctx(ctx);
        pthread_mutex_destroy(&call->lock);
        free(call);
        return NULL;
    }
    MHD_suspend_connection(c);
    call->suspended = true;
    pthread_mutex_unlock(&call->lock);
    return call;
}

bool call_result(deferred_call *call, json_t **response, unsigned *http_status) {
    pthread_mutex_lock(&call->lock);
    bool answered = call->answered;
    if (answered) {
        *response = call->response;
        *http_status = call->http_status;
        call->response = NULL;
    }
    pthread_mutex_unlock(&call->lock);
    return answered;
}

void *call_context(deferred_call *call) { return call->ctx; }

/* Takes every lane's queue (pool.lock held), chained by next_queued. */
static deferred_call *take_queues_locked(void) {
    deferred_call *all = NULL;
    for (int l = 0; l < CALL_LANES; l++) {
        call_lane_state *lane = &pool.lanes[l];
        if (lane->tail) {
            lane->tail->next_queued = all;
            all = lane->head;
        }
        lane->head = lane->tail = NULL;
        lane->queued = 0;
    }
    return all;
}

void calls_close_intake(void) {
    pthread_mutex_lock(&pool.lock);
    pool.intake_closed = true;
    deferred_call *queued = take_queues_locked(); /* answered now, not when a worker frees up */
    pthread_mutex_unlock(&pool.lock);
    while (queued) {
        deferred_call *call = queued;
        queued = call->next_queued;
        pthread_mutex_lock(&call->lock);
        answer_locked(call, refusal("the server is stopping"), MHD_HTTP_SERVICE_UNAVAILABLE);
        pthread_mutex_unlock(&call->lock);
        call_unref(call); /* the worker's reference: no worker will take it */
    }
}

int calls_pending(void) { return atomic_load(&pool.unanswered); }

void calls_abandon(void) {
    /* Collect references under the pool lock, answer each under its own lock only. */
    pthread_mutex_lock(&pool.lock);
    int n = 0;
    for (deferred_call *call = pool.live; call; call = call->next) n++;
    deferred_call **calls = calloc((size_t)n + 1, sizeof *calls);
    n = 0;
    for (deferred_call *call = pool.live; call && calls; call = call->next) {
        call->refs++;
        calls[n++] = call;
    }
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&calls[i]->lock);
        answer_locked(calls[i], refusal("the server is stopping"), MHD_HTTP_SERVICE_UNAVAILABLE);
        pthread_mutex_unlock(&calls[i]->lock);
        call_unref(calls[i]);
    }
    free(calls);
}

void calls_join(void) {
    pthread_mutex_lock(&pool.lock);
    pool.quit = true; /* no worker is added from here on */
    for (int l = 0; l < CALL_LANES; l++) pthread_cond_broadcast(&pool.lanes[l].work);
    pthread_mutex_unlock(&pool.lock);
    for (int l = 0; l < CALL_LANES; l++) {
        call_lane_state *lane = &pool.lanes[l];
        for (int i = 0; i < lane->n_workers; i++) pthread_join(lane->workers[i], NULL);
        free(lane->workers);
        lane->workers = NULL;
        lane->n_workers = 0;
    }
}
