/* test_images.c - images in prompts (src/engine/images.c, kv.c) with speculation on, through the
 * tiny vision projector (tools/make_tiny_mmproj.c, LLaVA's mlp: a 32x32 image is 16 positions):
 * greedy output with the draft model, ngram-simple and suffix equals the target alone, with the
 * draft model drafting; another image gives other tokens (the image reaches the target); an image
 * split over passes (-b 5) gives the same tokens; the same image gives the same tokens, so the
 * prompt cache holds it; bad input refused by name (marker count, bytes that are no image, a prompt
 * ending with an image, an engine without a projector, a drafting head beside a projector).
 *
 *   test_images MODELS_DIR */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "engine_helpers.h"

#include <stdlib.h>
#include <string.h>

#define SIDE 32

static char target_path[1024], draft_path[1024], mmproj_path[1024], mmproj_patch16_path[1024], head_target_path[1024],
    eagle3_path[1024];
static specd_engine *engine;

/* A binary PPM (stb_image reads it) of SIDE x SIDE pixels, a pattern set by `seed`. */
static unsigned char *ppm(int seed, size_t *size) {
    char header[32];
    int h = snprintf(header, sizeof header, "P6\n%d %d\n255\n", SIDE, SIDE);
    *size = (size_t)h + SIDE * SIDE * 3;
    unsigned char *out = malloc(*size);
    assert_non_null(out);
    memcpy(out, header, (size_t)h);
    for (int i = 0; i < SIDE * SIDE * 3; i++) out[h + i] = (unsigned char)((i * (7 + seed * 13) + seed * 101) % 251);
    return out;
}

static specd_engine *open_vision(const char *target, const char *draft, int32_t n_batch) {
    specd_engine_params p = test_engine_params(target, draft, 512);
    p.mmproj_path = mmproj_path;
    if (n_batch) p.n_batch = n_batch;
    return open_engine_with(&p);
}

static int setup(void **state) {
    (void)state;
    engine = open_vision(target_path, draft_path, 0);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    specd_engine_free(engine);
    return 0;
}

/* The prompt "a picture <marker> of" with the images of the given seeds (one marker each). */
static int32_t image_prompt(specd_engine *e, const int *seeds, int n, specd_token **out) {
    char text[256] = "a picture ";
    specd_image images[4];
    for (int i = 0; i < n; i++) {
        images[i].data = ppm(seeds[i], &images[i].size);
        strcat(text, specd_image_marker());
        strcat(text, i + 1 < n ? " and " : " of the day");
    }
    int32_t n_tokens = 0;
    char *err = NULL;
    if (specd_tokenize_images(e, text, true, false, images, n, out, &n_tokens, &err) != SPECD_OK)
        fail_msg("tokenize: %s", err);
    for (int i = 0; i < n; i++) free((void *)images[i].data);
    return n_tokens;
}

static specd_generation_params greedy(const char *types, bool fixed) {
    specd_generation_params g = specd_generation_default_params();
    g.n_predict = 40;
    g.ignore_eos = true;
    g.sampling.temperature = 0.0f;
    assert_int_equal(specd_spec_params_parse_types(&g.speculative, types, NULL), SPECD_OK);
    if (fixed) {
        g.speculative.adaptive = false;
        g.speculative.draft_max = g.speculative.draft_min = 4;
    }
    return g;
}

static specd_result run(specd_engine *e, const specd_token *prompt, int32_t n, const specd_generation_params *g) {
    specd_result r;
    char *err = NULL;
    if (specd_generate(e, prompt, n, g, &r, &err) != SPECD_OK) fail_msg("generate: %s", err);
    return r;
}

static int32_t count_images(const specd_token *t, int32_t n) {
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) k += specd_token_is_image(t[i]);
    return k;
}

static void test_speculation_with_images_equals_target_alone(void **state) {
    (void)state;
    const int seeds[] = {1, 2};
    specd_token *prompt = NULL;
    int32_t n = image_prompt(engine, seeds, 2, &prompt);
    assert_int_equal(count_images(prompt, n), 32); /* two images of 16 positions */
    specd_generation_params off = greedy("none", false);
    specd_result want = run(engine, prompt, n, &off);
    const struct {
        const char *types;
        bool fixed;
    } cases[] = {{"draft", true}, {"draft", false}, {"ngram-simple", false}, {"suffix", false}, {"draft,suffix", true}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        specd_generation_params g = greedy(cases[c].types, cases[c].fixed);
        specd_result got = run(engine, prompt, n, &g);
        assert_same_tokens(&got, &want, cases[c].types);
        if (cases[c].fixed) assert_true(got.stats.n_drafted > 0);
        specd_result_clear(&got);
    }
    specd_result_clear(&want);
    specd_free(prompt);
}

