/* completion_probs.c - completion_probabilities entries as their text is decided (see
 * completion_probs.h). */
#include "completion_probs.h"

#include <math.h>
#include <stdlib.h>

void completion_probs_free(completion_probs *cp) {
    free(cp->start);
    free(cp->end);
    bool llama = cp->llama, post_sampling = cp->post_sampling;
    *cp = (completion_probs){.llama = llama, .post_sampling = post_sampling};
}

bool completion_probs_record(completion_probs *cp, size_t start, size_t end) {
    if (cp->n == cp->cap) {
        int32_t cap = cp->cap ? cp->cap * 2 : 64;
        size_t *s = realloc(cp->start, (size_t)cap * sizeof *s);
        if (s) cp->start = s;
        size_t *e = s ? realloc(cp->end, (size_t)cap * sizeof *e) : NULL;
        if (!e) return false;
        cp->end = e;
        cp->cap = cap;
    }
    cp->start[cp->n] = start;
    cp->end[cp->n] = end;
    cp->n++;
    return true;
}

/* A token's text as valid UTF-8 (a lone byte of a split character becomes U+FFFD), and with
 * `bytes` (not NULL) its raw bytes as an array of numbers. */
static json_t *piece_json_bytes(specd_engine *e, specd_token token, json_t **bytes) {
    char small[128];
    int32_t n = specd_token_to_piece(e, token, small, (int32_t)sizeof small);
    char *big = n < 0 ? malloc((size_t)-n) : NULL;
    if (n < 0 && (!big || specd_token_to_piece(e, token, big, -n) != -n)) n = 0;
    const char *raw = big ? big : small;
    size_t len = n < 0 ? (size_t)-n : (size_t)n;
    char *clean = specd_utf8_sanitize(raw, len);
    json_t *s = clean ? json_string(clean) : NULL;
    if (bytes) {
        *bytes = json_array();
        for (size_t i = 0; *bytes && i < len; i++) json_array_append_new(*bytes, json_integer((unsigned char)raw[i]));
    }
    free(clean);
    free(big);
    return s;
}

static json_t *piece_json(specd_engine *e, specd_token token) { return piece_json_bytes(e, token, NULL); }

/* A probability as llama-server reports it: itself with post_sampling_probs, else its log (null
 * for 0 or unknown, which JSON cannot hold as -inf). */
static json_t *prob_value(const completion_probs *cp, double p) {
    if (cp->post_sampling) return p >= 0 ? json_real(p) : json_null();
    return p > 0 ? json_real(log(p)) : json_null();
}

/* {id, token, bytes, logprob | prob} of one token. */
static json_t *llama_token_json(const completion_probs *cp, specd_engine *e, specd_token token, double p) {
    json_t *bytes = NULL, *piece = piece_json_bytes(e, token, &bytes);
    return json_pack("{s:i, s:o, s:o, s:o}", "id", token, "token", piece, "bytes", bytes,
                     cp->post_sampling ? "prob" : "logprob", prob_value(cp, p));
}

/* llama-server's entry for result token i: the token with its own (log)prob, then the top list. */
static json_t *llama_entry_json(const completion_probs *cp, specd_engine *e, const specd_result *r, int32_t i) {
    const specd_token_prob *list = r->probs + (size_t)i * (size_t)r->n_probs;
    json_t *top = json_array();
    double own = -1.0; /* unknown unless the token is in the list */
    for (int32_t k = 0; top && k < r->n_probs && list[k].token >= 0; k++) {
        if (list[k].token == r->tokens[i]) own = list[k].prob;
        json_array_append_new(top, llama_token_json(cp, e, list[k].token, list[k].prob));
    }
    json_t *entry = llama_token_json(cp, e, r->tokens[i], own);
    if (entry) json_object_set_new(entry, cp->post_sampling ? "top_probs" : "top_logprobs", top);
    else json_decref(top);
    return entry;
}

/* {content, probs: [{tok_str, prob}]} for result token i; padding entries are left out. */
static json_t *entry_json(specd_engine *e, const specd_result *r, int32_t i) {
    json_t *probs = json_array();
    const specd_token_prob *list = r->probs + (size_t)i * (size_t)r->n_probs;
    for (int32_t k = 0; probs && k < r->n_probs && list[k].token >= 0; k++)
        json_array_append_new(probs, json_pack("{s:o, s:f}", "tok_str", piece_json(e, list[k].token), "prob",
                                               (double)list[k].prob));
    return json_pack("{s:o, s:o}", "content", piece_json(e, r->tokens[i]), "probs", probs);
}

json_t *completion_probs_take(completion_probs *cp, specd_engine *engine, const specd_result *r,
                              const specd_text_stream *ts, bool final) {
    json_t *entries = json_array();
    bool stopped = specd_text_stream_stopped(ts);
    for (; entries && cp->n_sent < cp->n && cp->n_sent < r->n_tokens; cp->n_sent++) {
        int32_t i = cp->n_sent;
        /* After a stop string matched, a token starting at or past the cut is all stop string. */
        if (stopped && cp->start[i] >= ts->len) break;
        size_t end = cp->end[i] < ts->len ? cp->end[i] : ts->len;
        if (!final && end > ts->taken) break; /* its text is still held back */
        json_t *entry = cp->llama ? llama_entry_json(cp, engine, r, i) : entry_json(engine, r, i);
        if (!entry || json_array_append_new(entries, entry) != 0) {
            json_decref(entries);
            return NULL;
        }
    }
    return entries;
}
