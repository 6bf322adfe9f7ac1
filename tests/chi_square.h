/* chi_square.h - Pearson's chi-square goodness-of-fit for the exactness tests.
 *
 * Cells whose expected count is below 5 are pooled into one cell (the usual validity rule). The
 * statistic is turned into a z-score with the Wilson-Hilferty approximation, accurate enough to
 * tell "consistent" (z < 4, p > 3e-5) from "biased" (z in the tens for a broken verifier). */
#ifndef SPECD_TEST_CHI_SQUARE_H
#define SPECD_TEST_CHI_SQUARE_H

#include <math.h>
#include <stdint.h>

typedef struct chi_square_result {
    double statistic;
    int df;
    double z;
} chi_square_result;

static inline chi_square_result chi_square_test(const double *expected_prob, const int64_t *observed,
                                                int n_cells, int64_t n_samples) {
    chi_square_result r = {0.0, -1, 0.0};
    double pooled_expected = 0.0, pooled_observed = 0.0;
    for (int i = 0; i < n_cells; i++) {
        double e = expected_prob[i] * (double)n_samples;
        if (e < 5.0) {
            pooled_expected += e;
            pooled_observed += (double)observed[i];
            continue;
        }
        double d = (double)observed[i] - e;
        r.statistic += d * d / e;
        r.df++;
    }
    if (pooled_expected > 0.0) {
        double d = pooled_observed - pooled_expected;
        /* An observation where the exact distribution puts (almost) nothing is itself a failure. */
        r.statistic += d * d / (pooled_expected > 1e-9 ? pooled_expected : 1e-9);
        r.df++;
    }
    if (r.df < 1) r.df = 1;
    double k = r.df, x = r.statistic / k;
    r.z = (cbrt(x) - (1.0 - 2.0 / (9.0 * k))) / sqrt(2.0 / (9.0 * k));
    return r;
}

#define CHI_SQUARE_MAX_Z 4.0

#endif
