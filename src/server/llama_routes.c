/* llama_routes.c - llama-server's routes besides /completion and /health, for its clients:
 *   POST /tokenize    {content, add_special (false), parse_special, with_pieces} -> {tokens}
 *   POST /detokenize  {tokens} -> {content}
 *   GET  /props       default generation settings, n_ctx, model path, chat template, build info
 *   GET  /slots       every slot's state (idle / processing), its latest request and its stats
 *   GET  /metrics     Prometheus text: requests, tokens, throughput, speculative counters
 * and how POST /completion reads its body as llama-server does (null = absent, llama-server's
 * probabilities). Everything goes through the JSON API (the dispatcher, or the rpc layer's
 * props and metrics), which owns the engine: nothing here decides what a model does. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "server.h"

#include "../rpc/metrics.h"
#include "../rpc/props.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool llama_route_get(const char *url) {
    return !strcmp(url, "/props") || !strcmp(url, "/slots") || !strcmp(url, "/metrics");
}

bool llama_route_post(const char *url) { return !strcmp(url, "/tokenize") || !strcmp(url, "/detokenize"); }

/* ---- /completion ----------------------------------------------------------------------------- */

/* logit_bias as an object {"token id": bias} (OpenAI's form, which llama-server takes too) -> the
 * [[id, bias]] pairs the request takes; a key that is not a token id is kept as a string, which the
 * request refuses naming logit_bias (specd does not tokenize bias keys). */
static json_t *bias_pairs(json_t *object) {
    json_t *pairs = json_array();
    const char *key;
    json_t *value;
    json_object_foreach(object, key, value) {
        char *end = NULL;
        long long id = strtoll(key, &end, 10);
        json_t *token = *key && end && !*end ? json_integer(id) : json_string(key);
        json_array_append_new(pairs, json_pack("[o, O]", token, value));
    }
    return pairs;
}

/* Several prompts in one request (an array of two or more strings, or of arrays) make several
 * completions in llama-server; the JSON API would read them as one prompt, so they are refused. */
static bool several_prompts(json_t *prompt) {
    if (!json_is_array(prompt) || json_array_size(prompt) < 2) return false;
    size_t i;
    json_t *item;
    json_array_foreach(prompt, i, item) if (!json_is_string(item) && !json_is_array(item)) return false;
    return true;
}

json_t *llama_completion_params(json_t *params, rpc_error *err) {
    if (!json_is_object(params)) return params;
    if (several_prompts(json_object_get(params, "prompt"))) {
        json_decref(params);
        rpc_fail(err, RPC_INVALID_PARAMS, "prompt", "completion params: 'prompt' holds several prompts (an array of "
                 "strings or of arrays): specd makes one completion per request; send one request per prompt, or "
                 "one string, or one array mixing text and token ids");
        return NULL;
    }
    const char *key;
    json_t *value;
    void *tmp;
    json_object_foreach_safe(params, tmp, key, value) if (json_is_null(value)) json_object_del(params, key);
    if (!json_object_get(params, "probs_format")) json_object_set_new(params, "probs_format", json_string("llama"));
    /* Prompts as llama-server tokenizes them: special-token text becomes those tokens. */
    if (!json_object_get(params, "parse_special")) json_object_set_new(params, "parse_special", json_true());
    json_t *stop = json_object_get(params, "stop");
    if (json_is_string(stop)) json_object_set_new(params, "stop", json_pack("[O]", stop)); /* one stop string */
    json_t *bias = json_object_get(params, "logit_bias");
    if (json_is_object(bias)) json_object_set_new(params, "logit_bias", bias_pairs(bias));
    return params;
}

/* ---- /tokenize, /detokenize ------------------------------------------------------------------ */

static json_t *error_response(const rpc_error *err) { return json_pack("{s:o}", "error", rpc_error_object(err)); }

