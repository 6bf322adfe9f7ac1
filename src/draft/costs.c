/* costs.c - the cost model: target passes by size, the cache fill, draft tokens (see costs.h). */
#include "costs.h"

#include <string.h>

/* Before anything is measured: verifying n tokens on CPU costs about 1 + 0.15 (n - 1) times one
 * token (llama-bench pp1/pp4/pp8 on the benchmark pair), and a draft token about 10% of a target
 * token. Measurements replace these quickly. */
#define PRIOR_SLOPE 0.15
#define PRIOR_DRAFT_RATIO 0.10
/* An untried size priced from the known ones adds at least this share of T(1) per token. */
#define MIN_SLOPE 0.02
/* A size learnt from fewer than SPECD_COSTS_LEARN_PASSES passes is priced this share cheaper after
 * one pass (half of it after two, a third after three): one pass slowed by the machine (46 ms where
 * the size costs 37) made the size look dear, it was never chosen again, and nothing corrected it;
 * priced a little below what it measured, it is passed again until it has its passes. */
#define UNSURE_DISCOUNT 0.12
#define EMA 0.1
/* A base learnt from a pass at a high fill is what is left once the fill's part is taken off; an
 * attention estimate far too dear must not take it to nothing. */
#define MIN_BASE_SHARE 0.25
/* Bounds that real pass costs keep, give or take what the GEMM's tiling does. */
#define LINEAR_BOUND_SLACK 1.25

/* Moving average that trusts a much faster measurement at once: a pass slowed down by a busy
 * machine must not keep a size looking expensive (and so never chosen) for long. */
/* Moves *avg toward x by `weight`; the first value, or one under a third of it (a pass of another
 * kind, or the machine freed), sets it instead. True when it moved (not set). */
static bool weighted_average(double *avg, double x, double weight) {
    if (*avg <= 0.0 || x < *avg / 3.0) {
        *avg = x;
        return false;
    }
    *avg = (1.0 - weight) * *avg + weight * x;
    return true;
}

static void moving_average(double *avg, double x) { weighted_average(avg, x, EMA); }

void specd_costs_init(specd_costs *c) { memset(c, 0, sizeof *c); }

static double prior_ratio(int32_t n) { return 1.0 + PRIOR_SLOPE * (n - 1); }

static double level_of(const specd_costs *c) { return c->level > 0.0 ? c->level : 1.0; }

static bool measured(const specd_costs *c, int32_t n) { return c->base_ms[n] > 0.0 && c->base_passes[n] > 0; }

/* The base of size n: known (measured or a file's), or scaled from the nearest known size by the
 * prior's shape; 0 when none is known. What a pass of that size is checked against when it is
 * learnt (a pass far dearer than this is not learnt). */
static double nearest_base(const specd_costs *c, int32_t n) {
    if (c->base_ms[n] > 0.0) return c->base_ms[n];
    for (int32_t d = 1; d < SPECD_COSTS_MAX_BATCH; d++) {
        int32_t lo = n - d, hi = n + d;
        if (lo >= 1 && c->base_ms[lo] > 0.0) return c->base_ms[lo] * prior_ratio(n) / prior_ratio(lo);
        if (hi <= SPECD_COSTS_MAX_BATCH && c->base_ms[hi] > 0.0)
            return c->base_ms[hi] * prior_ratio(n) / prior_ratio(hi);
    }
    return 0.0;
}

/* The growth per token past the known sizes: the least from the smallest known size to any
 * other (not to the largest alone: one pass of the largest slowed by the machine, 87 ms where it
 * costs 67, made every longer size look 30% dearer, none was tried, and the draft length stayed
 * short for the whole run on the memory-bound pair). */
