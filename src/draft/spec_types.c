/* spec_types.c - see spec_types.h; and the public names and parsers of drafter names. */
#include "spec_types.h"

#include "../engine/head.h"
#include "../util/util.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Each type's name, then llama-server's spellings of them (--spec-type), which name no type back. */
static const struct {
    specd_spec_type type;
    const char *name;
} spec_type_names[] = {
    {SPECD_SPEC_AUTO, "auto"},
    {SPECD_SPEC_NONE, "none"},
    {SPECD_SPEC_DRAFT, "draft"},
    {SPECD_SPEC_NGRAM_SIMPLE, "ngram-simple"},
    {SPECD_SPEC_NGRAM_MAP, "ngram-map"},
    {SPECD_SPEC_NGRAM_CACHE, "ngram-cache"},
    {SPECD_SPEC_SUFFIX, "suffix"},
    {SPECD_SPEC_MTP, "mtp"},
    {SPECD_SPEC_EAGLE3, "eagle3"},
    {SPECD_SPEC_DFLASH, "dflash"},
    {SPECD_SPEC_DSPARK, "dspark"},
    {SPECD_SPEC_NGRAM_MOD, "ngram-mod"},
    {SPECD_SPEC_NGRAM_MAP_K4V, "ngram-map-k4v"},
    {SPECD_SPEC_DRAFT, "draft-simple"},
    {SPECD_SPEC_MTP, "draft-mtp"},
    {SPECD_SPEC_EAGLE3, "draft-eagle3"},
    {SPECD_SPEC_DFLASH, "draft-dflash"},
    {SPECD_SPEC_DSPARK, "draft-dspark"},
    {SPECD_SPEC_NGRAM_MAP, "ngram-map-k"},
};
#define N_SPEC_NAMES (sizeof spec_type_names / sizeof *spec_type_names)

const char *specd_spec_type_name(specd_spec_type type) {
    for (size_t i = 0; i < N_SPEC_NAMES; i++)
        if (spec_type_names[i].type == type) return spec_type_names[i].name;
    return NULL;
}

bool specd_spec_type_from_name(const char *name, specd_spec_type *type) {
    for (size_t i = 0; name && i < N_SPEC_NAMES; i++) {
        if (strcmp(spec_type_names[i].name, name) == 0) {
            *type = spec_type_names[i].type;
            return true;
        }
    }
    return false;
}

/* The types' own names after "auto", joined: built from the table, so no message lists them by hand. */
static char type_list[256];
static pthread_once_t type_list_once = PTHREAD_ONCE_INIT;

static void build_type_list(void) {
    size_t len = 0;
    for (size_t i = 1; i < N_SPEC_NAMES; i++) {
        specd_spec_type t = spec_type_names[i].type;
        if (strcmp(specd_spec_type_name(t), spec_type_names[i].name) != 0) continue; /* an alias */
        len += (size_t)snprintf(type_list + len, sizeof type_list - len, "%s%s", len ? ", " : "", spec_type_names[i].name);
    }
}

const char *specd_spec_type_names(void) {
    pthread_once(&type_list_once, build_type_list);
    return type_list;
}

specd_spec_type specd_spec_auto_type(const specd_engine *e) {
    if (specd_engine_has_draft(e)) return SPECD_SPEC_DRAFT;
    switch (specd_engine_head(e)) {
    case SPECD_HEAD_MTP: return SPECD_SPEC_MTP;
    case SPECD_HEAD_EAGLE3: return SPECD_SPEC_EAGLE3;
    case SPECD_HEAD_DFLASH: return SPECD_SPEC_DFLASH;
    case SPECD_HEAD_DSPARK: return SPECD_SPEC_DSPARK;
    default: return SPECD_SPEC_NONE;
    }
}

bool specd_spec_type_is_head(specd_spec_type t) {
    return t == SPECD_SPEC_MTP || t == SPECD_SPEC_EAGLE3 || t == SPECD_SPEC_DFLASH || t == SPECD_SPEC_DSPARK;
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
