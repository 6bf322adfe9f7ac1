/* sse.c - Server-Sent Events for one streamed job (or the jobs of one request's choices, OpenAI's
 * n > 1): each piece its reply made becomes "data: {...}" events. A pump thread per stream takes
 * the jobs' pieces (waiting on them, off libmicrohttpd's threads); the content reader never
 * waits: with nothing to send it suspends the connection and returns 0, and the pump resumes it
 * when there is news. A client that goes away ends its job.
 * Streams are bounded.
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
/* With several jobs the pump polls each in turn: a short wait, so one job's pieces do not wait
 * long behind another's silence. */
#define SSE_POLL_SHARED_MS 5

typedef struct sse_stream {
    pthread_mutex_t lock;
    int refs;                  /* the response's (libmicrohttpd) and the pump's */
    serve_job **jobs;          /* n_jobs, each referenced */
    bool *done;                /* which jobs have finished */
    int n_jobs, n_done;
    struct MHD_Connection *connection;
    char *pending;             /* formatted events not sent yet (owned) */
    size_t len, sent;
    bool finished;             /* the completion is over: its last event is in pending */
    bool ended;                /* nothing more will be added (finished, or the stop) */
    bool gone;                 /* the response was freed: the client let go */
    bool suspended;            /* the reader suspended the connection until the pump has news */
    sse_format format;         /* how it ends */
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

static void free_stream(sse_stream *s) {
    for (int i = 0; i < s->n_jobs; i++) serve_job_unref(s->jobs[i]);
    free(s->jobs);
    free(s->done);
    free(s->pending);
    free(s);
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
    free_stream(s);
}

/* Appends HEAD TEXT TAIL, the buffer kept a C string; out of memory, nothing (the event is lost,
 * the stream goes on). Called with s->lock held. */
static void append(sse_stream *s, const char *head, const char *text, const char *tail) {
    size_t h = strlen(head), n = strlen(text), t = strlen(tail);
    char *grown = realloc(s->pending, s->len + h + n + t + 1);
    if (!grown) return;
    s->pending = grown;
    memcpy(s->pending + s->len, head, h);
    memcpy(s->pending + s->len + h, text, n);
    memcpy(s->pending + s->len + h + n, tail, t + 1);
    s->len += h + n + t;
}

static void append_data(sse_stream *s, const char *text) { append(s, "data: ", text, "\n\n"); }

/* Appends "event: NAME\n" (named streams: the event's "type", as Anthropic's API names each
 * event); called with s->lock held. */
static void append_name(sse_stream *s, json_t *event) {
    const char *name = json_string_value(json_object_get(event, "type"));
    if (s->format.named && name) append(s, "event: ", name, "\n");
}

/* Appends "data: {event}\n\n" (after its name, in a named stream); called with s->lock held. */
static void append_event(sse_stream *s, json_t *event) {
    char *text = json_dumps(event, JSON_COMPACT | JSON_REAL_PRECISION(15));
    if (!text) return;
    append_name(s, event);
    append_data(s, text);
    free(text);
}

/* Appends one piece (taken) of job `job`: an object is one event, an array one event per element;
 * an indexed stream's events get the job's position as "index". */
static void append_item(sse_stream *s, int job, json_t *item) {
    size_t i;
    json_t *event;
    if (s->format.indexed && json_is_object(item)) json_object_set_new(item, "index", json_integer(job));
    json_array_foreach(item, i, event) if (s->format.indexed && json_is_object(event))
        json_object_set_new(event, "index", json_integer(job));
    if (!json_is_array(item)) {
        append_event(s, item);
    } else {
        json_array_foreach(item, i, event) append_event(s, event);
    }
    json_decref(item);
}

/* Wakes the reader when it waits and there is something for it; called with s->lock held. */
static void wake_locked(sse_stream *s) {
    if (s->suspended && (s->sent < s->len || s->ended)) {
        s->suspended = false;
        MHD_resume_connection(s->connection);
    }
}

static void end_jobs(sse_stream *s) {
    for (int i = 0; i < s->n_jobs; i++) serve_job_end(s->jobs[i], SERVE_END_CANCELLED);
}

/* Job `job`'s pieces taken (and its error) into the stream; called with s->lock held. The stream
 * is over when every job has finished, or at the first failure (the caller then ends the other
 * jobs, outside the lock). */
static void take_pieces(sse_stream *s, int job, void **items, size_t n, bool finished, bool failed,
                        const serve_fault *fault) {
    for (size_t i = 0; i < n; i++) append_item(s, job, items[i]);
    if (failed) {
        api_error err;
        api_error_from_fault(fault, &err);
        json_t *event = s->format.error ? s->format.error(fault) : json_pack("{s:o}", "error", api_error_object(&err));
        append_event(s, event);
        json_decref(event);
    }
    if (finished && !s->done[job]) {
        s->done[job] = true;
        s->n_done++;
    }
    if (failed || s->n_done == s->n_jobs) {
        if (s->format.done) append_data(s, s->format.done);
        s->finished = s->ended = true;
    }
}

/* One turn over the jobs not finished yet: what each has, after a wait for news. */
static void pump_once(sse_stream *s) {
    int wait_ms = s->n_jobs == 1 ? SSE_POLL_WAIT_MS : SSE_POLL_SHARED_MS;
    for (int j = 0; j < s->n_jobs; j++) {
        pthread_mutex_lock(&s->lock);
        bool skip = s->done[j] || s->ended || s->gone;
        pthread_mutex_unlock(&s->lock);
        if (skip) continue;
        size_t n = 0;
        bool finished = false, failed = false;
        serve_fault fault;
        void **items = serve_job_take(s->jobs[j], wait_ms, &n, &finished, &failed, &fault);
        pthread_mutex_lock(&s->lock);
        take_pieces(s, j, items, n, finished, failed, &fault);
        wake_locked(s);
        pthread_mutex_unlock(&s->lock);
        free(items);
        if (failed && s->n_jobs > 1) end_jobs(s); /* one choice failed: the stream is over for all */
    }
}

static void *pump_main(void *arg) {
    sse_stream *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        bool over = s->ended || s->gone;
        pthread_mutex_unlock(&s->lock);
        if (over) break;
        pump_once(s);
    }
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
    if (!finished) end_jobs(s);
    stream_unref(s);
}

