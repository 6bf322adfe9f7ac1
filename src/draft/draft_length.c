/* draft_length.c - adaptive draft length from measured costs and calibrated acceptance (see .h). */
#include "draft_length.h"

#include <string.h>

/* Before anything is measured: verifying n tokens on CPU costs about 1 + 0.15 (n - 1) times one
 * token (llama-bench pp1/pp4/pp8 on the benchmark pair), and a draft token about 10% of a target
 * token. Measurements replace these quickly. */
#define PRIOR_SLOPE 0.15
#define PRIOR_DRAFT_RATIO 0.10
#define PRIOR_WEIGHT 2.0
#define SHRINK_WEIGHT 4.0
#define LOOKAHEAD 8
#define COUNT_CAP 400.0  /* past this the counts are halved, so estimates follow a changing text */
#define EMA 0.1
/* A base learnt from a pass at a high fill is what is left once the fill's part is taken off; an
 * attention estimate far too dear must not take it to nothing. */
#define MIN_BASE_SHARE 0.25

/* Moving average that trusts a much faster measurement at once: a calibration pass slowed down by
 * a busy machine must not keep a batch size looking expensive (and so never chosen) for long. */
static void moving_average(double *avg, double x) {
    if (*avg <= 0.0 || x < *avg / 3.0) *avg = x;
    else *avg = (1.0 - EMA) * *avg + EMA * x;
}

static int bin_of(float confidence) {
    int b = (int)(confidence * SPECD_DL_BINS);
    return b < 0 ? 0 : b >= SPECD_DL_BINS ? SPECD_DL_BINS - 1 : b;
}

void specd_draft_length_init(specd_draft_length *dl) { memset(dl, 0, sizeof *dl); }

/* Overall acceptance, with a prior of one half worth PRIOR_WEIGHT drafts. */
static double mean_acceptance(const specd_draft_length *dl) {
    double a = PRIOR_WEIGHT * 0.5, d = PRIOR_WEIGHT;
    for (int b = 0; b < SPECD_DL_BINS; b++) {
        a += dl->accepted[b];
        d += dl->drafted[b];
    }
    return a / d;
}

/* A bucket's own rate, shrunk toward the overall rate: a bucket with few drafts (or none, because
 * its drafts were never kept) borrows from the rest instead of staying at a guess forever. */
double specd_draft_length_acceptance(const specd_draft_length *dl, float confidence) {
    int b = bin_of(confidence);
    return (dl->accepted[b] + SHRINK_WEIGHT * mean_acceptance(dl)) / (dl->drafted[b] + SHRINK_WEIGHT);
}

static double prior_ratio(int32_t n) { return 1.0 + PRIOR_SLOPE * (n - 1); }

static double drift_of(const specd_draft_length *dl) { return dl->drift > 0.0 ? dl->drift : 1.0; }

/* The base of size n: timed, or scaled from the nearest timed size by the prior's shape (what a pass
 * of an untimed size is checked against when it is learnt; choices: base_cost_to_choose); 0 when no
 * size is timed. */
static double base_cost(const specd_draft_length *dl, int32_t n) {
    if (dl->base_ms[n] > 0.0) return dl->base_ms[n];
    for (int32_t d = 1; d < SPECD_DL_MAX_BATCH; d++) {
        int32_t lo = n - d, hi = n + d;
        if (lo >= 1 && dl->base_ms[lo] > 0.0) return dl->base_ms[lo] * prior_ratio(n) / prior_ratio(lo);
        if (hi <= SPECD_DL_MAX_BATCH && dl->base_ms[hi] > 0.0)
            return dl->base_ms[hi] * prior_ratio(n) / prior_ratio(hi);
    }
    return 0.0;
}

/* The cells a pass of n tokens reads, weighted as the attention pays for them: own_work cells of
 * their own sequences in all, in a context of all_cells used cells before the pass. */
static double pass_work(const specd_draft_length *dl, double own_work, int32_t n, double all_cells) {
    const specd_attention_cost *a = &dl->attention;
    return a->own_weight * own_work + (a->all_weight * n + a->pass_weight) * (all_cells + n);
}

/* A pass of n tokens at the step's fill: each attends to the slot's cells before the root and
 * to those before it in the pass. */
static double step_work(const specd_draft_length *dl, int32_t n) {
    return pass_work(dl, n * dl->own_cells + 0.5 * n * (n + 1), n, dl->all_cells);
}

/* A (specd_attention_cost) when base(1) is base1 ms. */
static double attend_ms(const specd_draft_length *dl, double base1) {
    double a = dl->attention.per_t1 * base1;
    return a < dl->attention.max_ms ? a : dl->attention.max_ms;
}

/* The fill's part of a pass, at the level of the bases (0 when nothing is timed). */
static double fill_cost(const specd_draft_length *dl, double work) { return attend_ms(dl, base_cost(dl, 1)) * work; }

