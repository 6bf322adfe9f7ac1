/* test_sampler.c - the sampling transforms against a plain reference written from llama.cpp's
 * documented semantics (full sort, then each transform in order), on random logits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "chi_square.h"
#include "sample/coupled.h"
#include "sample/dist.h"
#include "sample/rng.h"
#include "sample/sampler.h"
#include "llama.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NV 64

static void random_logits(float *logits, uint64_t seed) {
    specd_rng rng;
    specd_rng_seed(&rng, seed);
    for (int i = 0; i < NV; i++) logits[i] = (float)(6.0 * specd_rng_uniform(&rng) - 3.0);
    logits[7] = logits[9]; /* a tie, to check the order rule */
}

/* ---- the reference: dense, sorted, one transform after another ------------------------------ */

static const float *ref_logits;
static int ref_desc(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    if (ref_logits[x] != ref_logits[y]) return ref_logits[x] < ref_logits[y] ? 1 : -1;
    return x - y;
}

/* Typical-p on idx[0..n) (sorted by logit): keep, in logit order again, the tokens with the
 * smallest |surprise - entropy| until their probability exceeds typical_p. */
static int reference_typical(const float *l, int *idx, int n, float typical_p) {
    double prob[NV], score[NV], z = 0, entropy = 0;
    for (int i = 0; i < n; i++) z += exp(l[idx[i]] - l[idx[0]]);
    for (int i = 0; i < n; i++) {
        prob[i] = exp(l[idx[i]] - l[idx[0]]) / z;
        entropy -= prob[i] * log(prob[i]);
    }
    for (int i = 0; i < n; i++) score[i] = fabs(-log(prob[i]) - entropy);
    bool kept[NV] = {false};
    double cum = 0;
    for (int taken = 0; taken < n && !(cum > typical_p); taken++) { /* selection: the next best score */
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!kept[i] && (best < 0 || score[i] < score[best])) best = i;
        kept[best] = true;
        cum += prob[best];
    }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (kept[i]) idx[m++] = idx[i];
    return m;
}

static void reference(const specd_sampling_params *p, const float *raw, const specd_token *hist, int n_hist,
                      double *out) {
    float l[NV];
    memcpy(l, raw, sizeof l);
    for (int i = 0; i < p->n_logit_bias; i++) l[p->logit_bias[i].token] += p->logit_bias[i].bias;
    int window = p->repeat_last_n < 0 || p->repeat_last_n > n_hist ? n_hist : p->repeat_last_n;
    int count[NV] = {0};
    for (int i = n_hist - window; i < n_hist; i++) count[hist[i]]++;
    for (int t = 0; t < NV; t++) {
        if (!count[t]) continue;
        l[t] = l[t] <= 0 ? l[t] * p->repeat_penalty : l[t] / p->repeat_penalty;
        l[t] -= count[t] * p->frequency_penalty + p->presence_penalty;
    }
    int idx[NV], n = NV;
    for (int i = 0; i < NV; i++) idx[i] = i;
    ref_logits = l;
    qsort(idx, NV, sizeof *idx, ref_desc);
    if (p->top_k > 0 && p->top_k < n) n = p->top_k;
    while (n > 0 && isinf(l[idx[n - 1]]) && l[idx[n - 1]] < 0) n--;
    if (p->typical_p < 1.0f) n = reference_typical(l, idx, n, p->typical_p);
    if (p->top_p < 1.0f) {
        double z = 0, cum = 0;
        for (int i = 0; i < n; i++) z += exp(l[idx[i]] - l[idx[0]]);
        for (int i = 0; i < n; i++) {
            cum += exp(l[idx[i]] - l[idx[0]]) / z;
            if (cum >= p->top_p) { n = i + 1; break; }
        }
    }
    if (p->min_p > 0.0f) {
        int kept = 0;
        for (int i = 0; i < n; i++)
            if (l[idx[i]] >= l[idx[0]] + logf(p->min_p)) idx[kept++] = idx[i];
        n = kept;
    }
    memset(out, 0, NV * sizeof *out);
    double z = 0;
    for (int i = 0; i < n; i++) z += exp((l[idx[i]] - l[idx[0]]) / p->temperature);
    for (int i = 0; i < n; i++) out[idx[i]] = exp((l[idx[i]] - l[idx[0]]) / p->temperature) / z;
}

