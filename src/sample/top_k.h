/* top_k.h - the k highest-ranked tokens of a logit vector with a min-heap of size k (O(n log k),
 * no full sort). Ranking: the higher logit first; on a tie, the lower id (as a stable sort would). */
#ifndef SPECD_TOP_K_H
#define SPECD_TOP_K_H

#include "specd.h"

#include <stdbool.h>

/* a ranks below b: a lower logit, or the same logit and a higher id. */
static inline bool specd_token_ranks_below(const float *logits, specd_token a, specd_token b) {
    return logits[a] < logits[b] || (logits[a] == logits[b] && a > b);
}

/* Puts the k (1 <= k <= n_vocab) highest-ranked tokens into heap[0..k), as a min-heap: heap[0]
 * is the weakest of them. */
void specd_top_k_heap(const float *logits, int32_t n_vocab, int32_t k, specd_token *heap);

/* Removes and returns heap[0], the weakest of the n tokens left in the heap. */
specd_token specd_top_k_pop(specd_token *heap, int32_t n, const float *logits);

#endif
