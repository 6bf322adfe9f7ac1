/* json_schema_keywords.c - the keywords of one schema (json_schema_check.h): which are known,
 * which kind of value the schema is (as llama.cpp's converter decides it), and the checks of the
 * object, array, string and integer keywords and of enum/const. Each refusal is a place where
 * llama.cpp's converter would drop the keyword or build no grammar. */
#include "json_schema_check_internal.h"

#include "specd.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ANNOTATION (-1) /* no effect on the output */
#define GENERAL 0       /* any kind of schema */

static const struct {
    const char *name;
    int role; /* ANNOTATION, GENERAL, or the kind (JSC_OBJECT, ...) the keyword constrains */
} KEYWORDS[] = {
    {"title", ANNOTATION},     {"description", ANNOTATION}, {"default", ANNOTATION},   {"examples", ANNOTATION},
    {"$schema", ANNOTATION},   {"$comment", ANNOTATION},    {"deprecated", ANNOTATION}, {"readOnly", ANNOTATION},
    {"writeOnly", ANNOTATION}, {"$id", ANNOTATION},         {"$defs", ANNOTATION},     {"definitions", ANNOTATION},
    {"type", GENERAL},         {"enum", GENERAL},           {"const", GENERAL},        {"$ref", GENERAL},
    {"anyOf", GENERAL},        {"oneOf", GENERAL},          {"allOf", GENERAL},
    {"properties", JSC_OBJECT}, {"required", JSC_OBJECT},   {"additionalProperties", JSC_OBJECT},
    {"items", JSC_ARRAY},       {"prefixItems", JSC_ARRAY}, {"minItems", JSC_ARRAY},   {"maxItems", JSC_ARRAY},
    {"minLength", JSC_STRING},  {"maxLength", JSC_STRING},  {"format", JSC_STRING},    {"pattern", JSC_STRING},
    {"minimum", JSC_INTEGER},   {"maximum", JSC_INTEGER},
    {"exclusiveMinimum", JSC_INTEGER}, {"exclusiveMaximum", JSC_INTEGER},
};

static const struct {
    const char *name;
    int bit;
} TYPES[] = {
    {"null", JSC_NULL},     {"boolean", JSC_BOOLEAN}, {"object", JSC_OBJECT},   {"array", JSC_ARRAY},
    {"string", JSC_STRING}, {"number", JSC_NUMBER},   {"integer", JSC_INTEGER},
};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])

static int keyword_role(const char *name) {
    for (size_t i = 0; i < sizeof KEYWORDS / sizeof KEYWORDS[0]; i++)
        if (strcmp(KEYWORDS[i].name, name) == 0) return KEYWORDS[i].role;
    return -2;
}

/* "string/null" for type bits (a thread's buffer: messages only). */
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

bool jsc_keywords_known(jsc *c, json_t *schema) {
    const char *key;
    json_t *value;
    json_object_foreach(schema, key, value) {
        (void)value;
        if (keyword_role(key) == -2) return jsc_fail(c, "unsupported keyword '%s'", key);
        if (strcmp(key, "$id") == 0 && schema != c->root)
            return jsc_fail(c, "'$id' is supported at the root only ($ref resolves within the whole document)");
    }
    return true;
}

bool jsc_only_with(jsc *c, json_t *schema, const char *key) {
    const char *other;
    json_t *value;
    json_object_foreach(schema, other, value) {
        (void)value;
        if (keyword_role(other) == ANNOTATION || strcmp(other, key) == 0) continue;
        if (strcmp(other, "type") == 0 && strcmp(key, "$ref") != 0) continue; /* jsc_type_beside's */
        return jsc_fail(c, "'%s' beside '%s' is not supported (llama.cpp's converter reads '%s' alone: put all "
                        "constraints inside one schema)", other, key, key);
    }
    return true;
}

/* ---- the kind -------------------------------------------------------------------------------- */

static bool type_bit(jsc *c, json_t *name, int *types) {
    if (!json_is_string(name)) return jsc_fail(c, "'type' must be a string or an array of strings");
    for (size_t i = 0; i < N_TYPES; i++) {
        if (strcmp(json_string_value(name), TYPES[i].name) != 0) continue;
        *types |= TYPES[i].bit;
        return true;
    }
    return jsc_fail(c, "unknown type '%s' (object, array, string, number, integer, boolean or null)",
                    json_string_value(name));
}

