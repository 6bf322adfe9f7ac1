/* test_json_schema.c - JSON Schema -> GBNF (src/rpc/json_schema.c): for every supported construct
 * the grammar parses in llama.cpp (specd_grammar_check) and, fed byte by byte through llama.cpp's
 * grammar engine, accepts valid documents and refuses invalid ones; unsupported keywords and
 * impossible schemas are refused with messages naming the keyword and its JSON path.
 *
 * The documents go through the grammar as the engine's sampler sees them: one token per byte
 * (the tiny model's vocabulary has a token for every byte), each allowed before it is accepted,
 * and the end-of-generation token allowed at the end (the grammar is complete there).
 *
 *   test_json_schema MODELS_DIR */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "engine/engine_internal.h"
#include "engine_helpers.h"
#include "rpc/json_schema.h"
#include "sample/grammar.h"
#include "specd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char target_path[1024], draft_path[1024];
static specd_engine *engine;
static specd_token byte_token[256]; /* a token whose text is that one byte */

static int setup(void **state) {
    (void)state;
    engine = open_engine(target_path, NULL, 64);
    for (int i = 0; i < 256; i++) byte_token[i] = -1;
    for (specd_token t = 0; t < engine->n_vocab; t++) {
        char piece[8];
        int32_t n = llama_token_to_piece(engine->vocab, t, piece, sizeof piece, 0, false);
        if (n == 1 && byte_token[(unsigned char)piece[0]] < 0) byte_token[(unsigned char)piece[0]] = t;
    }
    for (int i = 1; i < 256; i++)
        if (byte_token[i] < 0) fail_msg("the tiny vocabulary has no token for byte 0x%02X", i);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    specd_engine_free(engine);
    return 0;
}

/* ---- helpers ---------------------------------------------------------------------------------- */

static json_t *parse(const char *text) {
    json_error_t error;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &error);
    if (!v) fail_msg("test schema is not JSON (%s): %s", error.text, text);
    return v;
}

static char *convert(const char *schema_text) {
    json_t *schema = parse(schema_text);
    char *gbnf = NULL;
    rpc_error err = {0};
    if (!specd_json_schema_to_grammar(schema, NULL, &gbnf, &err)) fail_msg("schema %s refused: %s", schema_text, err.message);
    json_decref(schema);
    char *error = NULL;
    if (specd_grammar_check(engine, gbnf, &error) != SPECD_OK)
        fail_msg("llama.cpp refuses the grammar of %s (%s):\n%s", schema_text, error, gbnf);
    return gbnf;
}

/* Whether the grammar (already parsed into g) matches `text` exactly, fed one byte per token. */
static bool matches(specd_grammar *g, const char *text) {
    specd_grammar_state *state = specd_grammar_state_fork(g->state);
    assert_non_null(state);
    bool ok = true;
    for (const unsigned char *p = (const unsigned char *)text; *p && ok; p++)
        ok = specd_grammar_advance(g, state, byte_token[*p]);
    ok = ok && specd_grammar_allows(g, state, llama_vocab_eos(engine->vocab));
    specd_grammar_state_free(state);
    return ok;
}

static void open_grammar(specd_grammar *g, const char *gbnf) {
    char *error = NULL;
    if (specd_grammar_init(g, engine, gbnf, &error) != SPECD_OK) fail_msg("grammar: %s\n%s", error, gbnf);
}

#define END NULL

/* Converts the schema, then checks each valid document (NULL-terminated list, all real JSON) is
 * accepted and each invalid one refused. */
static void check_schema(const char *schema_text, const char *const *valid, const char *const *invalid) {
    char *gbnf = convert(schema_text);
    specd_grammar g;
    open_grammar(&g, gbnf);
    for (size_t i = 0; valid[i]; i++) {
        json_decref(parse(valid[i])); /* the test's own data is valid JSON */
        if (!matches(&g, valid[i])) fail_msg("schema %s\nrefuses valid document %s\ngrammar:\n%s", schema_text, valid[i], gbnf);
    }
    for (size_t i = 0; invalid[i]; i++)
        if (matches(&g, invalid[i]))
            fail_msg("schema %s\naccepts invalid document %s\ngrammar:\n%s", schema_text, invalid[i], gbnf);
    specd_grammar_free(&g);
    free(gbnf);
}

#define CHECK(schema, valid, invalid)                                                                            \
    do {                                                                                                         \
        static const char *const valid_docs[] = {valid, END};                                                    \
        static const char *const invalid_docs[] = {invalid, END};                                                \
        check_schema(schema, valid_docs, invalid_docs);                                                          \
    } while (0)
#define DOCS(...) __VA_ARGS__

/* The error message for a schema that must be refused (static buffer). */
static const char *refusal(const char *schema_text, const char *field) {
    static rpc_error err;
    memset(&err, 0, sizeof err);
    json_t *schema = parse(schema_text);
    char *gbnf = NULL;
    if (specd_json_schema_to_grammar(schema, field, &gbnf, &err)) fail_msg("schema %s accepted:\n%s", schema_text, gbnf);
    assert_null(gbnf);
    assert_int_equal(err.code, -32602);
    assert_string_equal(err.field, field ? field : "json_schema");
    json_decref(schema);
    return err.message;
}

