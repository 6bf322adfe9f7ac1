/* draft_length.c - adaptive draft length from measured costs and calibrated acceptance (see .h). */
#include "draft_length.h"

#include <string.h>

/* Before anything is measured: verifying n tokens on CPU costs about 1 + 0.15 (n - 1) times one
 * token (llama-bench pp1/pp4/pp8 on the benchmark pair), and a draft token about 10% of a target
 * token. Measurements replace these quickly. */
#define PRIOR_SLOPE 0.15
#define PRIOR_DRAFT_RATIO 0.10
#define PRIOR_WEIGHT 2.0
#define COUNT_CAP 400.0  /* past this the counts are halved, so estimates follow a changing text */
#define EMA 0.1

static int bin_of(float confidence) {
    int b = (int)(confidence * SPECD_DL_BINS);
    return b < 0 ? 0 : b >= SPECD_DL_BINS ? SPECD_DL_BINS - 1 : b;
}

void specd_draft_length_init(specd_draft_length *dl) {
    memset(dl, 0, sizeof *dl);
    /* Prior: a draft of confidence c is accepted with probability about c. */
    for (int b = 0; b < SPECD_DL_BINS; b++) {
        dl->drafted[b] = PRIOR_WEIGHT;
        dl->accepted[b] = PRIOR_WEIGHT * (b + 0.5) / SPECD_DL_BINS;
    }
}

double specd_draft_length_acceptance(const specd_draft_length *dl, float confidence) {
    int b = bin_of(confidence);
    return dl->accepted[b] / dl->drafted[b];
}

static double prior_ratio(int32_t n) { return 1.0 + PRIOR_SLOPE * (n - 1); }

double specd_draft_length_verify_cost(const specd_draft_length *dl, int32_t n) {
    if (n < 1) n = 1;
    if (n > SPECD_DL_MAX_BATCH) n = SPECD_DL_MAX_BATCH;
    if (dl->verify_ms[n] > 0.0) return dl->verify_ms[n];
    /* Scale from the nearest measured size by the prior's shape. */
    for (int32_t d = 1; d < SPECD_DL_MAX_BATCH; d++) {
        int32_t lo = n - d, hi = n + d;
        if (lo >= 1 && dl->verify_ms[lo] > 0.0) return dl->verify_ms[lo] * prior_ratio(n) / prior_ratio(lo);
        if (hi <= SPECD_DL_MAX_BATCH && dl->verify_ms[hi] > 0.0)
            return dl->verify_ms[hi] * prior_ratio(n) / prior_ratio(hi);
    }
    return prior_ratio(n); /* nothing measured: in units of one target token */
}

static double draft_cost(const specd_draft_length *dl) {
    if (dl->draft_ms > 0.0) return dl->draft_ms;
    return PRIOR_DRAFT_RATIO * specd_draft_length_verify_cost(dl, 1);
}

/* Mean acceptance over all buckets: the guess for a token not drawn yet. */
static double mean_acceptance(const specd_draft_length *dl) {
    double a = 0.0, d = 0.0;
    for (int b = 0; b < SPECD_DL_BINS; b++) {
        a += dl->accepted[b];
        d += dl->drafted[b];
    }
    return a / d;
}

void specd_draft_length_begin(specd_draft_length *dl) {
    dl->p_all = 1.0;
    dl->expected = 1.0;
    dl->cost = specd_draft_length_verify_cost(dl, 1);
}

bool specd_draft_length_should_add(specd_draft_length *dl, int32_t depth, float confidence) {
    /* The token is drawn: its draft cost is spent. Keeping it adds one token to the target pass. */
    double gain = dl->p_all * specd_draft_length_acceptance(dl, confidence);
    double extra = specd_draft_length_verify_cost(dl, depth + 2) - specd_draft_length_verify_cost(dl, depth + 1);
    if ((dl->expected + gain) * dl->cost < dl->expected * (dl->cost + extra)) return false;
    dl->p_all *= specd_draft_length_acceptance(dl, confidence);
    dl->expected += gain;
    dl->cost += extra;
    return true;
}

bool specd_draft_length_should_continue(const specd_draft_length *dl, int32_t depth) {
    double gain = dl->p_all * mean_acceptance(dl);
    double extra = draft_cost(dl) + specd_draft_length_verify_cost(dl, depth + 2) -
                   specd_draft_length_verify_cost(dl, depth + 1);
    return (dl->expected + gain) * dl->cost > dl->expected * (dl->cost + extra);
}

static void moving_average(double *avg, double x) { *avg = *avg > 0.0 ? (1.0 - EMA) * *avg + EMA * x : x; }

void specd_draft_length_record_verify(specd_draft_length *dl, int32_t n, double ms) {
    if (n >= 1 && n <= SPECD_DL_MAX_BATCH) moving_average(&dl->verify_ms[n], ms);
}

void specd_draft_length_record_draft(specd_draft_length *dl, int32_t n_decodes, double ms) {
    if (n_decodes > 0) moving_average(&dl->draft_ms, ms / n_decodes);
}

void specd_draft_length_record_outcome(specd_draft_length *dl, float confidence, bool accepted) {
    int b = bin_of(confidence);
    dl->drafted[b] += 1.0;
    dl->accepted[b] += accepted ? 1.0 : 0.0;
    if (dl->drafted[b] > COUNT_CAP) {
        dl->drafted[b] *= 0.5;
        dl->accepted[b] *= 0.5;
    }
}
