/* rerank_json.c - /rerank and /v1/rerank (embed_json.h): a query and documents read as
 * llama-server reads them (Jina's "documents", or TEI's "texts"), each document scored alone
 * (specd_rerank), the results by score, best first, in the shape the request's API expects. */
#define _POSIX_C_SOURCE 200809L
#include "embed_json.h"

#include <stdlib.h>
#include <string.h>

typedef struct rerank_request {
    const char *query;
    json_t *documents; /* borrowed: an array of strings */
    bool tei;          /* "texts" given: TEI's shape (an array, "score", "text" on request) */
    bool return_text;
    int64_t top_n;
} rerank_request;

static bool all_strings(json_t *list) {
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item) if (!json_is_string(item)) return false;
    return true;
}

static bool read_request(json_t *body, rerank_request *r, embed_error *err) {
    memset(r, 0, sizeof *r);
    json_t *query = json_object_get(body, "query");
    if (!query) return embed_fail(err, "invalid_request_error", "\"query\" must be provided"), false;
    if (!(r->query = json_string_value(query)))
        return embed_fail(err, "invalid_request_error", "\"query\" must be a string"), false;
    json_t *texts = json_object_get(body, "texts");
    r->tei = texts != NULL;
    r->documents = json_object_get(body, "documents");
    if (!r->documents) r->documents = texts;
    size_t n = json_array_size(r->documents);
    if (n == 0 || !all_strings(r->documents))
        return embed_fail(err, "invalid_request_error", "\"documents\" must be a non-empty string array"), false;
    if (n > EMBED_INPUTS_MAX)
        return embed_fail(err, "invalid_request_error", "\"documents\" has %zu documents: at most %d per request", n,
                          EMBED_INPUTS_MAX), false;
    r->return_text = r->tei && json_is_true(json_object_get(body, "return_text"));
    json_t *top_n = json_object_get(body, "top_n");
    r->top_n = (int64_t)n;
    if (top_n && (!json_is_integer(top_n) || json_integer_value(top_n) < 0))
        return embed_fail(err, "invalid_request_error", "\"top_n\" must be an integer of 0 or more"), false;
    if (top_n) r->top_n = json_integer_value(top_n);
    return true;
}

typedef struct ranked {
    size_t index;
    float score;
} ranked;

/* Best first; equal scores in the documents' order (llama-server's sort leaves them unspecified). */
static int by_score(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Every document's score in *out (documents' order); the tokens read, summed, in *n_tokens. */
static bool score_documents(specd_engine *e, const rerank_request *r, ranked *out, int64_t *n_tokens,
                            embed_error *err) {
    for (size_t i = 0; i < json_array_size(r->documents); i++) {
        if (!api_thread_still_wanted()) return embed_fail(err, "server_error", "the client went away"), false;
        char *message = NULL;
        int32_t n = 0;
        specd_status st = specd_rerank(e, r->query, json_string_value(json_array_get(r->documents, i)),
                                       &out[i].score, &n, &message);
        if (st != SPECD_OK) {
            embed_json_failed(st, message, n, e, err);
            specd_free(message);
            return false;
        }
        out[i].index = i;
        *n_tokens += n;
    }
    return true;
}

static json_t *results_json(const rerank_request *r, const ranked *v, size_t n) {
    json_t *results = json_array();
    for (size_t i = 0; results && i < n && (int64_t)i < r->top_n; i++) {
        json_t *item = json_pack("{s:I, s:f}", "index", (json_int_t)v[i].index, r->tei ? "score" : "relevance_score",
                                 (double)v[i].score);
        if (item && r->return_text) json_object_set(item, "text", json_array_get(r->documents, v[i].index));
        json_array_append_new(results, item);
    }
    return results;
}

json_t *embed_json_rerank(api_host *h, json_t *body, const char *model_name, embed_error *err) {
    specd_engine *e;
    if (!embed_json_serving_engine(h, true, &e, err)) return NULL;
    rerank_request r;
    ranked *scores = NULL;
    int64_t n_tokens = 0;
    bool ok = read_request(body, &r, err);
    size_t n = ok ? json_array_size(r.documents) : 0;
    if (ok && !(scores = calloc(n, sizeof *scores))) {
        embed_fail(err, "server_error", "out of memory");
        ok = false;
    }
    if (ok) ok = score_documents(e, &r, scores, &n_tokens, err);
    api_host_release_engine(h);
    json_t *results = NULL;
    if (ok) {
        qsort(scores, n, sizeof *scores, by_score);
        results = results_json(&r, scores, n);
    }
    free(scores);
    if (!results || r.tei) return results ? results : ok ? embed_fail(err, "server_error", "out of memory") : NULL;
    json_t *answer = json_pack("{s:o, s:s, s:{s:I, s:I}, s:o}", "model", embed_json_model(body, model_name), "object",
                               "list", "usage", "prompt_tokens", (json_int_t)n_tokens, "total_tokens",
                               (json_int_t)n_tokens, "results", results);
    return answer ? answer : embed_fail(err, "server_error", "out of memory");
}
