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
#include "verify/verify.h"

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
typedef enum { CHAIN, TREE_TWO_IID, CHAIN_DETERMINISTIC } draft_shape;

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
        cmocka_unit_test(test_always_accepting_verifier_is_caught),
        cmocka_unit_test(test_greedy_follows_target_argmax_through_tree),
        cmocka_unit_test(test_branches_are_tagged_by_leaf),
        cmocka_unit_test(test_keep_drops_nodes_and_renumbers_parents),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
