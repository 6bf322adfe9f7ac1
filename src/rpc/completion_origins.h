/* completion_origins.h - where each part of a completion's text came from (return_origins): the
 * tokens a step took from accepted drafts, or the target's own token that ends every step. The
 * pieces concatenate to the content, so a client can mark speculation at work in the text.
 * Knows the text only as byte offsets into the completion's text stream. */
#ifndef SPECD_COMPLETION_ORIGINS_H
#define SPECD_COMPLETION_ORIGINS_H

#include "specd.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct origin_run {
    size_t end;  /* the run covers the bytes from the previous run's end to here */
    bool draft;  /* from accepted drafts; false: the target's own tokens */
} origin_run;

typedef struct completion_origins {
    origin_run *runs; /* owned, in text order; neighbours differ in `draft` */
    size_t n, cap;
    int32_t accepted_seen; /* result->stats.n_accepted when the last step was seen */
} completion_origins;

void completion_origins_free(completion_origins *o);

/* At the start of a step's callback: how many of the step's first tokens are accepted drafts
 * (the engine counts a step's accepted drafts before it hands out the step's tokens, specd.h). */
int32_t completion_origins_step(completion_origins *o, const specd_result *r);

/* The text now ends at byte `end`, the bytes since the last mark from a draft or not. False when
 * out of memory. */
bool completion_origins_mark(completion_origins *o, size_t end, bool draft);

/* The pieces [{"text", "draft"}] of text[from, to) (to <= the last mark), new reference. A token
 * boundary inside a UTF-8 character moves to the character's end, so every piece is whole
 * characters; empty pieces are left out. */
json_t *completion_origins_json(const completion_origins *o, const char *text, size_t from, size_t to);

#endif
