/* completion_origins.c - where each part of a completion's text came from (see .h). */
#include "completion_origins.h"
#include "text_stream.h"

#include <stdlib.h>

void completion_origins_free(completion_origins *o) {
    free(o->runs);
    *o = (completion_origins){0};
}

int32_t completion_origins_step(completion_origins *o, const specd_result *r) {
    int32_t accepted = r->stats.n_accepted - o->accepted_seen;
    o->accepted_seen = r->stats.n_accepted;
    return accepted > 0 ? accepted : 0;
}

bool completion_origins_mark(completion_origins *o, size_t end, bool draft) {
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

static bool append_piece(json_t *pieces, const char *text, size_t from, size_t to, bool draft) {
    if (to <= from) return true;
    char *clean = specd_utf8_sanitize(text + from, to - from);
    json_t *piece = clean ? json_pack("{s:s, s:b}", "text", clean, "draft", draft) : NULL;
    free(clean);
    return piece && json_array_append_new(pieces, piece) == 0;
}

json_t *completion_origins_json(const completion_origins *o, const char *text, size_t from, size_t to) {
    json_t *pieces = json_array();
    size_t start = from;
    for (size_t i = 0; pieces && i < o->n && start < to; i++) {
        size_t end = o->runs[i].end < to ? char_boundary(text, o->runs[i].end, to) : to;
        if (end <= start) continue;
        if (!append_piece(pieces, text, start, end, o->runs[i].draft)) {
            json_decref(pieces);
            return NULL;
        }
        start = end;
    }
    return pieces;
}
