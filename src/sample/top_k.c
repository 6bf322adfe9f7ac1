/* top_k.c - a min-heap on token rank (see top_k.h). */
#include "top_k.h"

static void sift_down(specd_token *heap, int32_t n, int32_t i, const float *logits) {
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && specd_token_ranks_below(logits, heap[l], heap[m])) m = l;
        if (r < n && specd_token_ranks_below(logits, heap[r], heap[m])) m = r;
        if (m == i) return;
        specd_token t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
}

void specd_top_k_heap(const float *logits, int32_t n_vocab, int32_t k, specd_token *heap) {
    for (int32_t i = 0; i < k; i++) heap[i] = i;
    for (int32_t i = k / 2 - 1; i >= 0; i--) sift_down(heap, k, i, logits);
    for (specd_token t = k; t < n_vocab; t++) {
        if (specd_token_ranks_below(logits, heap[0], t)) {
            heap[0] = t;
            sift_down(heap, k, 0, logits);
        }
    }
}

specd_token specd_top_k_pop(specd_token *heap, int32_t n, const float *logits) {
    specd_token weakest = heap[0];
    heap[0] = heap[n - 1];
    sift_down(heap, n - 1, 0, logits);
    return weakest;
}