/* The kind without `type`, in llama.cpp's converter's order; 0: any value. */
static int implied_kind(json_t *schema) {
    json_t *additional = json_object_get(schema, "additionalProperties");
    if (json_object_get(schema, "properties") || (additional && !json_is_true(additional))) return JSC_OBJECT;
    if (json_object_get(schema, "items") || json_object_get(schema, "prefixItems")) return JSC_ARRAY;
    static const char *const STRING_KEYS[] = {"pattern", "minLength", "maxLength", "format"};
    for (size_t i = 0; i < 4; i++)
        if (json_object_get(schema, STRING_KEYS[i])) return JSC_STRING;
    return 0;
}

/* The types `type` names, else the kind the keywords imply; 0 = any. */
static bool read_types(jsc *c, json_t *schema, int *types) {
    *types = 0;
    json_t *type = json_object_get(schema, "type");
    if (!type) {
        *types = implied_kind(schema);
        return true;
    }
    if (!json_is_array(type)) return type_bit(c, type, types);
    if (json_array_size(type) == 0) return jsc_fail(c, "'type' must not be an empty array");
    for (size_t i = 0; i < json_array_size(type); i++)
        if (!type_bit(c, json_array_get(type, i), types)) return false;
    return true;
}

static int value_type(json_t *v) {
    switch (json_typeof(v)) {
    case JSON_NULL: return JSC_NULL;
    case JSON_TRUE:
    case JSON_FALSE: return JSC_BOOLEAN;
    case JSON_OBJECT: return JSC_OBJECT;
    case JSON_ARRAY: return JSC_ARRAY;
    case JSON_STRING: return JSC_STRING;
    case JSON_INTEGER: return JSC_INTEGER;
    case JSON_REAL: return JSC_NUMBER;
    }
    return 0;
}

int jsc_kind(json_t *schema) {
    json_t *values = json_object_get(schema, "enum"), *constant = json_object_get(schema, "const");
    if (constant) return value_type(constant);
    int types = 0;
    for (size_t i = 0; i < json_array_size(values); i++) types |= value_type(json_array_get(values, i));
    if (values) return types;
    if (json_object_get(schema, "$ref") || json_object_get(schema, "anyOf") || json_object_get(schema, "oneOf") ||
        json_object_get(schema, "allOf"))
        return 0;
    json_t *type = json_object_get(schema, "type");
    if (!type) return implied_kind(schema);
    for (size_t i = 0; i < N_TYPES; i++) {
        const char *name = TYPES[i].name;
        bool listed = json_is_string(type) && strcmp(json_string_value(type), name) == 0;
        for (size_t k = 0; !listed && k < json_array_size(type); k++)
            listed = json_is_string(json_array_get(type, k)) && strcmp(json_string_value(json_array_get(type, k)), name) == 0;
        if (listed) types |= TYPES[i].bit;
    }
    return types;
}

const char *jsc_type_names(int types) { return type_names(types); }

/* A keyword of a kind the schema is not would be dropped: refused instead. */
static bool check_keywords_apply(jsc *c, json_t *schema, int types) {
    const char *values = json_object_get(schema, "enum") ? "enum" : json_object_get(schema, "const") ? "const" : NULL;
    const char *key;
    json_t *value;
    json_object_foreach(schema, key, value) {
        int role = keyword_role(key);
        if (role <= GENERAL) continue;
        if (values) return jsc_fail(c, "'%s' beside '%s' is not supported", key, values);
        if (types == 0 && role == JSC_OBJECT && json_is_true(value)) continue; /* additionalProperties: true */
        if (types == 0)
            return jsc_fail(c, "'%s' needs \"type\": \"%s\" (without it llama.cpp's converter ignores it)", key,
                            type_names(role));
        if (role == JSC_INTEGER && (types & JSC_NUMBER))
            return jsc_fail(c, "'%s' on type number is not supported (bounds are supported on integers only)", key);
        if (!(role & types)) return jsc_fail(c, "keyword '%s' does not apply to type %s", key, type_names(types));
    }
    return true;
}

/* ---- enum, const ----------------------------------------------------------------------------- */

static bool has_type(json_t *v, int types) {
    switch (json_typeof(v)) {
    case JSON_NULL: return types & JSC_NULL;
    case JSON_TRUE:
    case JSON_FALSE: return types & JSC_BOOLEAN;
    case JSON_OBJECT: return types & JSC_OBJECT;
    case JSON_ARRAY: return types & JSC_ARRAY;
    case JSON_STRING: return types & JSC_STRING;
    case JSON_INTEGER: return types & (JSC_INTEGER | JSC_NUMBER);
    case JSON_REAL: return (types & JSC_NUMBER) || ((types & JSC_INTEGER) && json_real_value(v) == floor(json_real_value(v)));
    }
    return false;
}