static specd_sampling_params base_params(void) {
    specd_generation_params g = specd_generation_default_params();
    g.sampling.top_k = 0;
    g.sampling.top_p = 1.0f;
    g.sampling.min_p = 0.0f;
    g.sampling.temperature = 1.0f;
    return g.sampling;
}

static void check_against_reference(const specd_sampling_params *p, uint64_t seed) {
    float logits[NV];
    random_logits(logits, seed);
    specd_token hist[] = {3, 5, 3, 9, 60, 3};
    specd_sampler s;
    char *err = NULL;
    assert_true(specd_sampler_init(&s, p, NV, NULL, 0, &err));
    specd_dist d = {0};
    assert_true(specd_sampler_dist(&s, logits, hist, 6, &d));
    double want[NV], got[NV] = {0}, total = 0;
    reference(p, logits, hist, 6, want);
    for (int i = 0; i < d.n; i++) {
        got[d.ids[i]] += d.probs[i];
        total += d.probs[i];
    }
    assert_true(fabs(total - 1.0) < 1e-5);
    for (int t = 0; t < NV; t++) {
        if (fabs(got[t] - want[t]) > 1e-5) fail_msg("token %d: got %g, want %g (seed %llu)", t, got[t], want[t], (unsigned long long)seed);
    }
    specd_dist_free(&d);
    specd_sampler_free(&s);
}

static void test_plain_softmax_at_temperatures(void **state) {
    (void)state;
    specd_sampling_params p = base_params();
    for (int i = 0; i < 4; i++) {
        p.temperature = 0.3f + 0.5f * (float)i;
        check_against_reference(&p, 100 + (uint64_t)i);
    }
}

static void test_top_k_top_p_min_p(void **state) {
    (void)state;
    const int ks[] = {0, 1, 5, 40};
    const float ps[] = {1.0f, 0.9f, 0.5f};
    const float mins[] = {0.0f, 0.05f, 0.3f};
    uint64_t seed = 1;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 3; c++) {
                specd_sampling_params p = base_params();
                p.top_k = ks[a];
                p.top_p = ps[b];
                p.min_p = mins[c];
                p.temperature = 0.8f;
                check_against_reference(&p, seed++);
            }
}

static void test_typical_p(void **state) {
    (void)state;
    const float typical[] = {0.0f, 0.2f, 0.5f, 0.9f, 0.99f};
    uint64_t seed = 300;
    for (int a = 0; a < 5; a++)
        for (int k = 0; k < 2; k++) {
            specd_sampling_params p = base_params();
            p.typical_p = typical[a];
            p.top_k = k ? 20 : 0;
            p.top_p = k ? 0.8f : 1.0f;
            p.min_p = k ? 0.05f : 0.0f;
            p.temperature = 0.8f;
            check_against_reference(&p, seed++);
        }
}

/* The same chain through llama.cpp's own samplers: the distribution we verify against is the one
 * llama.cpp samples from (same support, same probabilities). */
