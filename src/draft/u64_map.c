/* u64_map.c - linear probing over a power-of-two table, grown at half load. */
#include "u64_map.h"

#include <stdlib.h>
#include <string.h>

#define INITIAL_CAP 256u

static uint64_t stored_key(uint64_t key) { return key ? key : 1; }

void specd_u64_map_free(specd_u64_map *map) {
    free(map->keys);
    free(map->values);
    memset(map, 0, sizeof *map);
}

void specd_u64_map_clear(specd_u64_map *map) {
    if (map->keys) memset(map->keys, 0, (size_t)map->cap * sizeof *map->keys);
    map->n = 0;
}

static uint32_t slot_of(const specd_u64_map *map, uint64_t key) {
    uint32_t mask = map->cap - 1, i = (uint32_t)(specd_hash_mix(key) & mask);
    while (map->keys[i] && map->keys[i] != key) i = (i + 1) & mask;
    return i;
}

int32_t *specd_u64_map_find(const specd_u64_map *map, uint64_t key) {
    if (!map->cap) return NULL;
    key = stored_key(key);
    uint32_t i = slot_of(map, key);
    return map->keys[i] ? &map->values[i] : NULL;
}

static bool grow(specd_u64_map *map) {
    uint32_t cap = map->cap ? map->cap * 2 : INITIAL_CAP;
    specd_u64_map bigger = {calloc(cap, sizeof(uint64_t)), malloc((size_t)cap * sizeof(int32_t)), cap, 0};
    if (!bigger.keys || !bigger.values || cap < map->cap) {
        specd_u64_map_free(&bigger);
        return false;
    }
    for (uint32_t i = 0; i < map->cap; i++) {
        if (!map->keys[i]) continue;
        uint32_t j = slot_of(&bigger, map->keys[i]);
        bigger.keys[j] = map->keys[i];
        bigger.values[j] = map->values[i];
        bigger.n++;
    }
    specd_u64_map_free(map);
    *map = bigger;
    return true;
}

int32_t *specd_u64_map_insert(specd_u64_map *map, uint64_t key, int32_t initial, bool *created) {
    if ((map->n + 1) * 2 > map->cap && !grow(map)) return NULL;
    key = stored_key(key);
    uint32_t i = slot_of(map, key);
    bool is_new = !map->keys[i];
    if (is_new) {
        map->keys[i] = key;
        map->values[i] = initial;
        map->n++;
    }
    if (created) *created = is_new;
    return &map->values[i];
}
