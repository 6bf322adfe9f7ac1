/* sse.c - Server-Sent Events for one async completion: each poll's updates become "data: {...}"
 * events. A pump thread per stream polls the completion (waiting on it, off libmicrohttpd's
 * threads); the content reader never waits: with nothing to send it suspends the connection and
 * returns 0, and the pump resumes it when there is news. A client that goes away cancels its
 * completion. Only one completion runs at a time, so there are few streams; they are bounded all
 * the same.
 *
 * Locks: the live list's lock, then a stream's lock; a stream's lock, then libmicrohttpd's own
 * (suspend, resume). */
#define _POSIX_C_SOURCE 200809L
#include "server.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SSE_MAX_STREAMS 32
#define SSE_POLL_WAIT_MS 200

typedef struct sse_stream {
    pthread_mutex_t lock;
    int refs;                  /* the response's (libmicrohttpd) and the pump's */
    json_int_t id;
    struct MHD_Connection *connection;
    char *pending;             /* formatted events not sent yet (owned) */
    size_t len, sent;
    bool finished;             /* the completion is over: its last event is in pending */
    bool ended;                /* nothing more will be added (finished, or the stop) */
    bool gone;                 /* the response was freed: the client let go */
    bool suspended;            /* the reader suspended the connection until the pump has news */
    sse_format format;         /* what each update becomes; all NULL: the updates as they are (ctx owned) */
    struct sse_stream *prev, *next;
} sse_stream;

static struct {
    pthread_mutex_t lock;
    sse_stream *head;
    int n;
    bool closing; /* the stop: no new streams, none may suspend */
} live = {.lock = PTHREAD_MUTEX_INITIALIZER};

int sse_live(void) {
    pthread_mutex_lock(&live.lock);
    int n = live.n;
    pthread_mutex_unlock(&live.lock);
    return n;
}

static void stream_unref(sse_stream *s) {
    pthread_mutex_lock(&s->lock);
    bool last = --s->refs == 0;
    pthread_mutex_unlock(&s->lock);
    if (!last) return;
    pthread_mutex_lock(&live.lock);
    if (s->prev) s->prev->next = s->next;
    else live.head = s->next;
    if (s->next) s->next->prev = s->prev;
    live.n--;
    pthread_mutex_unlock(&live.lock);
    pthread_mutex_destroy(&s->lock);
    if (s->format.free) s->format.free(s->format.ctx);
    free(s->pending);
    free(s);
}

/* Appends "data: TEXT\n\n"; called with s->lock held. */
static void append_data(sse_stream *s, const char *text) {
    size_t n = strlen(text);
    char *grown = realloc(s->pending, s->len + n + 9);
    if (grown) {
        s->pending = grown;
        memcpy(s->pending + s->len, "data: ", 6);
        memcpy(s->pending + s->len + 6, text, n);
        memcpy(s->pending + s->len + 6 + n, "\n\n", 3);
        s->len += n + 8;
    }
}

/* Appends "data: {event}\n\n"; called with s->lock held. */
static void append_event(sse_stream *s, json_t *event) {
    char *text = json_dumps(event, JSON_COMPACT | JSON_REAL_PRECISION(15));
    if (!text) return;
    append_data(s, text);
    free(text);
}

/* Appends one update, or what the stream's format makes of it (events taken). */
static void append_formatted(sse_stream *s, json_t *events) {
    size_t i;
    json_t *event;
    json_array_foreach(events, i, event) append_event(s, event);
    json_decref(events);
}

/* Wakes the reader when it waits and there is something for it; called with s->lock held. */
static void wake_locked(sse_stream *s) {
    if (s->suspended && (s->sent < s->len || s->ended)) {
        s->suspended = false;
        MHD_resume_connection(s->connection);
    }
}

/* One poll's updates (and error) into the stream; called with s->lock held. */
static void take_updates(sse_stream *s, json_t *response) {
    json_t *result = json_object_get(response, "result");
    size_t i;
    json_t *update;
    json_array_foreach(json_object_get(result, "completion_updates"), i, update) {
        if (s->format.events) append_formatted(s, s->format.events(s->format.ctx, update));
        else append_event(s, update);
    }
    json_t *error = result ? json_object_get(result, "error") : json_object_get(response, "error");
    if (error) {
        json_t *event = s->format.error ? s->format.error(s->format.ctx, error) : json_pack("{s:O}", "error", error);
        append_event(s, event);
        json_decref(event);
    }
    if (!result || json_is_true(json_object_get(result, "finished"))) {
        if (s->format.done) append_data(s, s->format.done);
        s->finished = s->ended = true;
    }
}