static void test_chain_equals_llama_cpp_samplers(void **state) {
    (void)state;
    const float typical[] = {1.0f, 0.3f, 0.7f};
    const int32_t ks[] = {0, 12};
    const float ps[] = {1.0f, 0.85f};
    uint64_t seed = 400;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 2; c++) {
                specd_sampling_params p = base_params();
                p.typical_p = typical[a];
                p.top_k = ks[b];
                p.top_p = ps[c];
                p.min_p = 0.05f;
                p.temperature = 0.7f;
                float logits[NV];
                random_logits(logits, seed++);
                struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
                llama_sampler_chain_add(chain, llama_sampler_init_top_k(p.top_k));
                llama_sampler_chain_add(chain, llama_sampler_init_typical(p.typical_p, 0));
                llama_sampler_chain_add(chain, llama_sampler_init_top_p(p.top_p, 0));
                llama_sampler_chain_add(chain, llama_sampler_init_min_p(p.min_p, 0));
                llama_sampler_chain_add(chain, llama_sampler_init_temp(p.temperature));
                llama_token_data data[NV];
                for (int i = 0; i < NV; i++) data[i] = (llama_token_data){i, logits[i], 0.0f};
                llama_token_data_array arr = {data, NV, -1, false};
                llama_sampler_apply(chain, &arr);
                llama_sampler_free(chain);
                double want[NV] = {0}, z = 0, max = -INFINITY;
                for (size_t i = 0; i < arr.size; i++) max = fmax(max, arr.data[i].logit);
                for (size_t i = 0; i < arr.size; i++) z += exp(arr.data[i].logit - max);
                for (size_t i = 0; i < arr.size; i++) want[arr.data[i].id] = exp(arr.data[i].logit - max) / z;
                specd_sampler s;
                assert_true(specd_sampler_init(&s, &p, NV, NULL, 0, NULL));
                specd_dist d = {0};
                assert_true(specd_sampler_dist(&s, logits, NULL, 0, &d));
                double got[NV] = {0};
                for (int i = 0; i < d.n; i++) got[d.ids[i]] = d.probs[i];
                assert_int_equal(d.n, (int)arr.size);
                for (int t = 0; t < NV; t++)
                    if (fabs(got[t] - want[t]) > 1e-5)
                        fail_msg("typical %g top_k %d top_p %g: token %d got %g, llama.cpp %g", (double)p.typical_p,
                                 p.top_k, (double)p.top_p, t, got[t], want[t]);
                specd_dist_free(&d);
                specd_sampler_free(&s);
            }
}

static void test_penalties_and_bias(void **state) {
    (void)state;
    specd_logit_bias bias[] = {{4, 2.5f}, {11, -INFINITY}};
    specd_sampling_params p = base_params();
    p.repeat_penalty = 1.3f;
    p.presence_penalty = 0.4f;
    p.frequency_penalty = 0.2f;
    p.repeat_last_n = 4;
    p.logit_bias = bias;
    p.n_logit_bias = 2;
    check_against_reference(&p, 7);
    p.repeat_last_n = -1;
    p.top_k = 10;
    check_against_reference(&p, 8);
}

static void test_greedy_is_one_hot_on_adjusted_argmax(void **state) {
    (void)state;
    float logits[NV];
    random_logits(logits, 3);
    specd_token best = 0;
    for (int i = 1; i < NV; i++)
        if (logits[i] > logits[best]) best = i;
    specd_sampling_params p = base_params();
    p.temperature = 0.0f;
    p.repeat_penalty = 100.0f; /* seeing `best` in the history must push it down */
    specd_sampler s;
    assert_true(specd_sampler_init(&s, &p, NV, NULL, 0, NULL));
    specd_dist d = {0};
    assert_true(specd_sampler_dist(&s, logits, NULL, 0, &d));
    assert_int_equal(d.n, 1);
    assert_int_equal(d.ids[0], best);
    assert_true(specd_sampler_dist(&s, logits, &best, 1, &d));
    assert_int_not_equal(d.ids[0], best);
    specd_dist_free(&d);
    specd_sampler_free(&s);
}

static void test_forbidden_tokens_never_appear(void **state) {
    (void)state;
    float logits[NV];
    random_logits(logits, 5);
    logits[2] = 50.0f; /* would dominate */
    specd_token forbidden = 2;
    specd_sampling_params p = base_params();
    specd_sampler s;
    assert_true(specd_sampler_init(&s, &p, NV, &forbidden, 1, NULL));
    specd_dist d = {0};
    assert_true(specd_sampler_dist(&s, logits, NULL, 0, &d));
    assert_true(specd_dist_prob(&d, 2) == 0.0f);
    assert_int_not_equal(specd_sampler_argmax(&s, logits, NULL, 0), 2);
    specd_dist_free(&d);
    specd_sampler_free(&s);
}

static void test_bias_outside_vocabulary_is_an_error(void **state) {
    (void)state;
    specd_logit_bias bias = {NV + 3, 1.0f};
    specd_sampling_params p = base_params();
    p.logit_bias = &bias;
    p.n_logit_bias = 1;
    specd_sampler s;
    char *err = NULL;
    assert_false(specd_sampler_init(&s, &p, NV, NULL, 0, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "logit_bias token 67 is outside the vocabulary"));
    specd_free(err);
}

