// json_schema_grammar.cpp - specd_json_schema_grammar (specd.h): JSON Schema -> GBNF through
// llama.cpp's common converter, json_schema_to_grammar, the call llama-server makes for the
// `json_schema` and `response_format` fields, so a schema becomes the grammar llama-server would
// build. One rule is written differently (see utf8_char_rule). No exception leaves this file:
// each becomes the *error message.
#include "cpp_text.h"
#include "specd.h"

#include "json-schema-to-grammar.h"
#include "json.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

// Deeper JSON is refused before llama.cpp's converter, which recurses once per level: a caller's
// hostile schema must not overflow the stack (the JSON API's checks bound it tighter, $refs too).
static const int MAX_TEXT_DEPTH = 512;

// The deepest nesting of objects and arrays in JSON text (strings skipped).
static int text_depth(const char *text) {
    int depth = 0, deepest = 0;
    bool in_string = false;
    for (const char *p = text; *p; p++) {
        if (in_string) {
            if (*p == '\\' && p[1]) p++;
            else if (*p == '"') in_string = false;
        } else if (*p == '"') {
            in_string = true;
        } else if (*p == '{' || *p == '[') {
            if (++depth > deepest) deepest = depth;
        } else if (*p == '}' || *p == ']') {
            depth--;
        }
    }
    return deepest;
}

// llama.cpp's string character is a negated class, [^"\\\x7F\x00-\x1F], and its grammar engine
// decodes a byte that begins no UTF-8 sequence (0xF5-0xFF) or a surrogate's as a "code point" that
// such a class lets through: a maxLength 5 string came back as 8 characters with U+FFFD. The same
// characters, written as ranges of Unicode scalar values, admit valid UTF-8 only. This is the one
// line in which our grammar differs from llama-server's.
static const char LLAMA_CHAR_RULE[] = "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})\n";
static const char UTF8_CHAR_RULE[] =
    "char ::= [\\x20-\\x21\\x23-\\x5B\\x5D-\\x7E\\u0080-\\uD7FF\\uE000-\\U0010FFFF] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})\n";

static void utf8_char_rule(std::string &grammar) {
    const size_t n = sizeof LLAMA_CHAR_RULE - 1;
    for (size_t at = grammar.find(LLAMA_CHAR_RULE); at != std::string::npos; at = grammar.find(LLAMA_CHAR_RULE, at + 1)) {
        if (at != 0 && grammar[at - 1] != '\n') continue; // a rule named e.g. "foo-char"
        grammar.replace(at, n, UTF8_CHAR_RULE);
        return;
    }
}

extern "C" char *specd_json_schema_grammar(const char *schema_json, char **error) {
    if (error) *error = nullptr;
    if (!schema_json) {
        specd_set_text_error(error, "specd_json_schema_grammar needs the schema as JSON text");
        return nullptr;
    }
    if (text_depth(schema_json) > MAX_TEXT_DEPTH) {
        specd_set_text_error(error, "the schema nests deeper than " + std::to_string(MAX_TEXT_DEPTH) + " levels");
        return nullptr;
    }
    try {
        std::string grammar = json_schema_to_grammar(common_json::parse(schema_json), /* force_gbnf */ true);
        utf8_char_rule(grammar);
        char *out = specd_copy_text(grammar);
        if (!out) specd_set_text_error(error, "out of memory");
        return out;
    } catch (const std::exception &e) {
        specd_set_text_error(error, e.what());
    } catch (...) {
        specd_set_text_error(error, "llama.cpp's JSON Schema converter failed");
    }
    return nullptr;
}
