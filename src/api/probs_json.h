/* probs_json.h - a completion's completion_probabilities (n_probs > 0) in the JSON API: one entry
 * per token whose text came with a piece of the answer (serve_view's probs range), in one of two
 * shapes (the request's probs_format decides; the transport picks its default: POST /completion
 * "llama", JSON-RPC and the C ABI "specd"):
 *  - specd (the old API's): {content: its piece, probs: [{tok_str, prob}]};
 *  - llama (llama-server's current one): {id, token, bytes, logprob, top_logprobs: [{id, token,
 *    bytes, logprob}]}, or with post_sampling_probs {id, token, bytes, prob, top_probs: [...]};
 *    the token's own logprob/prob is null when it is not among the top n_probs (specd computes
 *    the top n only; llama-server the whole vocabulary). */
#ifndef SPECD_API_PROBS_JSON_H
#define SPECD_API_PROBS_JSON_H

#include "../serve/reply.h"

#include <jansson.h>

/* The entries of view->result's tokens [view->probs_from, view->probs_to): a new array, NULL
 * when out of memory. */
json_t *probs_json_entries(const serve_view *view, bool server_shape);

/* A token's text as valid UTF-8 (a lone byte of a split character becomes U+FFFD), and with
 * `bytes` (not NULL) its raw bytes as an array of numbers (new references). */
json_t *probs_json_piece(specd_engine *engine, specd_token token, json_t **bytes);
/* A probability's log, null for 0 or unknown (which JSON cannot hold as -inf). */
json_t *probs_json_logprob(double p);

#endif
