/* ngram_map_k4v.h - llama.cpp's ngram-map-k4v: n-gram keys -> up to four values (the m tokens that
 * followed), the dominant one drafted (see ngram_map_k4v.c). */
#ifndef SPECD_NGRAM_MAP_K4V_H
#define SPECD_NGRAM_MAP_K4V_H

#include "drafter.h"

/* Keys of n tokens, values of m, drafted once a key was seen min_hits times. Owned by the caller. */
specd_status specd_ngram_map_k4v_new(int32_t n, int32_t m, int32_t min_hits, specd_drafter *out, char **error);

#endif
