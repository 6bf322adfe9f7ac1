/* json_schema.h - JSON Schema -> GBNF (llama.cpp's grammar format), for the OpenAI-compatible
 * `response_format` and llama-server's `json_schema` request fields.
 *
 * The grammar generates JSON the way llama.cpp's json-schema-to-grammar does, so output looks the
 * same as llama-server's: object properties in the order the schema declares them, compact
 * literals for enum/const, whitespace only after "{", "[", ",", ":" and before "}", "]" (none,
 * one space, or one or two newlines and up to 20 spaces or tabs: bounded, so a model cannot pad
 * forever), numbers with at most 16 integral and 16 fractional digits. The start symbol is "root"
 * and matches the JSON value only (no whitespace before or after it).
 *
 * Supported keywords:
 *   type (a name or a list of them: object, array, string, number, integer, boolean, null),
 *   enum, const (values are matched in their compact JSON form; with `type` they are filtered by it),
 *   properties, required, additionalProperties (absent: none when `properties` is given, any when it
 *     is not; false: none; true or a schema: extra keys after the declared ones, never one of
 *     the declared names),
 *   items (a schema or a boolean), minItems, maxItems,
 *   minLength, maxLength (in characters), format (date, time, date-time, uuid),
 *   minimum, maximum, exclusiveMinimum, exclusiveMaximum (integers only, within 16 digits),
 *   anyOf, oneOf (as anyOf: exclusivity is not enforced), allOf with a single schema,
 *   $ref to "#" or a JSON pointer into the same document ("#/$defs/x", "#/definitions/x", ...),
 *     recursion included, $defs, definitions,
 *   the schemas `true` and `{}` (any JSON value),
 *   annotations with no effect: title, description, default, examples, $schema, $comment,
 *     deprecated, readOnly, writeOnly, and $id at the root.
 * Anything else is an error naming the keyword and where it is ("unsupported keyword
 * 'patternProperties' at $.properties.a"), never silently ignored: pattern, patternProperties,
 * propertyNames, min/maxProperties, dependentRequired, prefixItems, contains, uniqueItems, not,
 * if/then/else, multipleOf, bounds on `number`, other formats, ... So are combinations the
 * grammar cannot express: $ref, anyOf or oneOf beside constraints of their own, a keyword that
 * applies to none of the schema's types, `required` naming an undeclared property, left recursion,
 * counts above 2000 (llama.cpp's repetition limit), more than 1000 properties in one object. Without `type`, the keywords present decide
 * it (properties -> object, items -> array, minLength -> string, ...); with none, any value. */
#ifndef SPECD_JSON_SCHEMA_H
#define SPECD_JSON_SCHEMA_H

#include "rpc_internal.h"

#include <jansson.h>
#include <stdbool.h>

/* Converts `schema` (borrowed) into a GBNF grammar. On success returns true and *gbnf_out (heap,
 * free with free()). On failure returns false and sets *err: -32602 with err->field = `field` and
 * a message "FIELD: what is wrong at $.json.path" (or -32603 when out of memory). `field` names
 * the schema in the request, e.g. "response_format.json_schema.schema"; NULL means "json_schema". */
bool specd_json_schema_to_grammar(json_t *schema, const char *field, char **gbnf_out, rpc_error *err);

/* The grammar of response_format {"type": "json_object"}: any JSON object (as the schema
 * {"type": "object"}). */
bool specd_json_object_grammar(char **gbnf_out, rpc_error *err);

#endif