/* llama-server's /tokenize fields -> the tokenize method's; its answer -> llama-server's. */
json_t *llama_route_tokenize(json_t *body, const rpc_caller *caller) {
    rpc_params rp;
    rpc_error err;
    rpc_params_open(&rp, body, "tokenize", "", &err);
    json_t *content = rpc_get_value(&rp, "content");
    bool add_special = false, parse_special = true, pieces = false; /* llama-server's defaults */
    if (rpc_get_bool(&rp, "add_special", &add_special) < 0 || rpc_get_bool(&rp, "parse_special", &parse_special) < 0 ||
        rpc_get_bool(&rp, "with_pieces", &pieces) < 0 || !rpc_params_finish(&rp))
        return error_response(&err);
    if (!json_is_string(content)) {
        rpc_fail(&err, RPC_INVALID_PARAMS, "content", "tokenize: 'content' (the text, a string) is required");
        return error_response(&err);
    }
    json_t *params = json_pack("{s:O, s:b, s:b}", "text", content, "add_special", add_special, "parse_special",
                               parse_special);
    json_t *response = serve_rpc("tokenize", params, caller);
    json_decref(params);
    json_t *result = json_object_get(response, "result");
    if (!result || !pieces) {
        if (result) json_object_del(result, "length");
        return response;
    }
    json_t *list = rpc_tokens_with_pieces(json_object_get(result, "tokens"), &err);
    json_decref(response);
    return list ? json_pack("{s:{s:o}}", "result", "tokens", list) : error_response(&err);
}

json_t *llama_route_detokenize(json_t *body, const rpc_caller *caller) {
    rpc_params rp;
    rpc_error err;
    rpc_params_open(&rp, body, "detokenize", "", &err);
    json_t *tokens = rpc_get_value(&rp, "tokens");
    if (!rpc_params_finish(&rp)) return error_response(&err);
    json_t *params = tokens ? json_pack("{s:O}", "tokens", tokens) : json_object();
    json_t *response = serve_rpc("detokenize", params, caller);
    json_decref(params);
    return response;
}

json_t *llama_route_parse_body(const char *body, size_t len, char *message, size_t size) {
    json_error_t jerr;
    json_t *parsed = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (json_is_object(parsed)) return parsed;
    snprintf(message, size, "parse error: the body must be a JSON object (%s at line %d, column %d)",
             parsed ? "not an object" : jerr.text, jerr.line, jerr.column);
    json_decref(parsed);
    return NULL;
}

/* ---- /metrics -------------------------------------------------------------------------------- */

static void metric(FILE *f, const char *name, const char *type, const char *help, double value) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, value);
}

static double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

/* llama-server's metric names (llamacpp:...) where it has them, specd's own (specd:...) besides. */
static void write_metrics(FILE *f, const rpc_metrics *m, int64_t processing, int64_t deferred) {
    metric(f, "specd:requests_total", "counter", "Completions finished.", (double)m->requests_total);
    metric(f, "llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.",
           (double)m->prompt_tokens_total);
    metric(f, "llamacpp:prompt_seconds_total", "counter", "Prompt process time in seconds.", m->prompt_seconds_total);
    metric(f, "llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.",
           ratio((double)m->prompt_tokens_total, m->prompt_seconds_total));
    metric(f, "llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.",
           (double)m->tokens_predicted_total);
    metric(f, "llamacpp:tokens_predicted_seconds_total", "counter", "Predict process time in seconds.",
           m->predicted_seconds_total);
    metric(f, "llamacpp:predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.",
           ratio((double)m->tokens_predicted_total, m->predicted_seconds_total));
    metric(f, "llamacpp:requests_processing", "gauge", "Number of requests processing.", (double)processing);
    metric(f, "llamacpp:requests_deferred", "gauge", "Number of requests deferred (waiting for a slot).",
           (double)deferred);
    metric(f, "llamacpp:n_decode_total", "counter", "Target passes while generating (speculative steps).",
           (double)m->n_steps_total);
    metric(f, "llamacpp:spec_decode_num_draft_tokens_total", "counter", "Total draft tokens verified.",
           (double)m->drafted_total);
    metric(f, "llamacpp:spec_decode_num_accepted_tokens_total", "counter", "Total draft tokens accepted by the "
           "target model.", (double)m->accepted_total);
    static const struct {
        const char *name, *help;
    } per[] = {{"specd:spec_drafted_tokens_total", "Draft tokens verified, per drafter type."},
               {"specd:spec_accepted_tokens_total", "Draft tokens accepted, per drafter type."},
               {"specd:spec_chosen_steps_total", "Steps whose verified draft came from this drafter type."}};
    for (size_t k = 0; k < sizeof per / sizeof *per; k++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", per[k].name, per[k].help, per[k].name);
        for (int i = 0; i < m->n_drafters; i++) {
            const rpc_drafter_metrics *d = &m->drafters[i];
            int64_t v = k == 0 ? d->drafted : k == 1 ? d->accepted : d->chosen;
            fprintf(f, "%s{drafter=\"%s\"} %lld\n", per[k].name, specd_spec_type_name(d->type), (long long)v);
        }
    }
}