static void expect_refusal(const char *schema_text, const char *expected_part) {
    const char *message = refusal(schema_text, NULL);
    if (!strstr(message, expected_part))
        fail_msg("schema %s: message \"%s\" lacks \"%s\"", schema_text, message, expected_part);
}

/* ---- scalars ---------------------------------------------------------------------------------- */

static void test_strings(void **state) {
    (void)state;
    CHECK("{\"type\": \"string\"}",
          DOCS("\"\"", "\"hello world\"", "\"q\\\"uote \\\\ \\/ \\n \\u00e9\"", "\"h\xC3\xA9llo \xE2\x82\xAC\""),
          DOCS("hello", "\"unterminated", "\"raw\nnewline\"", "\"bad \\x escape\"", "1"));
    CHECK("{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}",
          DOCS("\"ab\"", "\"abc\"", "\"\xC3\xA9\\n\"", "\"\\u0041\xE2\x82\xAC\xE2\x82\xAC\""),
          DOCS("\"a\"", "\"abcd\"", "\"\"", "\"\xC3\xA9\""));
    CHECK("{\"maxLength\": 0}", DOCS("\"\""), DOCS("\"a\"", "1"));
}

/* A string's characters are whole UTF-8 sequences of Unicode scalar values, as llama.cpp's converter
 * writes them: no lead byte that can begin none (0xF5-0xFF: a "maxLength": 5 string once came back
 * as 8 characters with U+FFFD), no surrogates, nothing past U+10FFFF, no overlong form, no lone
 * continuation byte, no DEL. */
static void test_strings_are_valid_utf8(void **state) {
    (void)state;
    CHECK("{\"type\": \"string\"}",
          DOCS("\"\xF0\x9F\x98\x80\"", "\"\xEF\xBF\xBD\"", "\"\xF4\x8F\xBF\xBF\"", "\"\xED\x9F\xBF\"",
               "\"\xEE\x80\x80\"", "\"\xC2\x80~ \""),
          DOCS("\"\xFD\x80\x80\x80\"", "\"\xFD\"", "\"\xF8\x88\x80\x80\x80\"", "\"\xF5\x80\x80\x80\"",
               "\"\xF4\x90\x80\x80\"", "\"\xED\xA0\x80\"", "\"\xED\xBF\xBF\"", "\"\xC0\xAF\"",
               "\"\xC1\xBF\"", "\"\x80\"", "\"\x7F\""));
    CHECK("{\"type\": \"string\", \"maxLength\": 2}", DOCS("\"\xE2\x82\xAC\xE2\x82\xAC\""),
          DOCS("\"\xFD\xBF\xBF\xBF\xBF\xBF\"", "\"a\xFE" "b\""));
}

/* The raw bytes of a result's tokens (heap, NUL-terminated). */
static char *raw_text(const specd_result *r) {
    char *text = calloc((size_t)r->n_tokens * 64 + 1, 1), *end = text;
    assert_non_null(text);
    for (int32_t i = 0; i < r->n_tokens; i++) {
        int32_t n = specd_token_to_piece(engine, r->tokens[i], end, 64);
        assert_true(n >= 0);
        end += n;
    }
    return text;
}

/* Whether `s` is valid UTF-8 (RFC 3629: no overlong forms, surrogates or code points past U+10FFFF),
 * with its count of code points. */
