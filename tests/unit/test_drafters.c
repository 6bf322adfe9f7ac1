/* test_drafters.c - the model-free drafters on crafted token histories: each must propose exactly
 * the draft its definition implies. No model is needed. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "draft/ngram_cache.h"
#include "draft/ngram_cache_file.h"
#include "draft/ngram_map.h"
#include "draft/ngram_simple.h"
#include "draft/suffix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROOM 256

/* Drafts after `history` into `tree` (reset here). */
static void draft_into(specd_drafter *d, const specd_token *history, int32_t n, int32_t max_len,
                       specd_token_tree *tree) {
    specd_token buf[ROOM];
    memcpy(buf, history, (size_t)n * sizeof *buf);
    assert_true(specd_tree_reset(tree, history[n - 1]));
    specd_draft_request req = {.history = buf, .n_history = n, .max_len = max_len};
    char *err = NULL;
    assert_int_equal(d->ops->draft(d->self, &req, tree, &err), SPECD_OK);
}

/* Drafts a chain after `history` and checks it equals `want` (n_want tokens). */
static void expect_chain(specd_drafter *d, const specd_token *history, int32_t n, int32_t max_len,
                         const specd_token *want, int32_t n_want) {
    specd_token_tree tree = {0};
    draft_into(d, history, n, max_len, &tree);
    if (specd_tree_n_drafted(&tree) != n_want)
        fail_msg("%s: drafted %d tokens, want %d", d->ops->name, specd_tree_n_drafted(&tree), n_want);
    for (int32_t i = 0; i < n_want; i++) {
        assert_int_equal(tree.nodes[i + 1].parent, i);
        if (tree.nodes[i + 1].token != want[i])
            fail_msg("%s: draft token %d is %d, want %d", d->ops->name, i, tree.nodes[i + 1].token, want[i]);
    }
    specd_tree_free(&tree);
}

#define N_OF(a) ((int32_t)(sizeof(a) / sizeof *(a)))

/* ---- ngram-simple --------------------------------------------------------------------------- */

static void test_ngram_simple_drafts_what_followed(void **state) {
    (void)state;
    specd_drafter d;
    assert_int_equal(specd_ngram_simple_new(3, &d, NULL), SPECD_OK);
    const specd_token h[] = {1, 2, 3, 4, 5, 9, 1, 2, 3};
    const specd_token want[] = {4, 5, 9, 1};
    expect_chain(&d, h, N_OF(h), 4, want, N_OF(want));
    d.ops->destroy(d.self);
}

static void test_ngram_simple_prefers_the_most_recent_occurrence(void **state) {
    (void)state;
    specd_drafter d;
    assert_int_equal(specd_ngram_simple_new(3, &d, NULL), SPECD_OK);
    const specd_token h[] = {7, 8, 9, 1, 7, 8, 9, 2, 6, 7, 8, 9};
    const specd_token want[] = {2, 6, 7};
    expect_chain(&d, h, N_OF(h), 3, want, N_OF(want));
    d.ops->destroy(d.self);
}

static void test_ngram_simple_repeats_a_period_into_the_future(void **state) {
    (void)state;
    specd_drafter d;
    assert_int_equal(specd_ngram_simple_new(2, &d, NULL), SPECD_OK);
    /* "5 6 7 5 6": the last 2-gram (5 6) ended at 2, so 7 5 6 7 5 6 ... */
    const specd_token h[] = {5, 6, 7, 5, 6};
    const specd_token want[] = {7, 5, 6, 7, 5, 6, 7};
    expect_chain(&d, h, N_OF(h), 7, want, N_OF(want));
    d.ops->destroy(d.self);
}

static void test_ngram_simple_without_a_match_drafts_nothing(void **state) {
    (void)state;
    specd_drafter d;
    assert_int_equal(specd_ngram_simple_new(3, &d, NULL), SPECD_OK);
    const specd_token h[] = {1, 2, 3, 4, 1, 2, 5, 2, 3};
    expect_chain(&d, h, N_OF(h), 4, NULL, 0);
    const specd_token short_h[] = {1, 2};
    expect_chain(&d, short_h, N_OF(short_h), 4, NULL, 0);
    d.ops->destroy(d.self);
}

