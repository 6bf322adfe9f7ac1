/* origins.h - where each part of a completion's text came from (return_origins): the tokens a
 * step took from accepted drafts, or the target's own token that ends every step. The spans cover
 * the text, so an API can mark speculation at work in it. Knows the text only as byte offsets
 * into the completion's text stream. */
#ifndef SPECD_SERVE_ORIGINS_H
#define SPECD_SERVE_ORIGINS_H

#include "specd.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct origin_run {
    size_t end;  /* the run covers the bytes from the previous run's end to here */
    bool draft;  /* from accepted drafts; false: the target's own tokens */
} origin_run;

typedef struct serve_origins {
    origin_run *runs; /* owned, in text order; neighbours differ in `draft` */
    size_t n, cap;
    int32_t accepted_seen; /* result->stats.n_accepted when the last step was seen */
} serve_origins;

void serve_origins_free(serve_origins *o);

/* At the start of a step's callback: how many of the step's first tokens are accepted drafts
 * (the engine counts a step's accepted drafts before it hands out the step's tokens, specd.h). */
int32_t serve_origins_step(serve_origins *o, const specd_result *r);

/* The text now ends at byte `end`, the bytes since the last mark from a draft or not. False when
 * out of memory. */
bool serve_origins_mark(serve_origins *o, size_t end, bool draft);

/* One span of the text: bytes [from, to), from accepted drafts or not. */
typedef struct serve_origin_span {
    size_t from, to;
    bool draft;
} serve_origin_span;

/* The spans of text[from, to) (to <= the last mark), in order, none empty, into `out` (room for
 * o->n of them); returns how many. A token boundary inside a UTF-8 character moves to the
 * character's end, so every span holds whole characters. */
size_t serve_origins_spans(const serve_origins *o, const char *text, size_t from, size_t to, serve_origin_span *out);

#endif
