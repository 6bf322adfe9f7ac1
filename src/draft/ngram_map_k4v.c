/* ngram_map_k4v.c - llama.cpp's ngram-map-k4v: each key (an n-gram of the history) keeps up to four
 * values, the m tokens that followed its occurrences, with how often each followed. When the last n
 * tokens are a key seen min_hits times, its most frequent value is drafted if it followed at least
 * twice as often as the others together; as long as it was accepted the last time it was drafted
 * (at first all m tokens, and never less than one: a value that failed once is still probed).
 *
 * An occurrence is counted once its m following tokens are in the history, so a step costs what the
 * new tokens add (and up to four comparisons of m tokens each), not a scan of the history. */
#include "ngram_map_k4v.h"

#include "u64_map.h"

#include "../util/util.h"

#include <stdlib.h>
#include <string.h>

#define VALUES 4

typedef struct key_values {
    int32_t start[VALUES]; /* where each value starts in the history; -1: unused */
    int32_t count[VALUES];
    int32_t length[VALUES]; /* tokens to draft of it: as many as were accepted the last time */
    int32_t hits;
} key_values;

typedef struct ngram_map_k4v {
    int32_t n, m, min_hits;
    specd_u64_map index; /* key hash -> keys[] */
    key_values *keys;
    int32_t n_keys, cap_keys;
    int32_t n_counted;    /* occurrences whose key ends before this are counted */
    key_values *drafted;  /* this step's drafted key and value, for observe */
    int32_t drafted_value;
} ngram_map_k4v;

static specd_status k4v_prepare(void *self, const specd_token *tokens, int32_t n, char **error) {
    (void)tokens, (void)n, (void)error;
    ngram_map_k4v *k = self;
    specd_u64_map_clear(&k->index);
    k->n_keys = 0;
    k->n_counted = 0;
    k->drafted = NULL;
    return SPECD_OK;
}

static key_values *key_of(ngram_map_k4v *k, uint64_t hash, bool create) {
    int32_t *idx = create ? specd_u64_map_insert(&k->index, hash, k->n_keys, NULL) : specd_u64_map_find(&k->index, hash);
    if (!idx) return NULL;
    if (*idx < k->n_keys) return &k->keys[*idx];
    if (k->n_keys == k->cap_keys) {
        int32_t cap = k->cap_keys ? 2 * k->cap_keys : 64;
        key_values *grown = specd_grow_array(k->keys, (size_t)cap, sizeof *grown);
        if (!grown) return NULL;
        k->keys = grown;
        k->cap_keys = cap;
    }
    key_values *kv = &k->keys[k->n_keys++];
    memset(kv, 0, sizeof *kv);
    for (int v = 0; v < VALUES; v++) kv->start[v] = -1, kv->length[v] = k->m;
    return kv;
}

/* The occurrence whose key ends at e (its value h[e..e+m)): counted under its key. */
static bool count_occurrence(ngram_map_k4v *k, const specd_token *h, int32_t e) {
    key_values *kv = key_of(k, specd_hash_tokens(h + e - k->n, k->n), true);
    if (!kv) return false;
    kv->hits++;
    for (int v = 0; v < VALUES; v++) {
        if (kv->start[v] < 0) kv->start[v] = e; /* a new value in a free place */
        if (kv->start[v] == e || !memcmp(h + kv->start[v], h + e, (size_t)k->m * sizeof *h)) {
            kv->count[v]++;
            return true;
        }
    }
    return true; /* a fifth value: not kept, as llama.cpp */
}

static bool count_history(ngram_map_k4v *k, const specd_token *h, int32_t n_history) {
    if (n_history < k->n_counted + k->m) return true;
    int32_t e = k->n_counted > k->n ? k->n_counted : k->n;
    for (; e + k->m <= n_history; e++)
        if (!count_occurrence(k, h, e)) return false;
    k->n_counted = e;
    return true;
}

/* The value to draft for the key: the most frequent, if it dominates (-1: none). */
static int dominant_value(const ngram_map_k4v *k, const key_values *kv) {
    int best = 0;
    int32_t others = 0;
    for (int v = 1; v < VALUES; v++)
        if (kv->count[v] > kv->count[best]) best = v;
    for (int v = 0; v < VALUES; v++) others += v == best ? 0 : kv->count[v];
    if (kv->hits < k->min_hits || kv->count[best] == 0 || (others > 0 && kv->count[best] < 2 * others)) return -1;
    return best;
}

static specd_status k4v_draft(void *self, const specd_draft_request *req, specd_token_tree *tree, char **error) {
    ngram_map_k4v *k = self;
    const specd_token *h = req->history;
    int32_t n = req->n_history;
    k->drafted = NULL;
    if (!count_history(k, h, n)) goto oom;
    if (n < k->n) return SPECD_OK;
    key_values *kv = key_of(k, specd_hash_tokens(h + n - k->n, k->n), false);
    int v = kv ? dominant_value(k, kv) : -1;
    if (v < 0) return SPECD_OK;
    int32_t others = kv->hits - kv->count[v], len = kv->length[v] < req->max_len ? kv->length[v] : req->max_len;
    float confidence = (float)kv->count[v] / (float)(kv->count[v] + others + 1);
    for (int32_t i = 0, parent = 0; i < len; i++) {
        parent = specd_tree_add(tree, parent, h[kv->start[v] + i], NULL, confidence);
        if (parent < 0) goto oom;
    }
    k->drafted = kv;
    k->drafted_value = v;
    return SPECD_OK;
oom:
    specd_set_error(error, "out of memory in the ngram-map-k4v drafter");
    return SPECD_ERR_NO_MEMORY;
}

static void k4v_observe(void *self, const specd_token_tree *tree, const specd_verify_result *vr) {
    (void)tree;
    ngram_map_k4v *k = self;
    if (!k->drafted) return;
    k->drafted->length[k->drafted_value] = vr->n_accepted > 1 ? vr->n_accepted : 1;
    k->drafted = NULL;
}

static void k4v_destroy(void *self) {
    ngram_map_k4v *k = self;
    if (!k) return;
    specd_u64_map_free(&k->index);
    free(k->keys);
    free(k);
}

static const specd_drafter_ops ngram_map_k4v_ops = {
    .name = "ngram-map-k4v",
    .prepare = k4v_prepare,
    .draft = k4v_draft,
    .destroy = k4v_destroy,
    .observe = k4v_observe,
};

specd_status specd_ngram_map_k4v_new(int32_t n, int32_t m, int32_t min_hits, specd_drafter *out, char **error) {
    if (n < 1 || m < 1) {
        specd_set_error(error, "ngram-map-k4v needs keys and values of at least 1 token (got %d, %d)", n, m);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    ngram_map_k4v *k = calloc(1, sizeof *k);
    if (!k) {
        specd_set_error(error, "out of memory for the ngram-map-k4v drafter");
        return SPECD_ERR_NO_MEMORY;
    }
    k->n = n;
    k->m = m;
    k->min_hits = min_hits;
    out->ops = &ngram_map_k4v_ops;
    out->self = k;
    return SPECD_OK;
}
