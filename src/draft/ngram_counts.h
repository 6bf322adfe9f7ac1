/* ngram_counts.h - how often each token followed each n-gram: the statistics behind ngram-cache
 * (one table per level: this context, earlier requests, a static file). Bounded: past max_pairs
 * every count is halved and the pairs that reach zero are dropped, so rare n-grams make room and
 * frequent ones stay (an old count weighs half as much as a new one). */
#ifndef SPECD_NGRAM_COUNTS_H
#define SPECD_NGRAM_COUNTS_H

#include "u64_map.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct specd_ngram_pair {
    uint64_t key;   /* hash of the n-gram (specd_hash_tokens) */
    int32_t token;  /* the token that followed it */
    int32_t count;
} specd_ngram_pair;

typedef struct specd_ngram_key {
    int32_t total;      /* occurrences of the n-gram with a known next token */
    int32_t best_token; /* its most frequent next token */
    int32_t best_count;
} specd_ngram_key;

typedef struct specd_ngram_counts {
    specd_ngram_pair *pairs;
    int32_t n_pairs, cap_pairs;
    specd_ngram_key *keys;
    int32_t n_keys, cap_keys;
    specd_u64_map pair_index; /* hash(key, token) -> pairs[] */
    specd_u64_map key_index;  /* key -> keys[] */
    int32_t max_pairs;        /* bound; <= 0: unbounded (a static file) */
} specd_ngram_counts;

void specd_ngram_counts_init(specd_ngram_counts *c, int32_t max_pairs);
void specd_ngram_counts_free(specd_ngram_counts *c);
/* Adds `count` occurrences of `token` after the n-gram `key`. Returns false when out of memory. */
bool specd_ngram_counts_add(specd_ngram_counts *c, uint64_t key, int32_t token, int32_t count);
/* The statistics of an n-gram, or NULL when it was never seen. */
const specd_ngram_key *specd_ngram_counts_find(const specd_ngram_counts *c, uint64_t key);
/* Adds every pair of `from` into `to`. Returns false when out of memory. */
bool specd_ngram_counts_merge(specd_ngram_counts *to, const specd_ngram_counts *from);

#endif
