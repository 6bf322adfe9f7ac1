#define _POSIX_C_SOURCE 200809L /* strdup */
/* json_schema.c - JSON Schema -> GBNF for the JSON API and the HTTP routes (json_schema.h): the
 * schema passes our checks (json_schema_check.c), then llama.cpp's converter writes the grammar
 * (specd_json_schema_grammar, the one llama-server uses). */
#include "json_schema.h"

#include "json_schema_check.h"
#include "specd.h"

#include <stdlib.h>
#include <string.h>

static bool out_of_memory(const char *field, api_error *err) {
    return api_fail(err, API_INTERNAL_ERROR, field, "%s: out of memory converting the JSON schema", field);
}

/* llama.cpp's reason on one line ("JSON schema conversion failed:\nJSON schema error at ..."). */
static void one_line(char *text) {
    for (char *p = text; *p; p++)
        if (*p == '\n') *p = ' ';
}

bool specd_json_schema_to_grammar(json_t *schema, const char *field, char **gbnf_out, api_error *err) {
    *gbnf_out = NULL;
    field = field ? field : "json_schema";
    if (!json_schema_check(schema, field, err)) return false;
    char *text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text) return out_of_memory(field, err);
    char *why = NULL, *grammar = specd_json_schema_grammar(text, &why);
    free(text);
    if (!grammar) {
        if (!why) return out_of_memory(field, err);
        one_line(why);
        api_fail(err, API_INVALID_PARAMS, field, "%s: %s", field, why);
        specd_free(why);
        return false;
    }
    *gbnf_out = strdup(grammar); /* the callers free() it; specd_free owns the library's copy */
    specd_free(grammar);
    return *gbnf_out ? true : out_of_memory(field, err);
}

bool specd_json_object_grammar(char **gbnf_out, api_error *err) {
    json_t *schema = json_pack("{s:s}", "type", "object");
    if (!schema) {
        *gbnf_out = NULL;
        return out_of_memory("response_format", err);
    }
    bool ok = specd_json_schema_to_grammar(schema, "response_format", gbnf_out, err);
    json_decref(schema);
    return ok;
}
