/* sampler.c - llama.cpp's sampling transforms, computed into a sparse distribution.
 *
 * Cost per position: one pass over the vocabulary for bias/penalties, a size-k heap for top-k
 * (no full sort), a sort only of what survives top-k when top-p needs it, one softmax. */
#include "sampler.h"
#include "softmax.h"
#include "top_k.h"

#include "../util/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool specd_sampler_init(specd_sampler *s, const specd_sampling_params *params, int32_t n_vocab,
                        const specd_token *forbidden, int32_t n_forbidden, char **error) {
    memset(s, 0, sizeof *s);
    s->params = *params;
    s->n_vocab = n_vocab;
    /* Ranges were checked by specd_generation_params_validate; only the vocabulary is new here. */
    for (int32_t i = 0; i < params->n_logit_bias; i++) {
        specd_token t = params->logit_bias[i].token;
        if (t < 0 || t >= n_vocab) {
            specd_set_error(error, "logit_bias token %d is outside the vocabulary (0..%d)", t,
                            n_vocab - 1);
            return false;
        }
    }
    int32_t n_bias = params->n_logit_bias + n_forbidden;
    s->bias = n_bias > 0 ? specd_alloc_array((size_t)n_bias, sizeof *s->bias) : NULL;
    s->logits = specd_alloc_array((size_t)n_vocab, sizeof *s->logits);
    s->counts = specd_alloc_array((size_t)n_vocab, sizeof *s->counts);
    s->cand = specd_alloc_array((size_t)n_vocab, sizeof *s->cand);
    bool typical = params->typical_p < 1.0f; /* its scratch only when asked for */
    if (typical) {
        s->typical_scores = specd_alloc_array((size_t)n_vocab, sizeof *s->typical_scores);
        s->typical_order = specd_alloc_array((size_t)n_vocab, sizeof *s->typical_order);
    }
    bool mirostat_ok = specd_mirostat_init(&s->mirostat, params->mirostat, params->mirostat_tau,
                                           params->mirostat_eta, n_vocab);
    bool xtc = params->xtc_probability > 0.0f; /* its scratch only when asked for */
    if (xtc) s->xtc_probs = specd_alloc_array((size_t)n_vocab, sizeof *s->xtc_probs);
    if ((n_bias > 0 && !s->bias) || !s->logits || !s->counts || !s->cand || !mirostat_ok ||
        (typical && (!s->typical_scores || !s->typical_order)) || (xtc && !s->xtc_probs)) {
        specd_sampler_free(s);
        specd_set_error(error, "out of memory for a sampler over %d tokens", n_vocab);
        return false;
    }
    if (params->n_logit_bias > 0)
        memcpy(s->bias, params->logit_bias, (size_t)params->n_logit_bias * sizeof *s->bias);
    for (int32_t i = 0; i < n_forbidden; i++)
        s->bias[params->n_logit_bias + i] = (specd_logit_bias){forbidden[i], -INFINITY};
    s->n_bias = n_bias;
    s->params.logit_bias = s->bias;
    s->params.n_logit_bias = n_bias;
    return true;
}

void specd_sampler_free(specd_sampler *s) {
    free(s->bias);
    free(s->logits);
    free(s->counts);
    free(s->cand);
    free(s->typical_scores);
    free(s->typical_order);
    specd_mirostat_free(&s->mirostat);
    specd_dist_free(&s->masked);
    specd_dry_free(s->dry);
    free(s->xtc_probs);
    memset(s, 0, sizeof *s);
}

bool specd_sampler_init_dry(specd_sampler *s, const specd_engine *e, char **error) {
    bool failed = false;
    s->dry = specd_dry_new(e, &s->params, &failed, error);
    return !failed;
}

bool specd_sampler_is_greedy(const specd_sampler *s) { return s->params.temperature <= 0.0f; }

bool specd_sampler_uses_mirostat(const specd_sampler *s) {
    return s->mirostat.version != 0 && !specd_sampler_is_greedy(s);
}

float specd_sampler_mu(const specd_sampler *s) { return s->mirostat.mu; }

void specd_sampler_set_mu(specd_sampler *s, float mu) { s->mirostat.mu = mu; }

static bool penalties_active(const specd_sampling_params *p) {
    return p->repeat_last_n != 0 &&
           (p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f);
}

/* llama.cpp's penalties sampler: divide positive logits (multiply negative ones) by the repeat
 * penalty, then subtract count * frequency + presence, for tokens seen in the window. */