/* The base a choice prices size n at: timed, or the least of the timed sizes scaled to n by the
 * prior's shape (0 when none is timed). Optimistic on purpose, where learning checks a pass against
 * the nearest timed size (base_cost): a size never passed is then chosen once when it might pay,
 * and known from then on (a calibration file keeps it). Priced from the nearest size, a size next
 * to a dear one looked dear for good: on this CPU passes of 4 and 8 tokens are cheap and 5-7 dear,
 * so with 2 slots T(6) = 67.6 ms priced T(8) at 79 where it costs 53, and the slots never drafted
 * 3 each (2 clients: 1.05x llama-server). */
static double base_cost_to_choose(const specd_draft_length *dl, int32_t n) {
    if (dl->base_ms[n] > 0.0) return dl->base_ms[n];
    double least = 0.0;
    for (int32_t m = 1; m <= SPECD_DL_MAX_BATCH; m++) {
        double scaled = dl->base_ms[m] * prior_ratio(n) / prior_ratio(m);
        if (dl->base_ms[m] > 0.0 && (least <= 0.0 || scaled < least)) least = scaled;
    }
    return least;
}

double specd_draft_length_verify_cost(const specd_draft_length *dl, int32_t n) {
    if (n < 1) n = 1;
    /* Past the sizes kept, a pass costs in proportion to its tokens (a batch of several slots):
     * never as if more tokens were free. */
    if (n > SPECD_DL_MAX_BATCH)
        return specd_draft_length_verify_cost(dl, SPECD_DL_MAX_BATCH) * n / (double)SPECD_DL_MAX_BATCH;
    double base = base_cost_to_choose(dl, n);
    /* Nothing timed: in units of one target token. */
    if (base <= 0.0) return prior_ratio(n) + dl->attention.per_t1 * step_work(dl, n);
    return (base + fill_cost(dl, step_work(dl, n))) * drift_of(dl);
}

void specd_draft_length_set_attention(specd_draft_length *dl, const specd_attention_cost *a) {
    bool known = a && a->per_t1 > 0.0 && a->max_ms > 0.0 && a->own_weight >= 0.0 && a->all_weight >= 0.0 &&
                 a->pass_weight >= 0.0;
    dl->attention = known ? *a : (specd_attention_cost){0};
}

void specd_draft_length_set_fill(specd_draft_length *dl, int32_t own_cells, int64_t all_cells) {
    dl->own_cells = own_cells > 0 ? own_cells : 0;
    dl->all_cells = all_cells > 0 ? (double)all_cells : 0.0;
}

static int32_t copies_of(const specd_draft_length *dl) { return dl->copies > 1 ? dl->copies : 1; }

/* One draft decode of this chain (and of its copies: one token each). */
static double draft_cost(const specd_draft_length *dl) {
    double one = dl->draft_ms > 0.0 ? dl->draft_ms : PRIOR_DRAFT_RATIO * specd_draft_length_verify_cost(dl, 1);
    return one * copies_of(dl);
}

/* T of the step's pass when this slot's part of it is n tokens: the other slots' tokens ride in the
 * same pass (specd_draft_length_begin_in_batch). */
static double pass_cost(const specd_draft_length *dl, int32_t n) {
    return specd_draft_length_verify_cost(dl, dl->batch_tokens + copies_of(dl) * n);
}

/* Keeping a draft at `depth`: one more token in the target pass, and for the first draft of a
 * step the state checkpoint a recurrent model needs. */
static double extra_verify_cost(const specd_draft_length *dl, int32_t depth) {
    double state = depth == 0 ? dl->state_ms : 0.0;
    return pass_cost(dl, depth + 2) - pass_cost(dl, depth + 1) + state;
}

/* The best tokens-per-ms reachable from a chain of `depth` kept drafts by drafting m more
 * (m = 0..LOOKAHEAD), each accepted with the mean rate; the best m goes to *best_m when not NULL.
 * Looking ahead, not one token at a time, matters: on CPU T(n) is not convex (a pass of 5 tokens
 * can cost much more than one of 4 while 8 costs little more than 5), so one more token may not
 * pay while three more do. */
static double best_rate_from(const specd_draft_length *dl, int32_t depth, double expected, double cost,
                             double p_all, bool allow_stop, int32_t *best_m) {
    double a = mean_acceptance(dl), best = allow_stop ? expected / cost : 0.0;
    double base_verify = pass_cost(dl, depth + 1);
    if (best_m) *best_m = 0;
    for (int32_t m = 1; m <= LOOKAHEAD; m++) {
        p_all *= a;
        expected += p_all * copies_of(dl);
        double c = cost + m * draft_cost(dl) + pass_cost(dl, depth + 1 + m) - base_verify +
                   (depth == 0 ? dl->state_ms : 0.0);
        if (expected / c > best) {
            best = expected / c;
            if (best_m) *best_m = m;
        }
    }
    return best;
}

