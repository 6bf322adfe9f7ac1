/* test_verify.c - exactness of the verifiers on a synthetic world where everything is known.
 *
 * The target and the draft are Markov chains over a 5-token vocabulary: p(next | previous) = P,
 * q(next | previous) = Q, with Q deliberately different from P. We run the real speculative loop
 * (draft, verify, emit, repeat) and compare the distribution of the first two emitted tokens with
 * the exact target distribution P[0][a] * P[a][b] by a chi-square test. A biased verifier that
 * always accepts must fail the same test (the negative control). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "chi_square.h"
#include "sample/rng.h"
#include "verify/sibling_draws.h"
#include "verify/verify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define V 5
#define N_SAMPLES 200000

static double P[V][V], Q[V][V];

static void random_rows(double m[V][V], specd_rng *rng, double peak) {
    for (int i = 0; i < V; i++) {
        double sum = 0.0;
        for (int j = 0; j < V; j++) {
            m[i][j] = 0.05 + specd_rng_uniform(rng) + (j == (i + 1) % V ? peak : 0.0);
            sum += m[i][j];
        }
        for (int j = 0; j < V; j++) m[i][j] /= sum;
    }
}

static void make_world(void) {
    specd_rng rng;
    specd_rng_seed(&rng, 42);
    random_rows(P, &rng, 1.0);
    random_rows(Q, &rng, 1.5); /* agrees with P on the likely token, differs elsewhere */
}

static void row_dist(const double row[V], specd_dist *d) {
    specd_dist_reserve(d, V);
    d->n = V;
    for (int j = 0; j < V; j++) {
        d->ids[j] = j;
        d->probs[j] = (float)row[j];
    }
}

static bool world_target_dist(void *ctx, const specd_token_tree *tree, int32_t node, specd_dist *out) {
    (void)ctx;
    row_dist(P[tree->nodes[node].token], out);
    return true;
}

static specd_token world_target_argmax(void *ctx, const specd_token_tree *tree, int32_t node) {
    (void)ctx;
    const double *row = P[tree->nodes[node].token];
    int best = 0;
    for (int j = 1; j < V; j++)
        if (row[j] > row[best]) best = j;
    return best;
}

static const specd_verify_source world = {world_target_dist, world_target_argmax, NULL};

/* How the draft tree is shaped in a test. */
typedef enum {
    CHAIN,
    TREE_TWO_IID,
    CHAIN_DETERMINISTIC,
    TREE_THREE_WITHOUT_REPLACEMENT,     /* three distinct siblings, each keeping its q_i */
    TREE_THREE_WITHOUT_REPLACEMENT_BAD, /* the same draws, but each keeps the full q (wrong) */
} draft_shape;

static void draft_chain(specd_token_tree *tree, int32_t parent, int len, specd_rng *rng, bool sampled) {
    specd_dist q = {0};
    for (int i = 0; i < len; i++) {
        const double *row = Q[tree->nodes[parent].token];
        row_dist(row, &q);
        specd_token t = sampled ? specd_dist_sample(&q, rng) : specd_dist_argmax(&q);
        parent = specd_tree_add(tree, parent, t, sampled ? &q : NULL, (float)row[t]);
    }
    specd_dist_free(&q);
}

/* Up to three distinct children of the root drawn without replacement, each followed by a chain. */
static void draft_siblings(specd_token_tree *tree, int len, specd_rng *rng, bool keep_q_i) {
    specd_dist q = {0}, q_i = {0};
    specd_sibling_draws draws = {0};
    row_dist(Q[tree->nodes[0].token], &q);
    assert_true(specd_sibling_draws_begin(&draws, &q));
    specd_token t;
    for (int b = 0; b < 3 && specd_sibling_draw(&draws, rng, &t, &q_i); b++) {
        int32_t child = specd_tree_add(tree, 0, t, keep_q_i ? &q_i : &q, (float)specd_dist_prob(&q, t));
        draft_chain(tree, child, len - 1, rng, true);
    }
    specd_sibling_draws_free(&draws);
    specd_dist_free(&q);
    specd_dist_free(&q_i);
}