static double least_growth(const specd_costs *c, int32_t n, int32_t first,
                           bool (*known)(const specd_costs *, int32_t)) {
    double least = -1.0;
    for (int32_t m = first + 1; m <= SPECD_COSTS_MAX_BATCH; m++) {
        if (m == n || !known(c, m)) continue;
        double g = (c->base_ms[m] - c->base_ms[first]) / (m - first);
        if (least < 0.0 || g < least) least = g;
    }
    return least;
}

/* A size no pass has priced yet, from the sizes `known` counts (those this process measured, or a
 * calibration file's): between two known sizes, on the line between them; past the known ones,
 * from the nearest known size along the growth the known sizes show from the smallest to the
 * largest (the prior's slope while only one size is known; at least MIN_SLOPE of T(1) a token).
 * 0 when no size is known. From evidence, not from a fixed shape: priced by the prior's shape, a
 * memory-bound machine's passes (T(8) 1.4 T(1) where the prior says 2.05) looked dear past the
 * known sizes and too cheap below them (T(4) 44 ms scaled down from T(13) where it costs 57), and
 * sizes past the known ones looked cheaper than the largest known one (T(10) 2.35 T(1) beside a
 * measured T(9) of 2.6 T(1)); priced optimistically, every generation tried long chains it then
 * lost on (a 128-token generation spent 17 of its 60 steps trying sizes, each twice: a size's
 * first pass warms up). Two known sizes give one growth, which may be a step of the curve rather
 * than its slope (on a GPU T(2) is 1.4 T(1) and T(3..16) about T(2), and the first pass of a size
 * pays its graph's rebuild too): past them it is at most the prior's, so that a longer size is
 * tried once (along that step T(8) of an H200's 8.8 GB target looked 7 T(1), and the planner
 * stopped drafting where a fixed 6 made 1.35x its tokens). */
static double extrapolated_base(const specd_costs *c, int32_t n, bool (*known)(const specd_costs *, int32_t)) {
    int32_t first = 0, last = 0, below = 0, above = 0, n_known = 0;
    for (int32_t m = 1; m <= SPECD_COSTS_MAX_BATCH; m++) {
        if (m == n || !known(c, m)) continue;
        n_known++;
        if (!first) first = m;
        last = m;
        if (m < n) below = m;
        if (m > n && !above) above = m;
    }
    if (!first) return 0.0;
    if (below && above)
        return c->base_ms[below] + (c->base_ms[above] - c->base_ms[below]) * (n - below) / (above - below);
    double one = c->base_ms[first] / prior_ratio(first); /* T(1), or scaled down to it */
    double slope = last > first ? least_growth(c, n, first, known) : PRIOR_SLOPE * one;
    if (n_known < 3 && slope > PRIOR_SLOPE * one) slope = PRIOR_SLOPE * one;
    if (slope < MIN_SLOPE * one) slope = MIN_SLOPE * one;
    if (below) return c->base_ms[below] + (n - below) * slope;
    double x = c->base_ms[above] - (above - n) * slope;
    return x > MIN_BASE_SHARE * c->base_ms[above] ? x : MIN_BASE_SHARE * c->base_ms[above];
}

static bool is_measured(const specd_costs *c, int32_t n) { return measured(c, n); }
static bool is_known(const specd_costs *c, int32_t n) { return c->base_ms[n] > 0.0; }

/* The base of size n: known (measured, or a calibration file's); else extrapolated from the
 * measured sizes, or from the file's while none is measured (0 when neither has one). */
static double estimated_base(const specd_costs *c, int32_t n) {
    if (c->base_ms[n] > 0.0) return c->base_ms[n];
    double from_measured = extrapolated_base(c, n, is_measured);
    return from_measured > 0.0 ? from_measured : extrapolated_base(c, n, is_known);
}

