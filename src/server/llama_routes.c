/* llama_routes.c - llama-server's routes besides /completion and /health, for its clients:
 *   POST /tokenize    {content, add_special (false), parse_special, with_pieces} -> {tokens}
 *   POST /detokenize  {tokens} -> {content}
 *   GET  /props       default generation settings, n_ctx, model path, chat template, build info
 *   GET  /slots       every slot's state (idle / processing), its latest request and its stats
 *   GET  /metrics     Prometheus text: requests, tokens, throughput, speculative counters
 *   GET  /lora-adapters  [{id, path, scale}]; POST /lora-adapters [{id, scale}]: the scales of
 *                     later requests (adapters left out: 0)
 * Everything goes through the JSON API (its methods and props, on the host's models): nothing
 * here decides what a model does. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "server.h"

#include "../rpc/methods.h"
#include "../api/props.h"
#include "../api/slot_files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool route_is_llama_get(const char *url) {
    return !strcmp(url, "/props") || !strcmp(url, "/slots") || !strcmp(url, "/metrics") || !strcmp(url, "/lora-adapters");
}

bool route_is_llama_post(const char *url) {
    return !strcmp(url, "/tokenize") || !strcmp(url, "/detokenize") || !strcmp(url, "/lora-adapters");
}

/* ---- /tokenize, /detokenize ------------------------------------------------------------------ */

static json_t *error_response(const api_error *err) { return json_pack("{s:o}", "error", api_error_object(err)); }

static json_t *result_response(json_t *result, const api_error *err) {
    return result ? json_pack("{s:o}", "result", result) : error_response(err);
}

/* llama-server's /tokenize fields -> the tokenize method's; its answer -> llama-server's. */
static json_t *tokenize(api_host *host, json_t *body) {
    api_params rp;
    api_error err;
    api_params_open(&rp, body, "tokenize", "", &err);
    json_t *content = api_get_value(&rp, "content");
    bool add_special = false, parse_special = true, pieces = false; /* llama-server's defaults */
    if (api_get_bool(&rp, "add_special", &add_special) < 0 || api_get_bool(&rp, "parse_special", &parse_special) < 0 ||
        api_get_bool(&rp, "with_pieces", &pieces) < 0 || !api_params_finish(&rp))
        return error_response(&err);
    if (!json_is_string(content)) {
        api_fail(&err, API_INVALID_PARAMS, "content", "tokenize: 'content' (the text, a string) is required");
        return error_response(&err);
    }
    json_t *params = json_pack("{s:O, s:b, s:b}", "text", content, "add_special", add_special, "parse_special",
                               parse_special);
    json_t *result = rpc_method_tokenize(host, params, &err);
    json_decref(params);
    if (!result || !pieces) {
        if (result) json_object_del(result, "length");
        return result_response(result, &err);
    }
    json_t *list = api_tokens_with_pieces(host, json_object_get(result, "tokens"), &err);
    json_decref(result);
    return list ? json_pack("{s:{s:o}}", "result", "tokens", list) : error_response(&err);
}

static json_t *detokenize(api_host *host, json_t *body) {
    api_params rp;
    api_error err;
    api_params_open(&rp, body, "detokenize", "", &err);
    json_t *tokens = api_get_value(&rp, "tokens");
    if (!api_params_finish(&rp)) return error_response(&err);
    json_t *params = tokens ? json_pack("{s:O}", "tokens", tokens) : json_object();
    json_t *result = rpc_method_detokenize(host, params, &err);
    json_decref(params);
    return result_response(result, &err);
}

/* POST /lora-adapters: the body is {adapters: list} (route_parse_body). */
static json_t *lora_adapters_set(api_host *host, json_t *body) {
    api_error err;
    json_t *result = rpc_method_lora_adapters_set(host, body, &err);
    return result_response(result, &err);
}

typedef enum { CALL_TOKENIZE, CALL_DETOKENIZE, CALL_LORA_SET } call_kind;

typedef struct tokens_call {
    api_host *host;
    call_kind kind;
    json_t *body;
} tokens_call;