void specd_draft_length_begin(specd_draft_length *dl) { specd_draft_length_begin_in_batch(dl, 0, 0.0); }

void specd_draft_length_begin_in_batch(specd_draft_length *dl, int32_t other_tokens, double other_expected) {
    specd_draft_length_begin_joint(dl, other_tokens, other_expected, 1);
}

void specd_draft_length_begin_joint(specd_draft_length *dl, int32_t other_tokens, double other_expected,
                                    int32_t copies) {
    dl->copies = copies > 1 ? copies : 1;
    dl->batch_tokens = other_tokens > 0 ? other_tokens : 0;
    dl->batch_expected = other_expected > 0.0 ? other_expected : 0.0;
    dl->p_all = 1.0;
    dl->expected = dl->copies + dl->batch_expected;
    dl->cost = pass_cost(dl, 1);
}

bool specd_draft_length_worth_adding(const specd_draft_length *dl, int32_t depth, float confidence) {
    /* The token is drawn: its draft cost is spent. Keeping it adds one token to the target pass,
     * and maybe more drafts after it. */
    double p = dl->p_all * specd_draft_length_acceptance(dl, confidence);
    double with = best_rate_from(dl, depth + 1, dl->expected + p * copies_of(dl),
                                 dl->cost + extra_verify_cost(dl, depth), p, true, NULL);
    return with > dl->expected / dl->cost;
}

void specd_draft_length_add(specd_draft_length *dl, int32_t depth, float confidence) {
    dl->p_all *= specd_draft_length_acceptance(dl, confidence);
    dl->expected += dl->p_all * copies_of(dl);
    dl->cost += extra_verify_cost(dl, depth);
}

/* The chain length with the best expected tokens per ms at the mean acceptance: what a fixed
 * length would choose from the same measurements. Per-token confidences may stop a draft sooner,
 * but not carry it past this: on CPU, T(n) jumps (T(5) is 1.5x T(4) on the benchmark pair), and
 * the confidence buckets are too noisy to bet a jump on. Measured on the benchmark pair (8 prompts,
 * interleaved): temperature 1 46.1 -> 49.4 tokens/s, temperature 0 50.4 -> 52.3. */
static int32_t best_fixed_length(const specd_draft_length *dl) {
    int32_t k = 0; /* from an empty chain: one pass over the root, nothing drafted yet */
    best_rate_from(dl, 0, copies_of(dl) + dl->batch_expected, pass_cost(dl, 1), 1.0, true, &k);
    return k;
}

bool specd_draft_length_worth_continuing(const specd_draft_length *dl, int32_t depth) {
    if (depth >= best_fixed_length(dl)) return false;
    return best_rate_from(dl, depth, dl->expected, dl->cost, dl->p_all, false, NULL) > dl->expected / dl->cost;
}

void specd_draft_length_add_draft_decode(specd_draft_length *dl) { dl->cost += draft_cost(dl); }

void specd_draft_length_record_calibration(specd_draft_length *dl, int32_t n, double ms) {
    if (n < 1 || n > SPECD_DL_MAX_BATCH || !(ms > 0.0)) return;
    dl->base_ms[n] = ms;
    dl->base_passes[n] = SPECD_DL_LEARN_PASSES; /* known: only the level moves it from now on */
    dl->n_learnt++;
}

/* Bounds that real pass costs keep, give or take what the GEMM's tiling does (LINEAR_BOUND_SLACK):
 * a pass over n tokens costs at most n/m passes over m < n (it could be split into them), and no
 * more than a pass over more tokens. A base beyond them was learnt from a pass the machine slowed
 * down (when it was the first pass of all, nothing could be expected of it), or read from a file
 * written on a busy machine: such a size would look so dear that it was never chosen again, and
 * nothing would correct it. */
#define LINEAR_BOUND_SLACK 1.25
void specd_draft_length_bound_costs(specd_draft_length *dl) {
    double least_per_token = 0.0; /* the smallest base_ms[m] / m over the sizes below n */
    for (int32_t n = 1; n <= SPECD_DL_MAX_BATCH; n++) {
        if (dl->base_ms[n] <= 0.0) continue;
        double bound = LINEAR_BOUND_SLACK * least_per_token * n;
        if (least_per_token > 0.0 && dl->base_ms[n] > bound) dl->base_ms[n] = bound;
        double per_token = dl->base_ms[n] / n;
        if (least_per_token <= 0.0 || per_token < least_per_token) least_per_token = per_token;
    }
    double least_above = 0.0; /* the cheapest base over the sizes above n */
    for (int32_t n = SPECD_DL_MAX_BATCH; n >= 1; n--) {
        if (dl->base_ms[n] <= 0.0) continue;
        if (least_above > 0.0 && dl->base_ms[n] > LINEAR_BOUND_SLACK * least_above)
            dl->base_ms[n] = LINEAR_BOUND_SLACK * least_above;
        if (least_above <= 0.0 || dl->base_ms[n] < least_above) least_above = dl->base_ms[n];
    }
}