static void *pump_main(void *arg) {
    sse_stream *s = arg;
    json_t *params = json_pack("{s:I, s:i}", "id", s->id, "wait_ms", SSE_POLL_WAIT_MS);
    for (;;) {
        pthread_mutex_lock(&s->lock);
        bool over = s->ended || s->gone;
        pthread_mutex_unlock(&s->lock);
        if (over || !params) break;
        json_t *response = serve_rpc("completion.poll", params, &serve_self); /* waits up to 200 ms */
        pthread_mutex_lock(&s->lock);
        take_updates(s, response);
        wake_locked(s);
        pthread_mutex_unlock(&s->lock);
        json_decref(response);
    }
    json_decref(params);
    stream_unref(s);
    return NULL;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    sse_stream *s = cls;
    pthread_mutex_lock(&s->lock);
    ssize_t n = 0;
    if (s->sent < s->len) {
        size_t k = s->len - s->sent < max ? s->len - s->sent : max;
        memcpy(buf, s->pending + s->sent, k);
        s->sent += k;
        if (s->sent == s->len) s->sent = s->len = 0; /* all out: reuse the buffer */
        n = (ssize_t)k;
    } else if (s->ended) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else { /* nothing yet: wait off the thread; the pump (or the stop) resumes */
        s->suspended = true;
        MHD_suspend_connection(s->connection);
    }
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* The response is freed: the stream ended, or the client went away (then its completion is
 * cancelled). */
static void sse_free(void *cls) {
    sse_stream *s = cls;
    pthread_mutex_lock(&s->lock);
    s->gone = true;
    bool finished = s->finished;
    pthread_mutex_unlock(&s->lock);
    if (!finished) {
        json_t *params = json_pack("{s:I}", "id", s->id);
        json_decref(serve_rpc("completion.cancel", params, &serve_self));
        json_decref(params);
    }
    stream_unref(s);
}

static enum MHD_Result refuse(struct MHD_Connection *c, json_int_t id, unsigned status, const char *message) {
    json_t *params = json_pack("{s:I}", "id", id);
    json_decref(serve_rpc("completion.cancel", params, &serve_self));
    json_decref(params);
    return send_error(c, status, RPC_BUSY, message);
}

enum MHD_Result sse_respond(struct MHD_Connection *c, json_int_t id) {
    return sse_respond_as(c, id, NULL);
}

enum MHD_Result sse_respond_as(struct MHD_Connection *c, json_int_t id, const sse_format *format) {
    sse_stream *s = calloc(1, sizeof *s);
    if (!s) {
        if (format && format->free) format->free(format->ctx);
        return refuse(c, id, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    }
    if (format) s->format = *format;
    pthread_mutex_init(&s->lock, NULL);
    s->id = id;
    s->connection = c;
    s->refs = 2;
    pthread_mutex_lock(&live.lock);
    bool room = !live.closing && live.n < SSE_MAX_STREAMS;
    if (room) {
        s->next = live.head;
        if (live.head) live.head->prev = s;
        live.head = s;
        live.n++;
    }
    pthread_mutex_unlock(&live.lock);
    if (!room) {
        pthread_mutex_destroy(&s->lock);
        if (s->format.free) s->format.free(s->format.ctx);
        free(s);
        return refuse(c, id, MHD_HTTP_SERVICE_UNAVAILABLE, "too many open streams, or the server is stopping");
    }
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, s, sse_free);
    if (!r) { /* never handed to libmicrohttpd: drop both references */
        stream_unref(s);
        stream_unref(s);
        return refuse(c, id, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    }
    pthread_t pump;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    bool started = pthread_create(&pump, &attr, pump_main, s) == 0;
    pthread_attr_destroy(&attr);
    if (!started) {
        stream_unref(s); /* the pump's */
        MHD_destroy_response(r); /* frees the stream through sse_free, which cancels */
        return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, RPC_INTERNAL_ERROR, "could not start a stream thread");
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

void sse_end_all(void) {
    pthread_mutex_lock(&live.lock);
    live.closing = true;
    for (sse_stream *s = live.head; s; s = s->next) {
        pthread_mutex_lock(&s->lock);
        s->ended = true;
        wake_locked(s);
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&live.lock);
}