/* As a choice prices it: a size with few passes below what it measured (UNSURE_DISCOUNT). */
static double base_to_choose(const specd_costs *c, int32_t n) {
    int32_t passes = c->base_passes[n];
    if (measured(c, n) && passes < SPECD_COSTS_LEARN_PASSES) return c->base_ms[n] * (1.0 - UNSURE_DISCOUNT / passes);
    /* a size no pass of this process priced is as unsure as one passed once: priced at a measured
     * size's full price beside it, going from one to the other looked dearer than it is */
    return c->base_ms[n] > 0.0 ? c->base_ms[n] : estimated_base(c, n) * (1.0 - UNSURE_DISCOUNT);
}

/* The cells a pass reads, weighted as the attention pays for them: own_work cells of the tokens'
 * own sequences in all, in a context of all_cells used cells before the pass. */
static double pass_work(const specd_costs *c, double own_work, int32_t n, double all_cells) {
    const specd_attention_cost *a = &c->attention;
    return a->own_weight * own_work + (a->all_weight * n + a->pass_weight) * (all_cells + n);
}

double specd_costs_own_work(int32_t n, const specd_fill *fill) {
    double own = fill ? fill->own_cells : 0.0;
    return n * own + 0.5 * n * (n + 1);
}

static double fill_work(const specd_costs *c, int32_t n, const specd_fill *fill) {
    return pass_work(c, specd_costs_own_work(n, fill), n, fill ? fill->all_cells : 0.0);
}

/* A (specd_attention_cost) when base(1) is base1 ms. */
static double attend_ms(const specd_costs *c, double base1) {
    double a = c->attention.per_t1 * base1;
    return a < c->attention.max_ms ? a : c->attention.max_ms;
}

/* The fill's part of a pass, at the level of the bases (0 when nothing is known). */
static double fill_cost(const specd_costs *c, double work) { return attend_ms(c, nearest_base(c, 1)) * work; }

static double pass_ms(const specd_costs *c, int32_t n, const specd_fill *fill,
                      double (*base_of)(const specd_costs *, int32_t)) {
    if (n < 1) n = 1;
    /* Past the sizes kept, a pass costs in proportion to its tokens (a batch of several slots):
     * never as if more tokens were free. */
    if (n > SPECD_COSTS_MAX_BATCH) return pass_ms(c, SPECD_COSTS_MAX_BATCH, fill, base_of) * n / (double)SPECD_COSTS_MAX_BATCH;
    double base = base_of(c, n);
    if (base <= 0.0) return prior_ratio(n) + c->attention.per_t1 * fill_work(c, n, fill);
    return (base + fill_cost(c, fill_work(c, n, fill))) * level_of(c);
}

double specd_costs_pass(const specd_costs *c, int32_t n, const specd_fill *fill) {
    return pass_ms(c, n, fill, estimated_base);
}

double specd_costs_pass_to_choose(const specd_costs *c, int32_t n, const specd_fill *fill) {
    return pass_ms(c, n, fill, base_to_choose);
}

/* A measured draft cost at the level of the moment. */
static double at_level(const specd_costs *c, double ms) {
    return c->draft_level > 0.0 ? ms * level_of(c) / c->draft_level : ms;
}

double specd_costs_draft_token(const specd_costs *c) {
    if (c->draft_ms > 0.0) return at_level(c, c->draft_ms);
    return c->first_draft_ms > 0.0 ? at_level(c, c->first_draft_ms) : PRIOR_DRAFT_RATIO * specd_costs_pass(c, 1, NULL);
}

double specd_costs_first_draft_token(const specd_costs *c) {
    return c->first_draft_ms > 0.0 ? at_level(c, c->first_draft_ms) : specd_costs_draft_token(c);
}

double specd_costs_drafts(const specd_costs *c, int32_t n) {
    return n <= 0 ? 0.0 : specd_costs_first_draft_token(c) + (n - 1) * specd_costs_draft_token(c);
}

void specd_costs_set_attention(specd_costs *c, const specd_attention_cost *a) {
    bool known = a && a->per_t1 > 0.0 && a->max_ms > 0.0 && a->own_weight >= 0.0 && a->all_weight >= 0.0 &&
                 a->pass_weight >= 0.0;
    c->attention = known ? *a : (specd_attention_cost){0};
}

