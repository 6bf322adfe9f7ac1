/* json_schema.c - JSON Schema -> GBNF (see json_schema.h for what is supported and why).
 *
 * Each schema becomes a GBNF expression; an expression used inside another one gets a rule of its
 * own, named after where it is (root-address-street, ref-node-children-item, ...). A $ref target
 * is converted once, into a rule reserved before its target is converted, so recursive schemas
 * become recursive rules. Every keyword is checked against the supported set first: anything
 * unknown is an error, never silently ignored. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "json_schema_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deeper schemas are refused rather than risking the stack (of an HTTP worker thread). */
#define MAX_DEPTH 128

enum {
    T_NULL = 1,
    T_BOOLEAN = 2,
    T_OBJECT = 4,
    T_ARRAY = 8,
    T_STRING = 16,
    T_NUMBER = 32,
    T_INTEGER = 64,
};

static const struct {
    const char *name;
    int bit;
} TYPES[] = {
    {"null", T_NULL},     {"boolean", T_BOOLEAN}, {"object", T_OBJECT},   {"array", T_ARRAY},
    {"string", T_STRING}, {"number", T_NUMBER},   {"integer", T_INTEGER},
};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])

typedef struct keyword {
    const char *name;
    int applies_to;  /* type bits of the values it constrains; 0: any schema */
    bool annotation; /* no effect on the grammar */
} keyword;

static const keyword KEYWORDS[] = {
    {"title", 0, true},       {"description", 0, true}, {"default", 0, true},   {"examples", 0, true},
    {"$schema", 0, true},     {"$comment", 0, true},    {"deprecated", 0, true}, {"readOnly", 0, true},
    {"writeOnly", 0, true},   {"$id", 0, true},         {"$defs", 0, true},     {"definitions", 0, true},
    {"type", 0, false},       {"enum", 0, false},       {"const", 0, false},    {"$ref", 0, false},
    {"anyOf", 0, false},      {"oneOf", 0, false},      {"allOf", 0, false},
    {"properties", T_OBJECT, false}, {"required", T_OBJECT, false}, {"additionalProperties", T_OBJECT, false},
    {"items", T_ARRAY, false},       {"minItems", T_ARRAY, false},  {"maxItems", T_ARRAY, false},
    {"minLength", T_STRING, false},  {"maxLength", T_STRING, false}, {"format", T_STRING, false},
    {"minimum", T_INTEGER, false},   {"maximum", T_INTEGER, false},
    {"exclusiveMinimum", T_INTEGER, false}, {"exclusiveMaximum", T_INTEGER, false},
};

static char *visit(js_conv *c, json_t *schema, const char *hint);

/* ---- small helpers ---------------------------------------------------------------------------- */

static const keyword *find_keyword(const char *name) {
    for (size_t i = 0; i < sizeof KEYWORDS / sizeof KEYWORDS[0]; i++)
        if (strcmp(KEYWORDS[i].name, name) == 0) return &KEYWORDS[i];
    return NULL;
}

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* "string/null" for the type bits (static buffer: messages only). */
static const char *type_names(int types) {
    static _Thread_local char out[96];
    out[0] = '\0';
    for (size_t i = 0; i < N_TYPES; i++) {
        if (!(types & TYPES[i].bit)) continue;
        if (out[0]) strcat(out, "/");
        strcat(out, TYPES[i].name);
    }
    return out;
}

static char *dup_text(js_conv *c, const char *s) {
    char *copy = strdup(s);
    if (!copy) js_oom(c);
    return copy;
}

