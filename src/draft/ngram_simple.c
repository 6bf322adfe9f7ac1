/* ngram_simple.c - prompt lookup (ngram-simple).
 *
 * Index: key = hash of the n tokens h[e-n..e) -> e, the latest such end. Every position is
 * indexed once, when the history first reaches past it, so a step costs O(new tokens + draft),
 * never a scan of the history.
 *
 * Draft: with N = n_history and key h[N-n..N), the latest earlier end e < N gives the draft
 * h[e], h[e+1], ... When the draft runs into the present (e + i >= N) it reads its own earlier
 * draft tokens: a text that repeats with period N - e is drafted as repeating on. The confidence
 * grows with how far back the match really extends (n tokens at least), which the chain's
 * calibration turns into an acceptance estimate. */
#include "ngram_simple.h"

#include "../util/util.h"
#include "u64_map.h"

#include <stdlib.h>

#define MATCH_LOOKBACK 32 /* how far back a match is measured for the confidence */

typedef struct ngram_simple {
    int32_t n;
    specd_u64_map last_end; /* key hash -> latest end position */
    int32_t n_indexed;      /* keys ending before this position are indexed */
} ngram_simple;

static specd_status ns_prepare(void *self, const specd_token *tokens, int32_t n, char **error) {
    (void)tokens, (void)n, (void)error;
    ngram_simple *ns = self;
    /* A new prompt: the generation owns one drafter, so this only happens at its start. */
    specd_u64_map_clear(&ns->last_end);
    ns->n_indexed = 0;
    return SPECD_OK;
}

/* Indexes the keys ending at positions [n_indexed, n_history). Returns false when out of memory. */
static bool index_history(ngram_simple *ns, const specd_token *h, int32_t n_history) {
    if (n_history < ns->n_indexed) { /* not an extension of what was indexed: start over */
        specd_u64_map_clear(&ns->last_end);
        ns->n_indexed = 0;
    }
    int32_t e = ns->n_indexed > ns->n ? ns->n_indexed : ns->n;
    for (; e < n_history; e++) {
        int32_t *slot = specd_u64_map_insert(&ns->last_end, specd_hash_tokens(h + e - ns->n, ns->n), e, NULL);
        if (!slot) return false;
        *slot = e;
    }
    ns->n_indexed = n_history > ns->n_indexed ? n_history : ns->n_indexed;
    return true;
}

static bool same_tokens(const specd_token *a, const specd_token *b, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (a[i] != b[i]) return false;
    return true;
}

/* Tokens the match ending at e shares with the present, counting back from the ends. */
static int32_t match_length(const specd_token *h, int32_t e, int32_t n_history) {
    int32_t len = 0;
    while (len < MATCH_LOOKBACK && e - 1 - len >= 0 && h[e - 1 - len] == h[n_history - 1 - len]) len++;
    return len;
}

static specd_status ns_draft(void *self, const specd_draft_request *req, specd_token_tree *tree, char **error) {
    ngram_simple *ns = self;
    specd_token *h = req->history;
    int32_t N = req->n_history;
    if (N <= ns->n || req->max_len < 1) return SPECD_OK;
    /* Look up before indexing the key that ends at N itself (it would find itself). */
    if (!index_history(ns, h, N)) goto oom;
    const int32_t *found = specd_u64_map_find(&ns->last_end, specd_hash_tokens(h + N - ns->n, ns->n));
    if (!found || *found >= N || !same_tokens(h + *found - ns->n, h + N - ns->n, ns->n)) return SPECD_OK;
    int32_t e = *found, L = match_length(h, e, N);
    float confidence = (float)L / (float)(L + 4);
    for (int32_t i = 0, parent = 0; i < req->max_len; i++) {
        specd_token t = h[e + i]; /* e + i < N + i: the history or this draft so far */
        h[N + i] = t;             /* scratch past the history, read by later i */
        parent = specd_tree_add(tree, parent, t, NULL, confidence);
        if (parent < 0) goto oom;
    }
    return SPECD_OK;
oom:
    specd_set_error(error, "out of memory in the ngram-simple drafter");
    return SPECD_ERR_NO_MEMORY;
}

static void ns_destroy(void *self) {
    ngram_simple *ns = self;
    if (!ns) return;
    specd_u64_map_free(&ns->last_end);
    free(ns);
}

static const specd_drafter_ops ngram_simple_ops = {
    .name = "ngram-simple",
    .prepare = ns_prepare,
    .draft = ns_draft,
    .destroy = ns_destroy,
};

specd_status specd_ngram_simple_new(int32_t n, specd_drafter *out, char **error) {
    if (n < 1) {
        specd_set_error(error, "ngram-simple needs keys of at least 1 token (got %d)", n);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    ngram_simple *ns = calloc(1, sizeof *ns);
    if (!ns) {
        specd_set_error(error, "out of memory for the ngram-simple drafter");
        return SPECD_ERR_NO_MEMORY;
    }
    ns->n = n;
    out->ops = &ngram_simple_ops;
    out->self = ns;
    return SPECD_OK;
}
