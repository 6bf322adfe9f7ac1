/* test_json_schema_llama.c - the grammar the JSON API builds for a JSON Schema (src/api/json_schema.c:
 * our checks, jansson's text of the schema, llama.cpp's converter) is the grammar llama-server builds
 * for the same schema, but for the one rule written for valid UTF-8 (specd_json_schema_grammar):
 *   - the schemas of test_json_schema.c, against json_schema_to_grammar called on the schema's own
 *     text as llama-server calls it (json_schema_reference.cpp);
 *   - llama.cpp's own test cases (tests/data/llama_json_schema_cases.json, from its
 *     tests/test-json-schema-to-grammar.cpp), against the grammars that test expects; those our
 *     checks refuse on purpose are listed below with why.
 *
 *   test_json_schema_llama CASES_JSON */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "api/json_schema.h"
#include "specd.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *reference_grammar(const char *schema_text, char **error); /* json_schema_reference.cpp */

static const char *cases_path;

/* llama.cpp's string character rule, and ours (src/engine/json_schema_grammar.cpp). */
static const char LLAMA_CHAR[] = "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})";
static const char OUR_CHAR[] =
    "char ::= [\\x20-\\x21\\x23-\\x5B\\x5D-\\x7E\\u0080-\\uD7FF\\uE000-\\U0010FFFF] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})";

/* The grammar as llama.cpp's test compares it: no blanks around it or at the start of a line. */
static char *trim(const char *text) {
    char *out = malloc(strlen(text) + 1), *o = out;
    assert_non_null(out);
    bool line_start = true;
    for (const char *p = text; *p; p++) {
        if (line_start && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) continue;
        line_start = *p == '\n';
        *o++ = *p;
    }
    while (o > out && (o[-1] == '\n' || o[-1] == ' ' || o[-1] == '\t' || o[-1] == '\r')) o--;
    *o = '\0';
    return out;
}

/* llama.cpp's grammar with our character rule in place of its own (heap). A grammar with a rule
 * named char must hold llama.cpp's rule as we know it: otherwise llama.cpp changed it, and
 * json_schema_grammar.cpp would no longer replace it. */
static char *with_our_char(const char *grammar) {
    char *text = trim(grammar);
    char *at = strstr(text, LLAMA_CHAR);
    bool has_char_rule = strncmp(text, "char ::= ", 9) == 0 || strstr(text, "\nchar ::= ");
    if (has_char_rule && !at) fail_msg("llama.cpp's char rule is not the one we replace:\n%s", text);
    if (!at) return text;
    size_t head = (size_t)(at - text), tail = strlen(at + strlen(LLAMA_CHAR));
    char *out = malloc(head + strlen(OUR_CHAR) + tail + 1);
    assert_non_null(out);
    memcpy(out, text, head);
    memcpy(out + head, OUR_CHAR, strlen(OUR_CHAR));
    memcpy(out + head + strlen(OUR_CHAR), at + strlen(LLAMA_CHAR), tail + 1);
    free(text);
    return out;
}

/* Our grammar for the schema (trimmed, heap), or NULL with the refusal in *message. */
static char *our_grammar(json_t *schema, char message[768]) {
    char *gbnf = NULL;
    api_error err = {0};
    if (!specd_json_schema_to_grammar(schema, NULL, &gbnf, &err)) {
        snprintf(message, 768, "%s", err.message);
        return NULL;
    }
    char *trimmed = trim(gbnf);
    free(gbnf);
    return trimmed;
}

static void expect_same(const char *what, const char *ours, const char *expected) {
    if (strcmp(ours, expected) != 0) fail_msg("%s:\n# ours:\n%s\n# llama.cpp's:\n%s", what, ours, expected);
}

/* ---- our schemas, against llama-server's call on the same text ------------------------------- */

