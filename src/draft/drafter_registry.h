/* drafter_registry.h - the one table of drafter kinds (drafter_registry.c): for each, its name and
 * llama-server's spelling of it, what it needs from the engine, its help line and its constructor.
 * Names and their parsers (spec_types.c), help text, validation messages, the drafter chain's
 * construction and the per-drafter stats all read it: a new drafter is its file plus one row
 * there (and its value in specd.h's public specd_spec_type). "auto" and "none" are no drafters
 * and have no row. What a kind needs is public (specd.h: specd_spec_needs, specd_spec_type_needs,
 * specd_spec_params_need), for the layers that see only the library's API (libspecd-rpc). */
#ifndef SPECD_DRAFTER_REGISTRY_H
#define SPECD_DRAFTER_REGISTRY_H

#include "../engine/engine.h"
#include "../engine/head.h"
#include "drafter.h"

struct specd_drafter_memory;

/* What a constructor gets: the engine, what the drafters keep across requests (the engine's;
 * NULL where the kind keeps nothing: draft, the heads, ngram-simple, ngram-map, ngram-map-k4v)
 * and the request's speculative params. */
typedef struct specd_drafter_env {
    specd_engine *engine;
    struct specd_drafter_memory *memory;
    const specd_spec_params *params;
} specd_drafter_env;

typedef struct specd_drafter_kind {
    specd_spec_type type;
    const char *name;        /* specd's name, the one reported */
    const char *llama_name;  /* llama-server's --spec-type spelling (may equal name); NULL: it has none */
    specd_spec_needs needs;
    specd_head_kind head;    /* the head it runs (NEXTN and HEAD_FILE kinds), else SPECD_HEAD_NONE */
    const char *requirement; /* what the engine must load for it, as a refusal says it; NULL: nothing */
    const char *help;        /* one line for the help texts */
    specd_status (*create)(const specd_drafter_env *env, specd_drafter *out, char **error);
} specd_drafter_kind;

/* Every kind, in specd_spec_type order; *n is how many. */
const specd_drafter_kind *specd_drafter_kinds(int32_t *n);
/* The kind of a type; NULL for AUTO, NONE and values no row has. */
const specd_drafter_kind *specd_drafter_kind_of(specd_spec_type type);
/* The kind with this name or llama-server's spelling; NULL when there is none. */
const specd_drafter_kind *specd_drafter_kind_named(const char *name);
/* Whether the kind decodes a model to draft (the draft model or a head): valued by its recent
 * yield in a drafter list, rather than by its proposal before it runs. */
bool specd_drafter_kind_decodes(const specd_drafter_kind *kind);
/* Whether sp names (as its type or in its list) a drafter that needs `needs`; AUTO counts as the
 * draft model when auto_is_draft. */
bool specd_spec_names_need(const specd_spec_params *sp, specd_spec_needs needs, bool auto_is_draft);
/* Builds a drafter of `type` (a row's) for one generation. Owned by the caller (ops->destroy). */
specd_status specd_drafter_create(const specd_drafter_env *env, specd_spec_type type, specd_drafter *out,
                                  char **error);

#endif