/* From status: slots processing a request, and requests waiting for one. */
static void slot_counts(int64_t *processing, int64_t *queued, int64_t *total) {
    json_t *status = serve_rpc("status", NULL, &serve_self);
    json_t *result = json_object_get(status, "result");
    *processing = 0;
    *queued = json_integer_value(json_object_get(result, "n_queued"));
    size_t i;
    json_t *v;
    json_t *slots = json_object_get(result, "slots");
    json_array_foreach(slots, i, v) *processing += !strcmp(json_string_value(json_object_get(v, "state")), "processing");
    *total = (int64_t)json_array_size(slots);
    json_decref(status);
}

static enum MHD_Result send_metrics(struct MHD_Connection *c) {
    int64_t processing = 0, queued = 0, total = 0;
    slot_counts(&processing, &queued, &total);
    rpc_metrics m = rpc_metrics_get();
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, RPC_INTERNAL_ERROR, "out of memory");
    write_metrics(f, &m, processing, queued);
    fclose(f);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

/* ---- /slots actions -------------------------------------------------------------------------- */

bool llama_route_slot_action(struct MHD_Connection *c, const char *url) {
    return strncmp(url, "/slots/", 7) == 0 ||
           (!strcmp(url, "/slots") && MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action"));
}

/* llama-server's POST /slots/{id}?action=save|restore|erase: refused by name (501, as llama-server
 * answers without --slot-save-path), never read as GET /slots. A slot's cache cannot go to a file
 * and back here: the draft model's cache and the drafters' memory would not follow it. */
enum MHD_Result llama_route_slot_action_refuse(struct MHD_Connection *c) {
    const char *action = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action");
    char message[500];
    snprintf(message, sizeof message, "the /slots action '%.40s' is not implemented by specd: it does not save a "
             "slot's cache to a file, restore one or erase one on demand (llama-server's POST /slots/ID?action="
             "save|restore|erase); to run a request on an empty cache, send it with \"cache_prompt\": false",
             action ? action : "");
    return send_error(c, MHD_HTTP_NOT_IMPLEMENTED, RPC_METHOD_NOT_FOUND, message);
}

/* ---- GET ------------------------------------------------------------------------------------- */

enum MHD_Result llama_route_answer_get(struct MHD_Connection *c, const char *url) {
    if (!strcmp(url, "/metrics")) return send_metrics(c);
    rpc_error err;
    const char *fail_on_no_slot = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "fail_on_no_slot");
    if (!strcmp(url, "/slots") && fail_on_no_slot && !strcmp(fail_on_no_slot, "1")) { /* as llama-server */
        int64_t processing = 0, queued = 0, total = 0;
        slot_counts(&processing, &queued, &total);
        if (processing >= total)
            return send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, RPC_BUSY, "no slot available: every slot is processing "
                              "a completion");
    }
    json_t *body = !strcmp(url, "/props") ? rpc_props_json(&err) : rpc_slots_json(&err);
    json_t *response = body ? json_pack("{s:o}", "result", body) : error_response(&err);
    return send_rpc_outcome(c, response);
}