static void test_ngram_simple_follows_a_growing_history(void **state) {
    (void)state;
    specd_drafter d;
    assert_int_equal(specd_ngram_simple_new(2, &d, NULL), SPECD_OK);
    const specd_token h[] = {1, 2, 3, 4, 8, 1, 2, 9, 3, 4};
    const specd_token want_a[] = {3, 4};
    expect_chain(&d, h, 7, 2, want_a, N_OF(want_a)); /* ends 1 2: earlier 1 2 was followed by 3 4 */
    const specd_token want_b[] = {8, 1, 2};
    expect_chain(&d, h, N_OF(h), 3, want_b, N_OF(want_b)); /* ends 3 4: followed by 8 1 2 */
    d.ops->destroy(d.self);
}

/* ---- ngram-map ------------------------------------------------------------------------------ */

/* (1 2) was followed by (3 4) twice, then by (3 5) most recently: prompt lookup would draft 3 5,
 * the map drafts the frequent continuation from its latest occurrence. */
static const specd_token map_history[] = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 5, 7, 1, 2};

static void test_ngram_map_drafts_the_frequent_continuation(void **state) {
    (void)state;
    specd_drafter d;
    assert_int_equal(specd_ngram_map_new(2, 2, &d, NULL), SPECD_OK);
    const specd_token want[] = {3, 4, 1, 2};
    expect_chain(&d, map_history, N_OF(map_history), 4, want, N_OF(want));
    d.ops->destroy(d.self);
    assert_int_equal(specd_ngram_map_new(2, 3, &d, NULL), SPECD_OK); /* seen twice: not enough */
    expect_chain(&d, map_history, N_OF(map_history), 4, NULL, 0);
    d.ops->destroy(d.self);
}

static void test_ngram_map_stops_drafting_a_rejected_continuation(void **state) {
    (void)state;
    specd_drafter d;
    assert_int_equal(specd_ngram_map_new(2, 2, &d, NULL), SPECD_OK);
    const specd_token want[] = {3, 4};
    specd_verify_result rejected = {.n_accepted = 0, .last_node = 0};
    for (int i = 0; i < 3; i++) {
        specd_token_tree tree = {0};
        draft_into(&d, map_history, N_OF(map_history), 2, &tree);
        assert_int_equal(specd_tree_n_drafted(&tree), 2);
        assert_int_equal(tree.nodes[1].token, want[0]);
        d.ops->observe(d.self, &tree, &rejected);
        specd_tree_free(&tree);
    }
    expect_chain(&d, map_history, N_OF(map_history), 2, NULL, 0); /* acceptance (0+1)/(3+2) < 0.25 */
    d.ops->destroy(d.self);
}

/* ---- ngram-cache ---------------------------------------------------------------------------- */

static void test_ngram_cache_context_level(void **state) {
    (void)state;
    specd_drafter d;
    assert_int_equal(specd_ngram_cache_new(NULL, NULL, &d, NULL), SPECD_OK);
    /* (1 2 3) -> 4, then (1 2 3 4) -> 1, (2 3 4 1) -> 2, ... */
    const specd_token h[] = {1, 2, 3, 4, 1, 2, 3};
    const specd_token want[] = {4, 1, 2, 3};
    expect_chain(&d, h, N_OF(h), 4, want, N_OF(want));
    d.ops->destroy(d.self);
}

