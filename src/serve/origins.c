/* origins.c - where each part of a completion's text came from (see origins.h). */
#include "origins.h"

#include <stdlib.h>

void serve_origins_free(serve_origins *o) {
    free(o->runs);
    *o = (serve_origins){0};
}

int32_t serve_origins_step(serve_origins *o, const specd_result *r) {
    int32_t accepted = r->stats.n_accepted - o->accepted_seen;
    o->accepted_seen = r->stats.n_accepted;
    return accepted > 0 ? accepted : 0;
}

bool serve_origins_mark(serve_origins *o, size_t end, bool draft) {
    if (o->n > 0 && o->runs[o->n - 1].draft == draft) {
        o->runs[o->n - 1].end = end;
        return true;
    }
    if (o->n > 0 && o->runs[o->n - 1].end == end) return true; /* nothing new (an empty piece) */
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 16;
        origin_run *grown = realloc(o->runs, cap * sizeof *grown);
        if (!grown) return false;
        o->runs = grown;
        o->cap = cap;
    }
    o->runs[o->n++] = (origin_run){end, draft};
    return true;
}

/* The first character boundary at or after `at` (not past `limit`). */
static size_t char_boundary(const char *text, size_t at, size_t limit) {
    while (at < limit && ((unsigned char)text[at] & 0xC0) == 0x80) at++;
    return at;
}

size_t serve_origins_spans(const serve_origins *o, const char *text, size_t from, size_t to, serve_origin_span *out) {
    size_t n = 0, start = from;
    for (size_t i = 0; i < o->n && start < to; i++) {
        size_t end = o->runs[i].end < to ? char_boundary(text, o->runs[i].end, to) : to;
        if (end <= start) continue;
        out[n++] = (serve_origin_span){start, end, o->runs[i].draft};
        start = end;
    }
    return n;
}