static void test_another_image_gives_other_tokens(void **state) {
    (void)state;
    specd_generation_params g = greedy("none", false);
    specd_token *a = NULL, *b = NULL;
    int32_t na = image_prompt(engine, (const int[]){1}, 1, &a), nb = image_prompt(engine, (const int[]){3}, 1, &b);
    assert_int_equal(na, nb);
    assert_memory_not_equal(a, b, (size_t)na * sizeof *a); /* other images, other tokens */
    specd_result ra = run(engine, a, na, &g), rb = run(engine, b, nb, &g);
    bool differ = ra.n_tokens != rb.n_tokens || memcmp(ra.tokens, rb.tokens, (size_t)ra.n_tokens * sizeof *ra.tokens);
    assert_true(differ);
    specd_result_clear(&ra);
    specd_result_clear(&rb);
    specd_free(a);
    specd_free(b);
}

/* The same image twice: the same tokens, and the second request reuses the first's cache. */
static void test_same_image_is_cached_as_text(void **state) {
    (void)state;
    specd_token *a = NULL, *again = NULL;
    int32_t n = image_prompt(engine, (const int[]){5}, 1, &a);
    assert_int_equal(image_prompt(engine, (const int[]){5}, 1, &again), n);
    assert_memory_equal(a, again, (size_t)n * sizeof *a);
    specd_generation_params g = greedy("draft", true);
    specd_result first = run(engine, a, n, &g), second = run(engine, again, n, &g);
    assert_same_tokens(&second, &first, "the same image again");
    assert_int_equal(second.stats.n_prompt_cached, n - 1);
    specd_result_clear(&first);
    specd_result_clear(&second);
    specd_free(a);
    specd_free(again);
}

/* An image split over passes of 5 (its 16 positions in 4 passes) decodes as one pass does. */
static void test_image_over_several_passes(void **state) {
    (void)state;
    specd_engine *small = open_vision(target_path, draft_path, 5);
    specd_token *p = NULL, *q = NULL;
    int32_t n = image_prompt(engine, (const int[]){7}, 1, &p);
    assert_int_equal(image_prompt(small, (const int[]){7}, 1, &q), n);
    specd_generation_params g = greedy("draft", true);
    specd_result whole = run(engine, p, n, &g), split = run(small, q, n, &g);
    assert_same_tokens(&split, &whole, "an image in passes of 5");
    specd_result_clear(&whole);
    specd_result_clear(&split);
    specd_free(p);
    specd_free(q);
    specd_engine_free(small);
}

static void expect_tokenize_error(specd_engine *e, const char *text, int n_images, const char *needle) {
    specd_image images[2];
    for (int i = 0; i < n_images; i++) images[i].data = ppm(i, &images[i].size);
    specd_token *t = NULL;
    int32_t n = 0;
    char *err = NULL;
    assert_int_equal(specd_tokenize_images(e, text, true, false, images, n_images, &t, &n, &err),
                     SPECD_ERR_INVALID_ARGUMENT);
    if (!err || !strstr(err, needle)) fail_msg("'%s' lacks '%s'", err ? err : "(none)", needle);
    specd_free(err);
    for (int i = 0; i < n_images; i++) free((void *)images[i].data);
}

static void test_bad_input_is_refused_by_name(void **state) {
    (void)state;
    expect_tokenize_error(engine, "two <__media__> <__media__>", 1, "2 image markers (<__media__>) for 1 images");
    expect_tokenize_error(engine, "none", 1, "0 image markers");
    specd_image junk = {(const unsigned char *)"hello", 5};
    specd_token *t = NULL;
    int32_t n = 0;
    char *err = NULL;
    assert_int_equal(specd_tokenize_images(engine, "<__media__> x", true, false, &junk, 1, &t, &n, &err),
                     SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "not an image"));
    specd_free(err);
    /* a prompt that ends with an image: refused by specd_generate, not decoded */
    specd_image image = {NULL, 0};
    image.data = ppm(1, &image.size);
    assert_int_equal(specd_tokenize_images(engine, "x <__media__>", true, false, &image, 1, &t, &n, NULL), SPECD_OK);
    free((void *)image.data);
    specd_generation_params g = greedy("draft", true);
    specd_result r;
    assert_int_equal(specd_generate(engine, t, n, &g, &r, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "ends with an image"));
    specd_free(err);
    specd_free(t);
    /* an image token no tokenization made: outside the vocabulary */
    specd_token made_up[3] = {1, -12345, 5};
    assert_int_equal(specd_generate(engine, made_up, 3, &g, &r, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "outside the vocabulary"));
    specd_free(err);
}

/* More images than the engine keeps (16 + 4 for one slot): the first is let go, a prompt with it
 * refused saying so, held again by specd_image_tokens (the same tokens), then generated as before. */