static void apply_penalties(specd_sampler *s, const specd_token *history, int32_t n_history) {
    const specd_sampling_params *p = &s->params;
    int32_t window = p->repeat_last_n < 0 ? n_history : p->repeat_last_n;
    if (window > n_history) window = n_history;
    const specd_token *recent = history + (n_history - window);
    for (int32_t i = 0; i < window; i++)
        if (recent[i] >= 0 && recent[i] < s->n_vocab) s->counts[recent[i]]++;
    for (int32_t i = 0; i < window; i++) {
        specd_token t = recent[i];
        if (t < 0 || t >= s->n_vocab || s->counts[t] == 0) continue;
        float *l = &s->logits[t];
        *l = *l <= 0.0f ? *l * p->repeat_penalty : *l / p->repeat_penalty;
        *l -= (float)s->counts[t] * p->frequency_penalty + p->presence_penalty;
        s->counts[t] = 0; /* applied once per token; also leaves counts zeroed for next time */
    }
}

/* llama.cpp's top-n-sigma: masks every token whose logit lies more than n standard deviations
 * (of the finite logits) below the top one. The sums are llama.cpp's, in its types, so the same
 * tokens go. */
static void apply_top_n_sigma(specd_sampler *s) {
    float n_sigma = s->params.top_n_sigma, max = -INFINITY, sum = 0.0f;
    size_t valid = 0;
    for (int32_t t = 0; t < s->n_vocab; t++)
        if (s->logits[t] != -INFINITY) {
            max = fmaxf(max, s->logits[t]);
            sum += s->logits[t];
            valid++;
        }
    float mean = valid > 0 ? sum / (float)valid : 0.0f, acc = 0.0f;
    for (int32_t t = 0; t < s->n_vocab; t++)
        if (s->logits[t] != -INFINITY) acc += (float)pow(s->logits[t] - mean, 2);
    float sd = valid > 0 ? sqrtf(acc / (float)valid) : 0.0f;
    for (int32_t t = 0; t < s->n_vocab; t++)
        if (s->logits[t] < max - n_sigma * sd) s->logits[t] = -INFINITY;
}

/* Copies logits into the scratch buffer with bias, penalties, DRY and top-n-sigma applied: what
 * llama.cpp's chain does before top-k, and all that greedy decoding sees. */
static void adjust_logits(specd_sampler *s, const float *logits, const specd_token *history,
                          int32_t n_history) {
    memcpy(s->logits, logits, (size_t)s->n_vocab * sizeof *logits);
    for (int32_t i = 0; i < s->n_bias; i++) s->logits[s->bias[i].token] += s->bias[i].bias;
    if (penalties_active(&s->params)) apply_penalties(s, history, n_history);
    if (s->dry) specd_dry_apply(s->dry, history, n_history, s->logits);
    if (s->params.top_n_sigma > 0.0f && s->n_vocab > 1) apply_top_n_sigma(s);
}

