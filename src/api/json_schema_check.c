/* json_schema_check.c - the walk of the schema checks (json_schema_check.h): each schema, the
 * $refs followed the way llama.cpp's converter resolves them, anyOf/oneOf, allOf, and the bounds
 * on depth and expansion. The keywords of one schema are json_schema_keywords.c's, which come back
 * here for the schemas inside (properties, items) through jsc.schema. */
#include "json_schema_check_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool check_schema(jsc *c, json_t *schema);

/* ---- $ref ------------------------------------------------------------------------------------ */

/* The target of "#/a/b" as llama.cpp's converter finds it: the text between slashes taken as it is
 * (no ~0, ~1 or %XX decoding), an array's element by its index. *where receives the target's path
 * ("$.a.b"); errors name the $ref's own place. */
static json_t *resolve(jsc *c, const char *ref, jsc_path *where) {
    json_t *node = c->root;
    *where = (jsc_path){.text = "$", .len = 1};
    for (const char *p = ref + 2;; p++) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char token[256];
        if (len >= sizeof token) return jsc_fail(c, "$ref '%s' has a name longer than 255 bytes", ref), NULL;
        memcpy(token, p, len);
        token[len] = '\0';
        char *digits_end = token;
        unsigned long long index = json_is_array(node) ? strtoull(token, &digits_end, 10) : 0;
        json_t *next = json_is_object(node) ? json_object_get(node, token)
                       : json_is_array(node) && token[0] >= '0' && token[0] <= '9' && !*digits_end
                           ? json_array_get(node, (size_t)index)
                           : NULL;
        if (!next) return jsc_fail(c, "$ref '%s' does not resolve ('%s' not found)", ref, token), NULL;
        if (json_is_array(node)) jsc_path_append(where, "[", token, "]");
        else jsc_path_append_key(where, token);
        node = next;
        if (!end) return node;
        p = end;
    }
}

static bool ref_syntax(jsc *c, json_t *value) {
    if (!json_is_string(value)) return jsc_fail(c, "'$ref' must be a string");
    const char *ref = json_string_value(value);
    if (ref[0] != '#')
        return jsc_fail(c, "$ref '%s' is not supported: only references within the document ('#/...')", ref);
    if (ref[1] != '/') return jsc_fail(c, "$ref '%s' is not supported: only JSON pointers ('#/$defs/name') are", ref);
    if (strlen(ref) > JSC_MAX_REF) return jsc_fail(c, "$ref '%.64s...' is longer than %d bytes", ref, JSC_MAX_REF);
    if (strpbrk(ref, "~%"))
        return jsc_fail(c, "$ref '%s' is not supported: llama.cpp's converter reads '~' and '%%' escapes as they are "
                        "written (rename the definition)", ref);
    return true;
}

static bool on_path(const jsc *c, const char *ref) {
    for (int i = 0; i < c->n_on_path; i++)
        if (strcmp(c->on_path[i], ref) == 0) return true;
    return false;
}

/* Whether the ref's target was checked before; notes it when not (*too_many: no room). */
static bool walked_before(jsc *c, const char *ref, bool *too_many) {
    for (size_t i = 0; i < c->n_walked; i++)
        if (strcmp(c->walked[i], ref) == 0) return true;
    if (c->n_walked == JSC_MAX_REFS) return *too_many = true, false;
    if (c->n_walked == c->cap_walked) {
        size_t cap = c->cap_walked ? c->cap_walked * 2 : 16;
        const char **walked = realloc(c->walked, cap * sizeof *walked);
        if (!walked) return *too_many = true, false;
        c->walked = walked;
        c->cap_walked = cap;
    }
    c->walked[c->n_walked++] = ref;
    return false;
}

/* A $ref is checked where it points, each time it is met (the depth below it depends on where it
 * is met), except inside itself: llama.cpp's converter makes that a recursive rule. */
static bool check_ref(jsc *c, json_t *schema) {
    json_t *value = json_object_get(schema, "$ref");
    if (!ref_syntax(c, value)) return false;
    const char *ref = json_string_value(value);
    if (on_path(c, ref)) return true;
    jsc_path where;
    json_t *target = resolve(c, ref, &where);
    if (!target) return false;
    bool too_many = false, again = walked_before(c, ref, &too_many);
    if (too_many && c->n_walked < JSC_MAX_REFS) return jsc_oom(c);
    if (too_many) return jsc_fail(c, "the schema names more than %d different $refs", JSC_MAX_REFS);
    jsc_path saved = c->path;
    c->path = where;
    c->on_path[c->n_on_path++] = ref; /* fewer than JSC_MAX_DEPTH: each one is a level deeper */
    c->rewalk += again;
    bool ok = check_schema(c, target);
    c->rewalk -= again;
    c->n_on_path--;
    c->path = saved;
    return ok;
}

