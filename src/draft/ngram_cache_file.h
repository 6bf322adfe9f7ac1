/* ngram_cache_file.h - the static n-gram cache on disk (tools/build_ngram_cache writes it,
 * ngram-cache reads it). Layout, little-endian:
 *   "SPECDNGC" | u32 version (1) | u32 n_vocab | u32 max_n | u32 n_pairs | n_pairs x {u64 key, i32 token, i32 count}
 * Keys are specd_hash_tokens of n-grams of 1..max_n tokens. */
#ifndef SPECD_NGRAM_CACHE_FILE_H
#define SPECD_NGRAM_CACHE_FILE_H

#include "ngram_counts.h"
#include "specd.h"

/* Writes `counts` to `path`. */
specd_status specd_ngram_cache_save(const specd_ngram_counts *counts, int32_t n_vocab, int32_t max_n,
                                    const char *path, char **error);
/* Reads `path` into `counts` (initialized by the caller), refusing files that are not caches or
 * were built for another vocabulary size. */
specd_status specd_ngram_cache_load(specd_ngram_counts *counts, int32_t n_vocab, const char *path, char **error);

#endif