static void draft_tree(specd_token_tree *tree, draft_shape shape, int len, specd_rng *rng) {
    switch (shape) {
    case CHAIN: draft_chain(tree, 0, len, rng, true); break;
    case CHAIN_DETERMINISTIC: draft_chain(tree, 0, len, rng, false); break;
    case TREE_TWO_IID:
        /* two independent draws from q(.|root), each followed by its own chain */
        for (int b = 0; b < 2; b++) {
            int32_t before = tree->n_nodes;
            draft_chain(tree, 0, 1, rng, true);
            draft_chain(tree, before, len - 1, rng, true);
        }
        break;
    case TREE_THREE_WITHOUT_REPLACEMENT: draft_siblings(tree, len, rng, true); break;
    case TREE_THREE_WITHOUT_REPLACEMENT_BAD: draft_siblings(tree, len, rng, false); break;
    }
}

/* A deliberately wrong verifier for the negative control: accepts every draft of the chain. */
static void accept_everything(const specd_token_tree *tree, specd_rng *rng, specd_verify_result *r) {
    specd_dist p = {0};
    r->n_accepted = 0;
    for (int32_t i = 1; i < tree->n_nodes; i++) r->path[r->n_accepted++] = i;
    r->last_node = tree->n_nodes - 1;
    row_dist(P[tree->nodes[r->last_node].token], &p);
    r->next_token = specd_dist_sample(&p, rng);
    specd_dist_free(&p);
}

typedef struct run_config {
    draft_shape shape;
    int draft_len;
    bool greedy;
    bool biased;
} run_config;

/* Runs speculative steps from token 0 until two tokens are emitted; returns them as a*V+b. */
static int first_two_tokens(const run_config *cfg, specd_verifier *v, specd_token_tree *tree,
                            specd_rng *rng, int64_t *drafted, int64_t *accepted) {
    int emitted[2 * 16 + 2], n = 0;
    int32_t path[64];
    specd_token root = 0;
    while (n < 2) {
        specd_tree_reset(tree, root);
        draft_tree(tree, cfg->shape, cfg->draft_len, rng);
        specd_verify_result r = {.path = path};
        if (cfg->biased) accept_everything(tree, rng, &r);
        else if (cfg->greedy) specd_verify_greedy(v, tree, &world, &r);
        else specd_verify_stochastic(v, tree, &world, rng, &r);
        *drafted += cfg->draft_len;
        *accepted += r.n_accepted;
        for (int i = 0; i < r.n_accepted; i++) emitted[n++] = tree->nodes[r.path[i]].token;
        emitted[n++] = r.next_token;
        root = r.next_token;
    }
    return emitted[0] * V + emitted[1];
}

static chi_square_result run_and_test(const run_config *cfg, double *acceptance) {
    specd_verifier v;
    specd_token_tree tree = {0};
    specd_rng rng;
    specd_rng_seed(&rng, 1234);
    assert_true(specd_verifier_init(&v, V));
    int64_t counts[V * V] = {0}, drafted = 0, accepted = 0;
    for (int s = 0; s < N_SAMPLES; s++) counts[first_two_tokens(cfg, &v, &tree, &rng, &drafted, &accepted)]++;
    double expected[V * V];
    for (int a = 0; a < V; a++)
        for (int b = 0; b < V; b++) expected[a * V + b] = P[0][a] * P[a][b];
    specd_tree_free(&tree);
    specd_verifier_free(&v);
    *acceptance = (double)accepted / (double)drafted;
    return chi_square_test(expected, counts, V * V, N_SAMPLES);
}

static void assert_exact(run_config cfg) {
    double acceptance = 0.0;
    chi_square_result r = run_and_test(&cfg, &acceptance);
    print_message("shape %d len %d: chi2 %.1f df %d z %.2f acceptance %.3f\n", cfg.shape, cfg.draft_len,
                  r.statistic, r.df, r.z, acceptance);
    /* Non-vacuous: drafts are both accepted and rejected, so both paths of the verifier ran. */
    assert_true(acceptance > 0.2 && acceptance < 0.95);
    assert_true(r.z < CHI_SQUARE_MAX_Z);
}