static specd_token argmax_logits(const float *logits, int32_t n) {
    specd_token best = 0;
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

specd_token specd_sampler_argmax(specd_sampler *s, const float *logits, const specd_token *history,
                                 int32_t n_history) {
    adjust_logits(s, logits, history, n_history);
    return argmax_logits(s->logits, s->n_vocab);
}

/* ---- token filters (grammars) ------------------------------------------------------------- */

/* Masks every token not already forbidden, so later transforms see only allowed ones. */
static void mask_all(specd_sampler *s, const specd_token_filter *f) {
    int32_t n = 0;
    for (specd_token t = 0; t < s->n_vocab; t++)
        if (s->logits[t] != -INFINITY) s->cand[n++] = t;
    f->mask(f->ctx, f->state, s->cand, n, s->logits);
}

/* The argmax over allowed tokens, given the unconstrained one: like llama.cpp, only that one token
 * is checked unless the filter refuses it. */
static specd_token filtered_argmax(specd_sampler *s, const specd_token_filter *f, specd_token best) {
    f->mask(f->ctx, f->state, &best, 1, s->logits);
    if (s->logits[best] != -INFINITY) return best;
    mask_all(s, f);
    best = argmax_logits(s->logits, s->n_vocab);
    return s->logits[best] != -INFINITY ? best : f->none_valid;
}

specd_token specd_sampler_argmax_filtered(specd_sampler *s, const float *logits, const specd_token *history,
                                          int32_t n_history, const specd_token_filter *filter) {
    specd_token best = specd_sampler_argmax(s, logits, history, n_history);
    return filter ? filtered_argmax(s, filter, best) : best;
}

/* ---- top-k: the k highest-ranked tokens (top_k.h; ties: the lower id wins) ------------------ */

/* Puts the k highest-ranked tokens (unordered) into s->cand; returns k. */
static int32_t select_top_k(specd_sampler *s, int32_t k) {
    specd_top_k_heap(s->logits, s->n_vocab, k, s->cand);
    return k;
}

/* qsort has no context argument: the logits being sorted, per thread so engines stay independent. */
static _Thread_local const float *g_sort_logits;

static int compare_desc(const void *a, const void *b) {
    specd_token x = *(const specd_token *)a, y = *(const specd_token *)b;
    if (specd_token_ranks_below(g_sort_logits, x, y)) return 1;
    if (specd_token_ranks_below(g_sort_logits, y, x)) return -1;
    return 0;
}

static void sort_desc(specd_token *ids, int32_t n, const float *logits) {
    g_sort_logits = logits;
    qsort(ids, (size_t)n, sizeof *ids, compare_desc);
}

/* Keeps the shortest sorted prefix whose probability (at temperature 1) reaches top_p. */
static int32_t apply_top_p(specd_sampler *s, int32_t n, float *scratch_probs) {
    sort_desc(s->cand, n, s->logits);
    specd_softmax_ids(s->logits, s->cand, n, 1.0f, scratch_probs);
    double cum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        cum += scratch_probs[i];
        if (cum >= s->params.top_p && i + 1 >= s->params.min_keep) return i + 1;
    }
    return n;
}

/* Ranks by typicality score, then by the earlier (logit) order: qsort's context, per thread. */
static _Thread_local const float *g_typical_scores;

static int compare_typical(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    float sx = g_typical_scores[x], sy = g_typical_scores[y];
    if (sx != sy) return sx < sy ? -1 : 1;
    return x - y;
}

/* Locally typical sampling (Meister et al.), as llama.cpp's typical sampler: rank the candidates by
 * how far their surprise -log p is from the entropy, and keep the shortest prefix of that ranking
 * whose probability (at temperature 1) exceeds typical_p. The kept candidates stay in that order. */
static int32_t apply_typical(specd_sampler *s, int32_t n, float *scratch_probs) {
    sort_desc(s->cand, n, s->logits);
    specd_softmax_ids(s->logits, s->cand, n, 1.0f, scratch_probs);
    float entropy = 0.0f;
    for (int32_t i = 0; i < n; i++)
        if (scratch_probs[i] > 0.0f) entropy -= scratch_probs[i] * logf(scratch_probs[i]);
    int32_t *order = s->typical_order;
    for (int32_t i = 0; i < n; i++) {
        s->typical_scores[i] = fabsf(-logf(scratch_probs[i]) - entropy);
        order[i] = i;
    }
    g_typical_scores = s->typical_scores;
    qsort(order, (size_t)n, sizeof *order, compare_typical);
    float cum = 0.0f;
    int32_t keep = n;
    for (int32_t i = 0; i < n; i++) {
        cum += scratch_probs[order[i]];
        if (cum > s->params.typical_p && i + 1 >= s->params.min_keep) {
            keep = i + 1;
            break;
        }
    }
    for (int32_t i = 0; i < keep; i++) order[i] = s->cand[order[i]]; /* positions -> token ids */
    memcpy(s->cand, order, (size_t)keep * sizeof *s->cand);
    return keep;
}

/* Keeps tokens whose probability is at least min_p times the largest one, or the min_keep
 * highest-ranked when fewer pass (llama.cpp's sorted fallback). */
static int32_t apply_min_p(specd_sampler *s, int32_t n) {
    float max = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (s->logits[s->cand[i]] > max) max = s->logits[s->cand[i]];
    float threshold = max + logf(s->params.min_p);
    int32_t passing = 0;
    for (int32_t i = 0; i < n; i++) passing += s->logits[s->cand[i]] >= threshold;
    if (passing < s->params.min_keep) {
        sort_desc(s->cand, n, s->logits);
        return s->params.min_keep < n ? s->params.min_keep : n;
    }
    int32_t kept = 0;
    for (int32_t i = 0; i < n; i++)
        if (s->logits[s->cand[i]] >= threshold) s->cand[kept++] = s->cand[i];
    return kept;
}

