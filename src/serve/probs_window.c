/* probs_window.c - see probs_window.h. */
#include "probs_window.h"

#include <stdlib.h>

void probs_window_free(probs_window *w) {
    free(w->start);
    free(w->end);
    *w = (probs_window){0};
}

bool probs_window_record(probs_window *w, size_t start, size_t end) {
    if (w->n == w->cap) {
        int32_t cap = w->cap ? w->cap * 2 : 64;
        size_t *s = realloc(w->start, (size_t)cap * sizeof *s);
        if (s) w->start = s;
        size_t *e = s ? realloc(w->end, (size_t)cap * sizeof *e) : NULL;
        if (!e) return false;
        w->end = e;
        w->cap = cap;
    }
    w->start[w->n] = start;
    w->end[w->n] = end;
    w->n++;
    return true;
}

void probs_window_take(probs_window *w, int32_t n_tokens, const specd_text_stream *ts, bool final, int32_t *from,
                       int32_t *to) {
    bool stopped = specd_text_stream_stopped(ts);
    *from = w->n_sent;
    for (; w->n_sent < w->n && w->n_sent < n_tokens; w->n_sent++) {
        int32_t i = w->n_sent;
        /* After a stop string matched, a token starting at or past the cut is all stop string. */
        if (stopped && w->start[i] >= ts->len) break;
        size_t end = w->end[i] < ts->len ? w->end[i] : ts->len;
        if (!final && end > ts->taken) break; /* its text is still held back */
    }
    *to = w->n_sent;
}