static void test_sampling_follows_the_distribution(void **state) {
    (void)state;
    specd_dist d = {0};
    assert_true(specd_dist_reserve(&d, 3));
    d.n = 3;
    d.ids[0] = 10; d.probs[0] = 0.2f;
    d.ids[1] = 20; d.probs[1] = 0.5f;
    d.ids[2] = 30; d.probs[2] = 0.3f;
    specd_rng rng;
    specd_rng_seed(&rng, 9);
    int counts[3] = {0};
    for (int i = 0; i < 100000; i++) {
        specd_token t = specd_dist_sample(&d, &rng);
        counts[t / 10 - 1]++;
    }
    assert_in_range(counts[0], 19400, 20600);
    assert_in_range(counts[1], 49400, 50600);
    assert_in_range(counts[2], 29400, 30600);
    specd_dist_free(&d);
}

/* ---- token filters (grammars) ------------------------------------------------------------- */

/* A filter that allows the tokens with allowed[t] and counts the candidates it was shown. */
typedef struct test_filter {
    bool allowed[NV];
    int n_checked;
} test_filter;

static void test_mask(void *ctx, void *state, const specd_token *ids, int32_t n, float *logits) {
    test_filter *f = ctx;
    (void)state;
    f->n_checked += n;
    for (int32_t i = 0; i < n; i++)
        if (!f->allowed[ids[i]]) logits[ids[i]] = -INFINITY;
}

static specd_token_filter make_filter(test_filter *f) {
    return (specd_token_filter){test_mask, f, NULL, 61};
}

/* llama.cpp's grammar sampling, written out: c(x) [x allowed] + m g(x), g the transforms over the
 * allowed tokens only, m the mass c gives refused tokens. */
static void filtered_reference(const specd_sampling_params *p, const float *raw, const specd_token *hist,
                               int n_hist, const test_filter *f, double *out) {
    double c[NV], g[NV], m = 0.0;
    float masked[NV];
    reference(p, raw, hist, n_hist, c);
    for (int t = 0; t < NV; t++) {
        masked[t] = f->allowed[t] ? raw[t] : -INFINITY;
        if (!f->allowed[t]) m += c[t];
    }
    reference(p, masked, hist, n_hist, g);
    for (int t = 0; t < NV; t++) out[t] = (f->allowed[t] ? c[t] : 0.0) + m * g[t];
}

static void check_filtered(const specd_sampling_params *p, test_filter *f, uint64_t seed) {
    float logits[NV];
    random_logits(logits, seed);
    specd_token hist[] = {3, 5, 3, 9, 60, 3};
    specd_sampler s;
    assert_true(specd_sampler_init(&s, p, NV, NULL, 0, NULL));
    specd_dist d = {0};
    specd_token_filter filter = make_filter(f);
    assert_true(specd_sampler_dist_filtered(&s, logits, hist, 6, &filter, &d));
    double want[NV], got[NV] = {0}, total = 0;
    filtered_reference(p, logits, hist, 6, f, want);
    for (int i = 0; i < d.n; i++) {
        if (!f->allowed[d.ids[i]]) fail_msg("refused token %d has probability %g", d.ids[i], d.probs[i]);
        got[d.ids[i]] += d.probs[i];
        total += d.probs[i];
    }
    assert_true(fabs(total - 1.0) < 1e-5);
    for (int t = 0; t < NV; t++)
        if (fabs(got[t] - want[t]) > 1e-5) fail_msg("token %d: got %g, want %g (seed %llu)", t, got[t], want[t], (unsigned long long)seed);
    specd_dist_free(&d);
    specd_sampler_free(&s);
}

static void test_filter_gives_llama_cpp_grammar_distribution(void **state) {
    (void)state;
    const int ks[] = {0, 3, 12};
    const float ps[] = {1.0f, 0.7f};
    const float mins[] = {0.0f, 0.1f};
    uint64_t seed = 40;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 2; c++) {
                specd_sampling_params p = base_params();
                p.top_k = ks[a];
                p.top_p = ps[b];
                p.min_p = mins[c];
                p.temperature = 0.9f;
                test_filter f = {.n_checked = 0};
                for (int t = 0; t < NV; t++) f.allowed[t] = t % 3 == 0; /* refuses most of c's mass */
                check_filtered(&p, &f, seed++);
            }
}