void specd_costs_record_calibration(specd_costs *c, int32_t n, double ms) {
    if (n < 1 || n > SPECD_COSTS_MAX_BATCH || !(ms > 0.0)) return;
    c->base_ms[n] = ms;
    c->base_passes[n] = 0; /* a prior: this process's first passes of the size re-learn it */
    c->n_learnt++;
}

void specd_costs_record_calibration_draft(specd_costs *c, double first_ms, double ms) {
    if (ms > 0.0) c->draft_ms = ms;
    if (first_ms > 0.0) c->first_draft_ms = first_ms;
    c->draft_decodes = 0; /* the first draft decode this process measures replaces them */
}

/* A pass over n tokens costs at most n/m passes over m < n (it could be split into them), and no
 * more than a pass over more tokens, give or take LINEAR_BOUND_SLACK. A base beyond them was learnt
 * from a pass the machine slowed down, or read from a file written on a busy machine: such a size
 * would look so dear that it was never chosen again, and nothing would correct it. */
void specd_costs_bound(specd_costs *c) {
    double least_per_token = 0.0; /* the smallest base_ms[m] / m over the sizes below n */
    for (int32_t n = 1; n <= SPECD_COSTS_MAX_BATCH; n++) {
        if (c->base_ms[n] <= 0.0) continue;
        double bound = LINEAR_BOUND_SLACK * least_per_token * n;
        if (least_per_token > 0.0 && c->base_ms[n] > bound) c->base_ms[n] = bound;
        double per_token = c->base_ms[n] / n;
        if (least_per_token <= 0.0 || per_token < least_per_token) least_per_token = per_token;
    }
    double least_above = 0.0; /* the cheapest base over the sizes above n */
    for (int32_t n = SPECD_COSTS_MAX_BATCH; n >= 1; n--) {
        if (c->base_ms[n] <= 0.0) continue;
        if (least_above > 0.0 && c->base_ms[n] > LINEAR_BOUND_SLACK * least_above)
            c->base_ms[n] = LINEAR_BOUND_SLACK * least_above;
        if (least_above <= 0.0 || c->base_ms[n] < least_above) least_above = c->base_ms[n];
    }
}

/* What is left of a pass of n tokens that cost level_ms once its fill's part is taken off. For
 * n = 1 that part depends on the very base being learnt (A = per_t1 x base(1), at most max_ms). */
static double empty_cache_part(const specd_costs *c, int32_t n, double level_ms, double work) {
    if (n != 1) return level_ms - fill_cost(c, work);
    double by_share = level_ms / (1.0 + c->attention.per_t1 * work);
    return c->attention.per_t1 * by_share < c->attention.max_ms ? by_share : level_ms - c->attention.max_ms * work;
}

/* A pass of a size still being learnt (fewer than SPECD_COSTS_LEARN_PASSES this process): its base
 * is the cheapest of its passes, each brought to the empty-cache level by the level of its moment
 * and capped at twice what was expected. The cheapest, not the mean: what slows a pass on a CPU
 * (the first pass of a size warming up, the scheduler, another process) only ever adds time, and
 * a size that looks too dear is never chosen again, so nothing would correct it. The first pass of
 * the process replaces a file's prior. */
static void learn_base(specd_costs *c, int32_t n, double level_ms, double expected, double work) {
    if (expected > 0.0 && level_ms > 2.0 * expected) level_ms = 2.0 * expected;
    double empty = empty_cache_part(c, n, level_ms, work);
    if (empty < MIN_BASE_SHARE * level_ms) empty = MIN_BASE_SHARE * level_ms;
    int32_t k = ++c->base_passes[n];
    if (k == 1 || empty < c->base_ms[n]) c->base_ms[n] = empty;
    c->n_learnt++;
    specd_costs_bound(c);
}