void *route_tokens_call(api_host *host, const char *url, json_t *body) {
    tokens_call *call = malloc(sizeof *call);
    call_kind kind = !strcmp(url, "/tokenize") ? CALL_TOKENIZE : !strcmp(url, "/detokenize") ? CALL_DETOKENIZE
                                                                                              : CALL_LORA_SET;
    if (call) *call = (tokens_call){host, kind, body};
    else json_decref(body);
    return call;
}

json_t *route_tokens_run(void *ctx) {
    tokens_call *call = ctx;
    switch (call->kind) {
    case CALL_TOKENIZE: return tokenize(call->host, call->body);
    case CALL_DETOKENIZE: return detokenize(call->host, call->body);
    default: return lora_adapters_set(call->host, call->body);
    }
}

void route_tokens_free(void *ctx) {
    tokens_call *call = ctx;
    if (call) json_decref(call->body);
    free(call);
}

json_t *route_parse_body(const char *url, const char *body, size_t len, char *message, size_t size) {
    json_error_t jerr;
    json_t *parsed = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (parsed && !strcmp(url, "/lora-adapters")) { /* the list, as llama-server takes it */
        json_t *params = json_pack("{s:o}", "adapters", parsed);
        if (!params) snprintf(message, size, "out of memory");
        return params;
    }
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

/* Graph computes and reuses per model (specd_engine_graph_counts): on a GPU only a reused graph
 * replays its CUDA graph. */
static void write_graph_metrics(FILE *f, const specd_graph_info *g) {
    static const struct {
        const char *name, *help;
    } names[] = {{"specd:graph_passes_total", "Graph computes (llama_decode passes) per model."},
                 {"specd:graph_reused_total", "Of them, passes that reused the graph of the pass before."}};
    for (int k = 0; k < 2; k++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", names[k].name, names[k].help, names[k].name);
        fprintf(f, "%s{model=\"target\"} %lld\n", names[k].name, (long long)(k ? g->target.reused : g->target.passes));
        fprintf(f, "%s{model=\"draft\"} %lld\n", names[k].name, (long long)(k ? g->draft.reused : g->draft.passes));
    }
}

/* llama-server's metric names (llamacpp:...) where it has them, specd's own (specd:...) besides. */
static void write_metrics(FILE *f, const serve_metrics *m, int64_t processing, int64_t deferred) {
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
    write_graph_metrics(f, &m->graphs);
    static const struct {
        const char *name, *help;
    } per[] = {{"specd:spec_drafted_tokens_total", "Draft tokens verified, per drafter type."},
               {"specd:spec_accepted_tokens_total", "Draft tokens accepted, per drafter type."},
               {"specd:spec_chosen_steps_total", "Steps whose verified draft came from this drafter type."}};
    for (size_t k = 0; k < sizeof per / sizeof *per; k++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", per[k].name, per[k].help, per[k].name);
        for (int i = 0; i < m->n_drafters; i++) {
            const serve_drafter_metrics *d = &m->drafters[i];
            int64_t v = k == 0 ? d->drafted : k == 1 ? d->accepted : d->chosen;
            fprintf(f, "%s{drafter=\"%s\"} %lld\n", per[k].name, specd_spec_type_name(d->type), (long long)v);
        }
    }
}

/* Slots processing a request, requests waiting for one, and the counters: all zero without a model. */
static void server_figures(api_host *host, serve_status *st, serve_metrics *m) {
    memset(st, 0, sizeof *st);
    memset(m, 0, sizeof *m);
    serve_server *server = NULL;
    api_error err;
    if (!api_host_acquire_server(host, &server, &err)) return;
    *st = serve_server_status(server);
    *m = serve_server_metrics(server);
    api_host_release_engine(host);
}

static int64_t processing_slots(const serve_status *st) {
    int64_t n = 0;
    for (int32_t i = 0; i < st->n_slots; i++) n += st->slots[i].processing;
    return n;
}

static enum MHD_Result send_metrics(struct MHD_Connection *c, api_host *host) {
    serve_status st;
    serve_metrics m;
    server_figures(host, &st, &m);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL_ERROR, "out of memory");
    write_metrics(f, &m, processing_slots(&st), st.n_queued);
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

bool route_is_slot_action(struct MHD_Connection *c, const char *url) {
    return strncmp(url, "/slots/", 7) == 0 ||
           (!strcmp(url, "/slots") && MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action"));
}

/* llama-server's POST /slots/{id}?action=save|restore|erase on a server started without
 * --slot-save-path: refused by name (501 not_supported_error, as llama-server answers), never read
 * as GET /slots. */
enum MHD_Result route_refuse_slot_action(struct MHD_Connection *c) {
    const char *action = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action");
    char message[500];
    snprintf(message, sizeof message, "the /slots action '%.40s' needs --slot-save-path: start specd serve with "
             "--slot-save-path DIR to save, restore and erase a slot's cache in files there (llama-server's POST "
             "/slots/ID?action=save|restore|erase); to run a request on an empty cache, send it with "
             "\"cache_prompt\": false", action ? action : "");
    return send_llama_error(c, MHD_HTTP_NOT_IMPLEMENTED, "not_supported_error", message);
}

bool route_slot_action_target(struct MHD_Connection *c, const char *url, int32_t *slot, const char **action,
                              char *message, size_t size) {
    static const char *const actions[] = {"save", "restore", "erase"};
    const char *asked = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action");
    *action = NULL;
    for (size_t i = 0; asked && i < sizeof actions / sizeof *actions; i++)
        if (!strcmp(asked, actions[i])) *action = actions[i];
    char *end = NULL;
    long id = strncmp(url, "/slots/", 7) == 0 ? strtol(url + 7, &end, 10) : -1;
    if (!end || end == url + 7 || *end || id < 0 || id > SPECD_MAX_PARALLEL) {
        snprintf(message, size, "a slot action is POST /slots/ID?action=save|restore|erase with ID a slot number");
        return false;
    }
    if (!*action) {
        snprintf(message, size, "the /slots action '%.40s' is not one of save, restore, erase", asked ? asked : "");
        return false;
    }
    *slot = (int32_t)id;
    return true;
}

typedef struct slot_action_call {
    api_host *host;
    int32_t slot;
    const char *action, *dir;
    json_t *body;
} slot_action_call;

void *route_slot_action_call(api_host *host, int32_t slot, const char *action, json_t *body, const char *dir) {
    slot_action_call *call = malloc(sizeof *call);
    if (call) *call = (slot_action_call){host, slot, action, dir, body};
    else json_decref(body);
    return call;
}

json_t *route_slot_action_run(void *ctx) {
    slot_action_call *call = ctx;
    api_error err;
    json_t *answer = api_slot_action(call->host, call->slot, call->action, call->body, call->dir, &err);
    return result_response(answer, &err);
}

void route_slot_action_free(void *ctx) {
    slot_action_call *call = ctx;
    if (call) json_decref(call->body);
    free(call);
}

/* ---- GET ------------------------------------------------------------------------------------- */

enum MHD_Result route_llama_get(struct MHD_Connection *c, api_host *host, const http_chat *chat, const char *url) {
    if (!strcmp(url, "/metrics")) return send_metrics(c, host);
    api_error err;
    const char *fail_on_no_slot = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "fail_on_no_slot");
    if (!strcmp(url, "/slots") && fail_on_no_slot && !strcmp(fail_on_no_slot, "1")) { /* as llama-server */
        serve_status st;
        serve_metrics m;
        server_figures(host, &st, &m);
        if (processing_slots(&st) >= st.n_slots)
            return send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, API_BUSY, "no slot available: every slot is processing "
                              "a completion");
    }
    json_t *body = !strcmp(url, "/props")           ? api_props_json(host, chat->template_src, &err)
                   : !strcmp(url, "/lora-adapters") ? rpc_method_lora_adapters(host, NULL, &err)
                                                    : api_slots_json(host, &err);
    return send_rpc_outcome(c, body ? json_pack("{s:o}", "result", body) : error_response(&err));
}