static const char *const OUR_SCHEMAS[] = {
    "{\"type\": \"string\"}",
    "{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}",
    "{\"maxLength\": 0}",
    "{\"type\": \"string\", \"maxLength\": 5}",
    "{\"type\": \"number\"}",
    "{\"type\": \"integer\"}",
    "{\"type\": \"boolean\"}",
    "{\"type\": \"null\"}",
    "{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 100}",
    "{\"type\": \"integer\", \"minimum\": -5, \"maximum\": 120}",
    "{\"type\": \"integer\", \"minimum\": -999, \"maximum\": -17}",
    "{\"type\": \"integer\", \"exclusiveMinimum\": 9, \"exclusiveMaximum\": 1000}",
    "{\"type\": \"integer\", \"minimum\": 1.5, \"maximum\": 20.5}",
    "{\"type\": \"integer\", \"minimum\": -30}",
    "{\"type\": \"integer\", \"maximum\": 250}",
    "{\"type\": \"string\", \"format\": \"date\"}",
    "{\"format\": \"date-time\"}",
    "{\"type\": \"string\", \"format\": \"time\"}",
    "{\"type\": \"string\", \"format\": \"uuid\"}",
    "{\"type\": \"string\", \"pattern\": \"^[a-z]{2,4}-[0-9]+$\"}",
    "{\"enum\": [\"red\", 42, null, 0.1, {\"a\": [1, true]}, \"say \\\"hi\\\"\"]}",
    "{\"const\": \"fixed\", \"description\": \"annotations are fine\"}",
    "{\"const\": {\"k\": \"v\", \"n\": [null]}}",
    "{\"type\": [\"string\", \"null\"], \"maxLength\": 2}",
    "{\"type\": [\"integer\", \"boolean\"], \"minimum\": 3}",
    "{\"type\": \"array\", \"items\": {\"type\": [\"object\", \"array\", \"string\", \"number\", \"boolean\", \"null\"]}}",
    "{}",
    "{\"description\": \"anything\"}",
    "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\"}, \"b\": {\"type\": \"integer\"},"
    " \"c\": {\"type\": \"boolean\"}}, \"required\": [\"a\"]}",
    "{\"properties\": {\"a\": {\"type\": \"null\"}, \"b\": {\"type\": \"null\"}, \"c\": {\"type\": \"null\"}}, \"required\": [\"b\"]}",
    "{\"type\": \"object\"}",
    "{\"type\": \"object\", \"additionalProperties\": false}",
    "{\"type\": \"object\", \"additionalProperties\": {\"type\": \"integer\"}}",
    "{\"properties\": {\"ab\": {\"type\": \"string\"}, \"abc\": {\"type\": \"string\"}, \"\xC3\xA9\": {\"type\": \"null\"}},"
    " \"additionalProperties\": true}",
    "{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"minItems\": 1, \"maxItems\": 3}",
    "{\"type\": \"array\"}",
    "{\"type\": \"array\", \"maxItems\": 0}",
    "{\"type\": \"array\", \"items\": [{\"type\": \"integer\"}, {\"type\": \"string\"}]}",
    "{\"prefixItems\": [{\"type\": \"boolean\"}]}",
    "{\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"integer\", \"minimum\": 0}]}",
    "{\"oneOf\": [{\"const\": 1}, {\"type\": \"object\", \"properties\": {\"k\": {\"const\": 2}}, \"required\": [\"k\"]}],"
    " \"title\": \"t\"}",
    "{\"allOf\": [{\"$ref\": \"#/$defs/a\"}, {\"type\": \"object\", \"properties\": {\"b\": {\"type\": \"integer\"}}}],"
    " \"$defs\": {\"a\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\"}}}}}",
    "{\"allOf\": [{\"enum\": [1, 2, 3]}, {\"enum\": [2, 3, 4]}]}",
    "{\"type\": \"string\", \"allOf\": [{\"enum\": [\"a\", \"b\"]}, {\"enum\": [\"b\", \"c\"]}]}",
    "{\"type\": \"object\", \"allOf\": [{\"properties\": {\"x\": {\"type\": \"null\"}}}]}",
    "{\"type\": \"object\", \"anyOf\": [{\"properties\": {\"a\": {\"type\": \"null\"}}, \"required\": [\"a\"]},"
    " {\"$ref\": \"#/$defs/b\"}], \"$defs\": {\"b\": {\"type\": \"object\", \"properties\": {\"b\": {\"type\": \"null\"}}}}}",
    "{\"type\": \"string\", \"pattern\": \"^(yes|no)$\"}",
    "{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"maxItems\": 400}",
    "{\"additionalProperties\": true}",
    "{\"$defs\": {\"name\": {\"type\": \"string\", \"maxLength\": 3}}, \"type\": \"object\","
    " \"properties\": {\"first\": {\"$ref\": \"#/$defs/name\"}, \"last\": {\"$ref\": \"#/$defs/name\"}},"
    " \"required\": [\"first\", \"last\"]}",
    "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"$ref\": \"#/properties/a\"}},"
    " \"required\": [\"a\", \"b\"]}",
    "{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"v\": {\"type\": \"integer\"},"
    " \"kids\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/node\"}}}, \"required\": [\"v\"]}},"
    " \"$ref\": \"#/$defs/node\"}",
    "{\"$defs\": {\"a\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/b\"}},"
    " \"b\": {\"anyOf\": [{\"type\": \"integer\"}, {\"$ref\": \"#/$defs/a\"}]}}, \"$ref\": \"#/$defs/a\"}",
};