static void test_chain_of_one_is_exact(void **state) { (void)state; assert_exact((run_config){CHAIN, 1, false, false}); }
static void test_chain_of_three_is_exact(void **state) { (void)state; assert_exact((run_config){CHAIN, 3, false, false}); }
static void test_deterministic_drafts_are_exact(void **state) {
    (void)state;
    assert_exact((run_config){CHAIN_DETERMINISTIC, 2, false, false});
}
static void test_two_iid_branches_are_exact(void **state) { (void)state; assert_exact((run_config){TREE_TWO_IID, 2, false, false}); }

static void test_siblings_without_replacement_are_exact(void **state) {
    (void)state;
    assert_exact((run_config){TREE_THREE_WITHOUT_REPLACEMENT, 2, false, false});
}

/* Negative control: siblings drawn without replacement but verified as if each came from the full
 * q. The test above must be able to fail. */
static void test_siblings_without_replacement_need_their_q_i(void **state) {
    (void)state;
    double acceptance = 0.0;
    chi_square_result r = run_and_test(&(run_config){TREE_THREE_WITHOUT_REPLACEMENT_BAD, 2, false, false}, &acceptance);
    print_message("siblings verified with the full q: chi2 %.1f z %.2f\n", r.statistic, r.z);
    assert_true(r.z > 3.0 * CHI_SQUARE_MAX_Z);
}

/* ---- multi-branch verification with hand-made p and q: exact acceptance probabilities ------- */

/* p over 4 tokens, and q for the draft. */
static const float HAND_P[4] = {0.4f, 0.1f, 0.3f, 0.2f};
static const float HAND_Q[4] = {0.1f, 0.5f, 0.2f, 0.2f};

static bool hand_target_dist(void *ctx, const specd_token_tree *tree, int32_t node, specd_dist *out) {
    (void)ctx, (void)tree, (void)node;
    specd_dist_reserve(out, 4);
    out->n = 4;
    for (int j = 0; j < 4; j++) {
        out->ids[j] = j;
        out->probs[j] = HAND_P[j];
    }
    return true;
}

/* Root with children 1 then 2 (drawn without replacement from HAND_Q: child 2 keeps q without
 * token 1, renormalized: (0.2, 0, 0.4, 0.4)). By hand:
 *   child 1 accepted with min(1, 0.1 / 0.5) = 0.2;
 *   then p2 = norm(max(0, p - q)) = norm(0.3, 0, 0.1, 0) = (0.75, 0, 0.25, 0);
 *   child 2 accepted with min(1, 0.25 / 0.4) = 0.625, so with 0.8 * 0.625 = 0.5 in all;
 *   then p3 = norm(max(0, p2 - q2)) = norm(0.55, 0, 0, 0): token 0, with 0.3.
 * Without the without-replacement q_2 (child 2 tried with HAND_Q) it would be 0.8 * min(1, 0.25 /
 * 0.2) = 0.8. */
static void test_two_children_accept_with_hand_computed_probabilities(void **state) {
    (void)state;
    specd_dist q = {0}, q2 = {0};
    specd_dist_reserve(&q, 4);
    q.n = 4;
    for (int j = 0; j < 4; j++) {
        q.ids[j] = j;
        q.probs[j] = HAND_Q[j];
    }
    assert_true(specd_dist_copy(&q2, &q));
    assert_true(fabsf(specd_dist_remove(&q2, 1) - 0.5f) < 1e-6f);
    assert_true(fabsf(specd_dist_prob(&q2, 2) - 0.4f) < 1e-6f);
    specd_token_tree tree = {0};
    specd_tree_reset(&tree, 0);
    int32_t c1 = specd_tree_add(&tree, 0, 1, &q, 0.5f);
    int32_t c2 = specd_tree_add(&tree, 0, 2, &q2, 0.2f);
    specd_verifier v;
    assert_true(specd_verifier_init(&v, 4));
    specd_verify_source src = {hand_target_dist, NULL, NULL};
    specd_rng rng;
    specd_rng_seed(&rng, 7);
    enum { TRIALS = 100000 };
    int64_t first = 0, second = 0, bonus0 = 0;
    int32_t path[4];
    for (int t = 0; t < TRIALS; t++) {
        specd_verify_result r = {.path = path};
        assert_true(specd_verify_stochastic(&v, &tree, &src, &rng, &r));
        if (r.n_accepted == 1 && r.path[0] == c1) first++;
        else if (r.n_accepted == 1 && r.path[0] == c2) second++;
        else {
            assert_int_equal(r.n_accepted, 0);
            assert_int_equal(r.next_token, 0); /* the residual left only token 0 */
            bonus0++;
        }
    }
    const double want[3] = {0.2, 0.5, 0.3};
    const int64_t got[3] = {first, second, bonus0};
    for (int i = 0; i < 3; i++) {
        double sd = sqrt(want[i] * (1.0 - want[i]) / TRIALS);
        print_message("outcome %d: %.4f (exact %.3f)\n", i, (double)got[i] / TRIALS, want[i]);
        assert_true(fabs((double)got[i] / TRIALS - want[i]) < 5.0 * sd);
    }
    specd_verifier_free(&v);
    specd_tree_free(&tree);
    specd_dist_free(&q);
    specd_dist_free(&q2);
}