void specd_costs_record_verify(specd_costs *c, int32_t n, double ms) { specd_costs_record_pass(c, n, 0.0, 0, ms); }

/* Passes of each kind (resized, same size) before their residuals price a resize. */
#define RESIZE_MIN_PASSES 8

double specd_costs_resize(const specd_costs *c) {
    if (c->same_size_passes < RESIZE_MIN_PASSES || c->resized_passes < RESIZE_MIN_PASSES) return 0.0;
    double extra = c->resized_residual - c->same_size_residual;
    return extra > 0.0 ? extra : 0.0;
}

/* A resize a tenth of a one-token pass or more (a GPU's: a third). A CPU's passes of the benchmark
 * pair learnt one of 2% (0.5 ms of 27), less than a spell gains by following the text, and noise
 * can leave a small one on any machine. */
#define RESIZE_MATTERS 0.10

bool specd_costs_resizes_matter(const specd_costs *c) {
    return specd_costs_resize(c) > RESIZE_MATTERS * specd_costs_pass(c, 1, NULL);
}

int32_t specd_costs_padding(const specd_costs *c, int32_t n, const specd_fill *fill, int32_t max_tokens) {
    int32_t last = c->last_pass_n;
    if (n < 1 || last <= n || last > max_tokens || last > SPECD_COSTS_MAX_BATCH || !specd_costs_resizes_matter(c))
        return 0;
    double resize = specd_costs_resize(c);
    return specd_costs_pass(c, last, fill) - specd_costs_pass(c, n, fill) < resize ? last - n : 0;
}

static void signed_average(double *avg, int32_t *count, double x) {
    *avg = *count == 0 ? x : (1.0 - EMA) * *avg + EMA * x;
    (*count)++;
}

/* A pass of a size the model knows well (its base settled, the level set) against the model: its
 * residual, to the same-size or the resized average (see last_pass_n). A pass far slower than the
 * model (a busy machine) says nothing about either. */
static void learn_resize(specd_costs *c, int32_t n, double ms, double expected) {
    bool settled = c->base_passes[n] >= SPECD_COSTS_LEARN_PASSES && c->level_passes >= SPECD_COSTS_LEARN_PASSES;
    if (!settled || !(expected > 0.0) || c->last_pass_n == 0) return;
    double modelled = expected * level_of(c);
    if (ms > 3.0 * modelled) return;
    if (n == c->last_pass_n) signed_average(&c->same_size_residual, &c->same_size_passes, ms - modelled);
    else signed_average(&c->resized_residual, &c->resized_passes, ms - modelled);
}

/* The level follows the low end of what passes take, as the bases do (each the cheapest of its
 * size's first passes): once it has moved LEVEL_SETTLE_PASSES times, a pass above it moves it by
 * LEVEL_LOW_SHARE of what a pass below it does (an expectile, not the mean). As a plain moving
 * average of every pass it stood some 7% above the bases learnt at it (the cheapest of four passes
 * against their mean), each size learnt later was learnt that much cheaper against it, and it
 * climbed as sizes were learnt: on the F32 target's costs (policy_replay's F32PAD) at t 1 a warm
 * engine's level rose 44%, sizes it learnt first (T(4), T(6)) looked 16-27% dearer than they are,
 * and the planner drafted 2 or 7-8 where a fixed 5 was best (0.960x it; 0.989x now, five seeds'
 * mean 0.985x -> 0.999x). Its first passes move it both ways alike: the first passes of a process
 * re-learn a calibration file's sizes at the level its least pass set (which may stand 10% low),
 * and a level slow to rise from there learnt them dear (cached replays lost up to 3%). */
#define LEVEL_LOW_SHARE 0.15
#define LEVEL_SETTLE_PASSES 48