static void test_ngram_cache_dynamic_level_learns_across_requests(void **state) {
    (void)state;
    specd_ngram_counts dynamic;
    specd_ngram_counts_init(&dynamic, 1000);
    specd_drafter a, b;
    assert_int_equal(specd_ngram_cache_new(&dynamic, NULL, &a, NULL), SPECD_OK);
    const specd_token first[] = {5, 6, 7, 8, 5, 6, 7, 8, 5};
    specd_token_tree tree = {0};
    draft_into(&a, first, N_OF(first), 4, &tree); /* indexes the request */
    a.ops->destroy(a.self);                       /* ... and hands its counts to the dynamic level */
    assert_int_equal(specd_ngram_cache_new(&dynamic, NULL, &b, NULL), SPECD_OK);
    /* (6 7) -> 8 twice, (6 7 8) -> 5 twice; (7 8 5) -> 6 only once: not enough for this level */
    const specd_token second[] = {9, 6, 7};
    const specd_token want[] = {8, 5};
    expect_chain(&b, second, N_OF(second), 4, want, N_OF(want));
    b.ops->destroy(b.self);
    specd_tree_free(&tree);
    specd_ngram_counts_free(&dynamic);
}

static void test_ngram_cache_static_file_round_trip(void **state) {
    (void)state;
    specd_ngram_counts built, loaded;
    specd_ngram_counts_init(&built, 0);
    specd_ngram_counts_init(&loaded, 0);
    const specd_token corpus[] = {10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13, 10};
    for (int32_t e = 1; e < N_OF(corpus); e++)
        for (int32_t n = 1; n <= SPECD_NGRAM_CACHE_MAX_N && n <= e; n++)
            assert_true(specd_ngram_counts_add(&built, specd_hash_tokens(corpus + e - n, n), corpus[e], 1));
    char path[] = "/tmp/specd-ngc-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(specd_ngram_cache_save(&built, 100, SPECD_NGRAM_CACHE_MAX_N, path, NULL), SPECD_OK);
    char *err = NULL;
    assert_int_equal(specd_ngram_cache_load(&loaded, 99, path, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "another vocabulary"));
    specd_free(err);
    assert_int_equal(specd_ngram_cache_load(&loaded, 100, path, NULL), SPECD_OK);
    assert_int_equal(loaded.n_pairs, built.n_pairs);
    specd_drafter d;
    assert_int_equal(specd_ngram_cache_new(NULL, &loaded, &d, NULL), SPECD_OK);
    /* (11 12) -> 13 and (11 12 13) -> 10 four times each; (12 13 10) -> 11 only three times,
     * below the static level's minimum of four */
    const specd_token h[] = {3, 11, 12};
    const specd_token want[] = {13, 10};
    expect_chain(&d, h, N_OF(h), 3, want, N_OF(want));
    d.ops->destroy(d.self);
    /* not a cache at all */
    FILE *f = fopen(path, "wb");
    fputs("hello", f);
    fclose(f);
    assert_int_equal(specd_ngram_cache_load(&loaded, 100, path, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "not an n-gram cache"));
    specd_free(err);
    unlink(path);
    specd_ngram_counts_free(&built);
    specd_ngram_counts_free(&loaded);
}

/* ---- suffix --------------------------------------------------------------------------------- */

static void expect_tree(specd_drafter *d, const specd_token *h, int32_t n, int32_t max_len,
                        const specd_token *tokens, const int32_t *parents, int32_t n_want) {
    specd_token_tree tree = {0};
    assert_int_equal(d->ops->prepare(d->self, h, n - 1, NULL), SPECD_OK);
    draft_into(d, h, n, max_len, &tree);
    if (specd_tree_n_drafted(&tree) != n_want)
        fail_msg("suffix: drafted %d nodes, want %d", specd_tree_n_drafted(&tree), n_want);
    for (int32_t i = 0; i < n_want; i++) {
        if (tree.nodes[i + 1].token != tokens[i] || tree.nodes[i + 1].parent != parents[i])
            fail_msg("suffix: node %d is (%d under %d), want (%d under %d)", i + 1, tree.nodes[i + 1].token,
                     tree.nodes[i + 1].parent, tokens[i], parents[i]);
    }
    assert_true(specd_tree_assign_branches(&tree));
    specd_tree_free(&tree);
}

/* A fresh suffix tree and a drafter of up to SPECD_TREE_MAX_BRANCHES branches on it drafts the
 * history h (up to 8 tokens) as the nodes tokens under parents (expect_tree). */
