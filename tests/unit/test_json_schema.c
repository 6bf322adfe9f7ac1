/* test_json_schema.c - JSON Schema -> GBNF (src/api/json_schema.c: our checks, then llama.cpp's
 * converter): for every supported construct the grammar parses in llama.cpp (specd_grammar_check)
 * and, fed byte by byte through llama.cpp's grammar engine, accepts valid documents and refuses
 * invalid ones; unsupported keywords and impossible schemas are refused with messages naming the
 * keyword and its JSON path. (test_json_schema_llama checks the grammar is llama-server's.)
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
#include "api/json_schema.h"
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
    api_error err = {0};
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
    static api_error err;
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
          DOCS("\"\"", "\"hello world\"", "\"q\\\"uote \\\\ \\n \\u00e9\"", "\"h\xC3\xA9llo \xE2\x82\xAC\""),
          /* "\/" too: llama.cpp's string escapes are \" \\ \b \f \n \r \t \uXXXX (a "/" is written as it is) */
          DOCS("hello", "\"unterminated", "\"raw\nnewline\"", "\"bad \\x escape\"", "1", "\"\\/\""));
    CHECK("{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}",
          DOCS("\"ab\"", "\"abc\"", "\"\xC3\xA9\\n\"", "\"\\u0041\xE2\x82\xAC\xE2\x82\xAC\""),
          DOCS("\"a\"", "\"abcd\"", "\"\"", "\"\xC3\xA9\""));
    CHECK("{\"maxLength\": 0}", DOCS("\"\""), DOCS("\"a\"", "1"));
}

/* A string's characters are whole UTF-8 sequences of Unicode scalar values (our one change to
 * llama.cpp's grammar, src/engine/json_schema_grammar.cpp): no lead byte that can begin none (0xF5-0xFF: a "maxLength": 5 string once came back
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

/* Patterns llama.cpp's converter translates (anchored ^...$). */
static void test_patterns(void **state) {
    (void)state;
    CHECK("{\"type\": \"string\", \"pattern\": \"^[a-z]{2,4}-[0-9]+$\"}", DOCS("\"ab-1\"", "\"abcd-0042\""),
          DOCS("\"a-1\"", "\"ab-\"", "\"abcde-1\"", "\"AB-1\""));
    CHECK("{\"pattern\": \"^(yes|no)$\"}", DOCS("\"yes\"", "\"no\""), DOCS("\"maybe\"", "\"yesno\""));
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
    CHECK("{\"type\": \"integer\", \"minimum\": 1}", DOCS("1", "9999999999999999"), DOCS("0", "-1"));
}

static void test_formats(void **state) {
    (void)state;
    CHECK("{\"type\": \"string\", \"format\": \"date\"}", DOCS("\"2024-02-29\"", "\"1999-12-31\""),
          DOCS("\"2024-13-01\"", "\"2024-1-01\"", "\"2024-00-10\"", "\"2024-01-32\"", "2024-01-01"));
    /* llama.cpp's date-time: an upper-case T, seconds up to 59, fractions of 3 digits. */
    CHECK("{\"format\": \"date-time\"}", DOCS("\"2024-02-29T23:59:59Z\"", "\"2024-02-29T10:00:00.123+05:30\""),
          DOCS("\"2024-02-29 10:00:00Z\"", "\"2024-02-29T24:00:00Z\"", "\"2024-02-29T10:00:00\"",
               "\"2024-02-29t10:00:00Z\"", "\"2024-02-29T23:59:60Z\""));
    CHECK("{\"type\": \"string\", \"format\": \"time\"}", DOCS("\"10:00:00Z\"", "\"23:59:59.500-01:00\""),
          DOCS("\"10:00Z\"", "\"10:00:00\"", "\"23:59:59.5-01:00\""));
    CHECK("{\"type\": \"string\", \"format\": \"uuid\"}", DOCS("\"123e4567-e89b-12d3-a456-426614174000\""),
          DOCS("\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400g\""));
}

