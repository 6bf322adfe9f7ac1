/* json_schema.h - JSON Schema -> GBNF (llama.cpp's grammar format), for the OpenAI-compatible
 * `response_format` and llama-server's `json_schema` request fields.
 *
 * The grammar is llama.cpp's, from its common converter (json_schema_to_grammar, through
 * specd_json_schema_grammar): the grammar llama-server builds for the same schema, with one rule
 * written for valid UTF-8 (specd.h says which). Output looks as llama-server's: an object's
 * required properties first, then its optional ones, each in the order the schema declares them;
 * compact literals for enum/const; bounded whitespace; integers of at most 16 digits. The start
 * symbol is "root" and matches the JSON value only.
 *
 * Before the converter the schema passes json_schema_check.h's checks: where llama.cpp would drop
 * a keyword without a word (an unknown one, an unknown format, a keyword beside $ref, ...), the
 * request is refused with the keyword and its place ("unsupported keyword 'not' at
 * $.properties.a"); they also bound the converter's depth and work. */
#ifndef SPECD_JSON_SCHEMA_H
#define SPECD_JSON_SCHEMA_H

#include "api.h"

#include <jansson.h>
#include <stdbool.h>

/* Converts `schema` (borrowed) into a GBNF grammar. On success returns true and *gbnf_out (heap,
 * free with free()). On failure returns false and sets *err: -32602 with err->field = `field` and
 * a message "FIELD: what is wrong at $.json.path" (or -32603 when out of memory). `field` names
 * the schema in the request, e.g. "response_format.json_schema.schema"; NULL means "json_schema". */
bool specd_json_schema_to_grammar(json_t *schema, const char *field, char **gbnf_out, api_error *err);

/* The grammar of response_format {"type": "json_object"}: any JSON object (as the schema
 * {"type": "object"}). */
bool specd_json_object_grammar(char **gbnf_out, api_error *err);

#endif