/* llama.cpp's converter writes every value of enum/const and ignores `type` beside them: a value
 * of another type would be allowed, so it is refused. */
static bool check_values(jsc *c, json_t *schema, int types) {
    json_t *values = json_object_get(schema, "enum"), *constant = json_object_get(schema, "const");
    if (values && constant) return jsc_fail(c, "'enum' beside 'const' is not supported");
    if (values && (!json_is_array(values) || json_array_size(values) == 0))
        return jsc_fail(c, "'enum' must be a non-empty array");
    if ((!values && !constant) || !json_object_get(schema, "type")) return true;
    size_t n = values ? json_array_size(values) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *v = values ? json_array_get(values, i) : constant;
        if (has_type(v, types)) continue;
        if (!values) return jsc_fail(c, "'const' is not of the type %s", type_names(types));
        return jsc_fail(c, "'enum' value %zu is not of the type %s (llama.cpp's converter would allow it)", i,
                        type_names(types));
    }
    return true;
}

/* ---- counts ---------------------------------------------------------------------------------- */

/* A count (minItems, ...) into *out; absent leaves *out. */
static bool read_count(jsc *c, json_t *schema, const char *key, json_int_t *out) {
    json_t *v = json_object_get(schema, key);
    if (!v) return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0) return jsc_fail(c, "'%s' must be a non-negative integer", key);
    if (json_integer_value(v) > JSC_MAX_REPEAT)
        return jsc_fail(c, "'%s' %" JSON_INTEGER_FORMAT " is above %d, the most repetitions llama.cpp's grammars allow",
                        key, json_integer_value(v), JSC_MAX_REPEAT);
    *out = json_integer_value(v);
    return true;
}

static bool check_counts(jsc *c, json_t *schema, const char *min_key, const char *max_key) {
    json_int_t lo = 0, hi = -1;
    if (!read_count(c, schema, min_key, &lo) || !read_count(c, schema, max_key, &hi)) return false;
    if (hi >= 0 && lo > hi)
        return jsc_fail(c, "'%s' %" JSON_INTEGER_FORMAT " is above '%s' %" JSON_INTEGER_FORMAT, min_key, lo, max_key, hi);
    return true;
}

/* ---- objects --------------------------------------------------------------------------------- */

/* llama.cpp excludes the declared names from the extra keys with character classes built from
 * their raw bytes: a name with a quote or backslash (escaped in JSON), a class's ] - ^ or a
 * control character would build a wrong class. */
static bool check_excludable_name(jsc *c, const char *name) {
    size_t len = strlen(name);
    bool plain = !strpbrk(name, "\"\\]-^");
    for (size_t i = 0; plain && i < len; i++) plain = (unsigned char)name[i] >= 0x20;
    if (plain) return true;
    return jsc_fail(c, "property name '%.64s' is not supported beside additionalProperties (llama.cpp's converter cannot "
                    "keep it out of the extra keys: no quote, backslash, ']', '-', '^' or control character)", name);
}

static bool check_required(jsc *c, json_t *schema, json_t *properties, size_t *n_required) {
    json_t *required = json_object_get(schema, "required");
    *n_required = 0;
    if (!required) return true;
    if (!json_is_array(required)) return jsc_fail(c, "'required' must be an array of property names");
    for (size_t i = 0; i < json_array_size(required); i++) {
        const char *name = json_string_value(json_array_get(required, i));
        if (!name) return jsc_fail(c, "'required' must be an array of property names");
        if (!json_object_get(properties, name))
            return jsc_fail(c, "required property '%s' is not declared in 'properties'", name);
    }
    *n_required = json_array_size(required);
    return true;
}

/* The optional properties' cost in llama.cpp's converter (see JSC_MAX_OPTIONAL). */
static bool charge_optional(jsc *c, size_t n_optional) {
    if (c->rewalk) return true;
    c->optional_cost += (double)n_optional * (double)n_optional * (double)n_optional;
    double limit = (double)JSC_MAX_OPTIONAL * JSC_MAX_OPTIONAL * JSC_MAX_OPTIONAL;
    if (c->optional_cost <= limit) return true;
    return jsc_fail(c, "too many optional properties: llama.cpp's converter takes time with the cube of an object's "
                    "optional ones (%zu here; at most %d in one object, fewer across several): mark more 'required'",
                    n_optional, JSC_MAX_OPTIONAL);
}

