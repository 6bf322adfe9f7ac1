/* ngram_simple.h - prompt lookup: find the most recent earlier occurrence of the last n tokens in
 * prompt + output and draft the tokens that followed it. */
#ifndef SPECD_NGRAM_SIMPLE_H
#define SPECD_NGRAM_SIMPLE_H

#include "drafter.h"

#define SPECD_NGRAM_DEFAULT_N 3

/* A prompt-lookup drafter with keys of n tokens (n >= 1). Owned by the caller (ops->destroy). */
specd_status specd_ngram_simple_new(int32_t n, specd_drafter *out, char **error);

#endif
