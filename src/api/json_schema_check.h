/* json_schema_check.h - the checks a JSON Schema passes before llama.cpp's converter sees it
 * (json_schema.c). llama.cpp's converter drops what it does not know without a word (an unknown
 * keyword, a format, a bound on a number, a keyword beside $ref or anyOf, a `type` beside an
 * enum, ...), so the model would be free where the schema meant to bind it; here each such schema
 * is refused with a message naming the keyword and where it is. The checks also bound what the
 * converter would otherwise pay for: the depth it recurses to (through $refs too), the schemas a
 * $ref expands to, the optional properties it combines (its time grows with their cube), counts
 * above llama.cpp's 2000 repetitions, integer bounds wider than its 15-digit ranges.
 *
 * What passes:
 *   type (a name or a list: object, array, string, number, integer, boolean, null), enum, const
 *     (values of the given type only), $ref to a JSON pointer into the document ("#/$defs/x",
 *     recursion included), anyOf, oneOf (as anyOf), allOf of objects (merged, every property made
 *     required, as llama.cpp does) or of enums (their common values),
 *   properties, required (declared names), additionalProperties,
 *   items (a schema, or an array of them: a tuple), prefixItems (a tuple), minItems, maxItems,
 *   minLength, maxLength, format (date, time, date-time, uuid, uuid1-5), pattern (anchored ^...$ and
 *     within what llama.cpp's converter translates), minimum, maximum, exclusiveMinimum,
 *     exclusiveMaximum (integers),
 *   annotations: title, description, default, examples, $schema, $comment, deprecated, readOnly,
 *     writeOnly, $defs, definitions, and $id at the root.
 * Without `type`, the keywords decide the kind as llama.cpp's converter does (properties -> object,
 * items -> array, minLength/pattern/format -> string, else any value), and a keyword of another kind
 * is refused rather than ignored. */
#ifndef SPECD_JSON_SCHEMA_CHECK_H
#define SPECD_JSON_SCHEMA_CHECK_H

#include "api.h"

#include <jansson.h>
#include <stdbool.h>

/* True when `schema` (borrowed) may go to llama.cpp's converter; else false with *err: -32602,
 * field `field`, "FIELD: what is wrong at $.json.path". */
bool json_schema_check(json_t *schema, const char *field, api_error *err);

#endif
