/* ngram_map.c - n-gram key -> continuations with hit counts (ngram-map).
 *
 * A continuation is identified by its first CONT_LEN tokens; it is indexed once those are known
 * (the key ending at e, when the history reaches e + CONT_LEN). Each key keeps up to WAYS
 * continuations; a new one replaces the least hit. The draft is the most hit continuation (at
 * least min_hits), read from its latest occurrence and carried on past it as far as the step
 * allows (a repeating text repeats on). Its verdicts update the continuation's acceptance; one
 * that keeps failing stops being drafted. */
#include "ngram_map.h"

#include "../util/util.h"
#include "u64_map.h"

#include <stdlib.h>

#define CONT_LEN 2
#define WAYS 4
#define MIN_ACCEPTANCE 0.25f /* below this (smoothed), a continuation is not drafted */

typedef struct continuation {
    uint64_t hash;      /* of its first CONT_LEN tokens; 0 = unused */
    int32_t hits;
    int32_t pos;        /* where its latest occurrence starts in the history */
    float drafted, accepted;
} continuation;

typedef struct map_entry {
    continuation ways[WAYS];
} map_entry;

typedef struct ngram_map {
    int32_t n, min_hits;
    specd_u64_map index;     /* key hash -> entries[] */
    map_entry *entries;
    int32_t n_entries, cap_entries;
    int32_t n_indexed;       /* keys ending before this are indexed */
    continuation *last;      /* the continuation drafted this step (for observe), or NULL */
    int32_t last_entry, last_way;
} ngram_map;

static specd_status nm_prepare(void *self, const specd_token *tokens, int32_t n, char **error) {
    (void)tokens, (void)n, (void)error;
    ngram_map *nm = self;
    specd_u64_map_clear(&nm->index);
    nm->n_entries = 0;
    nm->n_indexed = 0;
    nm->last_entry = -1;
    return SPECD_OK;
}

static map_entry *entry_for(ngram_map *nm, uint64_t key, bool create) {
    if (!create) {
        int32_t *idx = specd_u64_map_find(&nm->index, key);
        return idx ? &nm->entries[*idx] : NULL;
    }
    bool created = false;
    int32_t *idx = specd_u64_map_insert(&nm->index, key, nm->n_entries, &created);
    if (!idx) return NULL;
    if (created) {
        if (nm->n_entries == nm->cap_entries) {
            int32_t cap = nm->cap_entries ? nm->cap_entries * 2 : 256;
            map_entry *grown = specd_grow_array(nm->entries, (size_t)cap, sizeof *grown);
            if (!grown) return NULL;
            nm->entries = grown;
            nm->cap_entries = cap;
        }
        nm->entries[nm->n_entries++] = (map_entry){0};
    }
    return &nm->entries[*idx];
}

/* One more occurrence of the continuation starting at `pos` after its key. */
static void count_hit(map_entry *m, uint64_t cont, int32_t pos) {
    continuation *least = &m->ways[0];
    for (int w = 0; w < WAYS; w++) {
        continuation *c = &m->ways[w];
        if (c->hash == cont) {
            c->hits++;
            c->pos = pos;
            return;
        }
        if (c->hits < least->hits) least = c;
    }
    *least = (continuation){cont, 1, pos, 0.0f, 0.0f};
}

static bool index_history(ngram_map *nm, const specd_token *h, int32_t n_history) {
    if (n_history < nm->n_indexed) nm->n_indexed = 0;
    int32_t e = nm->n_indexed > nm->n ? nm->n_indexed : nm->n;
    for (; e + CONT_LEN <= n_history; e++) {
        map_entry *m = entry_for(nm, specd_hash_tokens(h + e - nm->n, nm->n), true);
        if (!m) return false;
        count_hit(m, specd_hash_tokens(h + e, CONT_LEN), e);
    }
    nm->n_indexed = e;
    return true;
}

static float smoothed_acceptance(const continuation *c) { return (c->accepted + 1.0f) / (c->drafted + 2.0f); }

