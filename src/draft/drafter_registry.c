/* drafter_registry.c - the table of drafter kinds (see .h), and the constructors' adapters: each
 * row's create takes the one env and hands its drafter's own constructor what it needs. */
#include "drafter_registry.h"

#include "../util/util.h"
#include "draft_model.h"
#include "drafter_memory.h"
#include "head_drafters.h"
#include "ngram_cache.h"
#include "ngram_map.h"
#include "ngram_map_k4v.h"
#include "ngram_mod.h"
#include "ngram_simple.h"
#include "suffix.h"

#include <string.h>

/* A kind that keeps state across requests, built without the engine's drafter memory. */
static bool has_memory(const specd_drafter_env *env, const char *name, char **error) {
    if (env->memory) return true;
    specd_set_error(error, "the %s drafter needs the engine's drafter memory (none was given)", name);
    return false;
}

static specd_status new_draft_model(const specd_drafter_env *env, specd_drafter *out, char **error) {
    return specd_draft_model_new(env->engine, out, error);
}

static specd_status new_head(const specd_drafter_env *env, specd_drafter *out, char **error) {
    return specd_head_drafter_new(env->engine, out, error);
}

static specd_status new_ngram_simple(const specd_drafter_env *env, specd_drafter *out, char **error) {
    return specd_ngram_simple_new(env->params->ngram_n, out, error);
}

static specd_status new_ngram_map(const specd_drafter_env *env, specd_drafter *out, char **error) {
    return specd_ngram_map_new(env->params->ngram_n, env->params->ngram_min_hits, out, error);
}

static specd_status new_ngram_map_k4v(const specd_drafter_env *env, specd_drafter *out, char **error) {
    const specd_spec_params *sp = env->params;
    return specd_ngram_map_k4v_new(sp->ngram_n, sp->draft_max, sp->ngram_min_hits, out, error);
}

static specd_status new_ngram_cache(const specd_drafter_env *env, specd_drafter *out, char **error) {
    if (!has_memory(env, "ngram-cache", error)) return SPECD_ERR_INVALID_ARGUMENT;
    const specd_ngram_counts *statics = NULL;
    specd_status st = specd_drafter_memory_statics(env->memory, specd_engine_n_vocab(env->engine),
                                                   env->params->ngram_cache_path, &statics, error);
    return st == SPECD_OK ? specd_ngram_cache_new(&env->memory->dynamic, statics, out, error) : st;
}

static specd_status new_suffix(const specd_drafter_env *env, specd_drafter *out, char **error) {
    if (!has_memory(env, "suffix", error)) return SPECD_ERR_INVALID_ARGUMENT;
    return specd_suffix_new(&env->memory->suffix, env->params->suffix_branches, out, error);
}

static specd_status new_ngram_mod(const specd_drafter_env *env, specd_drafter *out, char **error) {
    if (!has_memory(env, "ngram-mod", error)) return SPECD_ERR_INVALID_ARGUMENT;
    return specd_ngram_mod_new(&env->memory->mod, out, error);
}

