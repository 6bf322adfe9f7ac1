/* base64.c - see base64.h. */
#include "base64.h"

#include <stdlib.h>
#include <string.h>

/* A base64 digit's value (both alphabets); -1 for anything else. */
static int digit(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' || c == '-' ? 62 : c == '/' || c == '_' ? 63 : -1;
}

static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

unsigned char *specd_base64_decode(const char *text, size_t *size, bool *bad) {
    unsigned char *out = malloc(strlen(text) / 4 * 3 + 3);
    if (!out) return NULL;
    size_t n = 0;
    unsigned acc = 0, bits = 0;
    const char *c = text;
    for (; *c && *c != '='; c++) {
        if (is_space(*c)) continue;
        int v = digit((unsigned char)*c);
        if (v < 0) break;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    while (*c == '=' || is_space(*c)) c++;
    if (*c || n == 0) { /* a character outside the alphabet, or nothing at all */
        free(out);
        *bad = true;
        return NULL;
    }
    *size = n;
    return out;
}
