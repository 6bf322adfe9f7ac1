/* reply_json.c - the completion's answer in the JSON API's shape (see reply_json.h), built on the
 * server's thread from views of the running request (serve/reply.h). */
#define _POSIX_C_SOURCE 200809L /* strdup, strtok_r */
#include "reply_json.h"

#include "probs_json.h"

#include "../serve/text_stream.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_reply *json_reply_new(void) { return calloc(1, sizeof(json_reply)); }

static void json_reply_free(void *ctx) {
    json_reply *reply = ctx;
    if (!reply) return;
    json_decref(reply->prompt);
    json_decref(reply->response_fields);
    free(reply);
}

static json_t *sanitized_string(const char *bytes, size_t n) {
    char *clean = specd_utf8_sanitize(bytes, n);
    json_t *s = clean ? json_string(clean) : NULL;
    free(clean);
    return s;
}

/* ---- the figures ----------------------------------------------------------------------------- */

static double per(double a, double b) { return b > 0 ? a / b : 0.0; }

/* llama-server's timings: cache_n (prompt tokens reused), then draft_n / draft_n_accepted when
 * something was drafted. */
static json_t *timings_json(const specd_stats *s) {
    int32_t prompt_n = s->n_prompt - s->n_prompt_cached;
    json_t *t = json_pack("{s:i, s:i, s:f, s:f, s:f, s:i, s:f, s:f, s:f}", "cache_n", s->n_prompt_cached, "prompt_n",
                          prompt_n, "prompt_ms", s->prompt_ms, "prompt_per_token_ms", per(s->prompt_ms, prompt_n),
                          "prompt_per_second", per(prompt_n * 1000.0, s->prompt_ms), "predicted_n", s->n_predicted,
                          "predicted_ms", s->decode_ms, "predicted_per_token_ms", per(s->decode_ms, s->n_predicted),
                          "predicted_per_second", per(s->n_predicted * 1000.0, s->decode_ms));
    if (t && s->n_drafted > 0) {
        json_object_set_new(t, "draft_n", json_integer(s->n_drafted));
        json_object_set_new(t, "draft_n_accepted", json_integer(s->n_accepted));
    }
    return t;
}

/* Why the request ran without speculation (the library decides: specd_generation_drafters), in
 * this API's terms, or NULL when it speculated. */
static const char *spec_off_reason(const serve_request *req, specd_engine *e) {
    specd_spec_type drafters[SPECD_SPEC_MAX_TYPES];
    specd_spec_off why;
    specd_generation_drafters(e, &req->gen, drafters, &why);
    switch (why) {
    case SPECD_SPEC_ON:
    case SPECD_SPEC_OFF_MIROSTAT: return NULL; /* never given now: mirostat is verified exactly */
    case SPECD_SPEC_OFF_DRAFT_MAX: return "speculative.n_max is 0";
    case SPECD_SPEC_OFF_NONE: return "speculative.type is none";
    case SPECD_SPEC_OFF_NO_DRAFT:
        return "no draft model is loaded (init with -md FILE) and no model-free drafter was asked for";
    }
    return NULL;
}

/* The drafters a request uses, by name: ["none"] when it runs on the target alone. */
static json_t *spec_types_json(const serve_request *req, specd_engine *e) {
    specd_spec_type drafters[SPECD_SPEC_MAX_TYPES];
    int32_t n = specd_generation_drafters(e, &req->gen, drafters, NULL);
    json_t *a = json_array();
    for (int32_t i = 0; a && i < n; i++) json_array_append_new(a, json_string(specd_spec_type_name(drafters[i])));
    if (a && n == 0) json_array_append_new(a, json_string("none"));
    return a;
}

/* The same as one string, "ngram-simple,draft" (as `specd run --json` reports it). */
static json_t *spec_types_string(const serve_request *req, specd_engine *e) {
    json_t *list = spec_types_json(req, e);
    char buf[256] = "";
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
        if (i) strncat(buf, ",", sizeof buf - strlen(buf) - 1);
        strncat(buf, json_string_value(v), sizeof buf - strlen(buf) - 1);
    }
    json_decref(list);
    return json_string(buf);
}