/* In specd_spec_type order: the first row is DRAFT (1), each next one the type after. */
static const specd_drafter_kind kinds[] = {
    {SPECD_SPEC_DRAFT, "draft", "draft-simple", SPECD_SPEC_NEEDS_DRAFT_MODEL, SPECD_HEAD_NONE,
     "a draft model: load one (-md) or leave 'draft' out of the list",
     "a draft model (-md) proposes chains, or trees where a branch pays", new_draft_model},
    {SPECD_SPEC_NGRAM_SIMPLE, "ngram-simple", "ngram-simple", SPECD_SPEC_NEEDS_NOTHING, SPECD_HEAD_NONE, NULL,
     "prompt lookup: what followed the latest earlier copy of the last n tokens", new_ngram_simple},
    {SPECD_SPEC_NGRAM_MAP, "ngram-map", "ngram-map-k", SPECD_SPEC_NEEDS_NOTHING, SPECD_HEAD_NONE, NULL,
     "n-gram -> continuations with hit counts; drafts only frequent ones", new_ngram_map},
    {SPECD_SPEC_NGRAM_CACHE, "ngram-cache", "ngram-cache", SPECD_SPEC_NEEDS_NOTHING, SPECD_HEAD_NONE, NULL,
     "n-gram statistics of this context, earlier requests and a static file", new_ngram_cache},
    {SPECD_SPEC_SUFFIX, "suffix", NULL, SPECD_SPEC_NEEDS_NOTHING, SPECD_HEAD_NONE, NULL,
     "a suffix tree over prompts and past outputs (SuffixDecoding)", new_suffix},
    {SPECD_SPEC_MTP, "mtp", "draft-mtp", SPECD_SPEC_NEEDS_TARGET_NEXTN, SPECD_HEAD_MTP,
     "the target's MTP layers: load the engine with them (specd_engine_params.mtp; specd run/serve --spec mtp)",
     "the target's multi-token-prediction (nextn) layers, loaded with it", new_head},
    {SPECD_SPEC_EAGLE3, "eagle3", "draft-eagle3", SPECD_SPEC_NEEDS_HEAD_FILE, SPECD_HEAD_EAGLE3,
     "an EAGLE-3 head: give its GGUF (architecture eagle3) as the draft (-md)",
     "an EAGLE-3 head (-md an eagle3 GGUF) fed three of the target's hidden states", new_head},
    {SPECD_SPEC_DFLASH, "dflash", "draft-dflash", SPECD_SPEC_NEEDS_HEAD_FILE, SPECD_HEAD_DFLASH,
     "a DFlash head: give its GGUF (architecture dflash) as the draft (-md)",
     "a DFlash block-diffusion head (-md a dflash GGUF): a block per pass", new_head},
    {SPECD_SPEC_DSPARK, "dspark", "draft-dspark", SPECD_SPEC_NEEDS_HEAD_FILE, SPECD_HEAD_DSPARK,
     "a DSpark head: give its GGUF (a dflash with a Markov head) as the draft (-md)",
     "DFlash with its Markov head (-md a dflash GGUF with markov_w1)", new_head},
    {SPECD_SPEC_NGRAM_MOD, "ngram-mod", "ngram-mod", SPECD_SPEC_NEEDS_NOTHING, SPECD_HEAD_NONE, NULL,
     "a hashed n-gram -> next token table, rebuilt when it stops paying", new_ngram_mod},
    {SPECD_SPEC_NGRAM_MAP_K4V, "ngram-map-k4v", "ngram-map-k4v", SPECD_SPEC_NEEDS_NOTHING, SPECD_HEAD_NONE, NULL,
     "n-gram key -> up to 4 continuations, the most seen drafted", new_ngram_map_k4v},
};
#define N_KINDS ((int32_t)(sizeof kinds / sizeof *kinds))
/* The engine keeps a calibration per type (drafter_memory.h): a row added needs its room there. */
_Static_assert(sizeof kinds / sizeof *kinds + 1 == SPECD_N_SPEC_TYPES, "SPECD_N_SPEC_TYPES: one per row, and NONE");

const specd_drafter_kind *specd_drafter_kinds(int32_t *n) {
    *n = N_KINDS;
    return kinds;
}

const specd_drafter_kind *specd_drafter_kind_of(specd_spec_type type) {
    int32_t i = (int32_t)type - (int32_t)SPECD_SPEC_DRAFT;
    return i >= 0 && i < N_KINDS && kinds[i].type == type ? &kinds[i] : NULL;
}

const specd_drafter_kind *specd_drafter_kind_named(const char *name) {
    for (int32_t i = 0; name && i < N_KINDS; i++)
        if (strcmp(kinds[i].name, name) == 0 || (kinds[i].llama_name && strcmp(kinds[i].llama_name, name) == 0))
            return &kinds[i];
    return NULL;
}

bool specd_drafter_kind_decodes(const specd_drafter_kind *kind) {
    return kind && kind->needs != SPECD_SPEC_NEEDS_NOTHING;
}

static bool type_needs(specd_spec_type type, specd_spec_needs needs, bool auto_is_draft) {
    if (type == SPECD_SPEC_AUTO) return auto_is_draft && needs == SPECD_SPEC_NEEDS_DRAFT_MODEL;
    const specd_drafter_kind *kind = specd_drafter_kind_of(type);
    return kind && kind->needs == needs;
}

bool specd_spec_names_need(const specd_spec_params *sp, specd_spec_needs needs, bool auto_is_draft) {
    if (sp->n_types <= 0) return type_needs(sp->type, needs, auto_is_draft);
    for (int32_t i = 0; i < sp->n_types && i < SPECD_SPEC_MAX_TYPES; i++)
        if (type_needs(sp->types[i], needs, auto_is_draft)) return true;
    return false;
}

specd_spec_needs specd_spec_type_needs(specd_spec_type type) {
    const specd_drafter_kind *kind = specd_drafter_kind_of(type);
    return kind ? kind->needs : SPECD_SPEC_NEEDS_NOTHING;
}

bool specd_spec_params_need(const specd_spec_params *sp, specd_spec_needs needs) {
    return sp && specd_spec_names_need(sp, needs, false);
}

specd_status specd_drafter_create(const specd_drafter_env *env, specd_spec_type type, specd_drafter *out,
                                  char **error) {
    const specd_drafter_kind *kind = specd_drafter_kind_of(type);
    if (kind) return kind->create(env, out, error);
    specd_set_error(error, "speculative type %d is not a drafter of this build", (int)type);
    return SPECD_ERR_INVALID_ARGUMENT;
}
