/* grammar_error.c - why llama.cpp refused a grammar, for the caller's error message. llama.cpp's
 * GBNF parser writes its reason to stderr with fprintf, not through its log callback, and keeps
 * nothing to ask for afterwards; so the refused grammar is parsed once more with file descriptor 2
 * pointing at a temporary file, and the reason is read back from it. Only refused grammars pay
 * for this. One capture runs at a time. The first parse already printed llama.cpp's lines to the
 * real stderr, so the capture's own are dropped; whatever other threads wrote to stderr meanwhile
 * is written there afterwards, so nothing is lost (it may come a moment late). */
#define _GNU_SOURCE /* memmem */
#include "grammar_error.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PARSE_PREFIX "error parsing grammar: "
#define EXCERPT_MAX 40

static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;

/* All of `f` from its start (heap, NUL-terminated), or NULL. */
static char *read_all(FILE *f) {
    if (fflush(f) != 0 || fseek(f, 0, SEEK_END) != 0) return NULL;
    long n = ftell(f);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!text) return NULL;
    rewind(f);
    size_t got = fread(text, 1, (size_t)n, f);
    text[got] = '\0';
    return text;
}

/* What llama.cpp writes to stderr while it parses `text` (heap), or NULL. */
static char *parse_output(const struct llama_vocab *vocab, const char *text) {
    pthread_mutex_lock(&capture_lock);
    FILE *tmp = tmpfile();
    fflush(stderr);
    int saved = tmp ? dup(STDERR_FILENO) : -1;
    char *out = NULL;
    if (saved >= 0 && dup2(fileno(tmp), STDERR_FILENO) >= 0) {
        struct llama_sampler *s = llama_sampler_init_grammar(vocab, text, "root");
        if (s) llama_sampler_free(s);
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        out = read_all(tmp);
    }
    if (saved >= 0) close(saved);
    if (tmp) fclose(tmp);
    pthread_mutex_unlock(&capture_lock);
    return out;
}

/* 1-based line and column of byte `offset` of `text`. */
static void line_and_column(const char *text, size_t offset, int *line, int *column) {
    *line = 1;
    *column = 1;
    for (size_t i = 0; i < offset && text[i]; i++) {
        if (text[i] == '\n') (*line)++, *column = 1;
        else (*column)++;
    }
}

/* llama.cpp's parse error `what` ("expecting ::= at REST", REST the grammar from where it failed)
 * as "line L, column C: expecting ::= (at 'REST...')". */
static char *describe_parse_error(const char *what, size_t n, const char *text) {
    char *reason = NULL;
    const char *at = NULL;
    for (const char *p = what; p + 4 <= what + n; p++)
        if (!strncmp(p, " at ", 4)) {
            at = p;
            break;
        }
    size_t rest = at ? n - (size_t)(at + 4 - what) : 0, len = strlen(text);
    if (at && rest <= len && !strncmp(text + len - rest, at + 4, rest)) {
        int line, column;
        line_and_column(text, len - rest, &line, &column);
        size_t excerpt = strcspn(at + 4, "\n");
        if (excerpt > EXCERPT_MAX) excerpt = EXCERPT_MAX;
        if (rest == 0)
            specd_set_error(&reason, "line %d, column %d: %.*s (at the end of the grammar)", line, column,
                            (int)(at - what), what);
        else
            specd_set_error(&reason, "line %d, column %d: %.*s (at '%.*s%s')", line, column, (int)(at - what), what,
                            (int)excerpt, at + 4, excerpt < strcspn(at + 4, "\n") ? "..." : "");
    } else {
        size_t first = strcspn(what, "\n");
        specd_set_error(&reason, "%.*s", (int)(first < n ? first : n), what);
    }
    return reason;
}

/* The first line of `out` that says why, other than the "failed to parse grammar" echo (llama.cpp's
 * log errors: an undefined rule, left recursion, no root symbol). */
static char *first_log_reason(const char *out) {
    for (const char *line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        size_t n = strcspn(line, "\n");
        if (n == 0 || memmem(line, n, "failed to parse grammar", 23)) continue;
        char *reason = NULL;
        const char *colon = memmem(line, n, ": ", 2); /* "llama_grammar_init_impl: ..." */
        const char *from = colon ? colon + 2 : line;
        specd_set_error(&reason, "%.*s", (int)(n - (size_t)(from - line)), from);
        return reason;
    }
    return NULL;
}

/* Writes the lines of `out` that are not llama.cpp's about the grammar (every one of those names
 * it) to stderr: what other threads wrote during the capture. */
static void pass_on_others(const char *out) {
    for (const char *line = out; *line;) {
        size_t n = strcspn(line, "\n");
        bool newline = line[n] == '\n';
        if (n > 0 && !memmem(line, n, "grammar", 7)) fprintf(stderr, "%.*s\n", (int)n, line);
        line += n + newline;
    }
}

char *specd_grammar_refusal(const struct llama_vocab *vocab, const char *text) {
    char *out = parse_output(vocab, text);
    if (!out) return NULL;
    char *reason = NULL;
    char *prefix = strstr(out, PARSE_PREFIX);
    size_t text_len = strlen(text);
    char *echo = NULL; /* the "\n\n" + grammar + "\n" llama.cpp prints after `what` */
    for (char *p = prefix ? strstr(prefix, "\n\n") : NULL; p && !echo; p = strstr(p + 1, "\n\n"))
        if (!strncmp(p + 2, text, text_len) && p[2 + text_len] == '\n') echo = p;
    if (echo) {
        const char *what = prefix + strlen(PARSE_PREFIX);
        reason = describe_parse_error(what, (size_t)(echo - what), text);
        memmove(prefix, echo + 3 + text_len, strlen(echo + 3 + text_len) + 1); /* the block is llama.cpp's */
    } else {
        reason = first_log_reason(out);
    }
    pass_on_others(out);
    free(out);
    return reason;
}
