/* completion_probs.c - completion_probabilities entries as their text is decided (see
 * completion_probs.h). */
#include "completion_probs.h"

#include <stdlib.h>

void completion_probs_free(completion_probs *cp) {
    free(cp->start);
    free(cp->end);
    *cp = (completion_probs){0};
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

/* A token's text as valid UTF-8 (a lone byte of a split character becomes U+FFFD). */
static json_t *piece_json(specd_engine *e, specd_token token) {
    char small[128];
    int32_t n = specd_token_to_piece(e, token, small, (int32_t)sizeof small);
    char *big = n < 0 ? malloc((size_t)-n) : NULL;
    if (n < 0 && (!big || specd_token_to_piece(e, token, big, -n) != -n)) n = 0;
    char *clean = specd_utf8_sanitize(big ? big : small, n < 0 ? (size_t)-n : (size_t)n);
    json_t *s = clean ? json_string(clean) : NULL;
    free(clean);
    free(big);
    return s;
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
        json_t *entry = entry_json(engine, r, i);
        if (!entry || json_array_append_new(entries, entry) != 0) {
            json_decref(entries);
            return NULL;
        }
    }
    return entries;
}