/* The continuation worth drafting after the last n tokens, or NULL. */
static continuation *choose(ngram_map *nm, const specd_token *h, int32_t N, map_entry **entry, float *share) {
    map_entry *m = entry_for(nm, specd_hash_tokens(h + N - nm->n, nm->n), false);
    if (!m) return NULL;
    continuation *best = NULL;
    int32_t total = 0;
    for (int w = 0; w < WAYS; w++) {
        continuation *c = &m->ways[w];
        total += c->hits;
        if (c->hits >= nm->min_hits && smoothed_acceptance(c) >= MIN_ACCEPTANCE && (!best || c->hits > best->hits))
            best = c;
    }
    if (!best) return NULL;
    for (int32_t i = 0; i < nm->n; i++) /* a hash collision must not draft another key's text */
        if (h[best->pos - nm->n + i] != h[N - nm->n + i]) return NULL;
    *entry = m;
    *share = (float)best->hits / (float)total;
    return best;
}

static specd_status nm_draft(void *self, const specd_draft_request *req, specd_token_tree *tree, char **error) {
    ngram_map *nm = self;
    specd_token *h = req->history;
    int32_t N = req->n_history;
    nm->last_entry = -1;
    if (N < nm->n || !index_history(nm, h, N)) {
        if (N < nm->n) return SPECD_OK;
        specd_set_error(error, "out of memory in the ngram-map drafter");
        return SPECD_ERR_NO_MEMORY;
    }
    map_entry *m = NULL;
    float share = 0.0f;
    continuation *c = choose(nm, h, N, &m, &share);
    if (!c) return SPECD_OK;
    nm->last_entry = (int32_t)(m - nm->entries);
    nm->last_way = (int32_t)(c - m->ways);
    float confidence = share * smoothed_acceptance(c);
    for (int32_t i = 0, parent = 0; i < req->max_len; i++) {
        specd_token t = h[c->pos + i]; /* c->pos + i < N + i: the history or this draft */
        h[N + i] = t;
        parent = specd_tree_add(tree, parent, t, NULL, confidence);
        if (parent < 0) {
            specd_set_error(error, "out of memory in the ngram-map drafter");
            return SPECD_ERR_NO_MEMORY;
        }
    }
    return SPECD_OK;
}

static void nm_observe(void *self, const specd_token_tree *tree, const specd_verify_result *vr) {
    ngram_map *nm = self;
    if (nm->last_entry < 0) return;
    continuation *c = &nm->entries[nm->last_entry].ways[nm->last_way];
    /* Per draft, not per token: was the continuation right at least for its first token? */
    c->drafted += 1.0f;
    c->accepted += vr->n_accepted > 0 ? 1.0f : 0.0f;
    (void)tree;
    nm->last_entry = -1;
}

static void nm_destroy(void *self) {
    ngram_map *nm = self;
    if (!nm) return;
    specd_u64_map_free(&nm->index);
    free(nm->entries);
    free(nm);
}

static const specd_drafter_ops ngram_map_ops = {
    .name = "ngram-map",
    .prepare = nm_prepare,
    .draft = nm_draft,
    .destroy = nm_destroy,
    .observe = nm_observe,
};

specd_status specd_ngram_map_new(int32_t n, int32_t min_hits, specd_drafter *out, char **error) {
    if (n < 1 || min_hits < 1) {
        specd_set_error(error, "ngram-map needs n >= 1 and min_hits >= 1 (got %d, %d)", n, min_hits);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    ngram_map *nm = calloc(1, sizeof *nm);
    if (!nm) {
        specd_set_error(error, "out of memory for the ngram-map drafter");
        return SPECD_ERR_NO_MEMORY;
    }
    nm->n = n;
    nm->min_hits = min_hits;
    nm->last_entry = -1;
    out->ops = &ngram_map_ops;
    out->self = nm;
    return SPECD_OK;
}