static enum MHD_Result refuse(struct MHD_Connection *c, serve_job *const *jobs, int n, unsigned status,
                              const char *message) {
    for (int i = 0; i < n; i++) serve_job_end(jobs[i], SERVE_END_CANCELLED);
    return send_error(c, status, API_BUSY, message);
}

/* A stream over `jobs` (each referenced), or NULL when out of memory. */
static sse_stream *new_stream(serve_job *const *jobs, int n) {
    sse_stream *s = calloc(1, sizeof *s);
    if (s) s->jobs = calloc((size_t)n, sizeof *s->jobs);
    if (s && s->jobs) s->done = calloc((size_t)n, sizeof *s->done);
    if (!s || !s->done) {
        if (s) free(s->jobs);
        free(s);
        return NULL;
    }
    for (int i = 0; i < n; i++) serve_job_ref(s->jobs[i] = jobs[i]);
    s->n_jobs = n;
    return s;
}

enum MHD_Result sse_respond(struct MHD_Connection *c, serve_job *job, const sse_format *format) {
    return sse_respond_jobs(c, &job, 1, format);
}

enum MHD_Result sse_respond_jobs(struct MHD_Connection *c, serve_job *const *jobs, int n, const sse_format *format) {
    sse_stream *s = n > 0 ? new_stream(jobs, n) : NULL;
    if (!s) return refuse(c, jobs, n, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    if (format) s->format = *format;
    pthread_mutex_init(&s->lock, NULL);
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
        free_stream(s);
        return refuse(c, jobs, n, MHD_HTTP_SERVICE_UNAVAILABLE, "too many open streams, or the server is stopping");
    }
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, s, sse_free);
    if (!r) { /* never handed to libmicrohttpd: drop both references */
        end_jobs(s);
        stream_unref(s);
        stream_unref(s);
        return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, API_BUSY, "out of memory");
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
        return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL_ERROR, "could not start a stream thread");
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