static json_t *drafters_json(const specd_stats *s) {
    json_t *a = json_array();
    for (int32_t i = 0; a && i < s->n_drafters; i++) {
        const specd_drafter_stats *d = &s->drafters[i];
        json_array_append_new(a, json_pack("{s:s, s:i, s:i, s:i, s:i, s:f}", "type", specd_spec_type_name(d->type),
                                           "calls", d->n_calls, "chosen", d->n_chosen, "drafted", d->n_drafted,
                                           "accepted", d->n_accepted, "draft_ms", d->draft_ms));
    }
    return a;
}

/* `enabled`, and when it is false the `reason`, before the statistics. */
static json_t *speculative_json(const serve_request *req, specd_engine *e, const specd_stats *s) {
    const char *off_reason = spec_off_reason(req, e);
    json_t *sp = json_pack("{s:b, s:o, s:o, s:i, s:i, s:i, s:f, s:f, s:f, s:f}", "enabled", off_reason == NULL, "type",
                           spec_types_string(req, e), "drafters", drafters_json(s), "steps", s->n_steps, "drafted",
                           s->n_drafted, "accepted", s->n_accepted, "acceptance_rate", specd_stats_acceptance_rate(s),
                           "mean_accepted_per_step", specd_stats_mean_accepted_per_step(s), "draft_ms", s->draft_ms,
                           "verify_ms", s->verify_ms);
    if (sp && off_reason) json_object_set_new(sp, "reason", json_string(off_reason));
    if (sp) { /* draft trees: steps that verified several branches, their drafts and accepted */
        json_object_set_new(sp, "tree_steps", json_integer(s->n_tree_steps));
        json_object_set_new(sp, "tree_drafted", json_integer(s->n_tree_drafted));
        json_object_set_new(sp, "tree_accepted", json_integer(s->n_tree_accepted));
    }
    return sp;
}

/* ---- the settings echo ----------------------------------------------------------------------- */

/* A float setting as the user wrote it (0.95, not 0.949999988079071). */
static double decimal(float v) {
    char text[32];
    snprintf(text, sizeof text, "%.7g", (double)v);
    return strtod(text, NULL);
}

static json_t *stops_json(const serve_request *req) {
    json_t *a = json_array();
    for (int32_t i = 0; a && i < req->n_stops; i++) json_array_append_new(a, json_string(req->stops[i]));
    return a;
}

/* [[token id, bias or false], ...] */
static json_t *logit_bias_json(const specd_sampling_params *s) {
    json_t *a = json_array();
    for (int32_t i = 0; a && i < s->n_logit_bias; i++) {
        float b = s->logit_bias[i].bias;
        json_array_append_new(a, json_pack("[i, o]", s->logit_bias[i].token, b == -INFINITY ? json_false()
                                                                                            : json_real(decimal(b))));
    }
    return a;
}

static json_t *spec_settings_json(const serve_request *req, specd_engine *e) {
    const specd_spec_params *sp = &req->gen.speculative;
    return json_pack("{s:o, s:i, s:i, s:f, s:i, s:i, s:s, s:i, s:f, s:i}", "type", spec_types_json(req, e), "n_max",
                     sp->draft_max, "n_min", sp->draft_min, "p_min", decimal(sp->draft_p_min), "ngram_size_n",
                     sp->ngram_n, "suffix_branches", sp->suffix_branches, "tree", specd_draft_tree_mode_name(sp->tree),
                     "branches", sp->draft_branches, "p_split", decimal(sp->draft_p_split), "tree_nodes",
                     sp->draft_tree_nodes);
}

/* DRY's sequence breakers: the request's, or llama.cpp's default list. */
static json_t *dry_breakers_json(const specd_sampling_params *s) {
    if (!s->dry_sequence_breakers) return json_pack("[s, s, s, s]", "\n", ":", "\"", "*");
    json_t *a = json_array();
    for (int32_t i = 0; a && i < s->n_dry_sequence_breakers; i++)
        json_array_append_new(a, json_string(s->dry_sequence_breakers[i]));
    return a;
}