static bool check_object(jsc *c, json_t *schema) {
    json_t *properties = json_object_get(schema, "properties");
    json_t *additional = json_object_get(schema, "additionalProperties");
    if (properties && !json_is_object(properties)) return jsc_fail(c, "'properties' must be an object");
    if (json_object_size(properties) > JSC_MAX_PROPERTIES)
        return jsc_fail(c, "'properties' with %zu entries is not supported (at most %d per object)",
                        json_object_size(properties), JSC_MAX_PROPERTIES);
    if (additional && !json_is_boolean(additional) && !json_is_object(additional))
        return jsc_fail(c, "'additionalProperties' must be a boolean or a schema");
    size_t n_required;
    if (!check_required(c, schema, properties, &n_required)) return false;
    bool extras = json_is_object(additional) || json_is_true(additional);
    const char *name;
    json_t *value;
    json_object_foreach(properties, name, value) {
        (void)value;
        if (strlen(name) > JSC_MAX_NAME)
            return jsc_fail(c, "property name '%.64s...' is longer than %d bytes (llama.cpp's converter names rules after "
                            "it with std::regex, which recurses per character)", name, JSC_MAX_NAME);
        if (extras && !check_excludable_name(c, name)) return false;
    }
    if (!charge_optional(c, json_object_size(properties) - n_required + (extras ? 1 : 0))) return false;
    if (json_is_object(additional) && !jsc_child(c, schema, "additionalProperties")) return false;
    json_object_foreach(properties, name, value) {
        size_t saved = jsc_path_key(c, "properties");
        jsc_path_key(c, name);
        bool ok = c->schema(c, value);
        jsc_path_pop(c, saved);
        if (!ok) return false;
    }
    return true;
}

/* ---- arrays ---------------------------------------------------------------------------------- */

static bool check_tuple(jsc *c, json_t *schema, const char *key) {
    json_t *items = json_object_get(schema, key);
    if (json_object_get(schema, "minItems") || json_object_get(schema, "maxItems"))
        return jsc_fail(c, "'minItems'/'maxItems' beside a tuple ('%s' as an array) is not supported: it has exactly its "
                        "items", key);
    for (size_t i = 0; i < json_array_size(items); i++) {
        size_t saved = jsc_path_index(c, key, i);
        bool ok = c->schema(c, json_array_get(items, i));
        jsc_path_pop(c, saved);
        if (!ok) return false;
    }
    return true;
}

/* items or prefixItems: a schema for every item (llama.cpp reads prefixItems so too), or an array
 * of them, a tuple. */
static bool check_array(jsc *c, json_t *schema) {
    json_t *items = json_object_get(schema, "items"), *prefix = json_object_get(schema, "prefixItems");
    if (items && prefix) return jsc_fail(c, "'prefixItems' beside 'items' is not supported (llama.cpp's converter "
                                         "would ignore it)");
    const char *key = items ? "items" : "prefixItems";
    json_t *list = items ? items : prefix;
    if (json_is_boolean(list))
        return jsc_fail(c, "'%s' as a boolean is not supported (llama.cpp's converter takes schemas only): leave it "
                        "out, or give \"maxItems\": 0", key);
    if (json_is_array(list)) return check_tuple(c, schema, key);
    if (list && !json_is_object(list)) return jsc_fail(c, "'%s' must be a schema or an array of schemas", key);
    if (!check_counts(c, schema, "minItems", "maxItems")) return false;
    return !list || jsc_child(c, schema, key);
}

/* ---- strings --------------------------------------------------------------------------------- */

static bool known_format(const char *format) {
    static const char *const FORMATS[] = {"date", "time", "date-time", "uuid", "uuid1", "uuid2", "uuid3", "uuid4", "uuid5"};
    for (size_t i = 0; i < sizeof FORMATS / sizeof FORMATS[0]; i++)
        if (strcmp(format, FORMATS[i]) == 0) return true;
    return false;
}

/* llama.cpp's converter translates a pattern it can into a grammar and, for one it cannot, warns
 * and accepts any string: the pattern alone is converted here to tell (its fallback is the rule
 * "root ::= string"). */
