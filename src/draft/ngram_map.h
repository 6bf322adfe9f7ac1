/* ngram_map.h - the ngram-map drafter: a hash map from n-gram keys to the continuations seen after
 * them, with hit counts and per-continuation acceptance. It drafts a continuation only when it
 * was seen at least min_hits times and its earlier drafts were not mostly rejected: fewer, surer
 * drafts than prompt lookup. */
#ifndef SPECD_NGRAM_MAP_H
#define SPECD_NGRAM_MAP_H

#include "drafter.h"

specd_status specd_ngram_map_new(int32_t n, int32_t min_hits, specd_drafter *out, char **error);

#endif