static void expect_fresh_suffix_tree(const specd_token *h, int32_t n, const specd_token *tokens,
                                     const int32_t *parents, int32_t n_want) {
    specd_suffix_tree t;
    assert_true(specd_suffix_tree_init(&t, 10000, 24));
    specd_drafter d;
    assert_int_equal(specd_suffix_new(&t, SPECD_TREE_MAX_BRANCHES, &d, NULL), SPECD_OK);
    expect_tree(&d, h, n, 8, tokens, parents, n_want);
    d.ops->destroy(d.self);
    specd_suffix_tree_free(&t);
}

static void test_suffix_drafts_the_longest_match_continuation(void **state) {
    (void)state;
    /* (1 2 3) matched, depth 3: up to 6 tokens; what followed it runs out after 4 */
    const specd_token h[] = {1, 2, 3, 4, 1, 2, 3};
    const specd_token tokens[] = {4, 1, 2, 3};
    const int32_t parents[] = {0, 1, 2, 3};
    expect_fresh_suffix_tree(h, N_OF(h), tokens, parents, N_OF(tokens));
}

static void test_suffix_drafts_a_tree_of_frequent_continuations(void **state) {
    (void)state;
    /* (1 2) -> 3 three times, 4 twice; (1 2 3) -> 8 always; (1 2 3 8) -> 1, 5, 9; (1 2 4) -> 6.
     * Match length 2: 4 nodes, best first: 3 (.6), 8 (.6), 4 (.4), 6 (.4); 1, 5, 9 (.2 each) lose. */
    const specd_token h[] = {7, 1, 2, 3, 8, 1, 2, 4, 6, 1, 2, 3, 8, 5, 1, 2, 4, 6, 1, 2, 3, 8, 9, 1, 2};
    const specd_token tokens[] = {3, 8, 4, 6};
    const int32_t parents[] = {0, 1, 0, 3};
    expect_fresh_suffix_tree(h, N_OF(h), tokens, parents, N_OF(tokens));
}

static void test_suffix_tree_remembers_earlier_requests(void **state) {
    (void)state;
    specd_suffix_tree t;
    assert_true(specd_suffix_tree_init(&t, 10000, 24));
    specd_drafter a, b;
    assert_int_equal(specd_suffix_new(&t, 1, &a, NULL), SPECD_OK);
    const specd_token first[] = {20, 21, 22, 23, 24, 25};
    assert_int_equal(a.ops->prepare(a.self, first, N_OF(first), NULL), SPECD_OK);
    a.ops->destroy(a.self);
    assert_int_equal(specd_suffix_new(&t, 1, &b, NULL), SPECD_OK);
    const specd_token h[] = {30, 21, 22};
    const specd_token tokens[] = {23, 24, 25};
    const int32_t parents[] = {0, 1, 2};
    expect_tree(&b, h, N_OF(h), 8, tokens, parents, N_OF(tokens));
    b.ops->destroy(b.self);
    specd_suffix_tree_free(&t);
}

/* ---- following a context shift --------------------------------------------------------------- */

/* A history of 14 tokens, drafted after (so indexed); then a shift keeping 1 and dropping 4
 * (1 2 3 4); then 4 new tokens, so the history is 14 long again: a drafter that kept its old
 * positions would see nothing new to index. */
static const specd_token before_shift[] = {50, 1, 2, 3, 4, 60, 61, 62, 63, 7, 8, 9, 70, 71};
static const specd_token after_shift[] = {50, 60, 61, 62, 63, 7, 8, 9, 70, 71, 72, 73, 74, 75};
#define SHIFT_KEEP 1
#define SHIFT_DISCARD 4

static void draft_then_shift(specd_drafter *d) {
    specd_token_tree tree = {0};
    draft_into(d, before_shift, N_OF(before_shift), 4, &tree);
    specd_tree_free(&tree);
    /* the history right after the shift, without the root (as the generation passes it) */
    int32_t n = N_OF(before_shift) - SHIFT_DISCARD - 1;
    assert_int_equal(specd_drafter_shift(d, SHIFT_KEEP, SHIFT_DISCARD, after_shift, n, NULL), SPECD_OK);
}