/* ---- anyOf, oneOf, allOf --------------------------------------------------------------------- */

static bool check_alternatives(jsc *c, json_t *schema, const char *key) {
    json_t *alts = json_object_get(schema, key);
    if (!json_is_array(alts) || json_array_size(alts) == 0)
        return jsc_fail(c, "'%s' must be a non-empty array of schemas", key);
    for (size_t i = 0; i < json_array_size(alts); i++) {
        size_t saved = jsc_path_index(c, key, i);
        bool ok = check_schema(c, json_array_get(alts, i));
        jsc_path_pop(c, saved);
        if (!ok) return false;
    }
    return true;
}

enum { PART_OTHER, PART_OBJECT, PART_ENUM };

/* What an allOf part is to llama.cpp's converter, after its $refs (already checked): an object's
 * properties or an enum's values are merged; any other kind would be dropped. */
static int all_of_part(jsc *c, json_t *part, json_t **resolved) {
    jsc_path where;
    for (int hops = 0; json_is_object(part) && json_object_get(part, "$ref") && hops < JSC_MAX_DEPTH; hops++)
        part = resolve(c, json_string_value(json_object_get(part, "$ref")), &where);
    *resolved = part;
    if (!json_is_object(part)) return PART_OTHER;
    const char *type = json_string_value(json_object_get(part, "type"));
    if (json_object_get(part, "enum")) return PART_ENUM;
    bool object = (type && strcmp(type, "object") == 0) || (!json_object_get(part, "type") && json_object_get(part, "properties"));
    return object && !json_object_get(part, "const") && !json_object_get(part, "allOf") ? PART_OBJECT : PART_OTHER;
}

static bool enum_has(json_t *values, json_t *v) {
    for (size_t i = 0; i < json_array_size(values); i++)
        if (json_equal(json_array_get(values, i), v)) return true;
    return false;
}

/* Enums merge into the values they all hold: none would be a grammar without a value. */
static bool check_all_of_enums(jsc *c, json_t *parts[], size_t n) {
    /* llama.cpp counts each value's parts by its occurrences: a value twice in one enum would count
     * as if it were in two. */
    for (size_t k = 0; k < n; k++) {
        json_t *values = json_object_get(parts[k], "enum");
        for (size_t i = 1; i < json_array_size(values); i++)
            for (size_t j = 0; j < i; j++)
                if (json_equal(json_array_get(values, i), json_array_get(values, j)))
                    return jsc_fail(c, "'allOf' part %zu has a value twice in its enum", k);
    }
    json_t *first = json_object_get(parts[0], "enum");
    for (size_t i = 0; i < json_array_size(first); i++) {
        size_t k = 1;
        while (k < n && enum_has(json_object_get(parts[k], "enum"), json_array_get(first, i))) k++;
        if (k == n) return true;
    }
    return jsc_fail(c, "the enums of 'allOf' have no value in common");
}

/* Objects merge into one with every property; a name in two of them would be written twice. */
static bool check_all_of_objects(jsc *c, json_t *parts[], size_t n) {
    for (size_t i = 0; i < n; i++) {
        const char *name;
        json_t *value;
        json_object_foreach(json_object_get(parts[i], "properties"), name, value) {
            (void)value;
            for (size_t k = i + 1; k < n; k++)
                if (json_object_get(json_object_get(parts[k], "properties"), name))
                    return jsc_fail(c, "property '%s' is declared in 'allOf' parts %zu and %zu: llama.cpp's converter "
                                    "would ask for it twice", name, i, k);
        }
    }
    return true;
}