/* Drops candidates whose logit is -INFINITY (forbidden by bias). */
static int32_t drop_forbidden(specd_sampler *s, int32_t n) {
    int32_t kept = 0;
    for (int32_t i = 0; i < n; i++)
        if (s->logits[s->cand[i]] != -INFINITY) s->cand[kept++] = s->cand[i];
    return kept;
}

/* Mirostat replaces top-k/top-p/min-p: it sees every token, sorted by adjusted logit. */
static bool mirostat_dist(specd_sampler *s, specd_dist *out) {
    for (int32_t i = 0; i < s->n_vocab; i++) s->cand[i] = i;
    sort_desc(s->cand, s->n_vocab, s->logits);
    return specd_mirostat_dist(&s->mirostat, s->logits, s->cand, s->params.temperature, out);
}

/* The temperature over ids[0..n), softmax into probs: the request's, or with dynatemp llama.cpp's
 * temp_ext, a temperature between temp - range and temp + range by the normalized entropy of
 * the candidates (ids sorted, descending). A temperature of 0 there keeps the top one. */
static void apply_temperature(specd_sampler *s, const specd_token *ids, int32_t n, float *probs) {
    const specd_sampling_params *p = &s->params;
    float temp = p->temperature;
    if (p->dynatemp_range > 0.0f && n > 1) {
        float min_temp = fmaxf(0.0f, temp - p->dynatemp_range), max_temp = temp + p->dynatemp_range;
        float max_entropy = -logf(1.0f / (float)n), entropy = 0.0f;
        specd_softmax_ids(s->logits, ids, n, 1.0f, probs);
        for (int32_t i = 0; i < n; i++)
            if (probs[i] > 0.0f) entropy -= probs[i] * logf(probs[i]);
        temp = min_temp + (max_temp - min_temp) * powf(entropy / max_entropy, p->dynatemp_exponent);
    }
    if (temp > 0.0f) {
        specd_softmax_ids(s->logits, ids, n, temp, probs);
        return;
    }
    for (int32_t i = 0; i < n; i++) probs[i] = i == 0 ? 1.0f : 0.0f;
}

/* XTC (llama.cpp's, after min-p): among the candidates sorted by probability, those with
 * probability >= xtc_threshold all go but the least probable of them, when at least two pass and
 * min_keep stay. Returns how many of the top go (0: XTC changes nothing here). ids must be sorted. */
static int32_t xtc_removed(specd_sampler *s, const specd_token *ids, int32_t n, float *scratch_probs) {
    const specd_sampling_params *p = &s->params;
    if (p->xtc_probability <= 0.0f || p->xtc_threshold > 0.5f || n < 2) return 0;
    specd_softmax_ids(s->logits, ids, n, 1.0f, scratch_probs);
    int32_t last = 0;
    for (int32_t i = 0; i < n && scratch_probs[i] >= p->xtc_threshold; i++) last = i;
    return n - last >= p->min_keep && last > 0 ? last : 0;
}

/* The candidates ids[0..n) (sorted when XTC is on) after XTC and the temperature into out: XTC's
 * coin is part of the distribution, out = (1 - P) c + P c_xtc, c_xtc over ids[removed..n). */
static void finish_distribution(specd_sampler *s, int32_t n, specd_dist *out) {
    int32_t removed = s->xtc_probs ? xtc_removed(s, out->ids, n, out->probs) : 0;
    apply_temperature(s, out->ids, n, out->probs);
    out->n = n;
    if (removed == 0) return;
    float P = s->params.xtc_probability;
    apply_temperature(s, out->ids + removed, n - removed, s->xtc_probs);
    for (int32_t i = 0; i < n; i++) out->probs[i] *= 1.0f - P;
    for (int32_t i = removed; i < n; i++) out->probs[i] += P * s->xtc_probs[i - removed];
}

/* Keeps the tokens of non-zero probability (a distribution lists no others); returns how many. */
static int32_t drop_zeros(specd_dist *d) {
    int32_t kept = 0;
    for (int32_t i = 0; i < d->n; i++)
        if (d->probs[i] > 0.0f) {
            d->ids[kept] = d->ids[i];
            d->probs[kept++] = d->probs[i];
        }
    return d->n = kept;
}

/* Top-k, typical-p, top-p, min-p, XTC and temperature over s->logits (bias, penalties, DRY and
 * top-n-sigma applied) into `out`. Returns the support size: 0 when every token is forbidden, -1
 * when out of memory. */
