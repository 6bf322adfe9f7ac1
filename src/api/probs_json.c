/* probs_json.c - completion_probabilities entries (see probs_json.h). */
#include "probs_json.h"

#include "../serve/text_stream.h"

#include <math.h>
#include <stdlib.h>

json_t *probs_json_piece(specd_engine *e, specd_token token, json_t **bytes) {
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

static json_t *piece_json(specd_engine *e, specd_token token) { return probs_json_piece(e, token, NULL); }

/* A probability as llama-server reports it: itself with post_sampling_probs, else its log (null
 * for 0 or unknown, which JSON cannot hold as -inf). */
json_t *probs_json_logprob(double p) { return p > 0 ? json_real(log(p)) : json_null(); }

static json_t *prob_value(bool post_sampling, double p) {
    if (post_sampling) return p >= 0 ? json_real(p) : json_null();
    return probs_json_logprob(p);
}

/* {id, token, bytes, logprob | prob} of one token. */
static json_t *token_in_server_shape(bool post_sampling, specd_engine *e, specd_token token, double p) {
    json_t *bytes = NULL, *piece = probs_json_piece(e, token, &bytes);
    return json_pack("{s:i, s:o, s:o, s:o}", "id", token, "token", piece, "bytes", bytes,
                     post_sampling ? "prob" : "logprob", prob_value(post_sampling, p));
}

/* llama-server's entry for result token i: the token with its own (log)prob, then the top list. */
static json_t *entry_in_server_shape(bool post_sampling, specd_engine *e, const specd_result *r, int32_t i) {
    const specd_token_prob *list = r->probs + (size_t)i * (size_t)r->n_probs;
    json_t *top = json_array();
    double own = -1.0; /* unknown unless the token is in the list */
    for (int32_t k = 0; top && k < r->n_probs && list[k].token >= 0; k++) {
        if (list[k].token == r->tokens[i]) own = list[k].prob;
        json_array_append_new(top, token_in_server_shape(post_sampling, e, list[k].token, list[k].prob));
    }
    json_t *entry = token_in_server_shape(post_sampling, e, r->tokens[i], own);
    if (entry) json_object_set_new(entry, post_sampling ? "top_probs" : "top_logprobs", top);
    else json_decref(top);
    return entry;
}

/* {content, probs: [{tok_str, prob}]} for result token i; padding entries are left out. */
static json_t *entry_in_old_shape(specd_engine *e, const specd_result *r, int32_t i) {
    json_t *probs = json_array();
    const specd_token_prob *list = r->probs + (size_t)i * (size_t)r->n_probs;
    for (int32_t k = 0; probs && k < r->n_probs && list[k].token >= 0; k++)
        json_array_append_new(probs, json_pack("{s:o, s:f}", "tok_str", piece_json(e, list[k].token), "prob",
                                               (double)list[k].prob));
    return json_pack("{s:o, s:o}", "content", piece_json(e, r->tokens[i]), "probs", probs);
}

json_t *probs_json_entries(const serve_view *v, bool server_shape) {
    json_t *entries = json_array();
    bool post_sampling = v->request->gen.post_sampling_probs;
    for (int32_t i = v->probs_from; entries && i < v->probs_to; i++) {
        json_t *entry = server_shape ? entry_in_server_shape(post_sampling, v->engine, v->result, i)
                              : entry_in_old_shape(v->engine, v->result, i);
        if (!entry || json_array_append_new(entries, entry) != 0) {
            json_decref(entries);
            return NULL;
        }
    }
    return entries;
}