static bool valid_utf8(const char *s, size_t *n_chars) {
    const unsigned char *p = (const unsigned char *)s;
    for (*n_chars = 0; *p; (*n_chars)++) {
        unsigned c = *p++, len = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : (c & 0xF0) == 0xE0 ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : 9;
        if (len == 9) return false;
        unsigned cp = len == 0 ? c : c & (0x3F >> len);
        for (unsigned i = 0; i < len; i++, p++) {
            if ((*p & 0xC0) != 0x80) return false;
            cp = cp << 6 | (*p & 0x3F);
        }
        if ((len == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return false;
    }
    return true;
}

/* Generation under {"type": "string", "maxLength": 5}, with the byte tokens that begin no UTF-8
 * sequence (0xF5-0xFF) and a surrogate's lead pushed up by logit bias: the output is one JSON
 * string of valid UTF-8 and at most 5 characters, sampled and greedy, with and without prompt-lookup
 * speculation. It came back as 8 characters with U+FFFD when the grammar took such bytes. */
static void test_generation_under_max_length_is_valid_utf8(void **state) {
    (void)state;
    char *gbnf = convert("{\"type\": \"string\", \"maxLength\": 5}");
    specd_logit_bias bias[12];
    int32_t n_bias = 0;
    for (int b = 0xF5; b <= 0xFF; b++) bias[n_bias++] = (specd_logit_bias){byte_token[b], 30.0f};
    bias[n_bias++] = (specd_logit_bias){byte_token[0xED], 10.0f};
    for (int run = 0; run < 8; run++) {
        specd_generation_params g = specd_generation_default_params();
        g.grammar = gbnf;
        g.n_predict = 24;
        g.sampling.seed = (uint32_t)run + 1;
        g.sampling.temperature = run % 4 == 0 ? 0.0f : 1.5f;
        g.sampling.logit_bias = bias;
        g.sampling.n_logit_bias = n_bias;
        g.speculative.type = run % 2 ? SPECD_SPEC_NGRAM_SIMPLE : SPECD_SPEC_NONE;
        specd_result r = generate_text(engine, "the name: \"\xC3\xA9t\xC3\xA9\" the name: ", &g);
        char *text = raw_text(&r);
        size_t n_chars = 0;
        json_error_t error;
        json_t *doc = json_loads(text, JSON_DECODE_ANY, &error);
        const char *value = json_string_value(doc);
        if (!valid_utf8(text, &n_chars) || !value || !valid_utf8(value, &n_chars) || n_chars > 5)
            fail_msg("run %d: output '%s' (%zu characters in the string) is not a JSON string of valid UTF-8 with at "
                     "most 5 characters", run, text, n_chars);
        json_decref(doc);
        free(text);
        specd_result_clear(&r);
    }
    free(gbnf);
}

static void test_numbers_booleans_null(void **state) {
    (void)state;
    CHECK("{\"type\": \"number\"}", DOCS("0", "-1.5", "3e10", "2.5E-3", "-0", "123456.25"),
          DOCS("01", "1.", ".5", "+1", "NaN", "1e", "\"1\""));
    CHECK("{\"type\": \"integer\"}", DOCS("0", "-12", "1234567890123456"),
          DOCS("1.0", "00", "-", "1e3"));
    CHECK("{\"type\": \"boolean\"}", DOCS("true", "false"), DOCS("True", "1", "null"));
    CHECK("{\"type\": \"null\"}", DOCS("null"), DOCS("nul", "0", "\"null\""));
}

/* Every integer in [-1100, 1100] is accepted exactly when it lies within the bounds. */
static void check_integer_range(const char *schema_text, long lo, long hi) {
    char *gbnf = convert(schema_text);
    specd_grammar g;
    open_grammar(&g, gbnf);
    for (long v = -1100; v <= 1100; v++) {
        char text[32];
        snprintf(text, sizeof text, "%ld", v);
        if (matches(&g, text) != (v >= lo && v <= hi))
            fail_msg("schema %s: %ld is %s\ngrammar:\n%s", schema_text, v, matches(&g, text) ? "accepted" : "refused", gbnf);
    }
    specd_grammar_free(&g);
    free(gbnf);
}

static void test_integer_bounds(void **state) {
    (void)state;
    check_integer_range("{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 100}", 0, 100);
    check_integer_range("{\"type\": \"integer\", \"minimum\": -5, \"maximum\": 120}", -5, 120);
    check_integer_range("{\"type\": \"integer\", \"minimum\": -999, \"maximum\": -17}", -999, -17);
    check_integer_range("{\"type\": \"integer\", \"minimum\": 7, \"maximum\": 1000}", 7, 1000);
    check_integer_range("{\"type\": \"integer\", \"minimum\": 123, \"maximum\": 987}", 123, 987);
    check_integer_range("{\"type\": \"integer\", \"exclusiveMinimum\": 9, \"exclusiveMaximum\": 1000}", 10, 999);
    check_integer_range("{\"type\": \"integer\", \"minimum\": 1.5, \"maximum\": 20.5}", 2, 20);
    check_integer_range("{\"type\": \"integer\", \"minimum\": 42, \"maximum\": 42}", 42, 42);
    check_integer_range("{\"type\": \"integer\", \"minimum\": -30}", -30, 100000);
    check_integer_range("{\"type\": \"integer\", \"maximum\": 250}", -100000, 250);
    check_integer_range("{\"type\": \"integer\", \"maximum\": 1e30}", -100000, 100000); /* clamped: 16 digits */
    CHECK("{\"type\": \"integer\", \"minimum\": 1}", DOCS("1", "9999999999999999"), DOCS("0", "-1"));
}

static void test_formats(void **state) {
    (void)state;
    CHECK("{\"type\": \"string\", \"format\": \"date\"}", DOCS("\"2024-02-29\"", "\"1999-12-31\""),
          DOCS("\"2024-13-01\"", "\"2024-1-01\"", "\"2024-00-10\"", "\"2024-01-32\"", "2024-01-01"));
    CHECK("{\"format\": \"date-time\"}", DOCS("\"2024-02-29T23:59:60Z\"", "\"2024-02-29t10:00:00.123+05:30\""),
          DOCS("\"2024-02-29 10:00:00Z\"", "\"2024-02-29T24:00:00Z\"", "\"2024-02-29T10:00:00\""));
    CHECK("{\"type\": \"string\", \"format\": \"time\"}", DOCS("\"10:00:00Z\"", "\"23:59:59.5-01:00\""),
          DOCS("\"10:00Z\"", "\"10:00:00\""));
    CHECK("{\"type\": \"string\", \"format\": \"uuid\"}", DOCS("\"123e4567-e89b-12d3-a456-426614174000\""),
          DOCS("\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400g\""));
}

/* ---- enum, const, type lists, any ------------------------------------------------------------- */

static void test_enum_const(void **state) {
    (void)state;
    CHECK("{\"enum\": [\"red\", 42, null, 0.1, {\"a\": [1, true]}, \"say \\\"hi\\\"\"]}",
          DOCS("\"red\"", "42", "null", "0.1", "{\"a\":[1,true]}", "\"say \\\"hi\\\"\""),
          DOCS("\"blue\"", "43", "{\"a\":[1]}", "0.2"));
    CHECK("{\"type\": \"string\", \"enum\": [\"a\", 1, \"b\"]}", DOCS("\"a\"", "\"b\""), DOCS("1", "\"c\""));
    CHECK("{\"const\": \"fixed\", \"description\": \"annotations are fine\"}", DOCS("\"fixed\""), DOCS("\"other\"", "null"));
    CHECK("{\"const\": {\"k\": \"v\", \"n\": [null]}}", DOCS("{\"k\":\"v\",\"n\":[null]}"), DOCS("{\"k\":\"v\"}"));
}

static void test_type_lists(void **state) {
    (void)state;
    CHECK("{\"type\": [\"string\", \"null\"], \"maxLength\": 2}", DOCS("null", "\"ab\"", "\"\""),
          DOCS("\"abc\"", "1", "false"));
    CHECK("{\"type\": [\"integer\", \"boolean\"], \"minimum\": 3}", DOCS("3", "70", "true"), DOCS("2", "-3", "1.5", "null"));
    CHECK("{\"type\": [\"number\", \"integer\"]}", DOCS("1", "1.5"), DOCS("\"1\""));
    /* All six: the same body as the builtin "value", which other builtins name: it must stay. */
    CHECK("{\"type\": \"array\", \"items\": {\"type\": [\"object\", \"array\", \"string\", \"number\", \"boolean\", \"null\"]}}",
          DOCS("[{\"a\":[1,{\"b\":null}]},\"s\",true]"), DOCS("[{\"a\":}]"));
    /* Two properties of one type share a rule; each is still checked. */
    CHECK("{\"properties\": {\"a\": {\"type\": \"string\", \"maxLength\": 1}, \"b\": {\"type\": \"string\", \"maxLength\": 1}}}",
          DOCS("{\"a\":\"x\",\"b\":\"y\"}"), DOCS("{\"a\":\"x\",\"b\":\"yy\"}", "{\"a\":\"xx\"}"));
}

static void test_any_value(void **state) {
    (void)state;
    static const char *const schemas[] = {"{}", "true", "{\"description\": \"anything\"}"};
    for (size_t i = 0; i < 3; i++)
        CHECK(schemas[i],
              DOCS("1", "\"s\"", "null", "[1, {\"a\": null}, []]", "{\"deep\": {\"er\": [true, false, -2.5e3]}}", "{}"),
              DOCS("", "[1,", "undefined", "{\"a\"}", "[1,]", "'single'"));
}

/* ---- objects ---------------------------------------------------------------------------------- */

static void test_object_required_and_optional(void **state) {
    (void)state;
    /* a required, b and c optional: declared order, each at most once, nothing else. */
    CHECK("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\"}, \"b\": {\"type\": \"integer\"},"
          " \"c\": {\"type\": \"boolean\"}}, \"required\": [\"a\"]}",
          DOCS("{\"a\":\"x\"}", "{\"a\": \"x\", \"b\": 1}", "{\"a\":\"x\",\"c\":true}", "{\"a\":\"x\",\"b\":1,\"c\":false}",
               "{\n  \"a\": \"x\",\n  \"b\": 2\n}", "{ \"a\" : \"x\" }"),
          DOCS("{}", "{\"b\":1}", "{\"a\":\"x\",\"d\":1}", "{\"a\":1}", "{\"a\":\"x\",}", "{\"a\":\"x\",\"b\":1.5}"));
    /* The required one in the middle. */
    CHECK("{\"properties\": {\"a\": {\"type\": \"null\"}, \"b\": {\"type\": \"null\"}, \"c\": {\"type\": \"null\"}},"
          " \"required\": [\"b\"]}",
          DOCS("{\"b\":null}", "{\"a\":null,\"b\":null}", "{\"b\":null,\"c\":null}", "{\"a\":null,\"b\":null,\"c\":null}"),
          DOCS("{}", "{\"a\":null}", "{\"a\":null,\"c\":null}", "{\"c\":null}"));
    /* All optional: any in-order subset, the empty object included. */
    CHECK("{\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"integer\"}, \"y\": {\"type\": \"integer\"}}}",
          DOCS("{}", "{ }", "{\"x\":1}", "{\"y\":2}", "{\"x\":1,\"y\":2}"),
          DOCS("{,}", "{\"x\":1,}", "{\"z\":1}", "{\"x\":\"1\"}"));
    /* All required. */
    CHECK("{\"properties\": {\"x\": {\"type\": \"integer\"}, \"y\": {}}, \"required\": [\"x\", \"y\"]}",
          DOCS("{\"x\":1,\"y\":[2]}"), DOCS("{\"x\":1}", "{\"y\":2}", "{}"));
}

static void test_object_additional_properties(void **state) {
    (void)state;
    CHECK("{\"type\": \"object\"}", DOCS("{}", "{\"a\":1,\"b\":[null]}", "{\"a\":{\"b\":{}}}"), DOCS("[]", "1", "{\"a\"}"));
    CHECK("{\"type\": \"object\", \"additionalProperties\": false}", DOCS("{}"), DOCS("{\"a\":1}"));
    CHECK("{\"type\": \"object\", \"additionalProperties\": {\"type\": \"integer\"}}",
          DOCS("{}", "{\"x\":1}", "{\"x\":1,\"y\":-2}"), DOCS("{\"x\":\"s\"}", "{\"x\":1,\"y\":null}"));
    /* Declared names, then extra keys that are none of them (prefixes and extensions are fine). */
    CHECK("{\"properties\": {\"ab\": {\"type\": \"string\"}, \"abc\": {\"type\": \"string\"}, \"\xC3\xA9\": {\"type\": \"null\"}},"
          " \"additionalProperties\": true}",
          DOCS("{}", "{\"ab\":\"1\"}", "{\"ab\":\"1\",\"abc\":\"2\",\"\xC3\xA9\":null,\"a\":1}", "{\"a\":1}", "{\"abcd\":1}",
               "{\"\":1}", "{\"abc\":\"2\",\"b\":[]}", "{\"\xC3\xA9\xC3\xA9\":1}", "{\"\\u0041\":2}"),
          DOCS("{\"ab\":1}", "{\"abc\":1}", "{\"\xC3\xA9\":1}", "{\"a\":1,\"abc\":2}"));
    /* Optional declared ones with an additionalProperties schema. */
    CHECK("{\"properties\": {\"id\": {\"type\": \"integer\"}}, \"required\": [\"id\"],"
          " \"additionalProperties\": {\"type\": \"string\"}}",
          DOCS("{\"id\":1}", "{\"id\":1,\"name\":\"n\",\"tag\":\"t\"}"),
          DOCS("{\"name\":\"n\"}", "{\"id\":1,\"name\":2}", "{\"id\":\"1\"}"));
}

/* The most properties an object may have (1000), with every 50th and p150 in a document, then an
 * extra key; the same without p150. */
static void check_many_properties(bool p150_required) {
    enum { N = 1000 };
    static char schema[64 * N], valid[16 * N], invalid[16 * N];
    size_t len = (size_t)snprintf(schema, sizeof schema, "{\"additionalProperties\": true, \"properties\": {");
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(schema + len, sizeof schema - len, "%s\"p%d\": {\"type\": \"integer\"}", i ? ", " : "", i);
    snprintf(schema + len, sizeof schema - len, "}, \"required\": [%s]}", p150_required ? "\"p150\"" : "");
    size_t n_valid = (size_t)snprintf(valid, sizeof valid, "{"), n_invalid = n_valid;
    snprintf(invalid, sizeof invalid, "{");
    for (int i = 0; i < N; i++) {
        if (i % 50 != 0 && i != 150) continue;
        n_valid += (size_t)snprintf(valid + n_valid, sizeof valid - n_valid, "\"p%d\":%d,", i, i);
        if (i != 150) n_invalid += (size_t)snprintf(invalid + n_invalid, sizeof invalid - n_invalid, "\"p%d\":%d,", i, i);
    }
    snprintf(valid + n_valid, sizeof valid - n_valid, "\"p3000\":\"x\"}");
    snprintf(invalid + n_invalid, sizeof invalid - n_invalid, "\"p3000\":\"x\"}");
    const char *const valid_docs[] = {valid, "{\"p150\":1}", "{\"p150\":1,\"p999\":2,\"zz\":[]}", p150_required ? END : "{}", END};
    /* Without p150 (when required), a wrong type for a declared name, even after extra keys. */
    const char *const invalid_docs[] = {"{\"p150\":\"x\"}", "{\"p150\":1,\"zz\":1,\"p7\":\"x\"}",
                                        p150_required ? invalid : END, END};
    check_schema(schema, valid_docs, invalid_docs);
    char *gbnf = convert(schema);
    assert_true(strlen(gbnf) < 300000); /* linear in the properties, not quadratic */
    free(gbnf);
}

static void test_object_many_properties(void **state) {
    (void)state;
    check_many_properties(true);
    check_many_properties(false);
}

/* ---- arrays ----------------------------------------------------------------------------------- */

static void test_arrays(void **state) {
    (void)state;
    CHECK("{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"minItems\": 1, \"maxItems\": 3}",
          DOCS("[1]", "[1, 2,3]", "[\n  1,\n  2\n]", "[ 1 ]"), DOCS("[]", "[1,2,3,4]", "[1,]", "[\"a\"]"));
    CHECK("{\"type\": \"array\"}", DOCS("[]", "[1,\"a\",[null]]"), DOCS("{}", "[", "[,]"));
    CHECK("{\"items\": {\"type\": \"string\"}}", DOCS("[]", "[\"a\",\"b\"]"), DOCS("[1]", "[\"a\",]"));
    CHECK("{\"type\": \"array\", \"items\": false}", DOCS("[]", "[ ]"), DOCS("[1]"));
    CHECK("{\"type\": \"array\", \"maxItems\": 1}", DOCS("[]", "[{}]"), DOCS("[1,2]"));
    CHECK("{\"type\": \"array\", \"minItems\": 2}", DOCS("[1,2]", "[1,2,3,4,5]"), DOCS("[]", "[1]"));
    /* Up to llama.cpp's repetition limit, with and without a minimum. */
    static char full[4200], over[4300];
    size_t n = (size_t)snprintf(full, sizeof full, "[0");
    for (int i = 1; i < 2000; i++) n += (size_t)snprintf(full + n, sizeof full - n, ",%d", i % 10);
    snprintf(over, sizeof over, "%s,1]", full);
    snprintf(full + n, sizeof full - n, "]");
    CHECK("{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"maxItems\": 2000}", DOCS("[]", full), DOCS(over));
    CHECK("{\"type\": \"array\", \"minItems\": 2000, \"maxItems\": 2000}", DOCS(full), DOCS(over, "[1]"));
    CHECK("{\"type\": \"array\", \"items\": {\"type\": \"array\", \"items\": {\"type\": \"boolean\"}, \"maxItems\": 2}}",
          DOCS("[[true],[],[false,true]]"), DOCS("[[true,true,true]]", "[[1]]"));
}

/* ---- combinations, references, recursion ------------------------------------------------------ */

static void test_any_of_one_of_all_of(void **state) {
    (void)state;
    CHECK("{\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"integer\", \"minimum\": 0}]}", DOCS("\"x\"", "5"),
          DOCS("true", "-1"));
    CHECK("{\"oneOf\": [{\"const\": 1}, {\"type\": \"object\", \"properties\": {\"k\": {\"const\": 2}}, \"required\": [\"k\"]}],"
          " \"title\": \"t\"}",
          DOCS("1", "{\"k\":2}"), DOCS("2", "{\"k\":1}", "{}"));
    CHECK("{\"allOf\": [{\"type\": \"integer\"}], \"description\": \"pydantic v1 style\"}", DOCS("3"), DOCS("3.5"));
}

static void test_refs_and_definitions(void **state) {
    (void)state;
    CHECK("{\"$defs\": {\"name\": {\"type\": \"string\", \"maxLength\": 3}}, \"type\": \"object\","
          " \"properties\": {\"first\": {\"$ref\": \"#/$defs/name\"}, \"last\": {\"$ref\": \"#/$defs/name\"}},"
          " \"required\": [\"first\", \"last\"]}",
          DOCS("{\"first\":\"Al\",\"last\":\"Bo\"}"), DOCS("{\"first\":\"Alice\",\"last\":\"Bo\"}", "{\"first\":\"Al\"}"));
    CHECK("{\"definitions\": {\"a/b\": {\"enum\": [1, 2]}, \"t~x\": {\"type\": \"boolean\"}},"
          " \"type\": \"array\", \"items\": {\"anyOf\": [{\"$ref\": \"#/definitions/a~1b\"}, {\"$ref\": \"#/definitions/t~0x\"}]}}",
          DOCS("[1,true,2]"), DOCS("[3]", "[null]"));
    /* A pointer into the document that is not under $defs. */
    CHECK("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"$ref\": \"#/properties/a\"}},"
          " \"required\": [\"a\", \"b\"]}",
          DOCS("{\"a\":1,\"b\":2}"), DOCS("{\"a\":1,\"b\":\"2\"}"));
}

static void test_recursion(void **state) {
    (void)state;
    /* A tree through $defs. */
    CHECK("{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"v\": {\"type\": \"integer\"},"
          " \"kids\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/node\"}}}, \"required\": [\"v\"]}},"
          " \"$ref\": \"#/$defs/node\"}",
          DOCS("{\"v\":1}", "{\"v\":1,\"kids\":[]}", "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[{\"v\":4}]}]}"),
          DOCS("{\"v\":1,\"kids\":[{}]}", "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"kids\":[]}]}]}"));
    /* The root itself ("#"). */
    CHECK("{\"type\": \"object\", \"properties\": {\"next\": {\"$ref\": \"#\"}}}",
          DOCS("{}", "{\"next\":{}}", "{\"next\":{\"next\":{\"next\":{}}}}"), DOCS("{\"next\":1}", "{\"next\":{\"next\":[]}}"));
    /* A linked list through anyOf, and mutual recursion. */
    CHECK("{\"$defs\": {\"list\": {\"anyOf\": [{\"type\": \"null\"}, {\"type\": \"object\", \"properties\":"
          " {\"head\": {\"type\": \"integer\"}, \"tail\": {\"$ref\": \"#/$defs/list\"}}, \"required\": [\"head\", \"tail\"]}]}},"
          " \"$ref\": \"#/$defs/list\"}",
          DOCS("null", "{\"head\":1,\"tail\":null}", "{\"head\":1,\"tail\":{\"head\":2,\"tail\":null}}"),
          DOCS("{\"head\":1}", "{\"head\":1,\"tail\":{\"head\":2}}"));
    CHECK("{\"$defs\": {\"a\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/b\"}},"
          " \"b\": {\"anyOf\": [{\"type\": \"integer\"}, {\"$ref\": \"#/$defs/a\"}]}}, \"$ref\": \"#/$defs/a\"}",
          DOCS("[]", "[1,[2,[3,[]]]]"), DOCS("[\"x\"]", "[[[\"x\"]]]", "1"));
}

static void test_json_object_grammar(void **state) {
    (void)state;
    char *gbnf = NULL;
    rpc_error err = {0};
    assert_true(specd_json_object_grammar(&gbnf, &err));
    char *error = NULL;
    assert_int_equal(specd_grammar_check(engine, gbnf, &error), SPECD_OK);
    specd_grammar g;
    open_grammar(&g, gbnf);
    static const char *const valid[] = {"{}", "{\"a\": [1, {\"b\": null}], \"c\": \"d\"}", "{\n  \"x\": true\n}"};
    static const char *const invalid[] = {"[]", "\"x\"", "{\"a\"}", "{\"a\":1,}", "1", "{'a':1}"};
    for (size_t i = 0; i < 3; i++) assert_true(matches(&g, valid[i]));
    for (size_t i = 0; i < 6; i++) assert_false(matches(&g, invalid[i]));
    specd_grammar_free(&g);
    free(gbnf);
}

/* Valid JSON the grammars refuse on purpose, as llama.cpp's converter does: they make the model
 * write one form (declared property order, no duplicate keys, compact enum/const literals, no
 * blank before a comma or after the value, at most 16 digits) rather than every equivalent one. */
static void test_one_written_form_by_design(void **state) {
    (void)state;
    static const char *const none[] = {END};
    static const struct {
        const char *schema;
        const char *refused[4];
    } cases[] = {
        {"{\"type\": \"string\"}", {"\"a\" ", " \"a\"", END}},
        {"{\"enum\": [{\"a\": [1, true]}, 0.1]}", {"{\"a\": [1, true]}", "0.10000000000000001", "1e-1", END}},
        {"{\"const\": {\"k\": \"v\", \"n\": [null]}}", {"{\"n\":[null],\"k\":\"v\"}", END}},
        {"{\"properties\": {\"a\": {}, \"b\": {}}}", {"{\"b\":1,\"a\":2}", "{\"a\":1,\"a\":2}", "{\"a\":1 ,\"b\":2}", END}},
        {"{\"properties\": {\"a\": {}}, \"additionalProperties\": true}", {"{\"x\":1,\"a\":2}", "{\"a\":1,\"a\":2}", END}},
        {"{\"type\": \"array\"}", {"[1 ,2]", END}},
        {"{\"type\": \"integer\"}", {"12345678901234567", END}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_schema(cases[i].schema, none, cases[i].refused);
    /* ... while each schema above accepts its one written form. */
    CHECK("{\"properties\": {\"a\": {}, \"b\": {}}}", DOCS("{\"a\":1,\"b\":2}", "{\"a\": 1, \"b\": 2}"), DOCS("{\"c\":1}"));
}

/* ---- refusals --------------------------------------------------------------------------------- */

static void test_unsupported_keywords_are_named_with_their_path(void **state) {
    (void)state;
    assert_string_equal(refusal("{\"type\": \"object\", \"properties\": {\"a\": {\"patternProperties\": {\"x\": {}}}}}", NULL),
                        "json_schema: unsupported keyword 'patternProperties' at $.properties.a");
    assert_string_equal(refusal("{\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"string\", \"pattern\": \"^a\"}]}",
                                "response_format.json_schema.schema"),
                        "response_format.json_schema.schema: unsupported keyword 'pattern' at $.anyOf[1]");
    assert_string_equal(refusal("{\"type\": \"array\", \"items\": {\"properties\": {\"my key\": {\"not\": {}}}}}", NULL),
                        "json_schema: unsupported keyword 'not' at $.items.properties[\"my key\"]");
    assert_string_equal(refusal("{\"$defs\": {\"x\": {\"type\": \"string\", \"contentEncoding\": \"base64\"}},"
                                " \"$ref\": \"#/$defs/x\"}", NULL),
                        "json_schema: unsupported keyword 'contentEncoding' at $.$defs.x");
    static const char *const keywords[] = {"pattern", "not", "if", "then", "else", "uniqueItems", "prefixItems",
                                           "contains", "minProperties", "maxProperties", "propertyNames",
                                           "dependentRequired", "multipleOf", "unevaluatedProperties", "nullable",
                                           "x-vendor", "requird"};
    for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++) {
        char schema[128], expected[128];
        snprintf(schema, sizeof schema, "{\"type\": \"object\", \"properties\": {\"k\": {\"%s\": 1}}}", keywords[i]);
        snprintf(expected, sizeof expected, "json_schema: unsupported keyword '%s' at $.properties.k", keywords[i]);
        assert_string_equal(refusal(schema, NULL), expected);
    }
}

static void test_impossible_or_ambiguous_schemas_are_refused(void **state) {
    (void)state;
    expect_refusal("{\"$ref\": \"https://example.com/s.json\"}", "only references within the document");
    expect_refusal("{\"$ref\": \"#anchor\"}", "only JSON pointers");
    expect_refusal("{\"$defs\": {}, \"$ref\": \"#/$defs/missing\"}", "json_schema: $ref '#/$defs/missing' does not resolve ('missing' not found) at $");
    expect_refusal("{\"anyOf\": [{\"$ref\": \"#\"}, {\"type\": \"null\"}]}", "left recursion) at $.anyOf[0]");
    expect_refusal("{\"$defs\": {\"a\": {\"$ref\": \"#/$defs/b\"}, \"b\": {\"anyOf\": [{\"$ref\": \"#/$defs/a\"}]}},"
                   " \"$ref\": \"#/$defs/a\"}", "left recursion");
    expect_refusal("{\"properties\": {\"a\": {}}, \"required\": [\"b\"]}", "required property 'b' is not declared in 'properties' at $");
    expect_refusal("{\"type\": \"string\", \"minItems\": 1}", "keyword 'minItems' does not apply to type string at $");
    expect_refusal("{\"type\": \"number\", \"minimum\": 0}", "'minimum' on type number is not supported");
    expect_refusal("{\"minimum\": 0}", "needs \"type\": \"integer\"");
    expect_refusal("{\"$ref\": \"#/$defs/x\", \"type\": \"string\", \"$defs\": {\"x\": {}}}", "'type' beside '$ref' is not supported");
    expect_refusal("{\"type\": \"object\", \"anyOf\": [{}]}", "'type' beside 'anyOf'");
    expect_refusal("{\"allOf\": [{}, {}]}", "'allOf' with 2 schemas is not supported");
    expect_refusal("{\"type\": \"string\", \"format\": \"email\"}", "unsupported format 'email'");
    expect_refusal("{\"type\": \"string\", \"maxLength\": 5000}", "'maxLength' 5000 is above 2000");
    expect_refusal("{\"type\": \"array\", \"minItems\": 3, \"maxItems\": 2}", "'minItems' 3 is above 'maxItems' 2");
    expect_refusal("{\"type\": \"array\", \"minItems\": -1}", "'minItems' must be a non-negative integer");
    expect_refusal("{\"type\": \"array\", \"items\": [{}]}", "'items' as an array (a tuple) is not supported");
    expect_refusal("{\"type\": \"object\", \"properties\": {\"a\": false}}", "the schema false allows no value at $.properties.a");
    expect_refusal("5", "a schema must be an object or a boolean, not a number at $");
    expect_refusal("{\"type\": \"strin\"}", "unknown type 'strin'");
    expect_refusal("{\"type\": []}", "'type' must not be an empty array");
    expect_refusal("{\"enum\": []}", "'enum' must be a non-empty array");
    expect_refusal("{\"type\": \"integer\", \"enum\": [\"a\"]}", "no value of 'enum' has the type integer");
    expect_refusal("{\"enum\": [1], \"maxLength\": 3}", "'maxLength' beside 'enum' is not supported");
    expect_refusal("{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 4}", "no integer of at most 16 digits");
    expect_refusal("{\"type\": \"integer\", \"exclusiveMinimum\": true}", "as a boolean (draft 4)");
    expect_refusal("{\"properties\": {\"a\\\"b\": {}}, \"additionalProperties\": true}", "property name 'a\"b' is not supported");
    expect_refusal("{\"properties\": {\"a\": {\"$id\": \"x\"}}}", "'$id' is supported at the root only");
    char many[40000];
    size_t n_many = (size_t)snprintf(many, sizeof many, "{\"properties\": {");
    for (int i = 0; i < 1001; i++) n_many += (size_t)snprintf(many + n_many, sizeof many - n_many, "%s\"p%d\": {}", i ? "," : "", i);
    snprintf(many + n_many, sizeof many - n_many, "}}");
    expect_refusal(many, "'properties' with 1001 entries is not supported (at most 1000 per object) at $");
    /* Deeper than the converter goes: refused, not a stack overflow. */
    char deep[4096];
    size_t len = 0;
    for (int i = 0; i < 200; i++) len += (size_t)snprintf(deep + len, sizeof deep - len, "{\"items\":");
    len += (size_t)snprintf(deep + len, sizeof deep - len, "{}");
    for (int i = 0; i < 200; i++) deep[len++] = '}';
    deep[len] = '\0';
    expect_refusal(deep, "the schema nests deeper than 128 levels");
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target_path, draft_path, sizeof target_path)) return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_strings_are_valid_utf8),
        cmocka_unit_test(test_generation_under_max_length_is_valid_utf8),
        cmocka_unit_test(test_numbers_booleans_null),
        cmocka_unit_test(test_integer_bounds),
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_enum_const),
        cmocka_unit_test(test_type_lists),
        cmocka_unit_test(test_any_value),
        cmocka_unit_test(test_object_required_and_optional),
        cmocka_unit_test(test_object_additional_properties),
        cmocka_unit_test(test_object_many_properties),
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_any_of_one_of_all_of),
        cmocka_unit_test(test_refs_and_definitions),
        cmocka_unit_test(test_recursion),
        cmocka_unit_test(test_json_object_grammar),
        cmocka_unit_test(test_one_written_form_by_design),
        cmocka_unit_test(test_unsupported_keywords_are_named_with_their_path),
        cmocka_unit_test(test_impossible_or_ambiguous_schemas_are_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
