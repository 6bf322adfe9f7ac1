/* completion_probs.h - the response's completion_probabilities (n_probs > 0): one entry per token
 * whose text reached `content`, in one of two shapes (the request's probs_format decides; the
 * transport picks its default: POST /completion "llama", JSON-RPC and the C ABI "specd"):
 *  - specd (the old API's): {content: its piece, probs: [{tok_str, prob}]};
 *  - llama (llama-server's current one): {id, token, bytes, logprob, top_logprobs: [{id, token,
 *    bytes, logprob}]}, or with post_sampling_probs {id, token, bytes, prob, top_probs: [...]};
 *    the token's own logprob/prob is null when it is not among the top n_probs (specd computes
 *    the top n only; llama-server the whole vocabulary).
 * Entries are handed out with
 * the text chunk that completes the token's text, so streamed entries concatenate to the
 * blocking list. Tokens whose text lies wholly inside or after a matched stop string get none. */
#ifndef SPECD_RPC_COMPLETION_PROBS_H
#define SPECD_RPC_COMPLETION_PROBS_H

#include "text_stream.h"
#include "specd.h"

#include <jansson.h>

typedef struct completion_probs {
    size_t *start, *end; /* token i's bytes in the text stream, before any stop cut (owned) */
    int32_t n, cap;      /* tokens recorded: result tokens 0..n-1 */
    int32_t n_sent;      /* entries handed out so far */
    bool llama;          /* llama-server's shape */
    bool post_sampling;  /* with llama: prob / top_probs instead of logprob / top_logprobs */
} completion_probs;

void completion_probs_free(completion_probs *cp);

/* Records the next result token's text as text-stream bytes [start, end). False: out of memory. */
bool completion_probs_record(completion_probs *cp, size_t start, size_t end);

/* The entries not handed out yet whose text is decided: within what `ts` handed out so far, or
 * with `final`, every recorded token that reached the text. A new array (maybe empty), or NULL
 * when out of memory. */
json_t *completion_probs_take(completion_probs *cp, specd_engine *engine, const specd_result *r,
                              const specd_text_stream *ts, bool final);

#endif
