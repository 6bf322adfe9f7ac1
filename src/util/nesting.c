/* nesting.c - nesting.h: one pass over the text each, no recursion, so that measuring a hostile
 * text cannot itself overflow the stack. */
#include "nesting.h"

#include <stdbool.h>

/* ---- GBNF --------------------------------------------------------------------------------------- */

/* The bytes llama.cpp's parse_char takes for one character of a string or class: an escape is
 * the backslash and the next byte (hex digits after \x \u \U are plain characters to this count);
 * otherwise a UTF-8 lead byte's length from its high bits, continuation bytes taken unchecked up to
 * the end of the text, as llama.cpp's decode_utf8 does. Getting this as llama.cpp does matters: a
 * lead byte may swallow the quote that seems to close a string. */
static const unsigned char *gbnf_char(const unsigned char *p) {
    if (p[0] == '\\') return p[1] ? p + 2 : p + 1;
    static const unsigned char utf8_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    const unsigned char *end = p + utf8_len[p[0] >> 4];
    for (p++; p < end && *p; p++) {}
    return p;
}

/* Past the characters up to the closing byte `close` (and past it); at the text's end, there. */
static const unsigned char *gbnf_skip_chars(const unsigned char *p, unsigned char close) {
    while (*p && *p != close) p = gbnf_char(p);
    return *p ? p + 1 : p;
}

/* Past the first byte of `stop` from p (the byte itself is left), or at the end. */
static const unsigned char *skip_until(const unsigned char *p, const char *stop) {
    for (; *p; p++)
        for (const char *s = stop; *s; s++)
            if (*p == (unsigned char)*s) return p;
    return p;
}

/* Past a {m}, {m,} or {m,n} repetition at p (or one byte, where it does not parse: llama.cpp then
 * refuses the grammar). */
static const unsigned char *gbnf_skip_repetition(const unsigned char *p) {
    const unsigned char *q = p + 1;
    while ((*q >= '0' && *q <= '9') || *q == ',' || *q == ' ') q++;
    return *q == '}' ? q + 1 : p + 1;
}

specd_gbnf_shape specd_gbnf_measure(const char *grammar) {
    specd_gbnf_shape shape = {0, 0};
    int32_t depth = 0;
    const unsigned char *p = (const unsigned char *)grammar;
    while (p && *p) {
        switch (*p) {
        case '"': p = gbnf_skip_chars(p + 1, '"'); break;
        case '[': p = gbnf_skip_chars(p + 1 + (p[1] == '^'), ']'); break;
        case '<': p = skip_until(p + 1, ">"), p += *p != 0; break; /* <token> or <[id]> */
        case '#': p = skip_until(p + 1, "\r\n"); break;
        case '(':
            if (++depth > shape.depth) shape.depth = depth;
            shape.rules++; /* each group is a rule of its own */
            p++;
            break;
        case ')':
            depth -= depth > 0;
            p++;
            break;
        case ':':
            shape.rules += p[1] == ':' && p[2] == '=';
            p += p[1] == ':' && p[2] == '=' ? 3 : 1;
            break;
        case '*': case '+': case '?': shape.rules++, p++; break;
        case '{': shape.rules++, p = gbnf_skip_repetition(p); break;
        default: p++;
        }
    }
    return shape;
}


/* ---- ECMAScript regular expressions ------------------------------------------------------------- */

/* Past a [bracket expression] from its '[': the first ']' not escaped closes it, as in ECMAScript
 * (a ']' right after '[' too: closing early can only count more groups than the compiler meets,
 * never fewer). */
static const char *regex_skip_bracket(const char *p) {
    for (p++; *p && *p != ']'; p++)
        if (*p == '\\' && p[1]) p++;
    return *p ? p + 1 : p;
}

int32_t specd_regex_nesting(const char *pattern) {
    int32_t depth = 0, deepest = 0;
    for (const char *p = pattern; p && *p;) {
        if (*p == '\\') p += p[1] ? 2 : 1;
        else if (*p == '[') p = regex_skip_bracket(p);
        else {
            if (*p == '(' && ++depth > deepest) deepest = depth;
            if (*p == ')') depth -= depth > 0;
            p++;
        }
    }
    return deepest;
}

#define STATES_CAP ((size_t)-1)
#define GROUPS_MAX 256 /* deeper than this is measured as too many states */

static size_t add_sat(size_t a, size_t b) { return a > STATES_CAP - b ? STATES_CAP : a + b; }
static size_t mul_sat(size_t a, size_t b) { return a && b > STATES_CAP / a ? STATES_CAP : a * b; }

/* A {m}, {m,} or {m,n} quantifier at p: the copies of its atom std::regex makes (n; m + 1 for the
 * open-ended one), and *end past it; 0 when p is no quantifier (then '{' is a plain character). */
static size_t repeat_copies(const char *p, const char **end) {
    size_t m = 0, n = 0;
    bool comma = false, digits = false, max_digits = false;
    for (p++; *p >= '0' && *p <= '9'; p++, digits = true) m = add_sat(mul_sat(m, 10), (size_t)(*p - '0'));
    if (*p == ',') {
        comma = true;
        for (p++; *p >= '0' && *p <= '9'; p++, max_digits = true) n = add_sat(mul_sat(n, 10), (size_t)(*p - '0'));
    }
    if (!digits || *p != '}') return 0;
    *end = p + 1;
    size_t copies = !comma ? m : max_digits ? n : add_sat(m, 1);
    return copies ? copies : 1;
}

size_t specd_regex_states(const char *pattern) {
    size_t sum[GROUPS_MAX] = {0}, last = 0; /* atoms of each open group; of the latest atom or group */
    int depth = 0;
    for (const char *p = pattern; p && *p;) {
        const char *next = p + 1;
        size_t copies = 0;
        if (*p == '(') {
            if (++depth == GROUPS_MAX) return STATES_CAP;
            sum[depth] = 0;
            last = 0;
        } else if (*p == ')' && depth > 0) {
            last = add_sat(sum[depth--], 1);
            sum[depth] = add_sat(sum[depth], last);
        } else if (*p == '+') {
            copies = 2;
        } else if (*p == '{' && (copies = repeat_copies(p, &next)) != 0) {
        } else if (*p != '|' && *p != '*' && *p != '?' && *p != ')') {
            next = *p == '\\' ? p + 1 + (p[1] != 0) : *p == '[' ? regex_skip_bracket(p) : p + 1;
            last = 1;
            sum[depth] = add_sat(sum[depth], 1);
        }
        if (copies > 1) { /* the atom again, copies - 1 more times */
            sum[depth] = add_sat(sum[depth], mul_sat(last, copies - 1));
            last = mul_sat(last, copies);
        }
        p = next;
    }
    size_t total = 0;
    for (int i = 0; i <= depth; i++) total = add_sat(total, sum[i]);
    return total;
}