/* Deterministic siblings (one-hot q, as greedy tree drafts): child x accepted with p(x), the next
 * with p(y) / (1 - p(x)), ... : the target's own draw, taken in steps. Children 0 and 2: 0.4, then
 * 0.3 / 0.6 of the remaining 0.6 = 0.3, and the rest 0.3 goes to tokens 1 and 3 as 0.1 : 0.2. */
static void test_one_hot_children_accept_with_target_probabilities(void **state) {
    (void)state;
    specd_token_tree tree = {0};
    specd_tree_reset(&tree, 0);
    int32_t c1 = specd_tree_add(&tree, 0, 0, NULL, 1.0f);
    int32_t c2 = specd_tree_add(&tree, 0, 2, NULL, 1.0f);
    specd_verifier v;
    assert_true(specd_verifier_init(&v, 4));
    specd_verify_source src = {hand_target_dist, NULL, NULL};
    specd_rng rng;
    specd_rng_seed(&rng, 11);
    enum { TRIALS = 100000 };
    int64_t got[4] = {0};
    int32_t path[4];
    for (int t = 0; t < TRIALS; t++) {
        specd_verify_result r = {.path = path};
        assert_true(specd_verify_stochastic(&v, &tree, &src, &rng, &r));
        specd_token out = r.n_accepted ? tree.nodes[r.path[0]].token : r.next_token;
        if (r.n_accepted) assert_true(r.path[0] == c1 || r.path[0] == c2);
        else assert_true(out == 1 || out == 3);
        got[out]++;
    }
    for (int i = 0; i < 4; i++) {
        double want = HAND_P[i], sd = sqrt(want * (1.0 - want) / TRIALS);
        assert_true(fabs((double)got[i] / TRIALS - want) < 5.0 * sd);
    }
    specd_verifier_free(&v);
    specd_tree_free(&tree);
}

static void test_always_accepting_verifier_is_caught(void **state) {
    (void)state;
    double acceptance = 0.0;
    chi_square_result r = run_and_test(&(run_config){CHAIN, 2, false, true}, &acceptance);
    print_message("negative control: chi2 %.1f z %.2f\n", r.statistic, r.z);
    assert_true(r.z > 10.0 * CHI_SQUARE_MAX_Z);
}

/* Greedy on a tree: follows the branch holding the target's argmax at every level. */
static void test_greedy_follows_target_argmax_through_tree(void **state) {
    (void)state;
    specd_token_tree tree = {0};
    specd_verifier v;
    assert_true(specd_verifier_init(&v, V));
    specd_tree_reset(&tree, 0);
    specd_token a1 = world_target_argmax(NULL, &tree, 0);
    specd_token wrong = (a1 + 1) % V;
    int32_t n_wrong = specd_tree_add(&tree, 0, wrong, NULL, 1.0f);
    int32_t n_right = specd_tree_add(&tree, 0, a1, NULL, 1.0f);
    specd_tree_add(&tree, n_wrong, a1, NULL, 1.0f);
    specd_token a2 = world_target_argmax(NULL, &tree, n_right);
    int32_t n_right2 = specd_tree_add(&tree, n_right, (a2 + 1) % V, NULL, 1.0f); /* rejected */
    (void)n_right2;
    int32_t path[8];
    specd_verify_result r = {.path = path};
    assert_true(specd_verify_greedy(&v, &tree, &world, &r));
    assert_int_equal(r.n_accepted, 1);
    assert_int_equal(r.path[0], n_right);
    assert_int_equal(r.last_node, n_right);
    assert_int_equal(r.next_token, a2);
    specd_tree_free(&tree);
    specd_verifier_free(&v);
}