static void test_our_schemas_as_llama_server(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof OUR_SCHEMAS / sizeof OUR_SCHEMAS[0]; i++) {
        json_error_t jerr;
        json_t *schema = json_loads(OUR_SCHEMAS[i], 0, &jerr);
        if (!schema) fail_msg("test schema is not JSON (%s): %s", jerr.text, OUR_SCHEMAS[i]);
        char message[768], *error = NULL;
        char *ours = our_grammar(schema, message);
        if (!ours) fail_msg("schema %s refused: %s", OUR_SCHEMAS[i], message);
        char *reference = reference_grammar(OUR_SCHEMAS[i], &error);
        if (!reference) fail_msg("llama.cpp refuses %s: %s", OUR_SCHEMAS[i], error);
        char *expected = with_our_char(reference);
        expect_same(OUR_SCHEMAS[i], ours, expected);
        free(ours);
        free(reference);
        free(expected);
        json_decref(schema);
    }
}

/* ---- llama.cpp's test cases ------------------------------------------------------------------ */

/* llama.cpp's cases our checks refuse, with the part of the message that says why: a pattern
 * llama.cpp would replace by any string, a combination of allOf and anyOf whose anyOf parts it
 * would merge as optional properties, a prefixItems it would ignore. */
static const struct {
    const char *name, *why;
} REFUSED[] = {
    {"unanchored regexp", "must be anchored"},
    {"regexp with unsupported shorthand", "not supported"},
    {"unsupported regexp in a property", "not supported"},
    {"mix of allOf, anyOf and $ref (similar to https://json.schemastore.org/tsconfig.json)", "'allOf' part"},
    {"array with empty items and prefixItems", "'prefixItems' beside 'items'"},
};

static const char *refused_why(const char *name) {
    for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++)
        if (strcmp(REFUSED[i].name, name) == 0) return REFUSED[i].why;
    return NULL;
}

static void check_case(json_t *c, int *n_same, int *n_refused) {
    const char *name = json_string_value(json_object_get(c, "name"));
    char message[768];
    char *ours = our_grammar(json_object_get(c, "schema"), message);
    const char *why = refused_why(name);
    if (!ours) {
        if (!why || !strstr(message, why)) fail_msg("llama.cpp's case '%s' refused: %s", name, message);
        (*n_refused)++;
        return;
    }
    if (why) fail_msg("llama.cpp's case '%s' is listed as refused (%s) but converts", name, why);
    char *expected = with_our_char(json_string_value(json_object_get(c, "grammar")));
    expect_same(name, ours, expected);
    (*n_same)++;
    free(ours);
    free(expected);
}

static void test_llama_cases(void **state) {
    (void)state;
    json_error_t jerr;
    json_t *cases = json_load_file(cases_path, 0, &jerr);
    if (!json_is_array(cases)) fail_msg("%s: %s", cases_path, jerr.text);
    int n_same = 0, n_refused = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) check_case(json_array_get(cases, i), &n_same, &n_refused);
    assert_int_equal(n_refused, (int)(sizeof REFUSED / sizeof REFUSED[0]));
    printf("llama.cpp's cases: %d with the same grammar, %d refused on purpose\n", n_same, n_refused);
    json_decref(cases);
}

/* specd_json_schema_grammar on hostile text: an error string, never a throw or a crash. */
static void test_library_call_refuses_bad_text(void **state) {
    (void)state;
    static char deep[2000];
    for (int i = 0; i < 600; i++) deep[i] = '[';
    for (int i = 0; i < 600; i++) deep[600 + i] = ']';
    static const char *const bad[] = {deep, "{\"type\": ", "not json", "[]", "{\"type\": 5}", "{\"$ref\": \"#/nowhere\"}"};
    static const char *const why[] = {"nests deeper than 512", "", "", "", "", "nowhere"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *error = NULL, *grammar = specd_json_schema_grammar(bad[i], &error);
        if (grammar || !error || !strstr(error, why[i]))
            fail_msg("%.40s: grammar %s, error %s", bad[i], grammar ? grammar : "NULL", error ? error : "NULL");
        specd_free(error);
    }
    char *error = NULL;
    assert_null(specd_json_schema_grammar(NULL, &error));
    assert_non_null(error);
    specd_free(error);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASES_JSON\n", argv[0]);
        return 2;
    }
    cases_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_our_schemas_as_llama_server),
        cmocka_unit_test(test_llama_cases),
        cmocka_unit_test(test_library_call_refuses_bad_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