/* ---- enum, const, type lists, any ------------------------------------------------------------- */

static void test_enum_const(void **state) {
    (void)state;
    CHECK("{\"enum\": [\"red\", 42, null, 0.1, {\"a\": [1, true]}, \"say \\\"hi\\\"\"]}",
          DOCS("\"red\"", "42", "null", "0.1", "{\"a\":[1,true]}", "\"say \\\"hi\\\"\""),
          DOCS("\"blue\"", "43", "{\"a\":[1]}", "0.2"));
    CHECK("{\"type\": \"string\", \"enum\": [\"a\", \"b\"]}", DOCS("\"a\"", "\"b\""), DOCS("1", "\"c\""));
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
    static const char *const schemas[] = {"{}", "{\"description\": \"anything\"}", "{\"additionalProperties\": true}"};
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
    /* The required one in the middle: written first, as llama.cpp orders them (required, then optional). */
    CHECK("{\"properties\": {\"a\": {\"type\": \"null\"}, \"b\": {\"type\": \"null\"}, \"c\": {\"type\": \"null\"}},"
          " \"required\": [\"b\"]}",
          DOCS("{\"b\":null}", "{\"b\":null,\"a\":null}", "{\"b\":null,\"c\":null}", "{\"b\":null,\"a\":null,\"c\":null}"),
          DOCS("{}", "{\"a\":null}", "{\"a\":null,\"c\":null}", "{\"c\":null}", "{\"b\":null,\"c\":null,\"a\":null}"));
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
    /* Declared names, then extra keys that are none of them (extensions are fine; a strict prefix of
     * a declared name is not, as llama.cpp writes it: test_one_written_form_by_design). */
    CHECK("{\"properties\": {\"ab\": {\"type\": \"string\"}, \"abc\": {\"type\": \"string\"}, \"\xC3\xA9\": {\"type\": \"null\"}},"
          " \"additionalProperties\": true}",
          DOCS("{}", "{\"ab\":\"1\"}", "{\"ab\":\"1\",\"abc\":\"2\",\"\xC3\xA9\":null,\"b\":1}", "{\"b\":1}", "{\"abcd\":1}",
               "{\"\":1}", "{\"abc\":\"2\",\"b\":[]}", "{\"\xC3\xA9\xC3\xA9\":1}", "{\"\\u0041\":2}"),
          DOCS("{\"ab\":1}", "{\"abc\":1}", "{\"\xC3\xA9\":1}", "{\"a\":1,\"abc\":2}"));
    /* Optional declared ones with an additionalProperties schema. */
    CHECK("{\"properties\": {\"id\": {\"type\": \"integer\"}}, \"required\": [\"id\"],"
          " \"additionalProperties\": {\"type\": \"string\"}}",
          DOCS("{\"id\":1}", "{\"id\":1,\"name\":\"n\",\"tag\":\"t\"}"),
          DOCS("{\"name\":\"n\"}", "{\"id\":1,\"name\":2}", "{\"id\":\"1\"}"));
}

/* The most optional properties an object may have (255, with the extra keys as the 256th: llama.cpp's
 * converter takes time with their cube), with every 50th and p150 in a document, then an extra key;
 * the same without p150. */