static bool check_all_of(jsc *c, json_t *schema) {
    if (!check_alternatives(c, schema, "allOf")) return false;
    json_t *all = json_object_get(schema, "allOf");
    size_t n = json_array_size(all);
    json_t **parts = calloc(n, sizeof *parts);
    if (!parts) return jsc_oom(c);
    int kind = PART_OTHER;
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        int part = all_of_part(c, json_array_get(all, i), &parts[i]);
        if (part == PART_OTHER || (i > 0 && part != kind))
            ok = jsc_fail(c, "'allOf' part %zu is not supported: llama.cpp's converter merges objects (every property "
                          "becomes required) or enums (their common values), one kind only, and drops anything else", i);
        kind = part;
    }
    if (ok) ok = kind == PART_ENUM ? check_all_of_enums(c, parts, n) : check_all_of_objects(c, parts, n);
    free(parts);
    return ok;
}

/* llama.cpp's converter reads a combination alone and drops a `type` beside it: harmless only
 * where every part (after its $refs) is of that type already. (allOf it reads under "object" or
 * "string" only; under another type, or each of a list, it builds that type and drops the allOf.) */
static bool check_type_beside(jsc *c, json_t *schema, const char *key) {
    json_t *type = json_object_get(schema, "type");
    if (!type) return true;
    const char *name = json_string_value(type);
    if (strcmp(key, "allOf") == 0 && !(name && (strcmp(name, "object") == 0 || strcmp(name, "string") == 0)))
        return jsc_fail(c, "'type' beside 'allOf' is supported as \"object\" or \"string\" only (with another type "
                        "llama.cpp's converter drops the allOf)");
    json_t *declared = json_pack("{s:O}", "type", type);
    if (!declared) return jsc_oom(c);
    int allowed = jsc_kind(declared);
    json_decref(declared);
    if (allowed & JSC_NUMBER) allowed |= JSC_INTEGER;
    json_t *parts = json_object_get(schema, key);
    for (size_t i = 0; i < json_array_size(parts); i++) {
        json_t *part = json_array_get(parts, i);
        jsc_path where;
        for (int hops = 0; json_is_object(part) && json_object_get(part, "$ref") && hops < JSC_MAX_DEPTH; hops++)
            part = resolve(c, json_string_value(json_object_get(part, "$ref")), &where);
        int kind = json_is_object(part) ? jsc_kind(part) : 0;
        if (!allowed || !kind || (kind & ~allowed))
            return jsc_fail(c, "'type' beside '%s' is not supported: %s[%zu] may be other than %s, and llama.cpp's "
                            "converter reads '%s' alone (put the type inside each part)", key, key, i,
                            allowed ? jsc_type_names(allowed) : "the type", key);
    }
    return true;
}

/* ---- one schema ------------------------------------------------------------------------------ */

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

static bool check_object_schema(jsc *c, json_t *schema) {
    if (json_object_get(schema, "$ref")) return jsc_only_with(c, schema, "$ref") && check_ref(c, schema);
    const char *alt = json_object_get(schema, "oneOf") ? "oneOf" : json_object_get(schema, "anyOf") ? "anyOf" : NULL;
    if (alt) return jsc_only_with(c, schema, alt) && check_alternatives(c, schema, alt) && check_type_beside(c, schema, alt);
    if (json_object_get(schema, "allOf"))
        return jsc_only_with(c, schema, "allOf") && check_all_of(c, schema) && check_type_beside(c, schema, "allOf");
    return jsc_typed(c, schema);
}

static bool check_schema(jsc *c, json_t *schema) {
    if (c->failed) return false;
    if (++c->visits > JSC_MAX_VISITS)
        return jsc_fail(c, "the schema expands to more than %d schemas through its $refs", JSC_MAX_VISITS);
    if (json_is_boolean(schema))
        return jsc_fail(c, "the schema %s is not supported (llama.cpp's converter takes objects only): write {} for any "
                        "value", json_is_true(schema) ? "true" : "false");
    if (!json_is_object(schema)) return jsc_fail(c, "a schema must be an object, not %s", json_kind(schema));
    if (c->depth >= JSC_MAX_DEPTH)
        return jsc_fail(c, "the schema nests deeper than %d levels (a $ref followed counts as one)", JSC_MAX_DEPTH);
    if (!jsc_keywords_known(c, schema)) return false;
    c->depth++;
    bool ok = check_object_schema(c, schema);
    c->depth--;
    return ok;
}

bool json_schema_check(json_t *schema, const char *field, api_error *err) {
    jsc c = {.root = schema, .field = field, .err = err, .path = {.text = "$", .len = 1}, .schema = check_schema};
    bool ok = check_schema(&c, schema);
    free(c.walked);
    return ok;
}