static int32_t transform(specd_sampler *s, specd_dist *out) {
    const specd_sampling_params *p = &s->params;
    if (s->mirostat.version != 0) return mirostat_dist(s, out) ? out->n : -1;
    int32_t n;
    if (p->top_k > 0 && p->top_k < s->n_vocab) {
        n = select_top_k(s, p->top_k);
    } else {
        n = s->n_vocab;
        for (int32_t i = 0; i < n; i++) s->cand[i] = i;
    }
    n = drop_forbidden(s, n);
    if (n == 0) return 0;
    if (!specd_dist_reserve(out, n)) return -1;
    if (p->typical_p < 1.0f) n = apply_typical(s, n, out->probs);
    if (p->top_p < 1.0f) n = apply_top_p(s, n, out->probs);
    if (p->min_p > 0.0f) n = apply_min_p(s, n);
    /* XTC ranks by probability, dynatemp takes the top one first: both want them sorted. */
    if (s->xtc_probs || p->dynatemp_range > 0.0f) sort_desc(s->cand, n, s->logits);
    memcpy(out->ids, s->cand, (size_t)n * sizeof *out->ids);
    finish_distribution(s, n, out);
    return drop_zeros(out);
}

/* Drops the tokens of c (in out) that the filter refuses; returns their mass m. */
static double drop_refused(specd_sampler *s, const specd_token_filter *f, specd_dist *out) {
    f->mask(f->ctx, f->state, out->ids, out->n, s->logits);
    double refused = 0.0;
    int32_t kept = 0;
    for (int32_t i = 0; i < out->n; i++) {
        if (s->logits[out->ids[i]] == -INFINITY) {
            refused += out->probs[i];
            continue;
        }
        out->ids[kept] = out->ids[i];
        out->probs[kept++] = out->probs[i];
    }
    out->n = kept;
    return refused;
}

/* out <- out + m * g, out holding c's allowed part. s->counts (zero between uses) maps a token to
 * its index in out, plus one. */
static bool add_scaled(specd_sampler *s, specd_dist *out, const specd_dist *g, double m) {
    if (!specd_dist_reserve(out, out->n + g->n)) return false;
    for (int32_t i = 0; i < out->n; i++) s->counts[out->ids[i]] = i + 1;
    for (int32_t i = 0; i < g->n; i++) {
        int32_t at = s->counts[g->ids[i]];
        if (at > 0) {
            out->probs[at - 1] += (float)(m * g->probs[i]);
            continue;
        }
        out->ids[out->n] = g->ids[i];
        out->probs[out->n++] = (float)(m * g->probs[i]);
    }
    for (int32_t i = 0; i < out->n; i++) s->counts[out->ids[i]] = 0;
    return true;
}

/* c (in out) -> P = c [allowed] + m g (see sampler.h). */
static bool apply_filter(specd_sampler *s, const specd_token_filter *f, specd_dist *out) {
    double refused = drop_refused(s, f, out);
    if (refused == 0.0) return true;
    mask_all(s, f);
    int32_t n = transform(s, &s->masked);
    if (n < 0) return false;
    /* Nothing allowed at all: then c had nothing allowed either (m = 1). */
    if (n == 0) return specd_dist_set_one_hot(out, f->none_valid);
    return add_scaled(s, out, &s->masked, refused);
}

bool specd_sampler_dist_filtered(specd_sampler *s, const float *logits, const specd_token *history,
                                 int32_t n_history, const specd_token_filter *filter, specd_dist *out) {
    if (specd_sampler_is_greedy(s))
        return specd_dist_set_one_hot(out, specd_sampler_argmax_filtered(s, logits, history, n_history, filter));
    adjust_logits(s, logits, history, n_history);
    int32_t n = transform(s, out);
    if (n < 0) return false;
    if (n == 0) { /* everything forbidden: the argmax, as without a filter; the filter then decides */
        specd_token t = argmax_logits(s->logits, s->n_vocab);
        return specd_dist_set_one_hot(out, filter ? filter->none_valid : t);
    }
    return filter ? apply_filter(s, filter, out) : true;
}

bool specd_sampler_dist(specd_sampler *s, const float *logits, const specd_token *history,
                        int32_t n_history, specd_dist *out) {
    return specd_sampler_dist_filtered(s, logits, history, n_history, NULL, out);
}