static void check_many_properties(bool p150_required) {
    enum { N = 255 };
    static char schema[64 * N], valid[16 * N], invalid[16 * N];
    size_t len = (size_t)snprintf(schema, sizeof schema, "{\"additionalProperties\": true, \"properties\": {");
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(schema + len, sizeof schema - len, "%s\"p%d\": {\"type\": \"integer\"}", i ? ", " : "", i);
    snprintf(schema + len, sizeof schema - len, "}, \"required\": [%s]}", p150_required ? "\"p150\"" : "");
    /* A required property comes first (llama.cpp's order), the optional ones in declared order. */
    size_t n_valid = (size_t)snprintf(valid, sizeof valid, p150_required ? "{\"p150\":150," : "{"), n_invalid = 1;
    snprintf(invalid, sizeof invalid, "{");
    for (int i = 0; i < N; i++) {
        if (i % 50 != 0 || (i == 150 && p150_required)) continue;
        n_valid += (size_t)snprintf(valid + n_valid, sizeof valid - n_valid, "\"p%d\":%d,", i, i);
        if (i != 150) n_invalid += (size_t)snprintf(invalid + n_invalid, sizeof invalid - n_invalid, "\"p%d\":%d,", i, i);
    }
    snprintf(valid + n_valid, sizeof valid - n_valid, "\"p3000\":\"x\"}");
    snprintf(invalid + n_invalid, sizeof invalid - n_invalid, "\"p3000\":\"x\"}");
    const char *const valid_docs[] = {valid, "{\"p150\":1}", "{\"p150\":1,\"p254\":2,\"zz\":[]}", p150_required ? END : "{}", END};
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
    CHECK("{\"type\": \"array\", \"maxItems\": 0}", DOCS("[]", "[ ]"), DOCS("[1]"));
    /* Tuples: exactly their items. */
    CHECK("{\"type\": \"array\", \"items\": [{\"type\": \"integer\"}, {\"type\": \"string\"}]}", DOCS("[1, \"a\"]", "[1,\"\"]"),
          DOCS("[1]", "[1,\"a\",2]", "[\"a\",1]"));
    CHECK("{\"prefixItems\": [{\"type\": \"boolean\"}]}", DOCS("[true]"), DOCS("[]", "[true,false]"));
    CHECK("{\"type\": \"array\", \"maxItems\": 1}", DOCS("[]", "[{}]"), DOCS("[1,2]"));
    CHECK("{\"type\": \"array\", \"minItems\": 2}", DOCS("[1,2]", "[1,2,3,4,5]"), DOCS("[]", "[1]"));
    /* Long lists, with and without a minimum (llama.cpp's grammar parser refuses a repetition whose
     * count times the rules it repeats passes 2000: maxItems 2000 of integers is a 400 there). */
    static char full[4200], over[4300];
    size_t n = (size_t)snprintf(full, sizeof full, "[0");
    for (int i = 1; i < 400; i++) n += (size_t)snprintf(full + n, sizeof full - n, ",%d", i % 10);
    snprintf(over, sizeof over, "%s,1]", full);
    snprintf(full + n, sizeof full - n, "]");
    CHECK("{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"maxItems\": 400}", DOCS("[]", full), DOCS(over));
    CHECK("{\"type\": \"array\", \"minItems\": 400, \"maxItems\": 400}", DOCS(full), DOCS(over, "[1]"));
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
    /* allOf as llama.cpp reads it: objects merged, every property required; enums intersected. */
    CHECK("{\"allOf\": [{\"$ref\": \"#/$defs/a\"}, {\"type\": \"object\", \"properties\": {\"b\": {\"type\": \"integer\"}}}],"
          " \"$defs\": {\"a\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\"}}}}}",
          DOCS("{\"a\":\"x\",\"b\":1}"), DOCS("{\"a\":\"x\"}", "{\"b\":1}", "{}"));
    CHECK("{\"allOf\": [{\"enum\": [1, 2, 3]}, {\"$ref\": \"#/$defs/e\"}], \"description\": \"pydantic v1 style\","
          " \"$defs\": {\"e\": {\"enum\": [2, 3, 4]}}}",
          DOCS("2", "3"), DOCS("1", "4"));
    /* A `type` beside a combination whose parts are all of that type (llama.cpp drops it). */
    CHECK("{\"type\": \"object\", \"anyOf\": [{\"properties\": {\"a\": {\"type\": \"null\"}}, \"required\": [\"a\"]},"
          " {\"$ref\": \"#/$defs/b\"}], \"$defs\": {\"b\": {\"type\": \"object\", \"properties\": {\"b\": {\"type\": \"null\"}},"
          " \"required\": [\"b\"]}}}",
          DOCS("{\"a\":null}", "{\"b\":null}"), DOCS("{}", "null"));
}