/* A pass of a size still being learnt (fewer than SPECD_DL_LEARN_PASSES so far): its base is the
 * cheapest of its passes, each brought to the empty-cache level by the drift of its moment and
 * capped at twice what was expected. The cheapest, not the mean: what slows a pass on a CPU (the
 * first pass of a size warming up, the scheduler, another process) only ever adds time, and a
 * size that looks too dear is never chosen again, so nothing would correct it (the first plain
 * step of a run took 16 ms where the next ones take 10, and a mean kept drafting where it lost). */
/* What is left of a pass of n tokens that cost level_ms once its fill's part is taken off. For
 * n = 1 that part depends on the very base being learnt (A = per_t1 x base(1), at most max_ms). */
static double empty_cache_part(const specd_draft_length *dl, int32_t n, double level_ms, double work) {
    if (n != 1) return level_ms - fill_cost(dl, work);
    double by_share = level_ms / (1.0 + dl->attention.per_t1 * work);
    return dl->attention.per_t1 * by_share < dl->attention.max_ms ? by_share : level_ms - dl->attention.max_ms * work;
}

static void learn_base(specd_draft_length *dl, int32_t n, double level_ms, double expected, double work) {
    if (expected > 0.0 && level_ms > 2.0 * expected) level_ms = 2.0 * expected;
    double empty = empty_cache_part(dl, n, level_ms, work);
    if (empty < MIN_BASE_SHARE * level_ms) empty = MIN_BASE_SHARE * level_ms;
    int32_t k = ++dl->base_passes[n];
    if (k == 1 || empty < dl->base_ms[n]) dl->base_ms[n] = empty;
    dl->n_learnt++;
    specd_draft_length_bound_costs(dl);
}

void specd_draft_length_record_verify(specd_draft_length *dl, int32_t n, double ms) {
    specd_draft_length_record_pass(dl, n, 0.0, 0, ms);
}

void specd_draft_length_record_pass(specd_draft_length *dl, int32_t n, double own_work, int64_t all_cells,
                                    double ms) {
    if (n < 1 || n > SPECD_DL_MAX_BATCH || !(ms > 0.0)) return;
    double work = pass_work(dl, own_work > 0.0 ? own_work : 0.0, n, all_cells > 0 ? (double)all_cells : 0.0);
    double expected = base_cost(dl, n); /* known or scaled from the nearest known size; 0: none */
    if (expected > 0.0) expected += fill_cost(dl, work); /* at this pass's fill */
    bool known = dl->base_ms[n] > 0.0, settled = known && dl->base_passes[n] >= SPECD_DL_LEARN_PASSES;
    if ((known && dl->drift <= 0.0) || (settled && dl->level_passes < SPECD_DL_LEARN_PASSES)) {
        /* The first levels of this engine: the least of its first passes of sizes it knows. Only
         * the level: a warm-up pass 1.6x slow used to set it alone, and the next passes, seen
         * against it, lowered the sizes of a cache file run after run. */
        double x = ms / expected;
        if (dl->drift <= 0.0 || x < dl->drift) dl->drift = x;
        dl->level_passes++;
        return;
    }
    double level_ms = ms / drift_of(dl);
    /* Far slower than expected: the machine was busy, the pass says nothing about the model. */
    if (expected > 0.0 && level_ms > 3.0 * expected) return;
    if (!known) dl->base_passes[n] = 0;
    if (dl->base_passes[n] < SPECD_DL_LEARN_PASSES) learn_base(dl, n, level_ms, expected, work);
    if (known) moving_average(&dl->drift, ms / (base_cost(dl, n) + fill_cost(dl, work)));
}

void specd_draft_length_record_draft(specd_draft_length *dl, int32_t n_decodes, double ms) {
    if (n_decodes <= 0 || !(ms > 0.0)) return;
    if (dl->draft_ms <= 0.0) dl->n_learnt++; /* known from now on (its average moves, unsaved) */
    moving_average(&dl->draft_ms, ms / n_decodes);
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

/* A plain moving average: the cost is bimodal (a step whose drafts were all accepted only saved
 * the state; one with a rejection restored it and decoded again), so a cheap step must not reset
 * it as moving_average would. */
void specd_draft_length_record_state(specd_draft_length *dl, double ms) {
    if (ms < 0.0) return;
    dl->state_ms = dl->state_ms > 0.0 ? (1.0 - EMA) * dl->state_ms + EMA * ms : ms;
}