json_t *reply_json_settings(const serve_request *req, specd_engine *e, const char *model) {
    const specd_sampling_params *s = &req->gen.sampling;
    json_t *settings = json_pack(
        "{s:s, s:i, s:i, s:f, s:i, s:f, s:f, s:f, s:f, s:f, s:i, s:f, s:f, s:f, s:i, s:b, s:i, s:I, s:b, s:i}",
        "model", model, "n_ctx", req->n_ctx ? req->n_ctx : specd_engine_n_ctx(e), "n_predict", req->gen.n_predict,
        "temperature", decimal(s->temperature), "top_k", s->top_k, "top_p", decimal(s->top_p), "min_p",
        decimal(s->min_p), "typical_p", decimal(s->typical_p), "tfs_z", 1.0, "repeat_penalty",
        decimal(s->repeat_penalty), "repeat_last_n", s->repeat_last_n, "presence_penalty",
        decimal(s->presence_penalty), "frequency_penalty", decimal(s->frequency_penalty), "mirostat_tau",
        decimal(s->mirostat_tau), "mirostat", s->mirostat, "ignore_eos", req->gen.ignore_eos, "n_keep", req->n_keep,
        "seed", (json_int_t)req->seed_requested, "stream", req->stream, "n_probs", req->gen.n_probs);
    if (!settings) return NULL;
    json_object_set_new(settings, "stop", stops_json(req));
    json_object_set_new(settings, "logit_bias", logit_bias_json(s));
    json_object_set_new(settings, "grammar", json_string(req->grammar ? req->grammar : ""));
    json_object_set_new(settings, "mirostat_eta", json_real(decimal(s->mirostat_eta)));
    json_t *samplers = json_pack("{s:f, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:i}", "top_n_sigma",
                                 decimal(s->top_n_sigma), "min_keep", s->min_keep, "dynatemp_range",
                                 decimal(s->dynatemp_range), "dynatemp_exponent", decimal(s->dynatemp_exponent),
                                 "xtc_probability", decimal(s->xtc_probability), "xtc_threshold",
                                 decimal(s->xtc_threshold), "dry_multiplier", decimal(s->dry_multiplier), "dry_base",
                                 decimal(s->dry_base), "dry_allowed_length", s->dry_allowed_length,
                                 "dry_penalty_last_n", s->dry_penalty_last_n);
    if (samplers) json_object_update(settings, samplers);
    json_decref(samplers);
    json_object_set_new(settings, "dry_sequence_breakers", dry_breakers_json(s));
    json_object_set_new(settings, "post_sampling_probs", json_boolean(req->gen.post_sampling_probs));
    json_object_set_new(settings, "speculative", spec_settings_json(req, e));
    return settings;
}

json_t *reply_json_prompt_stats(const serve_request *req) {
    return json_pack("{s:i, s:i, s:b, s:i, s:i, s:i}", "n_ctx", req->n_ctx, "total_prompt_tokens",
                     req->n_prompt_tokens, "truncated", req->truncated, "n_past", req->n_cached, "cached",
                     req->n_cached, "to_eval", req->n_tokens - req->n_cached);
}

/* ---- pieces and the final answer ------------------------------------------------------------- */

/* The token ids the view hands out (return_tokens), new array. */
static json_t *tokens_json(const serve_view *v) {
    json_t *ids = json_array();
    for (int32_t i = v->tokens_from; ids && i < v->tokens_to; i++) json_array_append_new(ids, json_integer(v->result->tokens[i]));
    return ids;
}

json_t *reply_json_speculative(const serve_view *v) { return speculative_json(v->request, v->engine, &v->result->stats); }

json_t *reply_json_origins(const serve_view *v) {
    serve_origin_span *spans = malloc((v->origins->n + 1) * sizeof *spans);
    json_t *pieces = spans ? json_array() : NULL;
    size_t n = spans ? serve_origins_spans(v->origins, v->text, v->from, v->to, spans) : 0;
    for (size_t i = 0; pieces && i < n; i++) {
        json_t *text = sanitized_string(v->text + spans[i].from, spans[i].to - spans[i].from);
        json_array_append_new(pieces, json_pack("{s:o, s:b}", "text", text, "draft", spans[i].draft));
    }
    free(spans);
    return pieces;
}

/* Per-piece extras: llama-server's `tokens` (return_tokens) and `timings` (timings_per_token, the
 * figures so far), and specd's `origins` (return_origins) of the piece's text. */
