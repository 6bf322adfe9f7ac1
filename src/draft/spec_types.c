/* spec_types.c - see spec_types.h; and the public names and parsers of drafter names, read from
 * the drafter registry (drafter_registry.h). */
#include "spec_types.h"

#include "drafter_registry.h"
#include "../util/util.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* "auto" and "none" are no drafters: every other name is a row of the registry's. */
const char *specd_spec_type_name(specd_spec_type type) {
    if (type == SPECD_SPEC_AUTO) return "auto";
    if (type == SPECD_SPEC_NONE) return "none";
    const specd_drafter_kind *kind = specd_drafter_kind_of(type);
    return kind ? kind->name : NULL;
}

bool specd_spec_type_from_name(const char *name, specd_spec_type *type) {
    const specd_drafter_kind *kind = specd_drafter_kind_named(name);
    if (kind) *type = kind->type;
    else if (name && strcmp(name, "auto") == 0) *type = SPECD_SPEC_AUTO;
    else if (name && strcmp(name, "none") == 0) *type = SPECD_SPEC_NONE;
    else return false;
    return true;
}

/* "none" and the registry's names, joined: built from the table, so no message lists them by hand. */
static char type_list[256];
static pthread_once_t type_list_once = PTHREAD_ONCE_INIT;

static void build_type_list(void) {
    int32_t n = 0;
    const specd_drafter_kind *kinds = specd_drafter_kinds(&n);
    size_t len = (size_t)snprintf(type_list, sizeof type_list, "none");
    for (int32_t i = 0; i < n && len < sizeof type_list; i++)
        len += (size_t)snprintf(type_list + len, sizeof type_list - len, ", %s", kinds[i].name);
}

const char *specd_spec_type_names(void) {
    pthread_once(&type_list_once, build_type_list);
    return type_list;
}

specd_spec_type specd_spec_auto_type(const specd_engine *e) {
    if (specd_engine_has_draft(e)) return SPECD_SPEC_DRAFT;
    specd_head_kind head = specd_engine_head(e);
    int32_t n = 0;
    const specd_drafter_kind *kinds = specd_drafter_kinds(&n);
    for (int32_t i = 0; head != SPECD_HEAD_NONE && i < n; i++)
        if (kinds[i].head == head) return kinds[i].type;
    return SPECD_SPEC_NONE;
}

bool specd_spec_type_is_head(specd_spec_type t) {
    const specd_drafter_kind *kind = specd_drafter_kind_of(t);
    return kind && kind->head != SPECD_HEAD_NONE;
}

int32_t specd_spec_resolve_types(const specd_spec_params *sp, specd_spec_type auto_type,
                                 specd_spec_type out[SPECD_SPEC_MAX_TYPES]) {
    if (sp->n_types <= 0) {
        out[0] = sp->type == SPECD_SPEC_AUTO ? auto_type : sp->type;
        return out[0] == SPECD_SPEC_NONE ? 0 : 1;
    }
    int32_t n = 0;
    for (int32_t i = 0; i < sp->n_types && i < SPECD_SPEC_MAX_TYPES; i++)
        if (sp->types[i] != SPECD_SPEC_NONE) out[n++] = sp->types[i];
    return n;
}

specd_status specd_spec_params_set_types(specd_spec_params *sp, const char *const *names, int32_t n_names,
                                         char **error) {
    if (n_names < 1 || n_names > SPECD_SPEC_MAX_TYPES) {
        specd_set_error(error, "speculative types: give 1 to %d of %s (got %d)", SPECD_SPEC_MAX_TYPES,
                        specd_spec_type_names(), n_names);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    specd_spec_type types[SPECD_SPEC_MAX_TYPES];
    for (int32_t i = 0; i < n_names; i++) {
        if (!specd_spec_type_from_name(names[i], &types[i]) || types[i] == SPECD_SPEC_AUTO) {
            specd_set_error(error, "speculative type %d is '%s', not one of %s", i, names[i] ? names[i] : "(null)",
                            specd_spec_type_names());
            return SPECD_ERR_INVALID_ARGUMENT;
        }
        if (types[i] == SPECD_SPEC_NONE && n_names > 1) {
            specd_set_error(error, "speculative types: 'none' cannot be part of a list");
            return SPECD_ERR_INVALID_ARGUMENT;
        }
    }
    /* One type: the plain field, so 'none' and 'draft' keep their plain meaning. */
    sp->n_types = n_names > 1 ? n_names : 0;
    if (n_names == 1) sp->type = types[0];
    else memcpy(sp->types, types, (size_t)n_names * sizeof *types);
    return SPECD_OK;
}

specd_status specd_spec_params_parse_types(specd_spec_params *sp, const char *list, char **error) {
    char names[SPECD_SPEC_MAX_TYPES][32];
    const char *ptrs[SPECD_SPEC_MAX_TYPES];
    int32_t n = 0;
    for (const char *p = list ? list : ""; *p || n == 0;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof names[0] || n == SPECD_SPEC_MAX_TYPES) {
            specd_set_error(error, "speculative types '%s': %s", list ? list : "", n == SPECD_SPEC_MAX_TYPES
                            ? "too many entries" : "an empty or overlong entry");
            return SPECD_ERR_INVALID_ARGUMENT;
        }
        memcpy(names[n], p, len);
        names[n][len] = '\0';
        ptrs[n] = names[n];
        n++;
        p += len + (p[len] == ',');
    }
    return specd_spec_params_set_types(sp, ptrs, n, error);
}
