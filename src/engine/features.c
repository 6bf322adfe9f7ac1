/* features.c - see features.h. */
#include "features.h"

#include "llama_ext.h"

#include <stdlib.h>
#include <string.h>

bool specd_taps_enable(const specd_taps *t, struct llama_context *target) {
    bool ok = true;
    for (int32_t i = 0; i < t->n; i++)
        ok = (t->layer[i] == SPECD_TAP_NEXTN ? specd_ext_output_nextn(target, true, false)
                                             : specd_ext_output_layer_input(target, (uint32_t)t->layer[i], true)) && ok;
    return ok;
}

/* Room for rows up to position `end` (row 0 is always position lo). */
static bool reserve(specd_features *f, int32_t end) {
    int32_t need = end - f->lo;
    if (need <= f->cap) return true;
    int32_t cap = f->cap ? f->cap : 16;
    while (cap < need) cap *= 2;
    float *rows = realloc(f->rows, (size_t)cap * (size_t)f->width * sizeof *rows);
    if (!rows) return false;
    f->rows = rows;
    f->cap = cap;
    return true;
}

/* Room for n rows before lo: the held rows move up. */
static bool make_room_before(specd_features *f, int32_t n) {
    int32_t held = f->hi - f->lo;
    f->lo -= n;
    if (!reserve(f, f->hi)) {
        f->lo += n;
        return false;
    }
    size_t row = (size_t)f->width;
    memmove(f->rows + (size_t)n * row, f->rows, (size_t)held * row * sizeof *f->rows);
    return true;
}

bool specd_features_capture(specd_features *f, const specd_taps *taps, struct llama_context *target, int32_t b0,
                            int32_t pos, int32_t n) {
    if (n <= 0) return true;
    f->width = specd_taps_width(taps);
    bool before = pos + n == f->lo && f->hi > f->lo; /* the rows just before the held ones (decoded again) */
    if (before && !make_room_before(f, n)) return false;
    if (!before) {
        if (pos < f->lo || pos > f->hi) f->lo = f->hi = pos; /* a gap: start over from here */
        f->hi = pos;                                         /* what followed pos is not the target's now */
        if (!reserve(f, pos + n)) {
            specd_features_cut(f, pos);
            return false;
        }
    }
    for (int32_t k = 0; k < taps->n; k++) {
        bool nextn = taps->layer[k] == SPECD_TAP_NEXTN;
        const float *src = nextn ? specd_ext_nextn_rows(target) : specd_ext_layer_input_rows(target, (uint32_t)taps->layer[k]);
        if (!src) {
            specd_features_cut(f, pos);
            return false;
        }
        for (int32_t i = 0; i < n; i++) {
            float *dst = f->rows + (size_t)(pos + i - f->lo) * (size_t)f->width + (size_t)k * (size_t)taps->n_embd;
            memcpy(dst, src + (size_t)(b0 + i) * (size_t)taps->n_embd, (size_t)taps->n_embd * sizeof *dst);
        }
    }
    if (!before) f->hi = pos + n;
    return true;
}

void specd_features_cut(specd_features *f, int32_t pos) {
    if (pos < f->hi) f->hi = pos > f->lo ? pos : f->lo;
}

void specd_features_drop_before(specd_features *f, int32_t pos) {
    if (pos <= f->lo) return;
    if (pos >= f->hi) {
        f->lo = f->hi = pos;
        return;
    }
    size_t row = (size_t)f->width;
    memmove(f->rows, f->rows + (size_t)(pos - f->lo) * row, (size_t)(f->hi - pos) * row * sizeof *f->rows);
    f->lo = pos;
}

void specd_features_shift(specd_features *f, int32_t n_keep, int32_t n_discard) {
    int32_t end = n_keep + n_discard;
    if (f->hi <= n_keep) return;
    if (f->lo >= end) { /* every row moves back */
        f->lo -= n_discard;
        f->hi -= n_discard;
        return;
    }
    if (f->lo > n_keep || f->hi <= end) { /* rows only inside or across the start of the cut */
        specd_features_cut(f, n_keep);
        if (f->lo > n_keep) f->lo = f->hi = n_keep;
        return;
    }
    size_t row = (size_t)f->width;
    memmove(f->rows + (size_t)(n_keep - f->lo) * row, f->rows + (size_t)(end - f->lo) * row,
            (size_t)(f->hi - end) * row * sizeof *f->rows);
    f->hi -= n_discard;
}

const float *specd_features_row(const specd_features *f, int32_t pos) {
    if (pos < f->lo || pos >= f->hi) return NULL;
    return f->rows + (size_t)(pos - f->lo) * (size_t)f->width;
}

bool specd_features_hold(const specd_features *f, int32_t from, int32_t to) {
    return from >= to || (from >= f->lo && to <= f->hi);
}

void specd_features_free(specd_features *f) {
    free(f->rows);
    memset(f, 0, sizeof *f);
}
