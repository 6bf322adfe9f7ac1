/* json_schema_rules.c - the converter's plumbing: text buffers, a string map, the rule table with
 * unique names, and the builtin rules for JSON's own pieces (json_schema_internal.h). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "json_schema_internal.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- text buffer ------------------------------------------------------------------------------ */

static bool buf_reserve(js_buf *b, size_t extra) {
    if (b->oom) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            b->oom = true;
            return false;
        }
        cap *= 2;
    }
    char *data = realloc(b->data, cap);
    if (!data) {
        b->oom = true;
        return false;
    }
    b->data = data;
    b->cap = cap;
    return true;
}

void js_buf_append_n(js_buf *b, const char *s, size_t n) {
    if (!buf_reserve(b, n)) return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void js_buf_append(js_buf *b, const char *s) { js_buf_append_n(b, s, strlen(s)); }

void js_buf_appendf(js_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !buf_reserve(b, (size_t)n)) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void js_buf_truncate(js_buf *b, size_t len) {
    if (b->oom || len > b->len) return;
    b->len = len;
    if (b->data) b->data[len] = '\0';
}

char *js_buf_take(js_buf *b) {
    if (!b->oom && !b->data) buf_reserve(b, 0); /* an empty text is "" */
    char *text = b->oom ? NULL : b->data;
    if (!text) free(b->data);
    memset(b, 0, sizeof *b);
    return text;
}

void js_buf_free(js_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

void js_buf_literal(js_buf *b, const char *bytes, size_t n) {
    js_buf_append(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)bytes[i];
        if (ch == '"') js_buf_append(b, "\\\"");
        else if (ch == '\\') js_buf_append(b, "\\\\");
        else if (ch == '\n') js_buf_append(b, "\\n");
        else if (ch == '\r') js_buf_append(b, "\\r");
        else if (ch == '\t') js_buf_append(b, "\\t");
        else if (ch < 0x20 || ch == 0x7F) js_buf_appendf(b, "\\x%02X", ch);
        else js_buf_append_n(b, (const char *)&ch, 1);
    }
    js_buf_append(b, "\"");
}

void js_buf_utf8(js_buf *b, uint32_t cp) {
    char out[4];
    size_t n;
    if (cp < 0x80) {
        out[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        out[0] = (char)(0xF0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    js_buf_append_n(b, out, n);
}

void js_buf_class_char(js_buf *b, uint32_t cp) {
    bool plain = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') || cp >= 0x80;
    if (plain) js_buf_utf8(b, cp);
    else js_buf_appendf(b, "\\x%02X", (unsigned)cp); /* punctuation and controls: never special */
}

/* ---- string -> int map ------------------------------------------------------------------------ */

static size_t hash_string(const char *s) {
    size_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static size_t map_slot(const js_map *m, const char *key) {
    size_t i = hash_string(key) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & (m->cap - 1);
    return i;
}

int js_map_get(const js_map *m, const char *key) {
    if (!m->cap) return -1;
    size_t i = map_slot(m, key);
    return m->keys[i] ? m->values[i] : -1;
}

static bool map_grow(js_map *m) {
    js_map bigger = {0};
    bigger.cap = m->cap ? m->cap * 2 : 64;
    bigger.keys = calloc(bigger.cap, sizeof *bigger.keys);
    bigger.values = calloc(bigger.cap, sizeof *bigger.values);
    if (!bigger.keys || !bigger.values) {
        js_map_free(&bigger);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = map_slot(&bigger, m->keys[i]);
        bigger.keys[j] = m->keys[i];
        bigger.values[j] = m->values[i];
    }
    bigger.count = m->count;
    js_map_free(m);
    *m = bigger;
    return true;
}

bool js_map_put(js_map *m, const char *key, int value) {
    if ((m->count + 1) * 2 > m->cap && !map_grow(m)) return false; /* at most half full */
    size_t i = map_slot(m, key);
    if (!m->keys[i]) m->count++;
    m->keys[i] = key;
    m->values[i] = value;
    return true;
}

void js_map_free(js_map *m) {
    free(m->keys);
    free(m->values);
    memset(m, 0, sizeof *m);
}

/* ---- errors ----------------------------------------------------------------------------------- */

const char *js_fail(js_conv *c, const char *fmt, ...) {
    if (c->failed) return NULL;
    c->failed = true;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *where = c->path.oom || !c->path.data ? "$" : c->path.data;
    rpc_fail(c->err, RPC_INVALID_PARAMS, c->field, "%s: %s at %s", c->field, what, where);
    return NULL;
}

const char *js_oom(js_conv *c) {
    if (c->failed) return NULL;
    c->failed = true;
    rpc_fail(c->err, RPC_INTERNAL_ERROR, c->field, "%s: out of memory while converting the JSON schema", c->field);
    return NULL;
}

/* ---- rule table ------------------------------------------------------------------------------- */

char *js_hint(const char *parent, const char *part) {
    js_buf b = {0};
    js_buf_append(&b, parent);
    js_buf_append(&b, "-");
    bool dash = true; /* no "--" runs, no trailing "-" */
    for (const char *p = part; *p && b.len < 200; p++) {
        char ch = *p;
        bool word = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (word) js_buf_append_n(&b, &ch, 1);
        else if (!dash) js_buf_append(&b, "-");
        dash = !word;
    }
    if (dash) js_buf_truncate(&b, b.len - 1);
    return js_buf_take(&b);
}

static bool reserve_rules(js_conv *c) {
    if (c->n_rules < c->cap_rules) return true;
    size_t cap = c->cap_rules ? c->cap_rules * 2 : 32;
    char **names = realloc(c->names, cap * sizeof *names);
    if (!names) return false;
    c->names = names;
    char **bodies = realloc(c->bodies, cap * sizeof *bodies);
    if (!bodies) return false;
    c->bodies = bodies;
    c->cap_rules = cap;
    return true;
}

/* The hint when it is free, else hint-2, hint-3, ... (heap). */
static char *unique_name(js_conv *c, const char *hint) {
    js_buf b = {0};
    js_buf_append(&b, hint);
    for (int n = 2; !b.oom && js_map_get(&c->rule_index, b.data) >= 0; n++) {
        js_buf_truncate(&b, 0);
        js_buf_appendf(&b, "%s-%d", hint, n);
    }
    return js_buf_take(&b);
}

/* reuse: a rule already written with the same body serves instead (a rule means its body only, so
 * repeated property types, enum lists, ... stay one rule each). Builtins are never replaced so:
 * other builtins refer to them by name. */
static const char *add_rule(js_conv *c, const char *name_hint, char *body, int *index, bool reuse) {
    int same = body && reuse ? js_map_get(&c->body_index, body) : -1;
    if (same >= 0) {
        free(body);
        if (index) *index = same;
        return c->names[same];
    }
    char *name = c->failed ? NULL : unique_name(c, name_hint);
    if (!name || !reserve_rules(c)) {
        free(name);
        free(body);
        return js_oom(c);
    }
    int i = (int)c->n_rules++; /* owned by the table from here on, failure or not */
    c->names[i] = name;
    c->bodies[i] = body;
    if (!js_map_put(&c->rule_index, name, i) || (body && !js_map_put(&c->body_index, body, i))) return js_oom(c);
    if (index) *index = i;
    return name;
}

const char *js_add_rule(js_conv *c, const char *name_hint, char *body, int *index) {
    return add_rule(c, name_hint, body, index, true);
}

void js_set_body(js_conv *c, int index, char *body) {
    free(c->bodies[index]);
    c->bodies[index] = body;
}

const char *js_add_rule_buf(js_conv *c, const char *name_hint, js_buf *body) {
    if (body->oom) {
        js_buf_free(body);
        return js_oom(c);
    }
    return js_add_rule(c, name_hint, js_buf_take(body), NULL);
}

/* ---- builtin rules ---------------------------------------------------------------------------- */

typedef struct builtin_rule {
    const char *name;
    const char *body;
    const char *uses[6];
} builtin_rule;

/* Generated rule names always start with "root" or "ref-", so these never collide with them. */
static const builtin_rule BUILTINS[] = {
    /* Bounded whitespace, as llama.cpp's converter: a model cannot emit blanks forever. */
    {"ws", "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}", {NULL}},
    {"value", "object | array | string | number | boolean | null",
     {"object", "array", "string", "number", "boolean", "null"}},
    {"object", "\"{\" ws ( string ws \":\" ws value ( \",\" ws string ws \":\" ws value )* ws )? \"}\"",
     {"ws", "string", "value"}},
    {"array", "\"[\" ws ( value ( \",\" ws value )* ws )? \"]\"", {"ws", "value"}},
    {"string", "\"\\\"\" char* \"\\\"\"", {"char"}},
    /* A character of a string: a whole UTF-8 sequence of a Unicode scalar value, no control
     * character, quote or backslash (escaped instead), no DEL, as llama.cpp's converter. Written as
     * ranges of code points up to U+10FFFF, not as a negated class: llama.cpp decodes a lead byte
     * such as 0xFD into a "code point" past U+10FFFF that a negated class would let through. */
    {"char", "[\\x20-\\x21\\x23-\\x5B\\x5D-\\x7E\\u0080-\\uD7FF\\uE000-\\U0010FFFF] | \"\\\\\" escape",
     {"escape"}},
    {"escape", "[\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}", {NULL}},
    {"number", "integer ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,16} )?", {"integer"}},
    {"integer", "\"-\"? integral", {"integral"}},
    {"integral", "\"0\" | [1-9] [0-9]{0,15}", {NULL}},
    {"boolean", "\"true\" | \"false\"", {NULL}},
    {"null", "\"null\"", {NULL}},
    /* RFC 3339 (JSON Schema's date, time, date-time) and RFC 4122 UUIDs. */
    {"date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )", {NULL}},
    {"time", "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" ( [0-5] [0-9] | \"60\" ) ( \".\" [0-9]{1,9} )? "
             "( [zZ] | [-+] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )", {NULL}},
    {"date-time", "date [tT] time", {"date", "time"}},
    {"uuid", "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}", {NULL}},
    {"date-string", "\"\\\"\" date \"\\\"\"", {"date"}},
    {"time-string", "\"\\\"\" time \"\\\"\"", {"time"}},
    {"date-time-string", "\"\\\"\" date-time \"\\\"\"", {"date-time"}},
    {"uuid-string", "\"\\\"\" uuid \"\\\"\"", {"uuid"}},
};

static const builtin_rule *find_builtin(const char *name) {
    for (size_t i = 0; i < sizeof BUILTINS / sizeof BUILTINS[0]; i++)
        if (strcmp(BUILTINS[i].name, name) == 0) return &BUILTINS[i];
    return NULL;
}

const char *js_primitive(js_conv *c, const char *name) {
    int index = js_map_get(&c->rule_index, name);
    if (index >= 0) return c->names[index];
    const builtin_rule *rule = find_builtin(name);
    if (!rule) return js_fail(c, "internal error: no builtin rule '%s'", name);
    char *body = strdup(rule->body);
    if (!body) return js_oom(c);
    const char *added = add_rule(c, name, body, NULL, false);
    if (!added) return NULL;
    for (size_t i = 0; i < 6 && rule->uses[i]; i++)
        if (!js_primitive(c, rule->uses[i])) return NULL;
    return added;
}

/* ---- output ----------------------------------------------------------------------------------- */

typedef struct int_list {
    int *v;
    size_t n, cap;
} int_list;

static bool int_push(int_list *l, int x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        int *v = realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return true;
}

static bool name_char(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-';
}

/* The rules `body` names, in order (words outside its literals and classes). */
static bool collect_refs(const js_conv *c, const char *body, int_list *out) {
    for (const char *p = body; *p;) {
        if (*p == '"' || *p == '[') {
            char close = *p == '"' ? '"' : ']';
            for (p++; *p && *p != close; p++)
                if (*p == '\\' && p[1]) p++;
            if (*p) p++;
        } else if (name_char(*p)) {
            const char *start = p;
            while (name_char(*p)) p++;
            char name[256]; /* rule names stay far below: js_hint keeps 200 characters */
            size_t len = (size_t)(p - start);
            if (len >= sizeof name) continue;
            memcpy(name, start, len);
            name[len] = '\0';
            int index = js_map_get(&c->rule_index, name);
            if (index >= 0 && !int_push(out, index)) return false;
        } else {
            p++;
        }
    }
    return true;
}

/* The grammar text, rules in depth-first order from root, each before the rules it names first
 * (rules root does not reach are left out: they cannot matter).
 * llama.cpp numbers rules in the order the text first names them, and its left-recursion check
 * walks every leftmost chain again from each rule it has not yet visited: with a chain's tail
 * written first (as the converter creates rules, children before parents) that check took
 * quadratic time. */
char *js_format_rules(js_conv *c) {
    bool *done = calloc(c->n_rules, sizeof *done);
    int_list stack = {0}, kids = {0};
    js_buf out = {0};
    bool ok = done && int_push(&stack, 0);
    while (ok && stack.n) {
        int r = stack.v[--stack.n];
        if (done[r]) continue;
        done[r] = true;
        js_buf_appendf(&out, "%s ::= %s\n", c->names[r], c->bodies[r]);
        kids.n = 0;
        ok = collect_refs(c, c->bodies[r], &kids);
        for (size_t k = kids.n; ok && k-- > 0;)
            if (!done[kids.v[k]]) ok = int_push(&stack, kids.v[k]);
    }
    free(done);
    free(stack.v);
    free(kids.v);
    if (!ok) out.oom = true;
    return js_buf_take(&out);
}

/* ---- expressions the visitors share ----------------------------------------------------------- */

/* The expression of a builtin rule (heap). */
char *js_primitive_expr(js_conv *c, const char *name) {
    const char *rule = js_primitive(c, name);
    char *copy = rule ? strdup(rule) : NULL;
    if (rule && !copy) js_oom(c);
    return copy;
}

char *js_take_expr(js_conv *c, js_buf *b) {
    if (b->oom) {
        js_buf_free(b);
        js_oom(c);
        return NULL;
    }
    return js_buf_take(b);
}

/* ---- paths for messages: $.properties.a, $.anyOf[1] ------------------------------------------- */

static bool plain_key(const char *key) {
    if (!key[0] || (key[0] >= '0' && key[0] <= '9')) return false;
    for (const char *p = key; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '$'))
            return false;
    return true;
}

void js_path_append_key(js_buf *path, const char *key) {
    if (plain_key(key)) js_buf_appendf(path, ".%s", key);
    else js_buf_appendf(path, "[\"%s\"]", key);
}

size_t js_path_push(js_conv *c, const char *key) {
    size_t saved = c->path.len;
    js_path_append_key(&c->path, key);
    return saved;
}

void js_path_pop(js_conv *c, size_t saved) { js_buf_truncate(&c->path, saved); }

void js_encode_string(js_buf *b, const char *s, size_t n) {
    json_t *str = json_stringn(s, n);
    char *text = str ? json_dumps(str, JSON_ENCODE_ANY) : NULL;
    if (text) js_buf_append(b, text);
    else b->oom = true;
    free(text);
    json_decref(str);
}