static bool is_rule_name(const char *expr) {
    for (const char *p = expr; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-'))
            return false;
    return expr[0] != '\0';
}

/* The name of a rule matching expr (taken): expr itself when it already is a rule's name, else a
 * new rule named after hint. */
static const char *as_rule(js_conv *c, const char *hint, char *expr) {
    if (!expr) return NULL;
    if (is_rule_name(expr)) {
        int index = js_map_get(&c->rule_index, expr);
        if (index >= 0) {
            free(expr);
            return c->names[index];
        }
    }
    return js_add_rule(c, hint, expr, NULL);
}

static const char *visit_rule(js_conv *c, json_t *schema, const char *hint) {
    return as_rule(c, hint, visit(c, schema, hint));
}

static size_t path_push_index(js_conv *c, const char *key, size_t index) {
    size_t saved = js_path_push(c, key);
    js_buf_appendf(&c->path, "[%zu]", index);
    return saved;
}

/* ---- keyword checks --------------------------------------------------------------------------- */

static bool check_keywords(js_conv *c, json_t *schema) {
    const char *key;
    json_t *value;
    json_object_foreach(schema, key, value) {
        (void)value;
        if (!find_keyword(key)) return js_fail(c, "unsupported keyword '%s'", key) != NULL;
        if (strcmp(key, "$id") == 0 && schema != c->root)
            return js_fail(c, "'$id' is supported at the root only ($ref resolves within the whole document)") != NULL;
    }
    return true;
}

/* Fails when a constraint other than `key` sits beside it (annotations are fine). */
static bool only_with(js_conv *c, json_t *schema, const char *key) {
    const char *other;
    json_t *value;
    json_object_foreach(schema, other, value) {
        (void)value;
        const keyword *kw = find_keyword(other);
        if (kw->annotation || strcmp(other, key) == 0) continue;
        js_fail(c, "'%s' beside '%s' is not supported (put all constraints inside one schema)", other, key);
        return false;
    }
    return true;
}

static bool parse_type_name(js_conv *c, json_t *name, int *types) {
    if (!json_is_string(name)) return js_fail(c, "'type' must be a string or an array of strings") != NULL;
    for (size_t i = 0; i < N_TYPES; i++) {
        if (strcmp(json_string_value(name), TYPES[i].name) == 0) {
            *types |= TYPES[i].bit;
            return true;
        }
    }
    return js_fail(c, "unknown type '%s' (object, array, string, number, integer, boolean or null)",
                   json_string_value(name)) != NULL;
}

/* The types `type` names, or (without it) those its type-specific keywords imply; 0 = any. */
static bool read_types(js_conv *c, json_t *schema, int *types) {
    *types = 0;
    json_t *type = json_object_get(schema, "type");
    if (json_is_array(type)) {
        if (json_array_size(type) == 0) return js_fail(c, "'type' must not be an empty array") != NULL;
        size_t i;
        json_t *name;
        json_array_foreach(type, i, name) if (!parse_type_name(c, name, types)) return false;
        return true;
    }
    if (type) return parse_type_name(c, type, types);
    const char *key;
    json_t *value;
    json_object_foreach(schema, key, value) {
        (void)value;
        const keyword *kw = find_keyword(key);
        if (kw->applies_to == T_INTEGER)
            return js_fail(c, "'%s' needs \"type\": \"integer\" (bounds are supported on integers only)", key) != NULL;
        *types |= kw->applies_to;
    }
    return true;
}

/* Each type-specific keyword must apply to one of the types (else it would be ignored). */
static bool check_keywords_apply(js_conv *c, json_t *schema, int types, bool has_values) {
    const char *key;
    json_t *value;
    json_object_foreach(schema, key, value) {
        (void)value;
        const keyword *kw = find_keyword(key);
        if (!kw->applies_to) continue;
        if (has_values)
            return js_fail(c, "'%s' beside '%s' is not supported", key,
                           json_object_get(schema, "enum") ? "enum" : "const") != NULL;
        if (kw->applies_to == T_INTEGER && (types & T_NUMBER))
            return js_fail(c, "'%s' on type number is not supported (bounds are supported on integers only)", key) != NULL;
        if (!(kw->applies_to & types))
            return js_fail(c, "keyword '%s' does not apply to type %s", key, type_names(types)) != NULL;
    }
    return true;
}

/* A non-negative integer count (minItems, ...) into *out; absent leaves *out as it is. */
static bool read_count(js_conv *c, json_t *schema, const char *key, int64_t *out) {
    json_t *v = json_object_get(schema, key);
    if (!v) return true;
    double d = json_number_value(v);
    if (!json_is_number(v) || d < 0 || d != floor(d))
        return js_fail(c, "'%s' must be a non-negative integer", key) != NULL;
    if (d > JS_MAX_REPEAT)
        return js_fail(c, "'%s' %.0f is above %d, the most repetitions llama.cpp's grammars allow", key, d,
                       JS_MAX_REPEAT) != NULL;
    *out = (int64_t)d;
    return true;
}

/* lo..hi (hi < 0: no upper bound) */
static bool read_counts(js_conv *c, json_t *schema, const char *min_key, const char *max_key, int64_t *lo, int64_t *hi) {
    *lo = 0;
    *hi = -1;
    if (!read_count(c, schema, min_key, lo) || !read_count(c, schema, max_key, hi)) return false;
    if (*hi >= 0 && *lo > *hi) return js_fail(c, "'%s' %" PRId64 " is above '%s' %" PRId64, min_key, *lo, max_key, *hi) != NULL;
    return true;
}

/* GBNF repetition suffix for lo..hi (hi >= 1 or < 0 for none; never called for hi = 0). */
static void append_repeat(js_buf *b, int64_t lo, int64_t hi) {
    if (hi == lo) {
        if (lo != 1) js_buf_appendf(b, "{%" PRId64 "}", lo);
    } else if (hi < 0) {
        if (lo == 0) js_buf_append(b, "*");
        else if (lo == 1) js_buf_append(b, "+");
        else js_buf_appendf(b, "{%" PRId64 ",}", lo);
    } else if (lo == 0 && hi == 1) {
        js_buf_append(b, "?");
    } else {
        js_buf_appendf(b, "{%" PRId64 ",%" PRId64 "}", lo, hi);
    }
}

/* ---- strings, integers ------------------------------------------------------------------------ */

static char *visit_format(js_conv *c, json_t *schema) {
    json_t *format = json_object_get(schema, "format");
    if (!json_is_string(format)) return js_fail(c, "'format' must be a string"), NULL;
    if (json_object_get(schema, "minLength") || json_object_get(schema, "maxLength"))
        return js_fail(c, "'format' beside 'minLength'/'maxLength' is not supported"), NULL;
    static const char *const FORMATS[] = {"date", "time", "date-time", "uuid"};
    for (size_t i = 0; i < sizeof FORMATS / sizeof FORMATS[0]; i++) {
        if (strcmp(json_string_value(format), FORMATS[i]) != 0) continue;
        char name[32];
        snprintf(name, sizeof name, "%s-string", FORMATS[i]);
        return js_primitive_expr(c, name);
    }
    js_fail(c, "unsupported format '%s' (supported: date, time, date-time, uuid)", json_string_value(format));
    return NULL;
}

static char *visit_string(js_conv *c, json_t *schema) {
    if (json_object_get(schema, "format")) return visit_format(c, schema);
    int64_t lo, hi;
    if (!read_counts(c, schema, "minLength", "maxLength", &lo, &hi)) return NULL;
    if (lo == 0 && hi < 0) return js_primitive_expr(c, "string");
    if (!js_primitive(c, "char")) return NULL;
    js_buf b = {0};
    js_buf_append(&b, "\"\\\"\" ");
    if (hi != 0) {
        js_buf_append(&b, "char");
        append_repeat(&b, lo, hi);
        js_buf_append(&b, " ");
    }
    js_buf_append(&b, "\"\\\"\"");
    return js_take_expr(c, &b);
}

/* An integer bound, rounded inwards to the integers it admits: min rounds up, max down; an
 * exclusive one moves one further. Bounds beyond 16 digits are clamped there. */
static bool read_bound(js_conv *c, json_t *schema, const char *key, bool is_min, bool exclusive, int64_t *bound) {
    json_t *v = json_object_get(schema, key);
    if (!v) return true;
    if (json_is_boolean(v))
        return js_fail(c, "'%s' as a boolean (draft 4) is not supported: give the bound itself as a number", key) != NULL;
    if (!json_is_number(v)) return js_fail(c, "'%s' must be a number", key) != NULL;
    int64_t n;
    bool integral;
    json_int_t i = json_is_integer(v) ? json_integer_value(v) : 0;
    if (json_is_integer(v) && i >= -JS_INTEGER_LIMIT && i <= JS_INTEGER_LIMIT) {
        n = i;
        integral = true;
    } else {
        double limit = (double)JS_INTEGER_LIMIT + 1, d = json_number_value(v); /* 10^16: exact */
        d = d > limit ? limit : d < -limit ? -limit : d;
        n = (int64_t)(is_min ? ceil(d) : floor(d));
        integral = d == floor(d);
    }
    if (exclusive && integral) n += is_min ? 1 : -1;
    if (is_min ? n > *bound : n < *bound) *bound = n;
    return true;
}

static char *visit_integer(js_conv *c, json_t *schema) {
    int64_t lo = -JS_INTEGER_LIMIT, hi = JS_INTEGER_LIMIT;
    if (!read_bound(c, schema, "minimum", true, false, &lo) || !read_bound(c, schema, "exclusiveMinimum", true, true, &lo) ||
        !read_bound(c, schema, "maximum", false, false, &hi) || !read_bound(c, schema, "exclusiveMaximum", false, true, &hi))
        return NULL;
    if (lo == -JS_INTEGER_LIMIT && hi == JS_INTEGER_LIMIT) return js_primitive_expr(c, "integer");
    if (lo > hi) return js_fail(c, "no integer of at most %d digits lies within the bounds", JS_MAX_INTEGER_DIGITS), NULL;
    js_buf b = {0};
    js_integer_range(&b, lo, hi);
    return js_take_expr(c, &b);
}

/* ---- arrays ----------------------------------------------------------------------------------- */

static char *visit_array(js_conv *c, json_t *schema, const char *hint) {
    int64_t lo, hi;
    if (!read_counts(c, schema, "minItems", "maxItems", &lo, &hi)) return NULL;
    json_t *items = json_object_get(schema, "items");
    if (json_is_array(items)) return js_fail(c, "'items' as an array (a tuple) is not supported"), NULL;
    if (json_is_false(items)) {
        if (lo > 0) return js_fail(c, "'minItems' %" PRId64 " with 'items' false allows no array", lo), NULL;
        hi = 0;
    }
    if (!js_primitive(c, "ws")) return NULL;
    if (hi == 0) return dup_text(c, "\"[\" ws \"]\"");
    const char *item;
    if (!items || json_is_true(items)) {
        if (lo == 0 && hi < 0) return js_primitive_expr(c, "array");
        item = js_primitive(c, "value");
    } else {
        char *item_hint = js_hint(hint, "item");
        size_t saved = js_path_push(c, "items");
        c->consumed++;
        item = item_hint ? visit_rule(c, items, item_hint) : js_oom(c);
        c->consumed--;
        js_path_pop(c, saved);
        free(item_hint);
    }
    if (!item) return NULL;
    js_buf list = {0};
    js_buf_append(&list, item);
    if (hi < 0 || hi > 1) {
        js_buf_appendf(&list, " ( \",\" ws %s )", item);
        append_repeat(&list, lo > 0 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1);
    }
    if (lo > 0) {
        js_buf b = {0};
        js_buf_appendf(&b, "\"[\" ws %s ws \"]\"", list.oom ? "" : list.data);
        if (list.oom) b.oom = true;
        js_buf_free(&list);
        return js_take_expr(c, &b);
    }
    /* An optional list gets a rule of its own: llama.cpp refuses a repetition (the "?") of a group
     * in which more than 2000 rules first appear, and "{0,1999}" makes that many. */
    char *list_hint = js_hint(hint, "list");
    const char *list_rule = list_hint ? as_rule(c, list_hint, js_take_expr(c, &list)) : (js_buf_free(&list), js_oom(c));
    free(list_hint);
    if (!list_rule) return NULL;
    js_buf b = {0};
    js_buf_appendf(&b, "\"[\" ws ( %s ws )? \"]\"", list_rule);
    return js_take_expr(c, &b);
}

/* ---- enum, const ------------------------------------------------------------------------------ */

static bool has_type(json_t *v, int types) {
    switch (json_typeof(v)) {
    case JSON_NULL: return types & T_NULL;
    case JSON_TRUE:
    case JSON_FALSE: return types & T_BOOLEAN;
    case JSON_OBJECT: return types & T_OBJECT;
    case JSON_ARRAY: return types & T_ARRAY;
    case JSON_STRING: return types & T_STRING;
    case JSON_INTEGER: return types & (T_INTEGER | T_NUMBER);
    case JSON_REAL: {
        double d = json_real_value(v);
        return (types & T_NUMBER) || ((types & T_INTEGER) && d == floor(d));
    }
    }
    return false;
}

/* The shortest of %.15g..%.17g that reads back as the same double (so 0.1 is "0.1"). */
static void encode_real(js_buf *b, double d) {
    char text[40];
    for (int precision = 15; precision <= 17; precision++) {
        snprintf(text, sizeof text, "%.*g", precision, d);
        if (strtod(text, NULL) == d) break;
    }
    js_buf_append(b, text);
}

/* Compact JSON text of v, object members in the document's order. */
static void encode_value(js_buf *b, json_t *v) {
    switch (json_typeof(v)) {
    case JSON_STRING: js_encode_string(b, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER: js_buf_appendf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
    case JSON_REAL: encode_real(b, json_real_value(v)); break;
    case JSON_TRUE: js_buf_append(b, "true"); break;
    case JSON_FALSE: js_buf_append(b, "false"); break;
    case JSON_NULL: js_buf_append(b, "null"); break;
    case JSON_ARRAY: {
        size_t i;
        json_t *item;
        js_buf_append(b, "[");
        json_array_foreach(v, i, item) {
            if (i) js_buf_append(b, ",");
            encode_value(b, item);
        }
        js_buf_append(b, "]");
        break;
    }
    case JSON_OBJECT: {
        const char *key;
        json_t *item;
        bool first = true;
        js_buf_append(b, "{");
        json_object_foreach(v, key, item) {
            if (!first) js_buf_append(b, ",");
            first = false;
            js_encode_string(b, key, strlen(key));
            js_buf_append(b, ":");
            encode_value(b, item);
        }
        js_buf_append(b, "}");
        break;
    }
    }
}

static void append_value_literal(js_buf *b, json_t *v) {
    js_buf text = {0};
    encode_value(&text, v);
    if (text.oom) b->oom = true;
    else js_buf_literal(b, text.data, text.len);
    js_buf_free(&text);
}

/* enum / const: their values as literals, those of the schema's types only when it has `type`. */
static char *visit_values(js_conv *c, json_t *schema, int types) {
    json_t *values = json_object_get(schema, "enum");
    json_t *constant = json_object_get(schema, "const");
    if (values && constant) return js_fail(c, "'enum' beside 'const' is not supported"), NULL;
    if (values && (!json_is_array(values) || json_array_size(values) == 0))
        return js_fail(c, "'enum' must be a non-empty array"), NULL;
    js_buf b = {0};
    size_t n_kept = 0, n = values ? json_array_size(values) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *v = values ? json_array_get(values, i) : constant;
        if (types && !has_type(v, types)) continue;
        if (n_kept++) js_buf_append(&b, " | ");
        append_value_literal(&b, v);
    }
    if (n_kept == 0) {
        js_buf_free(&b);
        return js_fail(c, "no value of '%s' has the type %s", values ? "enum" : "const", type_names(types)), NULL;
    }
    return js_take_expr(c, &b);
}

/* ---- combinations and references -------------------------------------------------------------- */

static char *visit_alternatives(js_conv *c, json_t *schema, const char *key, const char *hint) {
    json_t *alts = json_object_get(schema, key);
    if (!json_is_array(alts) || json_array_size(alts) == 0)
        return js_fail(c, "'%s' must be a non-empty array of schemas", key), NULL;
    js_buf b = {0};
    size_t i;
    json_t *alt;
    json_array_foreach(alts, i, alt) {
        char part[24];
        snprintf(part, sizeof part, "%zu", i);
        char *alt_hint = js_hint(hint, part);
        size_t saved = path_push_index(c, key, i);
        const char *rule = alt_hint ? visit_rule(c, alt, alt_hint) : js_oom(c);
        js_path_pop(c, saved);
        free(alt_hint);
        if (!rule) {
            js_buf_free(&b);
            return NULL;
        }
        js_buf_appendf(&b, "%s%s", i ? " | " : "", rule);
    }
    return js_take_expr(c, &b);
}

static char *visit_all_of(js_conv *c, json_t *schema, const char *hint) {
    json_t *all = json_object_get(schema, "allOf");
    if (!json_is_array(all) || json_array_size(all) == 0)
        return js_fail(c, "'allOf' must be a non-empty array of schemas"), NULL;
    if (json_array_size(all) > 1)
        return js_fail(c, "'allOf' with %zu schemas is not supported (only one)", json_array_size(all)), NULL;
    size_t saved = path_push_index(c, "allOf", 0);
    char *expr = visit(c, json_array_get(all, 0), hint);
    js_path_pop(c, saved);
    return expr;
}

/* One JSON pointer token (~1 is '/', ~0 is '~', %XX a byte) from *p up to the next '/'. */
static char *pointer_token(const char **p) {
    js_buf token = {0};
    const char *s = *p;
    js_buf_append(&token, "");
    for (; *s && *s != '/'; s++) {
        char ch = *s;
        if (ch == '~' && (s[1] == '0' || s[1] == '1')) ch = *++s == '0' ? '~' : '/';
        else if (ch == '%' && s[1] && s[2]) {
            char hex[3] = {s[1], s[2], '\0'};
            char *end;
            long byte = strtol(hex, &end, 16);
            if (*end == '\0' && byte > 0) {
                ch = (char)byte;
                s += 2;
            }
        }
        js_buf_append_n(&token, &ch, 1);
    }
    *p = s;
    return js_buf_take(&token);
}

static json_t *pointer_step(json_t *node, const char *token) {
    if (json_is_object(node)) return json_object_get(node, token);
    if (!json_is_array(node) || !token[0]) return NULL;
    char *end;
    unsigned long long i = strtoull(token, &end, 10);
    return *end == '\0' && token[0] >= '0' && token[0] <= '9' ? json_array_get(node, (size_t)i) : NULL;
}

/* The schema "#/a/b" names, with its path ("$.a.b") in *where. */
static json_t *resolve_pointer(js_conv *c, const char *ref, js_buf *where) {
    js_buf_append(where, "$");
    const char *p = ref + 1;
    if (*p && *p != '/') return js_fail(c, "$ref '%s' is not supported: only JSON pointers ('#/$defs/name') are", ref), NULL;
    json_t *node = c->root;
    while (*p == '/') {
        p++;
        char *token = pointer_token(&p);
        if (!token) return js_oom(c), NULL;
        json_t *next = pointer_step(node, token);
        if (!next) js_fail(c, "$ref '%s' does not resolve ('%s' not found)", ref, token);
        else if (json_is_array(node)) js_buf_appendf(where, "[%s]", token);
        else js_path_append_key(where, token);
        free(token);
        if (!next) return NULL;
        node = next;
    }
    return node;
}

/* A ref's last pointer token as a rule name hint: "ref-node". */
static char *ref_hint(const char *ref) {
    const char *last = strrchr(ref, '/');
    return js_hint("ref", last ? last + 1 : "root");
}

static int add_ref(js_conv *c, const char *ref, int rule) {
    if (c->n_refs == c->cap_refs) {
        size_t cap = c->cap_refs ? c->cap_refs * 2 : 16;
        js_ref *refs = realloc(c->refs, cap * sizeof *refs);
        if (!refs) return js_oom(c), -1;
        c->refs = refs;
        c->cap_refs = cap;
    }
    char *text = strdup(ref);
    if (!text) return js_oom(c), -1;
    int index = (int)c->n_refs;
    c->refs[index] = (js_ref){text, rule, true, c->consumed};
    c->n_refs++;
    if (!js_map_put(&c->ref_index, text, index)) return js_oom(c), -1;
    return index;
}

/* Converts the ref's target into the reserved rule (`rule`), the path pointing at the target. */
static bool convert_target(js_conv *c, int ref, json_t *target, js_buf *where) {
    js_buf saved_path = c->path;
    c->path = *where;
    char *expr = visit(c, target, c->names[c->refs[ref].rule]);
    *where = c->path;
    c->path = saved_path;
    if (!expr) return false;
    js_set_body(c, c->refs[ref].rule, expr);
    c->refs[ref].resolving = false;
    return true;
}

static char *visit_ref(js_conv *c, json_t *schema) {
    json_t *ref_value = json_object_get(schema, "$ref");
    if (!json_is_string(ref_value)) return js_fail(c, "'$ref' must be a string"), NULL;
    const char *ref = json_string_value(ref_value);
    if (ref[0] != '#')
        return js_fail(c, "$ref '%s' is not supported: only references within the document ('#/...')", ref), NULL;
    int known = js_map_get(&c->ref_index, ref);
    if (known >= 0) {
        if (c->refs[known].resolving && c->refs[known].guard == c->consumed)
            return js_fail(c, "$ref '%s' refers back to itself before any JSON text (left recursion)", ref), NULL;
        return dup_text(c, c->names[c->refs[known].rule]);
    }
    js_buf where = {0};
    json_t *target = resolve_pointer(c, ref, &where);
    char *hint = target ? ref_hint(ref) : NULL;
    int rule = -1;
    const char *name = hint ? js_add_rule(c, hint, NULL, &rule) : target ? js_oom(c) : NULL;
    int index = name ? add_ref(c, ref, rule) : -1;
    bool ok = index >= 0 && convert_target(c, index, target, &where);
    js_buf_free(&where);
    free(hint);
    return ok ? dup_text(c, name) : NULL;
}

/* ---- one schema ------------------------------------------------------------------------------- */

static char *visit_type(js_conv *c, json_t *schema, int type, const char *hint) {
    switch (type) {
    case T_NULL: return js_primitive_expr(c, "null");
    case T_BOOLEAN: return js_primitive_expr(c, "boolean");
    case T_NUMBER: return js_primitive_expr(c, "number");
    case T_INTEGER: return visit_integer(c, schema);
    case T_STRING: return visit_string(c, schema);
    case T_ARRAY: return visit_array(c, schema, hint);
    default: return js_visit_object(c, schema, hint);
    }
}

static char *visit_types(js_conv *c, json_t *schema, int types, const char *hint) {
    if (types == 0) return js_primitive_expr(c, "value");
    if (types & T_NUMBER) types &= ~T_INTEGER; /* every integer is a number */
    js_buf b = {0};
    int n = 0;
    for (size_t i = 0; i < N_TYPES && !c->failed; i++) {
        if (!(types & TYPES[i].bit)) continue;
        if (types == TYPES[i].bit) return visit_type(c, schema, TYPES[i].bit, hint); /* the only one */
        char *type_hint = js_hint(hint, TYPES[i].name);
        const char *rule = type_hint ? as_rule(c, type_hint, visit_type(c, schema, TYPES[i].bit, type_hint)) : js_oom(c);
        free(type_hint);
        if (rule) js_buf_appendf(&b, "%s%s", n++ ? " | " : "", rule);
    }
    if (c->failed) {
        js_buf_free(&b);
        return NULL;
    }
    return js_take_expr(c, &b);
}

static char *visit_schema_object(js_conv *c, json_t *schema, const char *hint) {
    if (json_object_get(schema, "$ref")) return only_with(c, schema, "$ref") ? visit_ref(c, schema) : NULL;
    const char *alt = json_object_get(schema, "anyOf") ? "anyOf" : json_object_get(schema, "oneOf") ? "oneOf" : NULL;
    if (alt) return only_with(c, schema, alt) ? visit_alternatives(c, schema, alt, hint) : NULL;
    if (json_object_get(schema, "allOf")) return only_with(c, schema, "allOf") ? visit_all_of(c, schema, hint) : NULL;
    int types;
    if (!read_types(c, schema, &types)) return NULL;
    bool has_values = json_object_get(schema, "enum") || json_object_get(schema, "const");
    if (!check_keywords_apply(c, schema, types, has_values)) return NULL;
    return has_values ? visit_values(c, schema, types) : visit_types(c, schema, types, hint);
}

static char *visit(js_conv *c, json_t *schema, const char *hint) {
    if (c->failed) return NULL;
    if (json_is_true(schema)) return js_primitive_expr(c, "value");
    if (json_is_false(schema)) return js_fail(c, "the schema false allows no value"), NULL;
    if (!json_is_object(schema)) return js_fail(c, "a schema must be an object or a boolean, not %s", json_kind(schema)), NULL;
    if (c->depth >= MAX_DEPTH) return js_fail(c, "the schema nests deeper than %d levels", MAX_DEPTH), NULL;
    if (!check_keywords(c, schema)) return NULL;
    c->depth++;
    char *expr = visit_schema_object(c, schema, hint);
    c->depth--;
    if (!expr && !c->failed) js_fail(c, "internal error converting the schema");
    return expr;
}

/* ---- entry points ----------------------------------------------------------------------------- */

static void conv_free(js_conv *c) {
    for (size_t i = 0; i < c->n_rules; i++) {
        free(c->names[i]);
        free(c->bodies[i]);
    }
    free(c->names);
    free(c->bodies);
    for (size_t i = 0; i < c->n_refs; i++) free(c->refs[i].ref);
    free(c->refs);
    js_map_free(&c->rule_index);
    js_map_free(&c->body_index);
    js_map_free(&c->ref_index);
    js_buf_free(&c->path);
}

bool specd_json_schema_to_grammar(json_t *schema, const char *field, char **gbnf_out, rpc_error *err) {
    *gbnf_out = NULL;
    js_conv c = {.root = schema, .field = field ? field : "json_schema", .err = err, .visit_rule = visit_rule};
    /* The root is the target of "#": reserve rule 0 "root" for it, so "$ref": "#" recurses. */
    int root = -1;
    js_buf where = {0};
    js_buf_append(&where, "$");
    if (js_add_rule(&c, "root", NULL, &root)) {
        int ref = add_ref(&c, "#", root);
        if (ref >= 0) convert_target(&c, ref, schema, &where);
    }
    js_buf_free(&where);
    char *out = c.failed ? NULL : js_format_rules(&c);
    if (!c.failed && !out) js_oom(&c);
    conv_free(&c);
    *gbnf_out = out;
    return out != NULL;
}

bool specd_json_object_grammar(char **gbnf_out, rpc_error *err) {
    json_t *schema = json_pack("{s:s}", "type", "object");
    if (!schema) {
        *gbnf_out = NULL;
        return rpc_fail(err, RPC_INTERNAL_ERROR, "response_format", "response_format: out of memory");
    }
    bool ok = specd_json_schema_to_grammar(schema, "response_format", gbnf_out, err);
    json_decref(schema);
    return ok;
}
