/* probs_window.h - which tokens' probability entries (n_probs > 0) go with which piece of a
 * completion's text: a token's entry goes out with the piece that completes its text, so streamed
 * entries concatenate to the blocking list; tokens whose text lies wholly inside or after a
 * matched stop string get none. Knows tokens only as byte ranges of the text stream. */
#ifndef SPECD_SERVE_PROBS_WINDOW_H
#define SPECD_SERVE_PROBS_WINDOW_H

#include "text_stream.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct probs_window {
    size_t *start, *end; /* token i's bytes in the text stream, before any stop cut (owned) */
    int32_t n, cap;      /* tokens recorded: result tokens 0..n-1 */
    int32_t n_sent;      /* entries handed out so far */
} probs_window;

void probs_window_free(probs_window *w);
/* Records the next result token's text as text-stream bytes [start, end). False: out of memory. */
bool probs_window_record(probs_window *w, size_t start, size_t end);
/* The tokens whose entries are decided and not handed out yet: [*from, *to) of the first
 * `n_tokens` result tokens, within what `ts` handed out so far or, with `final`, every recorded
 * token that reached the text. Marks them handed out. */
void probs_window_take(probs_window *w, int32_t n_tokens, const specd_text_stream *ts, bool final, int32_t *from,
                       int32_t *to);

#endif