static void test_an_image_let_go_is_held_again(void **state) {
    (void)state;
    specd_token *a = NULL;
    int32_t n = image_prompt(engine, (const int[]){40}, 1, &a);
    specd_generation_params g = greedy("draft", true);
    specd_result want = run(engine, a, n, &g);
    for (int seed = 41; seed < 41 + 24; seed++) {
        specd_token *other = NULL;
        image_prompt(engine, (const int[]){seed}, 1, &other);
        specd_free(other);
    }
    int32_t at = 0;
    while (!specd_token_is_image(a[at])) at++;
    assert_false(specd_engine_holds_image(engine, a[at]));
    specd_engine_slot_forget(engine, 0); /* else its cache would still hold the image's positions */
    specd_result r;
    char *err = NULL;
    assert_int_equal(specd_generate(engine, a, n, &g, &r, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "no longer held"));
    specd_free(err);
    specd_image image = {NULL, 0};
    image.data = ppm(40, &image.size);
    specd_token first = 0;
    int32_t positions = 0;
    assert_int_equal(specd_image_tokens(engine, &image, &first, &positions, NULL), SPECD_OK);
    free((void *)image.data);
    assert_int_equal(first, a[at]);
    assert_int_equal(positions, 16);
    assert_true(specd_engine_holds_image(engine, a[at]));
    specd_result got = run(engine, a, n, &g);
    assert_same_tokens(&got, &want, "the image held again");
    specd_result_clear(&got);
    specd_result_clear(&want);
    specd_free(a);
}

/* The draft's own projector (here the target's file: the tiny draft is the target plus noise): the
 * draft decodes the images too, the output is still the target's, and more drafts are accepted
 * than with the filler token. One that places an image in other positions is refused per image. */
static void test_draft_with_a_projector_of_its_own(void **state) {
    (void)state;
    specd_engine_params p = test_engine_params(target_path, draft_path, 512);
    p.mmproj_path = p.mmproj_draft_path = mmproj_path;
    specd_engine *own = open_engine_with(&p);
    const int seeds[] = {11, 12};
    specd_token *a = NULL, *b = NULL;
    int32_t n = image_prompt(engine, seeds, 2, &a);
    assert_int_equal(image_prompt(own, seeds, 2, &b), n);
    assert_memory_equal(a, b, (size_t)n * sizeof *a);
    specd_generation_params off = greedy("none", false), g = greedy("draft", true);
    specd_result want = run(engine, a, n, &off), filler = run(engine, a, n, &g), embedded = run(own, b, n, &g);
    assert_same_tokens(&embedded, &want, "a draft with its own projector");
    assert_same_tokens(&filler, &want, "a draft with the filler token");
    if (embedded.stats.n_accepted <= filler.stats.n_accepted)
        fail_msg("accepted %d with the draft's projector, %d without", (int)embedded.stats.n_accepted,
                 (int)filler.stats.n_accepted);
    specd_result_clear(&want);
    specd_result_clear(&filler);
    specd_result_clear(&embedded);
    specd_free(a);
    specd_free(b);
    specd_engine_free(own);
    p.mmproj_draft_path = mmproj_patch16_path;
    specd_engine *other = open_engine_with(&p);
    expect_tokenize_error(other, "a <__media__> b", 1, "the draft's projector makes 4 positions of it where the "
                                                     "target's makes 16");
    specd_engine_free(other);
    p.draft_path = NULL; /* and it needs a draft model */
    specd_engine *e = NULL;
    char *err = NULL;
    assert_int_not_equal(specd_engine_new(&p, &e, &err), SPECD_OK);
    assert_non_null(strstr(err, "needs a draft model"));
    specd_free(err);
}

static void test_engines_without_images(void **state) {
    (void)state;
    specd_engine *plain = open_engine(target_path, NULL, 256);
    assert_false(specd_engine_has_vision(plain));
    assert_true(specd_engine_has_vision(engine));
    expect_tokenize_error(plain, "<__media__> x", 1, "--mmproj");
    specd_engine_free(plain);
    /* (a projector made for another model is cli_images': mtmd leaks what it loaded when its
     * constructor refuses the pair, which would fail this test under make asan) */
    specd_engine *e = NULL;
    char *err = NULL;
    specd_engine_input input = SPECD_INPUT_NONE;
    /* beside a drafting head */
    specd_engine_params p = test_engine_params(head_target_path, eagle3_path, 256);
    p.mmproj_path = mmproj_path;
    p.failed_input = &input;
    assert_int_not_equal(specd_engine_new(&p, &e, &err), SPECD_OK);
    assert_int_equal(input, SPECD_INPUT_MMPROJ);
    assert_non_null(strstr(err, "drafting head"));
    specd_free(err);
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target_path, draft_path, sizeof target_path)) return 2;
    snprintf(mmproj_path, sizeof mmproj_path, "%s/mmproj.gguf", argv[1]);
    snprintf(mmproj_patch16_path, sizeof mmproj_patch16_path, "%s/mmproj-patch16.gguf", argv[1]);
    snprintf(head_target_path, sizeof head_target_path, "%s/head-target.gguf", argv[1]);
    snprintf(eagle3_path, sizeof eagle3_path, "%s/eagle3.gguf", argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_speculation_with_images_equals_target_alone),
        cmocka_unit_test(test_another_image_gives_other_tokens),
        cmocka_unit_test(test_same_image_is_cached_as_text),
        cmocka_unit_test(test_image_over_several_passes),
        cmocka_unit_test(test_bad_input_is_refused_by_name),
        cmocka_unit_test(test_an_image_let_go_is_held_again),
        cmocka_unit_test(test_draft_with_a_projector_of_its_own),
        cmocka_unit_test(test_engines_without_images),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