static void test_filter_allowing_c_checks_only_its_support(void **state) {
    (void)state;
    specd_sampling_params p = base_params();
    p.top_k = 5;
    test_filter f = {.n_checked = 0};
    for (int t = 0; t < NV; t++) f.allowed[t] = true;
    check_filtered(&p, &f, 77);
    assert_int_equal(f.n_checked, 5); /* no pass over the whole vocabulary */
}

static void test_filtered_greedy_is_argmax_over_allowed(void **state) {
    (void)state;
    float logits[NV];
    random_logits(logits, 11);
    specd_sampling_params p = base_params();
    p.temperature = 0.0f;
    specd_sampler s;
    assert_true(specd_sampler_init(&s, &p, NV, NULL, 0, NULL));
    specd_token best = specd_sampler_argmax(&s, logits, NULL, 0);
    test_filter f = {.n_checked = 0};
    for (int t = 0; t < NV; t++) f.allowed[t] = true;
    specd_token_filter filter = make_filter(&f);
    assert_int_equal(specd_sampler_argmax_filtered(&s, logits, NULL, 0, &filter), best);
    assert_int_equal(f.n_checked, 1); /* the unconstrained choice passes: only it is checked */
    f.allowed[best] = false;
    specd_token want = best == 0 ? 1 : 0;
    for (int t = 0; t < NV; t++)
        if (t != best && logits[t] > logits[want]) want = t;
    assert_int_equal(specd_sampler_argmax_filtered(&s, logits, NULL, 0, &filter), want);
    specd_dist d = {0};
    assert_true(specd_sampler_dist_filtered(&s, logits, NULL, 0, &filter, &d));
    assert_int_equal(d.n, 1);
    assert_int_equal(d.ids[0], want);
    specd_dist_free(&d);
    specd_sampler_free(&s);
}

static void test_filter_allowing_nothing_gives_its_end_token(void **state) {
    (void)state;
    float logits[NV];
    random_logits(logits, 12);
    test_filter f = {.n_checked = 0}; /* allows nothing */
    specd_token_filter filter = make_filter(&f);
    specd_sampling_params p = base_params();
    specd_sampler s;
    specd_dist d = {0};
    for (int greedy = 0; greedy < 2; greedy++) {
        p.temperature = greedy ? 0.0f : 1.0f;
        assert_true(specd_sampler_init(&s, &p, NV, NULL, 0, NULL));
        assert_true(specd_sampler_dist_filtered(&s, logits, NULL, 0, &filter, &d));
        assert_int_equal(d.n, 1);
        assert_int_equal(d.ids[0], filter.none_valid);
        specd_sampler_free(&s);
    }
    specd_dist_free(&d);
}

/* Coupled draws (sample/coupled.h): over many seeds, the draw at one index follows the
 * distribution, and the draws at two indexes of one seed are independent (pairs follow p x p);
 * one seed and index always give the same token. */
static void test_coupled_draws_follow_the_distribution(void **state) {
    (void)state;
    static const float P[] = {0.4f, 0.25f, 0.15f, 0.1f, 0.07f, 0.03f};
    enum { K = 6, N = 60000 };
    specd_dist d = {0};
    assert_true(specd_dist_reserve(&d, K));
    d.n = K;
    for (int i = 0; i < K; i++) d.ids[i] = 100 + 7 * i, d.probs[i] = P[i];
    double one[K], pair[K * K];
    int64_t seen_one[K] = {0}, seen_pair[K * K] = {0};
    for (int i = 0; i < K; i++) {
        one[i] = P[i];
        for (int j = 0; j < K; j++) pair[i * K + j] = (double)P[i] * P[j];
    }
    int same = 0;
    for (uint64_t seed = 1; seed <= N; seed++) {
        specd_token a = specd_coupled_draw(&d, seed, 5), b = specd_coupled_draw(&d, seed, 6);
        assert_int_equal(specd_coupled_draw(&d, seed, 5), a); /* a function of (seed, index, dist) */
        int ia = (a - 100) / 7, ib = (b - 100) / 7;
        assert_true(ia >= 0 && ia < K && ib >= 0 && ib < K);
        seen_one[ia]++;
        seen_pair[ia * K + ib]++;
        same += a == b;
    }
    chi_square_result c1 = chi_square_test(one, seen_one, K, N), c2 = chi_square_test(pair, seen_pair, K * K, N);
    print_message("coupled draws: one index z %.2f, two indexes z %.2f, equal %d of %d\n", c1.z, c2.z, same, N);
    assert_true(c1.z < CHI_SQUARE_MAX_Z && c2.z < CHI_SQUARE_MAX_Z && c2.df >= 20);
    d.probs[0] = 0.0f; /* a token with no probability is never drawn */
    for (uint64_t seed = 1; seed <= 2000; seed++) assert_int_not_equal(specd_coupled_draw(&d, seed, 0), 100);
    specd_dist_free(&d);
}

