/* json_schema_int.c - a GBNF expression for the integers in a range, for the integer bounds of a
 * JSON schema (minimum, maximum, exclusiveMinimum, exclusiveMaximum).
 *
 * The range is split by sign and by number of digits (so no number gets a leading zero); a range
 * of numbers with the same count of digits, x..y, is written digit by digit: where x and y share
 * their first digit it is a literal, otherwise three parts: x's first digit followed by x's rest
 * up to 99..9, the digits strictly between followed by any digits, y's first digit followed by
 * 00..0 up to y's rest (a part whose rest spans everything joins the middle). The expression has
 * O(digits^2) symbols. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "json_schema_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static bool all_same(const char *s, size_t n, char digit) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != digit) return false;
    return true;
}

static void digit_span(js_buf *b, char from, char to) {
    if (from == to) js_buf_appendf(b, "\"%c\"", from);
    else js_buf_appendf(b, "[%c-%c]", from, to);
}

/* " [0-9]{n}" (nothing for n = 0). */
static void any_digits(js_buf *b, size_t n) {
    if (n == 1) js_buf_append(b, " [0-9]");
    else if (n > 1) js_buf_appendf(b, " [0-9]{%zu}", n);
}

static const char ZEROS[] = "00000000000000000000";
static const char NINES[] = "99999999999999999999";

/* The n-digit strings from x to y (x <= y, both n >= 1 digits, leading zeros allowed here). */
static void same_length(js_buf *b, const char *x, const char *y, size_t n) {
    if (x[0] == y[0]) {
        digit_span(b, x[0], x[0]);
        if (n > 1) {
            js_buf_append(b, " ");
            same_length(b, x + 1, y + 1, n - 1);
        }
        return;
    }
    bool x_rest_lowest = all_same(x + 1, n - 1, '0');
    bool y_rest_highest = all_same(y + 1, n - 1, '9');
    char lo = x_rest_lowest ? x[0] : (char)(x[0] + 1);
    char hi = y_rest_highest ? y[0] : (char)(y[0] - 1);
    bool first = true;
    js_buf_append(b, "( ");
    if (!x_rest_lowest) {
        digit_span(b, x[0], x[0]);
        js_buf_append(b, " ");
        same_length(b, x + 1, NINES, n - 1);
        first = false;
    }
    if (lo <= hi) {
        if (!first) js_buf_append(b, " | ");
        digit_span(b, lo, hi);
        any_digits(b, n - 1);
        first = false;
    }
    if (!y_rest_highest) {
        if (!first) js_buf_append(b, " | ");
        digit_span(b, y[0], y[0]);
        js_buf_append(b, " ");
        same_length(b, ZEROS, y + 1, n - 1);
    }
    js_buf_append(b, " )");
}

static uint64_t power_of_ten(int n) {
    uint64_t p = 1;
    while (n-- > 0) p *= 10;
    return p;
}

static int count_digits(uint64_t v) {
    int n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* Non-negative integers from a to b (a <= b), without leading zeros. */
static void natural_range(js_buf *b, uint64_t a, uint64_t z) {
    js_buf_append(b, "( ");
    for (int d = count_digits(a); d <= count_digits(z); d++) {
        uint64_t lo = d == 1 ? 0 : power_of_ten(d - 1);
        uint64_t hi = power_of_ten(d) - 1;
        if (lo < a) lo = a;
        if (hi > z) hi = z;
        char x[24], y[24];
        snprintf(x, sizeof x, "%" PRIu64, lo);
        snprintf(y, sizeof y, "%" PRIu64, hi);
        if (d > count_digits(a)) js_buf_append(b, " | ");
        same_length(b, x, y, (size_t)d);
    }
    js_buf_append(b, " )");
}

void js_integer_range(js_buf *b, int64_t lo, int64_t hi) {
    if (hi < 0) {
        js_buf_append(b, "\"-\" ");
        natural_range(b, (uint64_t)-hi, (uint64_t)-lo);
    } else if (lo < 0) {
        js_buf_append(b, "( \"-\" ");
        natural_range(b, 1, (uint64_t)-lo);
        js_buf_append(b, " | ");
        natural_range(b, 0, (uint64_t)hi);
        js_buf_append(b, " )");
    } else {
        natural_range(b, (uint64_t)lo, (uint64_t)hi);
    }
}
