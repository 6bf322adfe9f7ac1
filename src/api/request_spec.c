/* request_spec.c - a completion request's speculation, from the nested `speculative` object and
 * from llama-server's flat keys (see request_json.h). The lengths (n_max, n_min) are read for their
 * type only: their range is the library's one check (specd_generation_params_validate, which
 * serve_request_prepare reuses for the early 400), and the engine's draft maximum and whether
 * "draft" has a draft model are serve_request_prepare's to check. */
#define _POSIX_C_SOURCE 200809L /* strdup, strtok_r */
#include "request_json.h"

#include <stdlib.h>
#include <string.h>

static specd_spec_params *spec_of(json_request *jr) { return &jr->req->gen.speculative; }

/* A list of drafter names into spec (one sets the plain type, several make a drafter list);
 * `field` names it in messages. */
static bool set_types(api_params *rp, const char *field, const char *const *names, size_t n, specd_spec_params *spec) {
    char *message = NULL;
    if (specd_spec_params_set_types(spec, names, (int32_t)n, &message) == SPECD_OK) return true;
    api_fail(rp->err, API_INVALID_PARAMS, field, "completion params: %s", message ? message : "");
    specd_free(message);
    return false;
}

/* speculative.type: ["none"], ["draft"], or a list of drafters such as ["ngram-simple", "draft"]
 * (the same as `specd run --spec`). */
static bool read_type_list(api_params *rp, json_t *type, specd_spec_params *spec) {
    size_t n = json_array_size(type);
    if (!json_is_array(type) || n == 0 || n > SPECD_SPEC_MAX_TYPES)
        return api_fail(rp->err, API_INVALID_PARAMS, "speculative.type", "completion params: 'speculative.type' must "
                        "be a list of 1 to %d of %s", SPECD_SPEC_MAX_TYPES, specd_spec_type_names());
    const char *names[SPECD_SPEC_MAX_TYPES];
    for (size_t i = 0; i < n; i++) {
        names[i] = json_string_value(json_array_get(type, i));
        if (!names[i])
            return api_fail(rp->err, API_INVALID_PARAMS, "speculative.type",
                            "completion params: speculative.type[%zu] must be a string", i);
    }
    return set_types(rp, "speculative.type", names, n, spec);
}

/* speculative.tree: "on", "off" or "auto" (true / false for on / off too). */
static bool read_tree_mode(api_params *sp, specd_spec_params *spec) {
    json_t *v = api_get_value(sp, "tree");
    if (!v) return true;
    if (json_is_boolean(v)) {
        spec->tree = json_is_true(v) ? SPECD_DRAFT_TREE_ON : SPECD_DRAFT_TREE_OFF;
        return true;
    }
    if (json_is_string(v) && specd_draft_tree_mode_from_name(json_string_value(v), &spec->tree)) return true;
    return api_fail(sp->err, API_INVALID_PARAMS, "speculative.tree",
                    "completion params: 'speculative.tree' must be \"on\", \"off\" or \"auto\"");
}

bool request_json_speculative(json_request *jr) {
    json_t *obj = api_get_value(jr->rp, "speculative");
    if (!obj) return true;
    if (!json_is_object(obj))
        return api_fail(jr->rp->err, API_INVALID_PARAMS, "speculative", "completion params: 'speculative' must be an "
                        "object {type, n_max, n_min, p_min, suffix_branches, tree, branches, p_split, tree_nodes}");
    specd_spec_params *spec = spec_of(jr);
    api_params sp;
    api_params_open(&sp, obj, "completion params", "speculative.", jr->rp->err);
    sp.null_is_absent = jr->rp->null_is_absent;
    json_t *type = api_get_value(&sp, "type");
    if ((type && !read_type_list(&sp, type, spec)) || !api_read_any_int32(&sp, "n_max", &spec->draft_max) ||
        !api_read_any_int32(&sp, "n_min", &spec->draft_min) ||
        !api_read_any_float(&sp, "p_min", &spec->draft_p_min) ||
        !api_read_any_int32(&sp, "suffix_branches", &spec->suffix_branches) || !read_tree_mode(&sp, spec) ||
        !api_read_any_int32(&sp, "branches", &spec->draft_branches) ||
        !api_read_any_float(&sp, "p_split", &spec->draft_p_split) ||
        !api_read_any_int32(&sp, "tree_nodes", &spec->draft_tree_nodes))
        return false;
    return api_params_finish(&sp);
}

/* ---- llama-server's flat keys ---------------------------------------------------------------- */

static bool present(const api_params *rp, const char *name) {
    json_t *v = json_object_get(rp->obj, name);
    return v && !(rp->null_is_absent && json_is_null(v));
}

/* A flat key and the nested speculative object must not both set one setting. */
static bool no_conflict(api_params *rp, const char *flat, const char *nested) {
    json_t *obj = json_object_get(rp->obj, "speculative");
    if (!present(rp, flat) || !json_is_object(obj) || !json_object_get(obj, nested)) return true;
    return api_fail(rp->err, API_INVALID_PARAMS, flat, "completion params: '%s' and speculative.%s in the "
                    "'speculative' object are both given: give one", flat, nested);
}

/* speculative.type as llama-server spells it: a name, or a comma-separated list
 * ("ngram-simple,draft"); an array of names is taken too. */
static bool read_flat_type(json_request *jr) {
    json_t *v = api_get_value(jr->rp, "speculative.type");
    if (!v || json_is_array(v)) return !v || read_type_list(jr->rp, v, spec_of(jr));
    if (!json_is_string(v)) return read_type_list(jr->rp, v, spec_of(jr)); /* refused with the list's message */
    const char *names[SPECD_SPEC_MAX_TYPES + 1];
    size_t n = 0;
    char *copy = strdup(json_string_value(v)), *save = NULL;
    if (!copy) return api_fail(jr->rp->err, API_INTERNAL_ERROR, "speculative.type", "out of memory");
    for (char *name = strtok_r(copy, ",", &save); name && n <= SPECD_SPEC_MAX_TYPES; name = strtok_r(NULL, ",", &save))
        names[n++] = name;
    bool fits = n > 0 && n <= SPECD_SPEC_MAX_TYPES;
    json_t *none = fits ? NULL : json_array(); /* refused with the list's message */
    bool ok = fits ? set_types(jr->rp, "speculative.type", names, n, spec_of(jr)) : read_type_list(jr->rp, none, spec_of(jr));
    json_decref(none);
    free(copy);
    return ok;
}

bool request_json_flat_speculative(json_request *jr) {
    api_params *rp = jr->rp;
    specd_spec_params *spec = spec_of(jr);
    return no_conflict(rp, "speculative.n_max", "n_max") && no_conflict(rp, "speculative.n_min", "n_min") &&
           no_conflict(rp, "speculative.p_min", "p_min") && no_conflict(rp, "speculative.type", "type") &&
           api_read_any_int32(rp, "speculative.n_max", &spec->draft_max) &&
           api_read_any_int32(rp, "speculative.n_min", &spec->draft_min) &&
           api_read_any_float(rp, "speculative.p_min", &spec->draft_p_min) && read_flat_type(jr) &&
           api_read_any_int32(rp, "speculative.ngram_size_n", &spec->ngram_n) &&
           api_read_any_int32(rp, "speculative.ngram_min_hits", &spec->ngram_min_hits);
}