static void level_average(specd_costs *c, double x) {
    double up = c->level_moves < LEVEL_SETTLE_PASSES ? 0.5 : LEVEL_LOW_SHARE;
    if (weighted_average(&c->level, x, 2.0 * EMA * (x > c->level ? up : 1.0 - up)) &&
        c->level_moves < LEVEL_SETTLE_PASSES)
        c->level_moves++;
}

/* The level and the size's base from a real pass (see the header). */
static void learn_pass(specd_costs *c, int32_t n, double work, double expected, double ms) {
    c->seen[n]++;
    bool known = c->base_ms[n] > 0.0, settled = known && c->base_passes[n] >= SPECD_COSTS_LEARN_PASSES;
    bool prior = known && c->base_passes[n] == 0; /* a calibration file's */
    if ((known && c->level <= 0.0) || ((settled || prior) && c->level_passes < SPECD_COSTS_LEARN_PASSES)) {
        /* The first levels of this engine: the least of its first passes of sizes it knows. Only
         * the level: a warm-up pass 1.6x slow used to set it alone, and the next passes, seen
         * against it, lowered the sizes of a cache file run after run. Once the level is set, the
         * file's sizes are re-learnt from this process's passes (learn_base). */
        double x = ms / expected;
        if (c->level <= 0.0 || x < c->level) c->level = x;
        c->level_passes++;
        return;
    }
    double level_ms = ms / level_of(c);
    /* Far slower than expected: the machine was busy, the pass says nothing about the model. */
    if (expected > 0.0 && level_ms > 3.0 * expected) return;
    if (!known) c->base_passes[n] = 0;
    if (c->base_passes[n] < SPECD_COSTS_LEARN_PASSES) learn_base(c, n, level_ms, expected, work);
    if (known) level_average(c, ms / (nearest_base(c, n) + fill_cost(c, work)));
}

void specd_costs_record_pass(specd_costs *c, int32_t n, double own_work, int64_t all_cells, double ms) {
    if (n < 1 || n > SPECD_COSTS_MAX_BATCH || !(ms > 0.0)) return;
    double work = pass_work(c, own_work > 0.0 ? own_work : 0.0, n, all_cells > 0 ? (double)all_cells : 0.0);
    double expected = nearest_base(c, n); /* known or scaled from the nearest known size; 0: none */
    if (expected > 0.0) expected += fill_cost(c, work); /* at this pass's fill */
    learn_resize(c, n, ms, expected);
    c->last_pass_n = n;
    learn_pass(c, n, work, expected, ms);
}

/* A file's draft costs stand only until this process measures a draft decode. */
static void forget_file_drafts(specd_costs *c) {
    if (c->draft_decodes == 0) c->draft_ms = c->first_draft_ms = 0.0;
}

void specd_costs_record_draft(specd_costs *c, int32_t n_decodes, double ms) {
    if (n_decodes <= 0 || !(ms > 0.0)) return;
    forget_file_drafts(c);
    if (c->draft_ms <= 0.0) c->n_learnt++; /* known from now on (its average moves, unsaved) */
    c->draft_decodes += n_decodes;
    moving_average(&c->draft_ms, ms / n_decodes);
    c->draft_level = level_of(c);
}

void specd_costs_record_first_draft(specd_costs *c, double ms) {
    if (!(ms > 0.0)) return;
    forget_file_drafts(c);
    if (c->first_draft_ms <= 0.0) c->n_learnt++;
    c->draft_decodes++;
    moving_average(&c->first_draft_ms, ms);
    c->draft_level = level_of(c);
}

/* A plain moving average: the cost is bimodal (a step whose drafts were all accepted only saved
 * the state; one with a rejection restored it and decoded again), so a cheap step must not reset
 * it as moving_average would. */
void specd_costs_record_state(specd_costs *c, double ms) {
    if (ms < 0.0) return;
    c->state_ms = c->state_ms > 0.0 ? (1.0 - EMA) * c->state_ms + EMA * ms : ms;
}
