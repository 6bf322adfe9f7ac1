// json_schema_reference.cpp - llama-server's grammar for a JSON Schema, for test_json_schema_llama:
// the schema text parsed and converted exactly as llama-server's json_schema field handler does
// (tools/server/server-schema.cpp: json_schema_to_grammar on the parsed request), with none of our
// code between.
#include "json-schema-to-grammar.h"
#include "json.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

static char *copy_text(const std::string &s) {
    char *out = static_cast<char *>(std::malloc(s.size() + 1));
    if (out) std::memcpy(out, s.c_str(), s.size() + 1);
    return out;
}

// The grammar (malloc'd), or NULL with *error (malloc'd) when llama.cpp throws.
extern "C" char *reference_grammar(const char *schema_text, char **error) {
    try {
        return copy_text(json_schema_to_grammar(common_json::parse(schema_text)));
    } catch (const std::exception &e) {
        *error = copy_text(e.what());
    } catch (...) {
        *error = copy_text("unknown exception");
    }
    return nullptr;
}
