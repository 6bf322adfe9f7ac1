/* text_stream.c - stop strings and UTF-8 hold-back for generated text (see text_stream.h). */
#define _GNU_SOURCE /* memmem */
#include "text_stream.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void specd_text_stream_init(specd_text_stream *ts, const char *const *stops, int n_stops) {
    memset(ts, 0, sizeof *ts);
    ts->stops = stops;
    ts->n_stops = n_stops;
    ts->stop_index = -1;
    for (int i = 0; i < n_stops; i++) {
        size_t n = strlen(stops[i]);
        if (n > ts->max_stop_len) ts->max_stop_len = n;
    }
}

void specd_text_stream_free(specd_text_stream *ts) {
    free(ts->buf);
    memset(ts, 0, sizeof *ts);
    ts->stop_index = -1;
}

bool specd_text_stream_stopped(const specd_text_stream *ts) { return ts->stop_index >= 0; }

static bool reserve(specd_text_stream *ts, size_t extra) {
    if (ts->len + extra + 1 <= ts->cap) return true;
    size_t cap = ts->cap ? ts->cap : 256;
    while (cap < ts->len + extra + 1) cap *= 2;
    char *grown = realloc(ts->buf, cap);
    if (!grown) return false;
    ts->buf = grown;
    ts->cap = cap;
    return true;
}

/* The earliest full match of any stop string starting at or after `from`; the first listed
 * stop string wins a tie. */
static void find_stop(specd_text_stream *ts, size_t from) {
    size_t best = SIZE_MAX;
    for (int i = 0; i < ts->n_stops; i++) {
        size_t n = strlen(ts->stops[i]);
        if (n == 0 || from >= ts->len) continue;
        const char *hit = memmem(ts->buf + from, ts->len - from, ts->stops[i], n);
        if (hit && (size_t)(hit - ts->buf) < best) {
            best = (size_t)(hit - ts->buf);
            ts->stop_index = i;
        }
    }
    if (best != SIZE_MAX) {
        ts->len = best; /* cut the stop string and anything after it */
        ts->buf[ts->len] = '\0';
    }
}

bool specd_text_stream_push(specd_text_stream *ts, const char *bytes, size_t n) {
    if (specd_text_stream_stopped(ts) || n == 0) return true;
    if (!reserve(ts, n)) return false;
    size_t old_len = ts->len;
    memcpy(ts->buf + ts->len, bytes, n);
    ts->len += n;
    ts->buf[ts->len] = '\0';
    /* A new match must end in the new bytes, so it starts at most max_stop_len - 1 before them;
     * and never before what was handed out (that was checked not to start a stop string). */
    size_t from = old_len + 1 > ts->max_stop_len ? old_len + 1 - ts->max_stop_len : 0;
    if (from < ts->taken) from = ts->taken;
    find_stop(ts, from);
    return true;
}

/* Length of the UTF-8 sequence a lead byte starts, or 0 for a byte that cannot start one. */
static int utf8_sequence_length(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

static bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

/* Where an unfinished character at the end of buf[0..end) starts, or `end` when none is. */
static size_t complete_utf8_end(const char *buf, size_t begin, size_t end) {
    for (size_t back = 1; back <= 3 && back <= end - begin; back++) {
        unsigned char c = (unsigned char)buf[end - back];
        if (is_continuation(c)) continue;
        int need = utf8_sequence_length(c);
        return need > (int)back ? end - back : end;
    }
    return end;
}

/* Length of the longest proper suffix of buf[begin..end) that begins some stop string. */
static size_t stop_prefix_suffix(const specd_text_stream *ts, size_t begin, size_t end) {
    size_t longest = ts->max_stop_len ? ts->max_stop_len - 1 : 0;
    if (longest > end - begin) longest = end - begin;
    for (size_t k = longest; k > 0; k--) {
        for (int i = 0; i < ts->n_stops; i++)
            if (strlen(ts->stops[i]) > k && memcmp(ts->buf + end - k, ts->stops[i], k) == 0) return k;
    }
    return 0;
}

const char *specd_text_stream_take(specd_text_stream *ts, bool final, size_t *n) {
    size_t end = ts->len;
    if (!final && !specd_text_stream_stopped(ts)) {
        end -= stop_prefix_suffix(ts, ts->taken, end);
        end = complete_utf8_end(ts->buf, ts->taken, end);
    }
    const char *chunk = ts->buf ? ts->buf + ts->taken : "";
    *n = end - ts->taken;
    ts->taken = end;
    return chunk;
}

const char *specd_text_stream_text(const specd_text_stream *ts, size_t *n) {
    *n = ts->len;
    return ts->buf ? ts->buf : "";
}

/* Length of the valid UTF-8 character at s[0..n), or 0 when it is not one. */
static int valid_utf8_at(const unsigned char *s, size_t n) {
    int need = utf8_sequence_length(s[0]);
    if (need == 0 || (size_t)need > n) return 0;
    for (int i = 1; i < need; i++)
        if (!is_continuation(s[i])) return 0;
    /* Overlong forms, surrogates and code points past U+10FFFF. */
    if (s[0] == 0xE0 && s[1] < 0xA0) return 0;
    if (s[0] == 0xED && s[1] > 0x9F) return 0;
    if (s[0] == 0xF0 && s[1] < 0x90) return 0;
    if (s[0] == 0xF4 && s[1] > 0x8F) return 0;
    return need;
}

char *specd_utf8_sanitize(const char *bytes, size_t n) {
    char *out = malloc(n * 3 + 1); /* each byte becomes at most the 3 bytes of U+FFFD */
    if (!out) return NULL;
    const unsigned char *s = (const unsigned char *)bytes;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        int len = valid_utf8_at(s + i, n - i);
        if (len > 0 && s[i] != 0) {
            memcpy(out + o, s + i, (size_t)len);
            o += (size_t)len;
            i += (size_t)len;
        } else { /* an invalid byte, or a NUL that would end the C string early */
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += 1;
        }
    }
    out[o] = '\0';
    return out;
}