static void test_refs_and_definitions(void **state) {
    (void)state;
    CHECK("{\"$defs\": {\"name\": {\"type\": \"string\", \"maxLength\": 3}}, \"type\": \"object\","
          " \"properties\": {\"first\": {\"$ref\": \"#/$defs/name\"}, \"last\": {\"$ref\": \"#/$defs/name\"}},"
          " \"required\": [\"first\", \"last\"]}",
          DOCS("{\"first\":\"Al\",\"last\":\"Bo\"}"), DOCS("{\"first\":\"Alice\",\"last\":\"Bo\"}", "{\"first\":\"Al\"}"));
    CHECK("{\"definitions\": {\"ab\": {\"enum\": [1, 2]}, \"t\": {\"type\": \"boolean\"}},"
          " \"type\": \"array\", \"items\": {\"anyOf\": [{\"$ref\": \"#/definitions/ab\"}, {\"$ref\": \"#/definitions/t\"}]}}",
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
    /* A chain through $defs (llama.cpp resolves no "#" to the root). */
    CHECK("{\"$defs\": {\"n\": {\"type\": \"object\", \"properties\": {\"next\": {\"$ref\": \"#/$defs/n\"}}}}, \"$ref\": \"#/$defs/n\"}",
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

/* Left recursion passes our checks and llama.cpp's converter; llama.cpp's grammar parser refuses
 * it, so a request gets the 400 of its grammar (serve/prepare.c) rather than a stalled sampler. */
static void test_left_recursion_refused_by_the_grammar_parser(void **state) {
    (void)state;
    json_t *schema = parse("{\"$defs\": {\"a\": {\"$ref\": \"#/$defs/b\"}, \"b\": {\"anyOf\": [{\"$ref\": \"#/$defs/a\"},"
                           " {\"type\": \"null\"}]}}, \"$ref\": \"#/$defs/a\"}");
    char *gbnf = NULL, *error = NULL;
    api_error err = {0};
    assert_true(specd_json_schema_to_grammar(schema, NULL, &gbnf, &err));
    assert_int_not_equal(specd_grammar_check(engine, gbnf, &error), SPECD_OK);
    if (!error || !strstr(error, "left recursion")) fail_msg("grammar check says: %s\n%s", error ? error : "(nothing)", gbnf);
    specd_free(error);
    free(gbnf);
    json_decref(schema);
}

static void test_json_object_grammar(void **state) {
    (void)state;
    char *gbnf = NULL;
    api_error err = {0};
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
        /* Required properties come first. */
        {"{\"properties\": {\"a\": {}, \"b\": {}}, \"required\": [\"b\"]}", {"{\"a\":1,\"b\":2}", END}},
        {"{\"properties\": {\"a\": {}}, \"additionalProperties\": true}", {"{\"x\":1,\"a\":2}", "{\"a\":1,\"a\":2}", END}},
        /* An extra key that is a strict prefix of a declared name. */
        {"{\"properties\": {\"ab\": {}}, \"additionalProperties\": true}", {"{\"a\":1}", END}},
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
    assert_string_equal(refusal("{\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"string\", \"contentMediaType\": \"a\"}]}",
                                "response_format.json_schema.schema"),
                        "response_format.json_schema.schema: unsupported keyword 'contentMediaType' at $.anyOf[1]");
    assert_string_equal(refusal("{\"type\": \"array\", \"items\": {\"properties\": {\"my key\": {\"not\": {}}}}}", NULL),
                        "json_schema: unsupported keyword 'not' at $.items.properties[\"my key\"]");
    assert_string_equal(refusal("{\"$defs\": {\"x\": {\"type\": \"string\", \"contentEncoding\": \"base64\"}},"
                                " \"$ref\": \"#/$defs/x\"}", NULL),
                        "json_schema: unsupported keyword 'contentEncoding' at $.$defs.x");
    static const char *const keywords[] = {"not", "if", "then", "else", "uniqueItems", "contains", "minProperties", "maxProperties", "propertyNames",
                                           "dependentRequired", "multipleOf", "unevaluatedProperties", "nullable",
                                           "x-vendor", "requird"};
    for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++) {
        char schema[128], expected[128];
        snprintf(schema, sizeof schema, "{\"type\": \"object\", \"properties\": {\"k\": {\"%s\": 1}}}", keywords[i]);
        snprintf(expected, sizeof expected, "json_schema: unsupported keyword '%s' at $.properties.k", keywords[i]);
        assert_string_equal(refusal(schema, NULL), expected);
    }
}

/* What llama.cpp's converter would recurse through or work on without end is refused before it runs:
 * a chain of $refs deeper than the nesting bound (each $ref a level, as in the converter), $refs that
 * fan out, too many optional properties across objects. */
static void check_bounded_expansion(void) {
    static char chain[20000], fan[8000], optional[40000];
    size_t n = (size_t)snprintf(chain, sizeof chain, "{\"$ref\": \"#/$defs/d0\", \"$defs\": {");
    for (int i = 0; i < 200; i++)
        n += (size_t)snprintf(chain + n, sizeof chain - n, "%s\"d%d\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/d%d\"}}",
                              i ? ", " : "", i, i + 1);
    snprintf(chain + n, sizeof chain - n, ", \"d200\": {}}}");
    expect_refusal(chain, "the schema nests deeper than 128 levels");
    /* d_i holds two $refs to d_{i+1}: 2^30 schemas once expanded. */
    n = (size_t)snprintf(fan, sizeof fan, "{\"$ref\": \"#/$defs/d0\", \"$defs\": {");
    for (int i = 0; i < 30; i++)
        n += (size_t)snprintf(fan + n, sizeof fan - n, "%s\"d%d\": {\"type\": \"array\", \"items\": {\"anyOf\": "
                              "[{\"$ref\": \"#/$defs/d%d\"}, {\"$ref\": \"#/$defs/d%d\"}]}}", i ? ", " : "", i, i + 1, i + 1);
    snprintf(fan + n, sizeof fan - n, ", \"d30\": {}}}");
    expect_refusal(fan, "the schema expands to more than 100000 schemas through its $refs");
    /* Two objects of 220 optional properties: each alone is fine, the two are too many. */
    n = (size_t)snprintf(optional, sizeof optional, "{\"type\": \"array\", \"prefixItems\": [");
    for (int k = 0; k < 2; k++) {
        n += (size_t)snprintf(optional + n, sizeof optional - n, "%s{\"properties\": {", k ? ", " : "");
        for (int i = 0; i < 220; i++)
            n += (size_t)snprintf(optional + n, sizeof optional - n, "%s\"p%d\": {}", i ? ", " : "", i);
        n += (size_t)snprintf(optional + n, sizeof optional - n, "}}");
    }
    snprintf(optional + n, sizeof optional - n, "]}");
    expect_refusal(optional, "too many optional properties");
    /* 1001 different $refs (each one is looked up among those before it). */
    static char refs[60000];
    n = (size_t)snprintf(refs, sizeof refs, "{\"anyOf\": [");
    for (int i = 0; i <= 1000; i++) n += (size_t)snprintf(refs + n, sizeof refs - n, "%s{\"$ref\": \"#/$defs/d%d\"}", i ? "," : "", i);
    n += (size_t)snprintf(refs + n, sizeof refs - n, "], \"$defs\": {");
    for (int i = 0; i <= 1000; i++) n += (size_t)snprintf(refs + n, sizeof refs - n, "%s\"d%d\": {}", i ? "," : "", i);
    snprintf(refs + n, sizeof refs - n, "}}");
    expect_refusal(refs, "the schema names more than 1000 different $refs");
}

static void test_impossible_or_ambiguous_schemas_are_refused(void **state) {
    (void)state;
    expect_refusal("{\"$ref\": \"https://example.com/s.json\"}", "only references within the document");
    expect_refusal("{\"$ref\": \"#anchor\"}", "only JSON pointers");
    expect_refusal("{\"$defs\": {}, \"$ref\": \"#/$defs/missing\"}", "json_schema: $ref '#/$defs/missing' does not resolve ('missing' not found) at $");
    expect_refusal("{\"anyOf\": [{\"$ref\": \"#\"}, {\"type\": \"null\"}]}", "$ref '#' is not supported: only JSON pointers");
    expect_refusal("{\"definitions\": {\"a/b\": {}}, \"$ref\": \"#/definitions/a~1b\"}", "reads '~' and '%' escapes as they are");
    expect_refusal("{\"properties\": {\"a\": {}}, \"required\": [\"b\"]}", "required property 'b' is not declared in 'properties' at $");
    expect_refusal("{\"type\": \"string\", \"minItems\": 1}", "keyword 'minItems' does not apply to type string at $");
    expect_refusal("{\"type\": \"number\", \"minimum\": 0}", "'minimum' on type number is not supported");
    expect_refusal("{\"minimum\": 0}", "needs \"type\": \"integer\"");
    expect_refusal("{\"$ref\": \"#/$defs/x\", \"type\": \"string\", \"$defs\": {\"x\": {}}}", "'type' beside '$ref' is not supported");
    expect_refusal("{\"type\": \"object\", \"anyOf\": [{}]}", "'type' beside 'anyOf' is not supported: anyOf[0] may be");
    expect_refusal("{\"type\": \"string\", \"oneOf\": [{\"type\": \"string\"}, {\"type\": \"integer\"}]}", "oneOf[1] may be other");
    expect_refusal("{\"allOf\": [{}, {}]}", "'allOf' part 0 is not supported");
    expect_refusal("{\"type\": \"integer\", \"allOf\": [{\"enum\": [1, 2]}]}", "'type' beside 'allOf' is supported as");
    expect_refusal("{\"type\": [\"object\", \"null\"], \"allOf\": [{\"properties\": {}}]}", "'type' beside 'allOf'");
    expect_refusal("{\"allOf\": [{\"type\": \"integer\"}]}", "'allOf' part 0 is not supported");
    expect_refusal("{\"allOf\": [{\"enum\": [1]}, {\"type\": \"object\", \"properties\": {}}]}", "'allOf' part 1");
    expect_refusal("{\"allOf\": [{\"enum\": [1]}, {\"enum\": [2]}]}", "the enums of 'allOf' have no value in common");
    expect_refusal("{\"allOf\": [{\"enum\": [1, 1]}, {\"enum\": [2]}]}", "'allOf' part 0 has a value twice in its enum");
    expect_refusal("{\"allOf\": [{\"properties\": {\"a\": {}}}, {\"properties\": {\"a\": {}}}]}",
                   "property 'a' is declared in 'allOf' parts 0 and 1");
    expect_refusal("{\"allOf\": [{\"properties\": {\"a\": {}}}, {\"anyOf\": [{\"properties\": {\"b\": {}}}]}]}",
                   "'allOf' part 1 is not supported");
    expect_refusal("{\"type\": \"string\", \"format\": \"email\"}", "unsupported format 'email'");
    expect_refusal("{\"type\": \"string\", \"maxLength\": 5000}", "'maxLength' 5000 is above 2000");
    expect_refusal("{\"type\": \"array\", \"minItems\": 3, \"maxItems\": 2}", "'minItems' 3 is above 'maxItems' 2");
    expect_refusal("{\"type\": \"array\", \"minItems\": -1}", "'minItems' must be a non-negative integer");
    expect_refusal("{\"type\": \"array\", \"items\": [{}], \"maxItems\": 3}", "'minItems'/'maxItems' beside a tuple");
    expect_refusal("{\"type\": \"array\", \"items\": {}, \"prefixItems\": [{}]}", "'prefixItems' beside 'items'");
    expect_refusal("{\"type\": \"array\", \"items\": false}", "'items' as a boolean is not supported");
    expect_refusal("{\"type\": \"object\", \"properties\": {\"a\": false}}", "the schema false is not supported (llama.cpp's "
                   "converter takes objects only): write {} for any value at $.properties.a");
    expect_refusal("true", "the schema true is not supported");
    expect_refusal("5", "a schema must be an object, not a number at $");
    expect_refusal("{\"type\": \"string\", \"pattern\": \"[a-z]+\"}", "must be anchored with '^' and '$'");
    expect_refusal("{\"type\": \"string\", \"pattern\": \"^\\\\w+$\"}", "pattern '^\\w+$' is not supported");
    expect_refusal("{\"type\": \"string\", \"pattern\": \"^(a$\"}", "pattern '^(a$' is not supported: JSON schema conversion failed");
    expect_refusal("{\"type\": \"string\", \"pattern\": \"^a$\", \"maxLength\": 3}", "'pattern' beside 'minLength'/'maxLength'");
    expect_refusal("{\"type\": \"integer\", \"maximum\": 1e30}", "'maximum' is beyond 15 digits");
    expect_refusal("{\"type\": \"integer\", \"minimum\": 1000000000000000}", "'minimum' is beyond 15 digits");
    expect_refusal("{\"type\": \"integer\", \"minimum\": 1, \"exclusiveMinimum\": 0}", "'exclusiveMinimum' beside 'minimum'");
    expect_refusal("{\"type\": [\"string\", \"null\"], \"enum\": [\"a\", 1]}", "'enum' value 1 is not of the type null/string");
    expect_refusal("{\"type\": \"integer\", \"const\": \"1\"}", "'const' is not of the type integer");
    expect_refusal("{\"minItems\": 1}", "'minItems' needs \"type\": \"array\"");
    expect_refusal("{\"properties\": {}, \"maxLength\": 1}", "keyword 'maxLength' does not apply to type object");
    expect_refusal("{\"type\": \"strin\"}", "unknown type 'strin'");
    expect_refusal("{\"type\": []}", "'type' must not be an empty array");
    expect_refusal("{\"enum\": []}", "'enum' must be a non-empty array");
    expect_refusal("{\"type\": \"integer\", \"enum\": [\"a\"]}", "'enum' value 0 is not of the type integer");
    expect_refusal("{\"enum\": [1], \"maxLength\": 3}", "'maxLength' beside 'enum' is not supported");
    expect_refusal("{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 4}", "no integer lies within the bounds");
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
    check_bounded_expansion();
    /* A name llama.cpp's converter would run std::regex over, recursing per character. */
    static char long_name[60000];
    len = (size_t)snprintf(long_name, sizeof long_name, "{\"properties\": {\"");
    memset(long_name + len, '.', 50000);
    snprintf(long_name + len + 50000, sizeof long_name - len - 50000, "\": {}}}");
    expect_refusal(long_name, "is longer than 256 bytes");
    char long_ref[700];
    len = (size_t)snprintf(long_ref, sizeof long_ref, "{\"$ref\": \"#/");
    memset(long_ref + len, 'x', 600);
    snprintf(long_ref + len + 600, sizeof long_ref - len - 600, "\"}");
    expect_refusal(long_ref, "is longer than 512 bytes");
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target_path, draft_path, sizeof target_path)) return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_strings_are_valid_utf8),
        cmocka_unit_test(test_generation_under_max_length_is_valid_utf8),
        cmocka_unit_test(test_patterns),
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
        cmocka_unit_test(test_left_recursion_refused_by_the_grammar_parser),
        cmocka_unit_test(test_json_object_grammar),
        cmocka_unit_test(test_one_written_form_by_design),
        cmocka_unit_test(test_unsupported_keywords_are_named_with_their_path),
        cmocka_unit_test(test_impossible_or_ambiguous_schemas_are_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
