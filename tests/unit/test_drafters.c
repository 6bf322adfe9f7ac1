/* test_drafters.c - the model-free drafters on crafted token histories: each must propose exactly
 * the draft its definition implies. No model is needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "draft/ngram_simple.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROOM 256

/* Drafts a chain after `history` and checks it equals `want` (n_want tokens). */
static void expect_chain(specd_drafter *d, const specd_token *history, int32_t n, int32_t max_len,
                         const specd_token *want, int32_t n_want) {
    specd_token buf[ROOM];
    memcpy(buf, history, (size_t)n * sizeof *buf);
    specd_token_tree tree = {0};
    assert_true(specd_tree_reset(&tree, history[n - 1]));
    specd_draft_request req = {.history = buf, .n_history = n, .max_len = max_len};
    char *err = NULL;
    assert_int_equal(d->ops->draft(d->self, &req, &tree, &err), SPECD_OK);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ngram_simple_drafts_what_followed),
        cmocka_unit_test(test_ngram_simple_prefers_the_most_recent_occurrence),
        cmocka_unit_test(test_ngram_simple_repeats_a_period_into_the_future),
        cmocka_unit_test(test_ngram_simple_without_a_match_drafts_nothing),
        cmocka_unit_test(test_ngram_simple_follows_a_growing_history),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
