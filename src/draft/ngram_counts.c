/* ngram_counts.c - counting next tokens per n-gram, with halving when full (see .h). */
#include "ngram_counts.h"

#include "../util/util.h"

#include <stdlib.h>
#include <string.h>

static uint64_t pair_hash(uint64_t key, int32_t token) { return specd_hash_mix(key ^ ((uint64_t)(uint32_t)token << 17)) + (uint32_t)token; }

void specd_ngram_counts_init(specd_ngram_counts *c, int32_t max_pairs) {
    memset(c, 0, sizeof *c);
    c->max_pairs = max_pairs;
}

void specd_ngram_counts_free(specd_ngram_counts *c) {
    free(c->pairs);
    free(c->keys);
    specd_u64_map_free(&c->pair_index);
    specd_u64_map_free(&c->key_index);
    memset(c, 0, sizeof *c);
}

static bool grow(void **array, int32_t *cap, int32_t need, size_t size) {
    if (need <= *cap) return true;
    int32_t new_cap = *cap ? *cap * 2 : 256;
    void *grown = specd_grow_array(*array, (size_t)new_cap, size);
    if (!grown) return false;
    *array = grown;
    *cap = new_cap;
    return true;
}

/* A pair's count changed by `delta`: keep its key's total and best up to date. */
static bool update_key(specd_ngram_counts *c, const specd_ngram_pair *p, int32_t delta) {
    bool created = false;
    int32_t *idx = specd_u64_map_insert(&c->key_index, p->key, c->n_keys, &created);
    if (!idx) return false;
    if (created) {
        if (!grow((void **)&c->keys, &c->cap_keys, c->n_keys + 1, sizeof *c->keys)) {
            *idx = -1;
            return false;
        }
        c->keys[c->n_keys++] = (specd_ngram_key){0, p->token, 0};
    }
    specd_ngram_key *k = &c->keys[*idx];
    k->total += delta;
    if (p->count > k->best_count || p->token == k->best_token) {
        k->best_token = p->token;
        k->best_count = p->count;
    }
    return true;
}

/* Halves every count, drops the pairs at zero, and rebuilds both indexes. */
static bool halve(specd_ngram_counts *c) {
    int32_t kept = 0;
    for (int32_t i = 0; i < c->n_pairs; i++) {
        specd_ngram_pair p = c->pairs[i];
        p.count /= 2;
        if (p.count > 0) c->pairs[kept++] = p;
    }
    c->n_pairs = kept;
    c->n_keys = 0;
    specd_u64_map_clear(&c->pair_index);
    specd_u64_map_clear(&c->key_index);
    for (int32_t i = 0; i < c->n_pairs; i++) {
        int32_t *idx = specd_u64_map_insert(&c->pair_index, pair_hash(c->pairs[i].key, c->pairs[i].token), i, NULL);
        if (!idx || !update_key(c, &c->pairs[i], c->pairs[i].count)) return false;
    }
    return true;
}

bool specd_ngram_counts_add(specd_ngram_counts *c, uint64_t key, int32_t token, int32_t count) {
    if (count <= 0) return true;
    bool created = false;
    int32_t *idx = specd_u64_map_find(&c->pair_index, pair_hash(key, token));
    if (!idx) {
        if (c->max_pairs > 0 && c->n_pairs >= c->max_pairs) {
            while (c->n_pairs >= c->max_pairs / 2)
                if (!halve(c)) return false;
        }
        if (!grow((void **)&c->pairs, &c->cap_pairs, c->n_pairs + 1, sizeof *c->pairs)) return false;
        idx = specd_u64_map_insert(&c->pair_index, pair_hash(key, token), c->n_pairs, &created);
        if (!idx) return false;
        c->pairs[c->n_pairs++] = (specd_ngram_pair){key, token, 0};
    }
    specd_ngram_pair *p = &c->pairs[*idx];
    p->count += count;
    return update_key(c, p, count);
}

const specd_ngram_key *specd_ngram_counts_find(const specd_ngram_counts *c, uint64_t key) {
    const int32_t *idx = specd_u64_map_find(&c->key_index, key);
    return idx && *idx >= 0 ? &c->keys[*idx] : NULL;
}

bool specd_ngram_counts_merge(specd_ngram_counts *to, const specd_ngram_counts *from) {
    for (int32_t i = 0; i < from->n_pairs; i++)
        if (!specd_ngram_counts_add(to, from->pairs[i].key, from->pairs[i].token, from->pairs[i].count)) return false;
    return true;
}
