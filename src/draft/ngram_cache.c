/* ngram_cache.c - drafting from three levels of n-gram statistics (see .h).
 *
 * The context level is indexed incrementally (each position once, for n = 1..4), so a step costs
 * O(new tokens + draft length) hash lookups. A level proposes a token only with enough support:
 * the dynamic and static levels pool text that is not this one, so they must be surer. */
#include "ngram_cache.h"

#include "../util/util.h"

#include <stdlib.h>

#define CONTEXT_MAX_PAIRS (1 << 20)

typedef struct level_rule {
    int32_t min_n;      /* shortest n-gram this level may use */
    int32_t min_count;  /* the continuation's count */
    float min_share;    /* the continuation's share of the n-gram's occurrences */
} level_rule;

enum { LEVEL_CONTEXT, LEVEL_DYNAMIC, LEVEL_STATIC, N_LEVELS };

static const level_rule rules[N_LEVELS] = {
    [LEVEL_CONTEXT] = {2, 1, 0.5f},
    [LEVEL_DYNAMIC] = {2, 2, 0.5f},
    [LEVEL_STATIC] = {2, 4, 0.6f},
};

typedef struct ngram_cache {
    specd_ngram_counts context;
    specd_ngram_counts *dynamic;
    const specd_ngram_counts *statics;
    int32_t n_indexed; /* positions whose token is counted after its n-grams */
} ngram_cache;

static specd_status nc_prepare(void *self, const specd_token *tokens, int32_t n, char **error) {
    (void)tokens, (void)n, (void)error;
    ngram_cache *nc = self;
    nc->n_indexed = 0;
    return SPECD_OK;
}

/* Counts h[e] after each n-gram ending before it, for every e not counted yet. */
static bool index_context(ngram_cache *nc, const specd_token *h, int32_t n_history) {
    if (n_history < nc->n_indexed) nc->n_indexed = 0;
    for (int32_t e = nc->n_indexed; e < n_history; e++) {
        for (int32_t n = 1; n <= SPECD_NGRAM_CACHE_MAX_N && n <= e; n++)
            if (!specd_ngram_counts_add(&nc->context, specd_hash_tokens(h + e - n, n), h[e], 1)) return false;
    }
    nc->n_indexed = n_history;
    return true;
}

/* The continuation of the longest n-gram ending at h[len) that `counts` supports under `rule`. */
static bool lookup(const specd_ngram_counts *counts, const level_rule *rule, const specd_token *h, int32_t len,
                   specd_token *token, float *confidence) {
    if (!counts) return false;
    for (int32_t n = SPECD_NGRAM_CACHE_MAX_N; n >= rule->min_n; n--) {
        if (n > len) continue;
        const specd_ngram_key *k = specd_ngram_counts_find(counts, specd_hash_tokens(h + len - n, n));
        if (!k || k->best_count < rule->min_count || k->best_count < rule->min_share * (float)k->total) continue;
        *token = k->best_token;
        *confidence = (float)k->best_count / (float)(k->total + 1);
        return true;
    }
    return false;
}

static bool next_token(const ngram_cache *nc, const specd_token *h, int32_t len, specd_token *token, float *confidence) {
    return lookup(&nc->context, &rules[LEVEL_CONTEXT], h, len, token, confidence) ||
           lookup(nc->dynamic, &rules[LEVEL_DYNAMIC], h, len, token, confidence) ||
           lookup(nc->statics, &rules[LEVEL_STATIC], h, len, token, confidence);
}

static specd_status nc_draft(void *self, const specd_draft_request *req, specd_token_tree *tree, char **error) {
    ngram_cache *nc = self;
    if (!index_context(nc, req->history, req->n_history)) goto oom;
    specd_token *h = req->history;
    int32_t len = req->n_history;
    for (int32_t i = 0, parent = 0; i < req->max_len; i++) {
        specd_token t;
        float confidence;
        if (!next_token(nc, h, len, &t, &confidence)) break;
        h[len++] = t; /* scratch past the history: the next lookup sees this draft */
        parent = specd_tree_add(tree, parent, t, NULL, confidence);
        if (parent < 0) goto oom;
    }
    return SPECD_OK;
oom:
    specd_set_error(error, "out of memory in the ngram-cache drafter");
    return SPECD_ERR_NO_MEMORY;
}

/* The counts hold no positions and stay (they describe text that was seen); only the count of
 * indexed tokens moves with the history, so nothing is counted twice. */
static specd_status nc_shift(void *self, int32_t n_keep, int32_t n_discard, const specd_token *tokens, int32_t n,
                             char **error) {
    (void)tokens, (void)n, (void)error;
    ngram_cache *nc = self;
    nc->n_indexed = specd_shifted_count(nc->n_indexed, n_keep, n_discard);
    return SPECD_OK;
}

static void nc_destroy(void *self) {
    ngram_cache *nc = self;
    if (!nc) return;
    /* This request's statistics join the engine's dynamic level; if memory runs out there the
     * dynamic level just learns less. */
    if (nc->dynamic) (void)specd_ngram_counts_merge(nc->dynamic, &nc->context);
    specd_ngram_counts_free(&nc->context);
    free(nc);
}

static const specd_drafter_ops ngram_cache_ops = {
    .name = "ngram-cache",
    .prepare = nc_prepare,
    .draft = nc_draft,
    .destroy = nc_destroy,
    .shift = nc_shift,
};

specd_status specd_ngram_cache_new(specd_ngram_counts *dynamic, const specd_ngram_counts *statics,
                                   specd_drafter *out, char **error) {
    ngram_cache *nc = calloc(1, sizeof *nc);
    if (!nc) {
        specd_set_error(error, "out of memory for the ngram-cache drafter");
        return SPECD_ERR_NO_MEMORY;
    }
    specd_ngram_counts_init(&nc->context, CONTEXT_MAX_PAIRS);
    nc->dynamic = dynamic;
    nc->statics = statics;
    out->ops = &ngram_cache_ops;
    out->self = nc;
    return SPECD_OK;
}
