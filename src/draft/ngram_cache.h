/* ngram_cache.h - the ngram-cache drafter: next-token statistics of n-grams (1..4 tokens) at
 * three levels, consulted in order: this context (prompt + output so far), earlier requests on
 * this engine (dynamic), and a static file built from a corpus. Each draft token is the most
 * frequent continuation of the longest n-gram a level knows with enough support. */
#ifndef SPECD_NGRAM_CACHE_H
#define SPECD_NGRAM_CACHE_H

#include "drafter.h"
#include "ngram_counts.h"

#define SPECD_NGRAM_CACHE_MAX_N 4

/* dynamic (may be NULL) receives this context's counts when the drafter is destroyed; statics
 * (may be NULL) is only read. Both belong to the caller and must outlive the drafter. */
specd_status specd_ngram_cache_new(specd_ngram_counts *dynamic, const specd_ngram_counts *statics,
                                   specd_drafter *out, char **error);

#endif
