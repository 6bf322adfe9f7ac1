/* heavy.c - see heavy.h. */
#include "heavy.h"

#include <string.h>

#define PASS_EMA_WEIGHT 0.05
#define PASS_OUTLIER 2.0

/* The typical pass follows the passes slowly, each counted at most PASS_OUTLIER times the
 * typical one: a pass stretched by the CPU being taken away (a busy machine) must not make every
 * grammar look cheap, and passes that really grew (a longer context) still move it. */
static void note_pass(heavy_state *h, double pass_ms) {
    if (pass_ms <= 0.0) return;
    if (h->pass_ms <= 0.0) h->pass_ms = pass_ms;
    double counted = pass_ms < PASS_OUTLIER * h->pass_ms ? pass_ms : PASS_OUTLIER * h->pass_ms;
    h->pass_ms += PASS_EMA_WEIGHT * (counted - h->pass_ms);
}

int32_t heavy_pick_round(heavy_state *h, const int32_t *active, int32_t n, int32_t *out, bool *solo) {
    int32_t n_light = 0, n_heavy = 0, heavy[SPECD_MAX_PARALLEL];
    for (int32_t i = 0; i < n; i++) {
        if (h->heavy[active[i]]) heavy[n_heavy++] = active[i];
        else out[n_light++] = active[i];
    }
    *solo = n_heavy > 0 && (n_light == 0 || h->owed_ms <= 0.0);
    if (!*solo) return n_light;
    out[0] = heavy[h->next_heavy++ % n_heavy];
    return 1;
}

double heavy_step_limit_ms(const heavy_state *h) {
    double floor_ms = (double)h->step_limit_ms;
    if (floor_ms <= 0.0) return 0.0; /* no limit */
    double by_pass = STEP_LIMIT_PASSES * h->pass_ms;
    return by_pass > floor_ms ? by_pass : floor_ms;
}

int32_t heavy_after_round(heavy_state *h, const int32_t *stepped, const bool *has_grammar, int32_t n, bool solo, double round_ms,
                          double grammar_ms, double pass_ms) {
    note_pass(h, pass_ms);
    double heavy_above = h->pass_ms > HEAVY_MIN_MS ? h->pass_ms : HEAVY_MIN_MS;
    if (!solo) {
        h->owed_ms -= round_ms;
        if (grammar_ms > heavy_above) /* one of them stalled the round */
            for (int32_t i = 0; i < n; i++) h->heavy[stepped[i]] |= has_grammar[i];
        return -1;
    }
    int32_t slot = stepped[0];
    h->owed_ms = round_ms;
    double limit = heavy_step_limit_ms(h);
    return limit > 0.0 && grammar_ms > limit ? slot : -1;
}

void heavy_forget(heavy_state *h, int32_t slot) { h->heavy[slot] = false; }

void heavy_reset(heavy_state *h, int64_t step_limit_ms) {
    memset(h, 0, sizeof *h);
    h->step_limit_ms = step_limit_ms;
}
