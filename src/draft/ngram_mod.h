/* ngram_mod.h - llama.cpp's ngram-mod: a hashed table of long n-grams -> the token that followed,
 * shared by the engine's requests (see ngram_mod.c). */
#ifndef SPECD_NGRAM_MOD_H
#define SPECD_NGRAM_MOD_H

#include "drafter.h"

/* The engine's table (drafter_memory.h): allocated when an ngram-mod drafter first needs it. */
typedef struct specd_ngram_mod_table {
    int32_t *slots;     /* NULL until first used */
    uint32_t used;      /* slots holding a token */
    int32_t low_streak; /* drafts in a row that were mostly rejected */
} specd_ngram_mod_table;

bool specd_ngram_mod_table_init(specd_ngram_mod_table *table);
void specd_ngram_mod_table_free(specd_ngram_mod_table *table);

/* A drafter on `table` (allocated here on first use). Owned by the caller (ops->destroy). */
specd_status specd_ngram_mod_new(specd_ngram_mod_table *table, specd_drafter *out, char **error);

#endif
