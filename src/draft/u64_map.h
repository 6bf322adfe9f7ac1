/* u64_map.h - an open-addressing hash map from 64-bit keys to int32 values: the index behind the
 * model-free drafters (n-gram -> position, n-gram -> entry, (node, token) -> child). Lookups are
 * O(1) expected, so drafting never scans the history. Entries are never deleted one by one; a
 * structure that must shrink rebuilds its map (specd_u64_map_clear, then re-insert). */
#ifndef SPECD_U64_MAP_H
#define SPECD_U64_MAP_H

#include <stdbool.h>
#include <stdint.h>

typedef struct specd_u64_map {
    uint64_t *keys;  /* 0 = empty slot (key 0 is stored as 1: keys are hashes, so this is harmless) */
    int32_t *values;
    uint32_t cap;    /* a power of two, or 0 before the first insert */
    uint32_t n;
} specd_u64_map;

void specd_u64_map_free(specd_u64_map *map);
/* Forgets every entry, keeping the memory. */
void specd_u64_map_clear(specd_u64_map *map);
/* The value stored for `key`, or NULL. */
int32_t *specd_u64_map_find(const specd_u64_map *map, uint64_t key);
/* The value slot for `key`, created with `initial` when absent (*created tells which).
 * Returns NULL when out of memory. */
int32_t *specd_u64_map_insert(specd_u64_map *map, uint64_t key, int32_t initial, bool *created);

/* Hashing token sequences: keys of different lengths differ, and the mix spreads nearby tokens. */
static inline uint64_t specd_hash_mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static inline uint64_t specd_hash_tokens(const int32_t *tokens, int32_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    for (int32_t i = 0; i < n; i++) h = specd_hash_mix(h ^ (uint32_t)tokens[i]) + 0x9e3779b97f4a7c15ULL;
    return h;
}

#endif