static void add_piece_fields(const json_reply *reply, const serve_view *v, json_t *update) {
    if (v->origins) json_object_set_new(update, "origins", reply_json_origins(v));
    if (reply->return_tokens) json_object_set_new(update, "tokens", tokens_json(v));
    if (reply->timings_per_token) {
        specd_stats now = v->result->stats;
        now.n_predicted = v->result->n_tokens;
        json_object_set_new(update, "timings", timings_json(&now));
    }
}

static void *reply_update(void *ctx, const serve_view *v) {
    const json_reply *reply = ctx;
    json_t *update = json_pack("{s:o, s:b, s:i}", "content", sanitized_string(v->text + v->from, v->to - v->from), "stop",
                               0, "id_slot", v->slot);
    if (!update) return NULL;
    if (v->result->n_probs > 0) json_object_set_new(update, "completion_probabilities", probs_json_entries(v, reply->probs_server_shape));
    add_piece_fields(reply, v, update);
    return update;
}

/* response_fields: the paths of `fields` found in `resp` (taken), each under its path. */
static json_t *only_fields(json_t *resp, json_t *fields) {
    json_t *kept = json_object();
    size_t i;
    json_t *path;
    json_array_foreach(fields, i, path) {
        char *copy = strdup(json_string_value(path)), *save = NULL;
        json_t *at = resp;
        for (char *key = copy ? strtok_r(copy, "/", &save) : NULL; key && at; key = strtok_r(NULL, "/", &save))
            at = json_is_object(at) ? json_object_get(at, key) : NULL;
        if (at && at != resp) json_object_set(kept, json_string_value(path), at);
        free(copy);
    }
    json_decref(resp);
    return kept;
}

static void debug_log(const json_reply *reply, json_t *value) {
    if (!reply->debug || !value) return;
    char *text = json_dumps(value, JSON_COMPACT | JSON_REAL_PRECISION(15));
    fprintf(stderr, "specd rpc: response %s\n", text ? text : "?");
    free(text);
}

static void *reply_final(void *ctx, const serve_view *v) {
    const json_reply *reply = ctx;
    const serve_request *req = v->request;
    const specd_result *r = v->result;
    const char *type = serve_stop_name(v->stop);
    bool word = v->stop == SERVE_STOP_WORD;
    json_t *resp = json_pack(
        "{s:o, s:b, s:s, s:i, s:i, s:o, s:O, s:b, s:b, s:b, s:b, s:s, s:s, s:i, s:o, s:i, s:o, s:o}", "content",
        sanitized_string(v->text + v->from, v->to - v->from), "stop", 1, "model", v->model, "tokens_predicted",
        r->n_tokens, "tokens_evaluated", req->n_tokens, "generation_settings",
        reply_json_settings(req, v->engine, v->model), "prompt", reply->prompt ? reply->prompt : json_null(),
        "truncated", v->truncated, "stopped_eos", v->stop == SERVE_STOP_EOS, "stopped_word", word, "stopped_limit",
        *v->stopping_limit != '\0', "stopping_word", v->stopping_word, "stop_type", type, "tokens_cached",
        r->stats.n_prompt + r->n_tokens, "timings", timings_json(&r->stats), "status", 200, "prompt_stats",
        reply_json_prompt_stats(req), "speculative", speculative_json(req, v->engine, &r->stats));
    if (!resp) return NULL;
    json_object_set_new(resp, "stopping_limit", json_string(v->stopping_limit));
    json_object_set_new(resp, "id_slot", json_integer(v->slot)); /* llama-server's: where it ran (-1: it never did) */
    if (req->gen.n_probs > 0) json_object_set_new(resp, "completion_probabilities", probs_json_entries(v, reply->probs_server_shape));
    if (reply->return_tokens) json_object_set_new(resp, "tokens", tokens_json(v));
    if (v->origins) json_object_set_new(resp, "origins", reply_json_origins(v));
    debug_log(reply, resp);
    return reply->response_fields ? only_fields(resp, reply->response_fields) : resp;
}

static void free_item(void *item) { json_decref(item); }

serve_reply json_reply_formatter(json_reply *reply) {
    return (serve_reply){.update = reply_update, .final = reply_final, .free_item = free_item,
                         .free_ctx = json_reply_free, .ctx = reply};
}
