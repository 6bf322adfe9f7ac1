/* json_schema_check_path.c - what both files of the schema checks use: the error (with the
 * schema's place in the document) and that place, "$.properties.a", as the walk moves. */
#include "json_schema_check_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bool jsc_fail(jsc *c, const char *fmt, ...) {
    if (c->failed) return false;
    c->failed = true;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    api_fail(c->err, API_INVALID_PARAMS, c->field, "%s: %s at %s", c->field, what, c->path.text);
    return false;
}

bool jsc_oom(jsc *c) {
    if (!c->failed) api_fail(c->err, API_INTERNAL_ERROR, c->field, "%s: out of memory checking the schema", c->field);
    c->failed = true;
    return false;
}

/* Appends BEFORE TEXT AFTER, cut at the buffer's end. */
void jsc_path_append(jsc_path *path, const char *before, const char *text, const char *after) {
    size_t room = sizeof path->text - path->len;
    int n = snprintf(path->text + path->len, room, "%s%s%s", before, text, after);
    path->len = n < 0 ? path->len : (size_t)n < room ? path->len + (size_t)n : sizeof path->text - 1;
}

static bool plain_key(const char *key) {
    if (!key[0] || (key[0] >= '0' && key[0] <= '9')) return false;
    for (const char *p = key; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '$'))
            return false;
    return true;
}

void jsc_path_append_key(jsc_path *path, const char *key) {
    if (plain_key(key)) jsc_path_append(path, ".", key, "");
    else jsc_path_append(path, "[\"", key, "\"]");
}

size_t jsc_path_key(jsc *c, const char *key) {
    size_t saved = c->path.len;
    jsc_path_append_key(&c->path, key);
    return saved;
}

size_t jsc_path_index(jsc *c, const char *key, size_t index) {
    size_t saved = jsc_path_key(c, key);
    char digits[24];
    snprintf(digits, sizeof digits, "%zu", index);
    jsc_path_append(&c->path, "[", digits, "]");
    return saved;
}

void jsc_path_pop(jsc *c, size_t saved) {
    c->path.len = saved;
    c->path.text[saved] = '\0';
}

bool jsc_child(jsc *c, json_t *parent, const char *key) {
    size_t saved = jsc_path_key(c, key);
    bool ok = c->schema(c, json_object_get(parent, key));
    jsc_path_pop(c, saved);
    return ok;
}