static void test_ngram_simple_after_a_shift_drafts_from_the_moved_text(void **state) {
    (void)state;
    specd_drafter d;
    assert_int_equal(specd_ngram_simple_new(2, &d, NULL), SPECD_OK);
    draft_then_shift(&d);
    specd_token h[N_OF(after_shift)];
    memcpy(h, after_shift, sizeof h);
    h[12] = 8, h[13] = 9; /* ... 73 8 9: the earlier 8 9 (moved to end at 8) was followed by 70 71 72 */
    const specd_token want[] = {70, 71, 72};
    expect_chain(&d, h, N_OF(h), 3, want, N_OF(want));
    d.ops->destroy(d.self);
}

static void test_ngram_cache_after_a_shift_counts_nothing_twice(void **state) {
    (void)state;
    specd_ngram_counts dynamic;
    specd_ngram_counts_init(&dynamic, 1000);
    specd_drafter a, b;
    assert_int_equal(specd_ngram_cache_new(&dynamic, NULL, &a, NULL), SPECD_OK);
    draft_then_shift(&a);
    specd_token_tree tree = {0};
    draft_into(&a, after_shift, N_OF(after_shift), 4, &tree); /* counts 72..75 only */
    specd_tree_free(&tree);
    a.ops->destroy(a.self); /* its counts join the dynamic level, which drafts what it saw twice */
    assert_int_equal(specd_ngram_cache_new(&dynamic, NULL, &b, NULL), SPECD_OK);
    const specd_token seen_once[] = {80, 7, 8}; /* (7 8) -> 9 happened once: counted again, it would draft */
    expect_chain(&b, seen_once, N_OF(seen_once), 4, NULL, 0);
    b.ops->destroy(b.self);
    specd_ngram_counts_free(&dynamic);
}

static int32_t suffix_count(const specd_suffix_tree *t, const specd_token *path, int32_t n) {
    int32_t node = 0;
    for (int32_t i = 0; i < n && node >= 0; i++) node = specd_suffix_child(t, node, path[i]);
    return node >= 0 ? t->nodes[node].count : 0;
}

static void test_suffix_after_a_shift_inserts_each_token_once(void **state) {
    (void)state;
    specd_suffix_tree t;
    assert_true(specd_suffix_tree_init(&t, 10000, 24));
    specd_drafter d;
    assert_int_equal(specd_suffix_new(&t, 1, &d, NULL), SPECD_OK);
    draft_then_shift(&d);
    specd_token_tree tree = {0};
    draft_into(&d, after_shift, N_OF(after_shift), 4, &tree);
    specd_tree_free(&tree);
    const specd_token kept_text[] = {7, 8, 9}, new_text[] = {71, 72, 73};
    assert_int_equal(suffix_count(&t, kept_text, 3), 1); /* not inserted again */
    assert_int_equal(suffix_count(&t, new_text, 3), 1);  /* the new tokens were inserted */
    d.ops->destroy(d.self);
    specd_suffix_tree_free(&t);
}

/* ---- bounded memory over many requests ------------------------------------------------------ */

static uint32_t lcg(uint32_t *s) { return (*s = *s * 1664525u + 1013904223u) >> 8; }

/* 1000 short requests (random prompt, a few growing drafts) through one drafter kind. */
static void run_requests(specd_drafter (*make)(void *), void *arg, void (*check)(void *), uint32_t seed) {
    for (int r = 0; r < 1000; r++) {
        specd_token h[ROOM];
        int32_t n = 40;
        for (int32_t i = 0; i < n; i++) h[i] = (specd_token)(lcg(&seed) % 300);
        specd_drafter d = make(arg);
        assert_int_equal(d.ops->prepare(d.self, h, n - 1, NULL), SPECD_OK);
        for (int step = 0; step < 4; step++) {
            specd_token_tree tree = {0};
            draft_into(&d, h, n, 6, &tree);
            specd_tree_free(&tree);
            for (int k = 0; k < 8; k++) h[n++] = (specd_token)(lcg(&seed) % 300);
        }
        d.ops->destroy(d.self);
        check(arg);
    }
}

