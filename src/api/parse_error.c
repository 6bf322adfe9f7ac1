/* parse_error.c - api_parse_error (api.h): a body that is not JSON, said with where it
 * failed, and for a number jansson cannot hold (1e999 overflows a double, 2^64 a 64-bit integer)
 * the field the number was given for, found by reading back from where the parser stopped. */
#include "api.h"

#include <stdio.h>
#include <string.h>

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Back from `i` (exclusive) over blanks: the index of the last other byte, or -1. */
static long back_over_space(const char *text, long i) {
    while (--i >= 0 && is_space(text[i])) {}
    return i;
}

/* The member name that ends (its closing quote) at `close`: copied into out; false when none. */
static bool name_ending_at(const char *text, long close, char *out, size_t size) {
    if (close < 0 || text[close] != '"') return false;
    long open = close - 1;
    while (open >= 0 && !(text[open] == '"' && (open == 0 || text[open - 1] != '\\'))) open--;
    if (open < 0 || close - open - 1 >= (long)size) return false;
    snprintf(out, size, "%.*s", (int)(close - open - 1), text + open + 1);
    return true;
}

/* The field a number ending before `end` was given for: "key": NUMBER, or an element of an array
 * given for a key ("key": [1, NUMBER]). Empty when it cannot be told. */
static void field_of_number(const char *text, long end, char *out, size_t size) {
    out[0] = '\0';
    long i = end;
    while (i > 0 && strchr("0123456789+-.eE", text[i - 1])) i--; /* the number's first byte */
    long before = back_over_space(text, i);
    while (before >= 0 && (text[before] == ',' || text[before] == '[')) { /* in an array: up to its key */
        int depth = 0;
        for (; before >= 0; before--) {
            char c = text[before];
            if (c == ']' || c == '}') depth++;
            if ((c == '[' || c == '{') && depth-- == 0) break;
        }
        before = before >= 0 && text[before] == '[' ? back_over_space(text, before) : -1;
    }
    if (before >= 0 && text[before] == ':') name_ending_at(text, back_over_space(text, before), out, size);
}

void api_parse_error(const char *text, size_t len, const json_error_t *jerr, api_error *err) {
    char field[sizeof err->field] = "";
    bool number = strstr(jerr->text, "real number overflow") || strstr(jerr->text, "too big integer") ||
                  strstr(jerr->text, "too big negative integer");
    long end = jerr->position > 0 && (size_t)jerr->position <= len ? (long)jerr->position : 0;
    if (number && text && end > 0) {
        char copy[4096]; /* the bytes up to the number are enough to find its key */
        long from = end > (long)sizeof copy - 1 ? end - (long)sizeof copy + 1 : 0;
        memcpy(copy, text + from, (size_t)(end - from));
        copy[end - from] = '\0';
        field_of_number(copy, end - from, field, sizeof field);
    }
    if (number && field[0])
        api_fail(err, API_PARSE_ERROR, field, "parse error: '%s' is a number out of range (%s): a number must fit a "
                 "double, an integer a signed 64-bit one, at line %d, column %d", field, jerr->text, jerr->line,
                 jerr->column);
    else
        api_fail(err, API_PARSE_ERROR, "", "parse error: %s at line %d, column %d", jerr->text, jerr->line,
                 jerr->column);
}
