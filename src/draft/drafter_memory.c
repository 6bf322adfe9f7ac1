/* drafter_memory.c - creating and freeing the drafters' memory (see .h). */
#include "drafter_memory.h"

#include "../util/util.h"
#include "ngram_cache_file.h"

#include <stdlib.h>
#include <string.h>

specd_drafter_memory *specd_drafter_memory_new(char **error) {
    specd_drafter_memory *m = calloc(1, sizeof *m);
    if (!m || !specd_suffix_tree_init(&m->suffix, SPECD_SUFFIX_MAX_NODES, SPECD_SUFFIX_DEPTH)) {
        specd_drafter_memory_free(m);
        specd_set_error(error, "out of memory for the drafters' state");
        return NULL;
    }
    for (int i = 0; i < SPECD_N_SPEC_TYPES; i++) {
        specd_acceptance_init(&m->calibration[i]);
        m->model_drafted[i] = SPECD_MODEL_PRIOR_DRAFTED;
        m->model_accepted[i] = SPECD_MODEL_PRIOR_ACCEPTED;
    }
    specd_ngram_counts_init(&m->dynamic, SPECD_DYNAMIC_CACHE_MAX_PAIRS);
    specd_ngram_counts_init(&m->statics, 0);
    return m;
}

void specd_drafter_memory_free(specd_drafter_memory *m) {
    if (!m) return;
    specd_suffix_tree_free(&m->suffix);
    specd_ngram_counts_free(&m->dynamic);
    specd_ngram_counts_free(&m->statics);
    specd_ngram_mod_table_free(&m->mod);
    free(m->statics_path);
    free(m);
}

specd_status specd_drafter_memory_statics(specd_drafter_memory *m, int32_t n_vocab, const char *path,
                                          const specd_ngram_counts **out, char **error) {
    *out = NULL;
    if (!path || !*path) return SPECD_OK;
    if (m->statics_path && strcmp(m->statics_path, path) == 0) {
        *out = &m->statics;
        return SPECD_OK;
    }
    specd_ngram_counts_free(&m->statics);
    specd_ngram_counts_init(&m->statics, 0);
    free(m->statics_path);
    m->statics_path = NULL;
    specd_status st = specd_ngram_cache_load(&m->statics, n_vocab, path, error);
    if (st != SPECD_OK) {
        specd_ngram_counts_free(&m->statics);
        return st;
    }
    size_t len = strlen(path) + 1;
    m->statics_path = malloc(len);
    if (!m->statics_path) {
        specd_set_error(error, "out of memory for the n-gram cache path");
        return SPECD_ERR_NO_MEMORY;
    }
    memcpy(m->statics_path, path, len);
    *out = &m->statics;
    return SPECD_OK;
}