static bool check_pattern(jsc *c, json_t *schema) {
    json_t *pattern = json_object_get(schema, "pattern");
    if (!json_is_string(pattern)) return jsc_fail(c, "'pattern' must be a string");
    const char *p = json_string_value(pattern);
    size_t len = strlen(p);
    if (len < 2 || p[0] != '^' || p[len - 1] != '$')
        return jsc_fail(c, "pattern '%.64s' must be anchored with '^' and '$' (llama.cpp's converter takes no other)", p);
    json_t *alone = json_pack("{s:s,s:O}", "type", "string", "pattern", pattern);
    char *text = alone ? json_dumps(alone, JSON_COMPACT) : NULL;
    json_decref(alone);
    if (!text) return jsc_oom(c);
    char *why = NULL, *grammar = specd_json_schema_grammar(text, &why);
    free(text);
    bool ok = grammar && strncmp(grammar, "root ::= string\n", 16) != 0 && !strstr(grammar, "\nroot ::= string\n");
    if (!ok)
        jsc_fail(c, "pattern '%.64s' is not supported: %s", p,
                 why ? why : "llama.cpp's converter cannot express it (it would accept any string)");
    specd_free(grammar);
    specd_free(why);
    return ok;
}

static bool check_string(jsc *c, json_t *schema) {
    json_t *format = json_object_get(schema, "format");
    bool lengths = json_object_get(schema, "minLength") || json_object_get(schema, "maxLength");
    if (format && !json_is_string(format)) return jsc_fail(c, "'format' must be a string");
    if (format && !known_format(json_string_value(format)))
        return jsc_fail(c, "unsupported format '%s' (supported: date, time, date-time, uuid)", json_string_value(format));
    if (format && lengths) return jsc_fail(c, "'format' beside 'minLength'/'maxLength' is not supported");
    if (json_object_get(schema, "pattern")) {
        if (format || lengths)
            return jsc_fail(c, "'pattern' beside '%s' is not supported (llama.cpp's converter reads the pattern alone)",
                            format ? "format" : "minLength'/'maxLength");
        return check_pattern(c, schema);
    }
    return check_counts(c, schema, "minLength", "maxLength");
}

/* ---- integers -------------------------------------------------------------------------------- */

/* An integer bound as llama.cpp's converter rounds it (inwards; an exclusive one moves one further)
 * into *bound; absent leaves it. */
static bool read_bound(jsc *c, json_t *schema, const char *key, bool is_min, bool exclusive, double *bound) {
    json_t *v = json_object_get(schema, key);
    if (!v) return true;
    if (json_is_boolean(v))
        return jsc_fail(c, "'%s' as a boolean (draft 4) is not supported: give the bound itself as a number", key);
    if (!json_is_number(v)) return jsc_fail(c, "'%s' must be a number", key);
    double d = json_number_value(v);
    if (fabs(d) > (double)JSC_INTEGER_LIMIT)
        return jsc_fail(c, "'%s' is beyond 15 digits, where llama.cpp's converter builds no grammar", key);
    *bound = exclusive ? (is_min ? floor(d) + 1 : ceil(d) - 1) : (is_min ? ceil(d) : floor(d));
    return true;
}

static bool check_integer(jsc *c, json_t *schema) {
    if (json_object_get(schema, "minimum") && json_object_get(schema, "exclusiveMinimum"))
        return jsc_fail(c, "'exclusiveMinimum' beside 'minimum' is not supported (llama.cpp's converter reads one)");
    if (json_object_get(schema, "maximum") && json_object_get(schema, "exclusiveMaximum"))
        return jsc_fail(c, "'exclusiveMaximum' beside 'maximum' is not supported (llama.cpp's converter reads one)");
    double lo = -(double)JSC_INTEGER_LIMIT, hi = (double)JSC_INTEGER_LIMIT;
    if (!read_bound(c, schema, "minimum", true, false, &lo) || !read_bound(c, schema, "exclusiveMinimum", true, true, &lo) ||
        !read_bound(c, schema, "maximum", false, false, &hi) || !read_bound(c, schema, "exclusiveMaximum", false, true, &hi))
        return false;
    if (lo > hi) return jsc_fail(c, "no integer lies within the bounds");
    if (fabs(lo) > (double)JSC_INTEGER_LIMIT || fabs(hi) > (double)JSC_INTEGER_LIMIT)
        return jsc_fail(c, "an exclusive bound is beyond 15 digits, where llama.cpp's converter builds no grammar");
    return true;
}

/* ---- one typed schema ------------------------------------------------------------------------ */

bool jsc_typed(jsc *c, json_t *schema) {
    int types;
    if (!read_types(c, schema, &types) || !check_values(c, schema, types) || !check_keywords_apply(c, schema, types))
        return false;
    if (json_object_get(schema, "enum") || json_object_get(schema, "const")) return true;
    return (!(types & JSC_OBJECT) || check_object(c, schema)) && (!(types & JSC_ARRAY) || check_array(c, schema)) &&
           (!(types & JSC_STRING) || check_string(c, schema)) && (!(types & JSC_INTEGER) || check_integer(c, schema));
}
