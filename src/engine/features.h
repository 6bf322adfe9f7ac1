/* features.h - the target's hidden states a drafting head reads, kept per slot by position.
 *
 * A head (head.h) asks for some of the target's hidden states ("taps": the input of a layer, or the
 * hidden state a nextn layer reads). After each target decode the engine copies them out of
 * llama.cpp (kv.c), one row per token (the taps side by side), under the token's position; the head
 * takes them when it catches up with the target and the rows before its need are dropped. Rows are
 * valid for the target's tokens as they were decoded: a decode at a position before the end drops
 * the rows from there (what follows is new), a tree pass drops them from its root (its branches share
 * positions), and a context shift moves them as it moves the cache. */
#ifndef SPECD_FEATURES_H
#define SPECD_FEATURES_H

#include "llama.h"

#include <stdbool.h>
#include <stdint.h>

#define SPECD_MAX_TAPS 8
#define SPECD_TAP_NEXTN (-1) /* the hidden state before the output (what a nextn layer reads) */

/* What the target outputs for the head: a row is the taps' vectors side by side. */
typedef struct specd_taps {
    int32_t n;
    int32_t layer[SPECD_MAX_TAPS]; /* a layer whose input is read, or SPECD_TAP_NEXTN */
    int32_t n_embd;                /* each tap's width (the target's hidden size) */
} specd_taps;

/* One slot's rows: positions [lo, hi), row r at rows + (r - lo) * width. */
typedef struct specd_features {
    float *rows;
    int32_t width, lo, hi, cap;
} specd_features;

static inline int32_t specd_taps_width(const specd_taps *t) { return t->n * t->n_embd; }

/* Asks the target context for the taps (llama_ext.h); false when llama.cpp refuses one. */
bool specd_taps_enable(const specd_taps *t, struct llama_context *target);

/* After a target decode whose batch indices [b0, b0 + n) held positions [pos, pos + n): their rows
 * (what the store held from pos on is replaced; rows that end where the held ones start are put
 * before them). False when out of memory (the rows from pos on are then gone). */
bool specd_features_capture(specd_features *f, const specd_taps *taps, struct llama_context *target, int32_t b0,
                            int32_t pos, int32_t n);
/* The rows from `pos` on are no longer the target's. */
void specd_features_cut(specd_features *f, int32_t pos);
/* The rows before `pos` are no longer needed. */
void specd_features_drop_before(specd_features *f, int32_t pos);
/* A context shift cut positions [n_keep, n_keep + n_discard) and moved the rest back. */
void specd_features_shift(specd_features *f, int32_t n_keep, int32_t n_discard);
/* The row of position `pos`, or NULL when it is not held. */
const float *specd_features_row(const specd_features *f, int32_t pos);
/* Whether every row of [from, to) is held. */
bool specd_features_hold(const specd_features *f, int32_t from, int32_t to);
void specd_features_free(specd_features *f);

#endif
