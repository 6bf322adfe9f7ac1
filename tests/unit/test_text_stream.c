/* test_text_stream.c - stop strings and UTF-8 hold-back of src/session/text_stream.c: first full
 * match cut, held-back stop prefixes, characters never split across chunks, chunks concatenate
 * to the final text however the bytes arrive. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "serve/text_stream.h"

#include <stdlib.h>
#include <string.h>

/* Pushes `text` in pieces of `step` bytes, taking a chunk after each push; returns the
 * concatenation of all chunks (the last taken with final set). */
static char *stream_in_pieces(const char *text, size_t step, const char *const *stops, int n_stops,
                              int *stop_index) {
    specd_text_stream ts;
    specd_text_stream_init(&ts, stops, n_stops);
    char *out = calloc(strlen(text) + 1, 1);
    size_t o = 0, n = 0;
    for (size_t i = 0; i < strlen(text); i += step) {
        size_t len = strlen(text + i) < step ? strlen(text + i) : step;
        assert_true(specd_text_stream_push(&ts, text + i, len));
        const char *chunk = specd_text_stream_take(&ts, false, &n);
        memcpy(out + o, chunk, n);
        o += n;
    }
    const char *chunk = specd_text_stream_take(&ts, true, &n);
    memcpy(out + o, chunk, n);
    out[o + n] = '\0';
    *stop_index = ts.stop_index;
    specd_text_stream_free(&ts);
    return out;
}

static void first_full_match_is_cut(void **state) {
    (void)state;
    const char *stops[] = {"END", "the"};
    for (size_t step = 1; step <= 7; step++) {
        int idx = -2;
        char *out = stream_in_pieces("once upon the time END more", step, stops, 2, &idx);
        assert_string_equal(out, "once upon ");
        assert_int_equal(idx, 1);
        free(out);
    }
}

static void no_stop_gives_everything(void **state) {
    (void)state;
    const char *stops[] = {"xyz"};
    for (size_t step = 1; step <= 5; step++) {
        int idx = -2;
        char *out = stream_in_pieces("a quick xy brown xyfox xy", step, stops, 1, &idx);
        assert_string_equal(out, "a quick xy brown xyfox xy");
        assert_int_equal(idx, -1);
        free(out);
    }
}

static void stop_prefix_is_held_back(void **state) {
    (void)state;
    const char *stops[] = {"\n\nUser:"};
    specd_text_stream ts;
    specd_text_stream_init(&ts, stops, 1);
    size_t n = 0;
    specd_text_stream_push(&ts, "Hello\n\nUs", 9);
    const char *c = specd_text_stream_take(&ts, false, &n);
    assert_int_equal(n, 5);
    assert_memory_equal(c, "Hello", 5);
    specd_text_stream_push(&ts, "ually", 5); /* not the stop string after all: released */
    c = specd_text_stream_take(&ts, false, &n);
    assert_int_equal(n, 9);
    assert_memory_equal(c, "\n\nUsually", 9);
    specd_text_stream_push(&ts, "\n\nUser: hi", 10);
    assert_true(specd_text_stream_stopped(&ts));
    c = specd_text_stream_take(&ts, false, &n);
    assert_int_equal(n, 0);
    specd_text_stream_free(&ts);
}

static void utf8_is_never_split(void **state) {
    (void)state;
    /* e-acute (2 bytes), euro sign (3), an emoji (4), fed one byte at a time */
    const char *text = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80!";
    specd_text_stream ts;
    specd_text_stream_init(&ts, NULL, 0);
    char out[64] = {0};
    size_t o = 0;
    for (size_t i = 0; i < strlen(text); i++) {
        size_t n = 0;
        specd_text_stream_push(&ts, text + i, 1);
        const char *c = specd_text_stream_take(&ts, false, &n);
        if (n > 0) { /* every chunk is valid UTF-8 on its own */
            char *clean = specd_utf8_sanitize(c, n);
            assert_int_equal(strlen(clean), n);
            assert_memory_equal(clean, c, n);
            free(clean);
        }
        memcpy(out + o, c, n);
        o += n;
    }
    assert_string_equal(out, text);
    specd_text_stream_free(&ts);
}

static void final_flushes_incomplete_character(void **state) {
    (void)state;
    specd_text_stream ts;
    specd_text_stream_init(&ts, NULL, 0);
    size_t n = 0;
    specd_text_stream_push(&ts, "ab\xE2\x82", 4);
    specd_text_stream_take(&ts, false, &n);
    assert_int_equal(n, 2);
    const char *c = specd_text_stream_take(&ts, true, &n);
    assert_int_equal(n, 2);
    char *clean = specd_utf8_sanitize(c, n);
    assert_string_equal(clean, "\xEF\xBF\xBD\xEF\xBF\xBD");
    free(clean);
    specd_text_stream_free(&ts);
}

static void multibyte_stop_string(void **state) {
    (void)state;
    const char *stops[] = {"\xE2\x82\xAC"}; /* the euro sign */
    for (size_t step = 1; step <= 4; step++) {
        int idx = -2;
        char *out = stream_in_pieces("price: 5\xE2\x82\xAC and more", step, stops, 1, &idx);
        assert_string_equal(out, "price: 5");
        assert_int_equal(idx, 0);
        free(out);
    }
}

static void sanitize_replaces_invalid_bytes(void **state) {
    (void)state;
    char *s = specd_utf8_sanitize("a\xFF" "b\xC0\xAF" "c\xED\xA0\x80", 9);
    /* 0xFF, overlong C0 AF, a surrogate ED A0 80: every invalid byte becomes U+FFFD */
    assert_string_equal(s, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD" "c\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    free(s);
    char nul[3] = {'x', 0, 'y'};
    s = specd_utf8_sanitize(nul, 3);
    assert_string_equal(s, "x\xEF\xBF\xBDy");
    free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(first_full_match_is_cut),
        cmocka_unit_test(no_stop_gives_everything),
        cmocka_unit_test(stop_prefix_is_held_back),
        cmocka_unit_test(utf8_is_never_split),
        cmocka_unit_test(final_flushes_incomplete_character),
        cmocka_unit_test(multibyte_stop_string),
        cmocka_unit_test(sanitize_replaces_invalid_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
