/* json_schema_internal.h - what the files of the JSON Schema -> GBNF converter share: a growable
 * text buffer, a string -> index map, the converter's state, and its rule table. See json_schema.h
 * for what is supported and why. */
#ifndef SPECD_JSON_SCHEMA_INTERNAL_H
#define SPECD_JSON_SCHEMA_INTERNAL_H

#include "json_schema.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- text buffer: every append is checked once, at the end, through `oom` -------------------- */
typedef struct js_buf {
    char *data; /* NUL-terminated while not oom */
    size_t len, cap;
    bool oom;
} js_buf;

void js_buf_append(js_buf *b, const char *s);
void js_buf_append_n(js_buf *b, const char *s, size_t n);
void js_buf_appendf(js_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void js_buf_truncate(js_buf *b, size_t len);
/* The buffer's text, handed over (the buffer is empty afterwards); NULL when out of memory. */
char *js_buf_take(js_buf *b);
void js_buf_free(js_buf *b);

/* A GBNF string literal "..." matching exactly these bytes (UTF-8 passes through). */
void js_buf_literal(js_buf *b, const char *bytes, size_t n);
/* cp as UTF-8. */
void js_buf_utf8(js_buf *b, uint32_t cp);
/* One code point inside a character class [...], escaped where GBNF would read it otherwise. */
void js_buf_class_char(js_buf *b, uint32_t cp);

/* ---- string -> int map (open addressing), for rule names and $ref memos ------------------------ */
typedef struct js_map {
    const char **keys; /* borrowed: the strings live as long as the map's user keeps them */
    int *values;
    size_t cap, count;
} js_map;

/* The value stored for key, or -1. */
int js_map_get(const js_map *m, const char *key);
/* Stores key -> value (key borrowed). False when out of memory. */
bool js_map_put(js_map *m, const char *key, int value);
void js_map_free(js_map *m);

/* ---- the converter ---------------------------------------------------------------------------- */
typedef struct js_ref {
    char *ref;      /* the $ref text, as written */
    int rule;       /* index of its rule in the table */
    bool resolving; /* its target is being converted right now */
    int guard;      /* js_conv.consumed when resolving began (left recursion check) */
} js_ref;

typedef struct js_conv {
    json_t *root;
    /* Rules in output order; names[i] ::= bodies[i]. Index 0 is "root". */
    char **names;
    char **bodies; /* NULL while a $ref target is being converted */
    size_t n_rules, cap_rules;
    js_map rule_index; /* name -> index */
    js_map body_index; /* body -> index of the first rule with it (bodies set at creation only) */
    js_ref *refs;
    size_t n_refs, cap_refs;
    js_map ref_index;
    js_buf path; /* "$.properties.a" of the schema being converted, for messages */
    int depth;
    /* Incremented while converting what follows a literal "{" or "[": a $ref met again at the
     * same value is a left recursion, which GBNF cannot express. */
    int consumed;
    const char *field;
    rpc_error *err;
    bool failed;
    /* The name of a rule matching a schema (json_schema.c's visitor), for the schemas an object
     * holds (json_schema_object.c): the two visit each other, through this. */
    const char *(*visit_rule)(struct js_conv *c, json_t *schema, const char *hint);
} js_conv;

/* Sets the error "FIELD: MESSAGE at PATH" (once: the first error wins) and returns NULL, so a
 * converter step can `return js_fail(...)`. */
const char *js_fail(js_conv *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Out of memory: sets the internal error and returns NULL. */
const char *js_oom(js_conv *c);

/* Adds `name_hint ::= body` under a name not used yet (the hint, else hint-2, hint-3, ...), taking
 * body (may be NULL for a placeholder filled later with js_set_body). Returns the stored name, or
 * NULL (error set; body freed). *index receives the rule's index when not NULL. */
const char *js_add_rule(js_conv *c, const char *name_hint, char *body, int *index);
void js_set_body(js_conv *c, int index, char *body);
/* The rule for a builtin JSON piece ("value", "object", "array", "string", "char", "number",
 * "integer", "boolean", "null", "ws", "date", "time", "date-time", "uuid" and the quoted format
 * strings "date-string", ...), added once with the rules it uses. NULL for an unknown name. */
const char *js_primitive(js_conv *c, const char *name);
/* Adds a rule for the buffer's text (taken). Returns its name or NULL. */
const char *js_add_rule_buf(js_conv *c, const char *name_hint, js_buf *body);

/* The grammar text: root first, then each rule before the ones it names first, unused rules left
 * out (heap; NULL when out of memory). */
char *js_format_rules(js_conv *c);

/* A rule name hint "PARENT-PART" with PART cut down to GBNF name characters. Heap; NULL on OOM. */
char *js_hint(const char *parent, const char *part);

/* ---- shared by the visitors (json_schema.c, json_schema_object.c), in json_schema_rules.c ------ */

/* The path of messages: appends ".key" (or ["key"]) and returns the length to restore. */
size_t js_path_push(js_conv *c, const char *key);
void js_path_pop(js_conv *c, size_t saved);
/* ".key", or ["key"] for a key that is not a plain name. */
void js_path_append_key(js_buf *path, const char *key);

/* json_schema_object.c: the expression of an object schema (properties, required,
 * additionalProperties). */
char *js_visit_object(js_conv *c, json_t *schema, const char *hint);
/* A builtin rule's name as a heap expression. */
char *js_primitive_expr(js_conv *c, const char *name);
/* The buffer's text as an expression (taken); NULL with the error set when out of memory. */
char *js_take_expr(js_conv *c, js_buf *b);
/* The JSON text of a string ("a\"b" with quotes and escapes). */
void js_encode_string(js_buf *b, const char *s, size_t n);

/* Appends a GBNF expression for the integers in [lo, hi] (json_schema_int.c). |lo|, |hi| must be
 * below 10^16. */
void js_integer_range(js_buf *b, int64_t lo, int64_t hi);

/* Largest count of items or characters a bound may give: llama.cpp's grammar parser refuses
 * repetitions above 2000 (and would quietly drop a larger maximum). */
#define JS_MAX_REPEAT 2000
/* Most properties one object schema may declare (json_schema_object.c says why). */
#define JS_MAX_PROPERTIES 1000
/* Integers have at most 16 digits (as in llama.cpp's converter), so a model cannot write digits
 * forever; integer bounds must lie within that. */
#define JS_MAX_INTEGER_DIGITS 16
#define JS_INTEGER_LIMIT 9999999999999999LL

#endif
