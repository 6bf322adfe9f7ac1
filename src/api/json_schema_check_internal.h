/* json_schema_check_internal.h - what the files of the schema checks share: the walk over the
 * schemas (json_schema_check.c: $ref, anyOf, allOf, depth), the checks of one schema's keywords
 * (json_schema_keywords.c: types, enum/const, objects, arrays, strings, integers), and the error
 * and path both use (json_schema_check_path.c). */
#ifndef SPECD_JSON_SCHEMA_CHECK_INTERNAL_H
#define SPECD_JSON_SCHEMA_CHECK_INTERNAL_H

#include "json_schema_check.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Deeper is refused before llama.cpp's converter recurses that far (on an HTTP worker's stack);
 * each $ref followed counts as a level, as it does in the converter. */
#define JSC_MAX_DEPTH 128
/* Schemas the walk visits, a $ref's target once per $ref: a document whose $refs fan out would
 * otherwise expand beyond any bound. */
#define JSC_MAX_VISITS 100000
/* Different $refs one schema may name (each is looked up among those met before). */
#define JSC_MAX_REFS 1000
/* Largest count of items or characters: llama.cpp's grammar parser refuses larger repetitions. */
#define JSC_MAX_REPEAT 2000
/* Most properties one object may declare. */
#define JSC_MAX_PROPERTIES 1000
/* llama.cpp's converter builds an object's optional properties in time that grows with the cube of
 * their count (1000 take a second): the sum of those cubes over the document is bounded, as if one
 * object had 256 (about 35 ms). */
#define JSC_MAX_OPTIONAL 256
/* Longest property name, and $ref: llama.cpp's converter names its rules after them through
 * std::regex, whose matcher recurses once per character of a run of non-alphanumerics (a name of
 * 50000 dots overflows an 8 MB stack, llama-server's too). */
#define JSC_MAX_NAME 256
#define JSC_MAX_REF 512
/* Integer bounds within 15 digits: at 16 llama.cpp writes repetitions like {16,15}, no grammar. */
#define JSC_INTEGER_LIMIT 999999999999999LL

enum {
    JSC_NULL = 1,
    JSC_BOOLEAN = 2,
    JSC_OBJECT = 4,
    JSC_ARRAY = 8,
    JSC_STRING = 16,
    JSC_NUMBER = 32,
    JSC_INTEGER = 64,
};

/* The place of a schema in the document, for messages: "$.properties.a", cut short when long. */
typedef struct jsc_path {
    char text[256];
    size_t len;
} jsc_path;

typedef struct jsc {
    json_t *root;
    const char *field;
    api_error *err;
    bool failed;
    jsc_path path; /* of the schema being checked */
    int depth;
    long visits;
    double optional_cost; /* sum of each object's optional properties, cubed */
    int rewalk;           /* > 0 inside a $ref target checked before: its costs are counted already */
    const char *on_path[JSC_MAX_DEPTH]; /* the $refs being followed, outermost first */
    int n_on_path;
    const char **walked; /* $refs whose target was checked (borrowed strings of the document) */
    size_t n_walked, cap_walked;
    /* Checks one schema (any JSON value) where the path points: json_schema_check.c's walk, which
     * json_schema_keywords.c calls for the schemas inside a schema. */
    bool (*schema)(struct jsc *c, json_t *schema);
} jsc;

/* Sets the error "FIELD: MESSAGE at PATH" (the first error wins) and returns false. */
bool jsc_fail(jsc *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Out of memory: the internal error, and false. */
bool jsc_oom(jsc *c);

/* Appends ".key" (or ["key"] for a key that is not a plain name) or "[i]" to the path; returns the
 * length to restore with jsc_path_pop. */
size_t jsc_path_key(jsc *c, const char *key);
size_t jsc_path_index(jsc *c, const char *key, size_t index);
void jsc_path_pop(jsc *c, size_t saved);

/* The schema under `key` of `parent`, checked with the path at .key. */
bool jsc_child(jsc *c, json_t *parent, const char *key);
/* The path's own appends: BEFORE TEXT AFTER (cut at the buffer's end), and .key or ["key"]. */
void jsc_path_append(jsc_path *path, const char *before, const char *text, const char *after);
void jsc_path_append_key(jsc_path *path, const char *key);

/* json_schema_keywords.c */
/* Every key of the schema is a keyword we know (and $id only at the root). */
bool jsc_keywords_known(jsc *c, json_t *schema);
/* Fails when a keyword other than `key` and the annotations sits beside it (llama.cpp's converter
 * reads `key` alone: $ref, anyOf, oneOf, allOf); a `type` beside a combination is left to
 * json_schema_check.c, which allows it where every part is of that type anyway. */
bool jsc_only_with(jsc *c, json_t *schema, const char *key);
/* The types a schema's values may have, as declared, implied by its keywords (llama.cpp's order)
 * or by its enum/const; 0 when any value or when it is a $ref or a combination. */
int jsc_kind(json_t *schema);
/* "string/null" for type bits (a thread's buffer: messages only). */
const char *jsc_type_names(int types);
/* A schema with neither $ref nor a combination: its type, values and type-specific keywords. */
bool jsc_typed(jsc *c, json_t *schema);

#endif
