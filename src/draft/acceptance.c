/* acceptance.c - acceptance by confidence, per verification mode (see acceptance.h). */
#include "acceptance.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PRIOR_WEIGHT 2.0
/* Before any verdict: a draft model trained on the same data is accepted 60-90% of the time. */
#define PRIOR_ACCEPTANCE 0.75
#define SHRINK_WEIGHT 4.0
#define COUNT_CAP 400.0 /* past this a bucket's counts are halved, so estimates follow the text */

static int bin_of(float confidence) {
    int b = (int)(confidence * SPECD_ACCEPTANCE_BINS);
    return b < 0 ? 0 : b >= SPECD_ACCEPTANCE_BINS ? SPECD_ACCEPTANCE_BINS - 1 : b;
}

static specd_accept_mode checked(specd_accept_mode mode) {
    return mode == SPECD_ACCEPT_SAMPLED ? SPECD_ACCEPT_SAMPLED : SPECD_ACCEPT_GREEDY;
}

void specd_acceptance_init(specd_acceptance *a) { memset(a, 0, sizeof *a); }

/* Adds one outcome to a pair of decayed counts. */
static void count(double *accepted, double *drafted, bool was_accepted) {
    *drafted += 1.0;
    *accepted += was_accepted ? 1.0 : 0.0;
    if (*drafted > COUNT_CAP) {
        *drafted *= 0.5;
        *accepted *= 0.5;
    }
}

static int32_t depth_index(int32_t depth) {
    return depth < 1 ? 0 : depth > SPECD_ACCEPTANCE_DEPTHS ? SPECD_ACCEPTANCE_DEPTHS - 1 : depth - 1;
}

void specd_acceptance_record(specd_acceptance *a, specd_accept_mode mode, int32_t depth, float confidence,
                             bool accepted) {
    int m = checked(mode), b = bin_of(confidence), d = depth_index(depth);
    count(&a->accepted[m][b], &a->drafted[m][b], accepted);
    count(&a->depth_accepted[m][d], &a->depth_drafted[m][d], accepted);
    a->n_verdicts++;
}

/* The mode's counts in file order: accepted and drafted by bin, drawn by bin, by depth. */
static int numbers_of(specd_acceptance *a, int m, double **out) {
    int n = 0;
    for (int b = 0; b < SPECD_ACCEPTANCE_BINS; b++) out[n++] = &a->accepted[m][b];
    for (int b = 0; b < SPECD_ACCEPTANCE_BINS; b++) out[n++] = &a->drafted[m][b];
    for (int b = 0; b < SPECD_ACCEPTANCE_BINS; b++) out[n++] = &a->drawn[m][b];
    for (int d = 0; d < SPECD_ACCEPTANCE_DEPTHS; d++) out[n++] = &a->depth_accepted[m][d];
    for (int d = 0; d < SPECD_ACCEPTANCE_DEPTHS; d++) out[n++] = &a->depth_drafted[m][d];
    return n;
}

void specd_acceptance_format(const specd_acceptance *a, specd_accept_mode mode, char *out, size_t size) {
    double *v[SPECD_ACCEPTANCE_NUMBERS];
    int n = numbers_of((specd_acceptance *)a, checked(mode), v), len = 0;
    out[0] = '\0';
    for (int i = 0; i < n && len >= 0 && (size_t)len < size; i++)
        len += snprintf(out + len, size - (size_t)len, "%s%.4g", i ? " " : "", *v[i]);
}

bool specd_acceptance_parse(specd_acceptance *a, specd_accept_mode mode, const char *numbers, double weight) {
    specd_acceptance parsed = *a;
    double *v[SPECD_ACCEPTANCE_NUMBERS];
    int n = numbers_of(&parsed, checked(mode), v);
    const char *p = numbers;
    for (int i = 0; i < n; i++) {
        char *end;
        double x = strtod(p, &end);
        if (end == p || !isfinite(x) || x < 0.0 || x > 1e9) return false;
        *v[i] = x * weight;
        p = end;
    }
    while (*p == ' ') p++;
    if (*p != '\0') return false;
    int m = checked(mode);
    for (int b = 0; b < SPECD_ACCEPTANCE_BINS; b++)
        if (parsed.accepted[m][b] > parsed.drafted[m][b]) return false;
    for (int d = 0; d < SPECD_ACCEPTANCE_DEPTHS; d++)
        if (parsed.depth_accepted[m][d] > parsed.depth_drafted[m][d]) return false;
    *a = parsed;
    return true;
}

int32_t specd_acceptance_trusted_depth(const specd_acceptance *a, specd_accept_mode mode, double verdicts) {
    int m = checked(mode);
    int32_t d = 0;
    while (d < SPECD_ACCEPTANCE_DEPTHS && a->depth_drafted[m][d] >= verdicts) d++;
    return d + 1;
}

double specd_acceptance_at_depth(const specd_acceptance *a, specd_accept_mode mode, int32_t depth) {
    int m = checked(mode), d = depth_index(depth);
    return (a->depth_accepted[m][d] + SHRINK_WEIGHT * specd_acceptance_mean(a, mode)) /
           (a->depth_drafted[m][d] + SHRINK_WEIGHT);
}

double specd_acceptance_mean(const specd_acceptance *a, specd_accept_mode mode) {
    int m = checked(mode);
    double acc = PRIOR_WEIGHT * PRIOR_ACCEPTANCE, drafted = PRIOR_WEIGHT;
    for (int b = 0; b < SPECD_ACCEPTANCE_BINS; b++) {
        acc += a->accepted[m][b];
        drafted += a->drafted[m][b];
    }
    return acc / drafted;
}

void specd_acceptance_record_drawn(specd_acceptance *a, specd_accept_mode mode, float confidence) {
    int m = checked(mode), b = bin_of(confidence);
    a->drawn[m][b] += 1.0;
    double total = 0.0;
    for (int i = 0; i < SPECD_ACCEPTANCE_BINS; i++) total += a->drawn[m][i];
    if (total > COUNT_CAP)
        for (int i = 0; i < SPECD_ACCEPTANCE_BINS; i++) a->drawn[m][i] *= 0.5;
}

double specd_acceptance_expect(const specd_acceptance *a, specd_accept_mode mode,
                               double (*value)(double acceptance, const void *context), const void *context) {
    int m = checked(mode);
    double total = 0.0, sum = 0.0;
    for (int b = 0; b < SPECD_ACCEPTANCE_BINS; b++) {
        if (a->drawn[m][b] <= 0.0) continue;
        total += a->drawn[m][b];
        sum += a->drawn[m][b] * value(specd_acceptance_of(a, mode, (b + 0.5f) / SPECD_ACCEPTANCE_BINS), context);
    }
    return total > 0.0 ? sum / total : value(specd_acceptance_mean(a, mode), context);
}

double specd_acceptance_of(const specd_acceptance *a, specd_accept_mode mode, float confidence) {
    int m = checked(mode), b = bin_of(confidence);
    return (a->accepted[m][b] + SHRINK_WEIGHT * specd_acceptance_mean(a, mode)) / (a->drafted[m][b] + SHRINK_WEIGHT);
}