static specd_drafter make_suffix(void *tree) {
    specd_drafter d;
    assert_int_equal(specd_suffix_new(tree, 1, &d, NULL), SPECD_OK);
    return d;
}

static void check_suffix_bound(void *tree) {
    const specd_suffix_tree *t = tree;
    assert_true(t->n_nodes <= t->max_nodes);
}

static void test_suffix_tree_stays_bounded(void **state) {
    (void)state;
    specd_suffix_tree t;
    assert_true(specd_suffix_tree_init(&t, 5000, 24));
    run_requests(make_suffix, &t, check_suffix_bound, 7);
    print_message("suffix tree after 1000 requests: %d nodes (bound %d), pruned %u times\n", t.n_nodes, t.max_nodes,
                  t.epoch);
    assert_true(t.epoch > 0); /* the bound was reached and enforced */
    /* Still works after pruning: a text seen right now is found. */
    specd_drafter d = make_suffix(&t);
    const specd_token h[] = {1, 2, 3, 4, 1, 2, 3};
    const specd_token tokens[] = {4, 1, 2, 3};
    const int32_t parents[] = {0, 1, 2, 3};
    expect_tree(&d, h, N_OF(h), 8, tokens, parents, N_OF(tokens));
    d.ops->destroy(d.self);
    specd_suffix_tree_free(&t);
}

static specd_drafter make_cache(void *dynamic) {
    specd_drafter d;
    assert_int_equal(specd_ngram_cache_new(dynamic, NULL, &d, NULL), SPECD_OK);
    return d;
}

static void check_cache_bound(void *dynamic) {
    const specd_ngram_counts *c = dynamic;
    assert_true(c->n_pairs <= c->max_pairs);
    assert_true(c->n_keys <= c->n_pairs);
}

static void test_dynamic_cache_stays_bounded(void **state) {
    (void)state;
    specd_ngram_counts dynamic;
    specd_ngram_counts_init(&dynamic, 20000);
    run_requests(make_cache, &dynamic, check_cache_bound, 11);
    print_message("dynamic cache after 1000 requests: %d pairs (bound %d)\n", dynamic.n_pairs, dynamic.max_pairs);
    specd_ngram_counts_free(&dynamic);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ngram_map_drafts_the_frequent_continuation),
        cmocka_unit_test(test_ngram_map_stops_drafting_a_rejected_continuation),
        cmocka_unit_test(test_ngram_cache_context_level),
        cmocka_unit_test(test_ngram_cache_dynamic_level_learns_across_requests),
        cmocka_unit_test(test_ngram_cache_static_file_round_trip),
        cmocka_unit_test(test_suffix_drafts_the_longest_match_continuation),
        cmocka_unit_test(test_suffix_drafts_a_tree_of_frequent_continuations),
        cmocka_unit_test(test_suffix_tree_remembers_earlier_requests),
        cmocka_unit_test(test_suffix_tree_stays_bounded),
        cmocka_unit_test(test_dynamic_cache_stays_bounded),
        cmocka_unit_test(test_ngram_simple_drafts_what_followed),
        cmocka_unit_test(test_ngram_simple_prefers_the_most_recent_occurrence),
        cmocka_unit_test(test_ngram_simple_repeats_a_period_into_the_future),
        cmocka_unit_test(test_ngram_simple_without_a_match_drafts_nothing),
        cmocka_unit_test(test_ngram_simple_follows_a_growing_history),
        cmocka_unit_test(test_ngram_simple_after_a_shift_drafts_from_the_moved_text),
        cmocka_unit_test(test_ngram_cache_after_a_shift_counts_nothing_twice),
        cmocka_unit_test(test_suffix_after_a_shift_inserts_each_token_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