static void test_branches_are_tagged_by_leaf(void **state) {
    (void)state;
    specd_token_tree tree = {0};
    specd_tree_reset(&tree, 0);
    int32_t a = specd_tree_add(&tree, 0, 1, NULL, 1.0f);
    int32_t b = specd_tree_add(&tree, 0, 2, NULL, 1.0f);
    int32_t c = specd_tree_add(&tree, a, 3, NULL, 1.0f);
    int32_t d = specd_tree_add(&tree, a, 4, NULL, 1.0f);
    assert_true(specd_tree_assign_branches(&tree));
    assert_int_equal(tree.n_branches, 3);
    assert_int_equal(tree.nodes[0].branch_mask, 7u); /* the root is on every branch */
    assert_int_equal(__builtin_popcount(tree.nodes[a].branch_mask), 2);
    assert_int_equal(__builtin_popcount(tree.nodes[b].branch_mask), 1);
    assert_int_equal(tree.nodes[c].branch_mask & tree.nodes[d].branch_mask, 0u);
    specd_token path[4];
    assert_int_equal(specd_tree_path(&tree, d, path), 3);
    assert_int_equal(path[0], 0);
    assert_int_equal(path[1], 1);
    assert_int_equal(path[2], 4);
    specd_tree_free(&tree);
}

static void test_keep_drops_nodes_and_renumbers_parents(void **state) {
    (void)state;
    specd_token_tree tree = {0};
    specd_tree_reset(&tree, 0);
    int32_t a = specd_tree_add(&tree, 0, 1, NULL, 1.0f);
    int32_t b = specd_tree_add(&tree, 0, 2, NULL, 1.0f);
    specd_tree_add(&tree, a, 3, NULL, 1.0f);
    int32_t d = specd_tree_add(&tree, b, 4, NULL, 0.5f);
    specd_dist q = {0};
    assert_true(specd_dist_set_one_hot(&q, 9)); /* unlike any token: shows q moves with its node */
    specd_tree_add(&tree, d, 5, &q, 0.25f);
    int32_t index[6] = {1, 0, 1, 0, 1, 1}; /* drop a and its child */
    assert_int_equal(specd_tree_keep(&tree, index), 4);
    int32_t want_index[6] = {0, -1, 1, -1, 2, 3};
    for (int i = 0; i < 6; i++) assert_int_equal(index[i], want_index[i]);
    const specd_token want_token[4] = {0, 2, 4, 5};
    const int32_t want_parent[4] = {-1, 0, 1, 2};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(tree.nodes[i].token, want_token[i]);
        assert_int_equal(tree.nodes[i].parent, want_parent[i]);
        assert_int_equal(tree.nodes[i].depth, i);
    }
    assert_true(tree.nodes[3].confidence == 0.25f);
    assert_int_equal(specd_dist_argmax(&tree.nodes[3].q), 9);
    assert_true(specd_tree_assign_branches(&tree));
    assert_int_equal(tree.n_branches, 1);
    specd_dist_free(&q);
    specd_tree_free(&tree); /* every q buffer is still owned once: ASan checks */
}

int main(void) {
    make_world();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_of_one_is_exact),
        cmocka_unit_test(test_chain_of_three_is_exact),
        cmocka_unit_test(test_deterministic_drafts_are_exact),
        cmocka_unit_test(test_two_iid_branches_are_exact),
        cmocka_unit_test(test_siblings_without_replacement_are_exact),
        cmocka_unit_test(test_siblings_without_replacement_need_their_q_i),
        cmocka_unit_test(test_two_children_accept_with_hand_computed_probabilities),
        cmocka_unit_test(test_one_hot_children_accept_with_target_probabilities),
        cmocka_unit_test(test_always_accepting_verifier_is_caught),
        cmocka_unit_test(test_greedy_follows_target_argmax_through_tree),
        cmocka_unit_test(test_branches_are_tagged_by_leaf),
        cmocka_unit_test(test_keep_drops_nodes_and_renumbers_parents),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
