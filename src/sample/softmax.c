/* softmax.c - see softmax.h. */
#include "softmax.h"

#include <math.h>

void specd_softmax_ids(const float *logits, const specd_token *ids, int32_t n, float temp, float *probs) {
    float max = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (logits[ids[i]] > max) max = logits[ids[i]];
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        probs[i] = expf((logits[ids[i]] - max) / temp);
        sum += probs[i];
    }
    for (int32_t i = 0; i < n; i++) probs[i] = (float)(probs[i] / sum);
}

double specd_softmax_denominator(const float *logits, int32_t n, float *max) {
    *max = -INFINITY;
    for (int32_t t = 0; t < n; t++)
        if (logits[t] > *max) *max = logits[t];
    double sum = 0.0;
    for (int32_t t = 0; t < n; t++) sum += exp((double)logits[t] - *max);
    return sum;
}