/* The seeded tree's children (specd_coupled_top_k): the coupled draw first, then distinct tokens
 * of p > 0; the second is the draw from p without the first (Gumbel-top-k), so its frequencies
 * follow p(x) / (1 - p(first)) summed over the first. */
static void test_coupled_top_k_ranks_under_the_same_noise(void **state) {
    (void)state;
    static const float P[] = {0.4f, 0.25f, 0.15f, 0.1f, 0.07f, 0.03f};
    enum { K = 6, N = 40000 };
    specd_dist d = {0};
    assert_true(specd_dist_reserve(&d, K));
    d.n = K;
    for (int i = 0; i < K; i++) d.ids[i] = 100 + 7 * i, d.probs[i] = P[i];
    double second[K] = {0};
    for (int i = 0; i < K; i++)
        for (int j = 0; j < K; j++)
            if (j != i) second[j] += (double)P[i] * P[j] / (1.0 - P[i]);
    int64_t seen[K] = {0};
    for (uint64_t seed = 1; seed <= N; seed++) {
        specd_token top[8];
        float probs[8];
        assert_int_equal(specd_coupled_top_k(&d, seed, 3, 8, top, probs), K); /* no more than there are */
        assert_int_equal(top[0], specd_coupled_draw(&d, seed, 3));
        for (int i = 0; i < K; i++) {
            assert_true(probs[i] == P[(top[i] - 100) / 7]);
            for (int j = 0; j < i; j++) assert_int_not_equal(top[i], top[j]);
        }
        seen[(top[1] - 100) / 7]++;
        specd_token two[2];
        assert_int_equal(specd_coupled_top_k(&d, seed, 3, 2, two, probs), 2); /* a prefix of the longer list */
        assert_true(two[0] == top[0] && two[1] == top[1]);
    }
    chi_square_result c = chi_square_test(second, seen, K, N);
    print_message("coupled top-k: the second token z %.2f\n", c.z);
    assert_true(c.z < CHI_SQUARE_MAX_Z);
    d.probs[2] = 0.0f; /* no probability: never ranked */
    specd_token top[8];
    float probs[8];
    assert_int_equal(specd_coupled_top_k(&d, 9, 0, 8, top, probs), K - 1);
    for (int i = 0; i < K - 1; i++) assert_int_not_equal(top[i], 114);
    specd_dist_free(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_softmax_at_temperatures),
        cmocka_unit_test(test_coupled_draws_follow_the_distribution),
        cmocka_unit_test(test_coupled_top_k_ranks_under_the_same_noise),
        cmocka_unit_test(test_top_k_top_p_min_p),
        cmocka_unit_test(test_typical_p),
        cmocka_unit_test(test_chain_equals_llama_cpp_samplers),
        cmocka_unit_test(test_penalties_and_bias),
        cmocka_unit_test(test_greedy_is_one_hot_on_adjusted_argmax),
        cmocka_unit_test(test_forbidden_tokens_never_appear),
        cmocka_unit_test(test_bias_outside_vocabulary_is_an_error),
        cmocka_unit_test(test_sampling_follows_the_distribution),
        cmocka_unit_test(test_filter_gives_llama_cpp_grammar_distribution),
        cmocka_unit_test(test_filter_allowing_c_checks_only_its_support),
        cmocka_unit_test(test_filtered_greedy_is_argmax_over_allowed),
        cmocka_unit_test(test_filter_allowing_nothing_gives_its_end_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
