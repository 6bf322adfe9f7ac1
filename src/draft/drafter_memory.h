/* drafter_memory.h - what the drafters keep across requests, owned by the engine: per-drafter
 * acceptance calibration (so a chain knows from the first step which drafter to trust) and the
 * recent yield of the drafters that decode (the draft model, the heads). Created on first use,
 * bounded in size, freed with the engine. */
#ifndef SPECD_DRAFTER_MEMORY_H
#define SPECD_DRAFTER_MEMORY_H

#include "acceptance.h"
#include "ngram_counts.h"
#include "ngram_mod.h"
#include "specd.h"
#include "suffix_tree.h"

#define SPECD_N_SPEC_TYPES (SPECD_SPEC_NGRAM_MAP_K4V + 1)
/* Bounds of what is kept across requests: about 12 MB for the suffix tree, 24 MB for the cache. */
#define SPECD_SUFFIX_MAX_NODES (1 << 18)
#define SPECD_SUFFIX_DEPTH 24
#define SPECD_DYNAMIC_CACHE_MAX_PAIRS (1 << 19)
/* Before the draft model has run in this engine: a guess that makes it worth trying. Its moving
 * averages start from it, so one unlucky first call does not write the model off. */
#define SPECD_MODEL_PRIOR_DRAFTED 4.0
#define SPECD_MODEL_PRIOR_ACCEPTED 2.0

typedef struct specd_drafter_memory {
    /* Acceptance by confidence, per drafter type. */
    specd_acceptance calibration[SPECD_N_SPEC_TYPES];
    /* The moving averages per call of each drafter that decodes (the draft model, the heads):
     * tokens drafted and accepted, by type. */
    double model_drafted[SPECD_N_SPEC_TYPES], model_accepted[SPECD_N_SPEC_TYPES];
    /* suffix: prompts and outputs of every request (bounded by SPECD_SUFFIX_MAX_NODES). */
    specd_suffix_tree suffix;
    /* ngram-cache: statistics of earlier requests (bounded), and the static file last asked for. */
    specd_ngram_counts dynamic;
    specd_ngram_counts statics;
    char *statics_path;  /* NULL: none loaded */
    /* ngram-mod: its table of long n-grams (16 MB, allocated when first used). */
    specd_ngram_mod_table mod;
} specd_drafter_memory;

/* A new memory (the engine's learned state keeps one: learned.h); NULL (with *error set) when out
 * of memory. */
specd_drafter_memory *specd_drafter_memory_new(char **error);
void specd_drafter_memory_free(specd_drafter_memory *memory);
/* The static n-gram cache at `path`, loaded once and kept while requests name the same file. */
specd_status specd_drafter_memory_statics(specd_drafter_memory *memory, int32_t n_vocab, const char *path,
                                          const specd_ngram_counts **out, char **error);

#endif
