/* completion_request.c - a completion request from JSON: every field of the old API checked
 * (type, range, no unknown fields), samplers the engine does not have refused with a clear
 * message, the prompt (text, or strings mixed with token ids) tokenized and truncated to the
 * context keeping n_keep tokens, as the old API did (which also shifts the context during
 * generation, keeping the same n_keep). llama-server's own names for fields (aliases, json_schema,
 * the flat speculative.* keys, the fields specd does not implement) are completion_llama.c's. */
#include "completion.h"

#include "limits.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void completion_request_free(completion_request *req) {
    if (!req) return;
    json_decref(req->prompt);
    json_decref(req->stop_list);
    json_decref(req->logit_bias_json);
    json_decref(req->response_fields);
    free(req->tokens);
    free(req->bias);
    free(req->stops);
    free(req->grammar);
    free(req);
}

static bool not_supported(rpc_params *rp, const char *field, const char *why) {
    return rpc_fail(rp->err, RPC_INVALID_PARAMS, field, "completion params: '%s' is not supported yet: %s",
                    field, why);
}

/* ---- sampling -------------------------------------------------------------------------------- */

/* Ranges are the library's to decide (specd_generation_params_validate, called once everything is
 * read): the readers here check types, and only the API's own limits (n_predict, n_probs, the
 * engine's draft_max, n_keep within the context) besides. The API is also stricter than the
 * library where a value would silently mean "off": top_p 2 or top_k -5 are a client's mistakes,
 * so the probabilities must lie in [0, 1] (1 is off) and top_k be 0 or -1 (off) or more. */

/* mirostat 1 or 2 runs on the target alone (the engine turns speculation off; the response says so). */
static bool parse_mirostat(rpc_params *rp, specd_sampling_params *s) {
    return rpc_read_any_int32(rp, "mirostat", &s->mirostat) &&
           rpc_read_any_float(rp, "mirostat_tau", &s->mirostat_tau) &&
           rpc_read_any_float(rp, "mirostat_eta", &s->mirostat_eta);
}

/* Fields whose only supported value is "off": refusing anything else beats ignoring it. */
static bool parse_unsupported_samplers(rpc_params *rp, const specd_sampling_params *s) {
    double tfs_z = 1.0;
    bool penalize_nl = false;
    if (rpc_get_number(rp, "tfs_z", 0.0, 1e9, &tfs_z) < 0 ||
        rpc_get_bool(rp, "penalize_nl", &penalize_nl) < 0)
        return false;
    if (tfs_z != 1.0) return not_supported(rp, "tfs_z", "tail-free sampling is gone from llama.cpp; use 1 (off)");
    if (penalize_nl && s->repeat_penalty != 1.0f)
        return not_supported(rp, "penalize_nl", "newlines are never penalized; use false");
    return true;
}

static bool parse_seed(rpc_params *rp, completion_request *req) {
    int64_t seed = -1;
    if (rpc_get_int(rp, "seed", -1, INT64_MAX, &seed) < 0) return false;
    req->seed_requested = seed;
    req->gen.sampling.seed = seed < 0 ? SPECD_SEED_RANDOM : (uint64_t)seed;
    return rpc_get_bool(rp, "reproducible", &req->gen.sampling.reproducible) >= 0;
}

static bool parse_sampling(rpc_params *rp, completion_request *req) {
    specd_sampling_params *s = &req->gen.sampling;
    return rpc_read_int32(rp, "n_predict", -1, INT32_MAX, &req->gen.n_predict) &&
           rpc_read_any_float(rp, "temperature", &s->temperature) &&
           rpc_read_int32(rp, "top_k", -1, INT32_MAX, &s->top_k) &&
           rpc_read_float(rp, "top_p", 0.0, 1.0, &s->top_p) &&
           rpc_read_float(rp, "min_p", 0.0, 1.0, &s->min_p) &&
           rpc_read_float(rp, "typical_p", 0.0, 1.0, &s->typical_p) &&
           rpc_read_any_int32(rp, "repeat_last_n", &s->repeat_last_n) &&
           rpc_read_any_float(rp, "repeat_penalty", &s->repeat_penalty) &&
           rpc_read_any_float(rp, "presence_penalty", &s->presence_penalty) &&
           rpc_read_any_float(rp, "frequency_penalty", &s->frequency_penalty) &&
           parse_seed(rp, req) && rpc_get_bool(rp, "ignore_eos", &req->gen.ignore_eos) >= 0 &&
           rpc_read_any_int32(rp, "n_keep", &req->n_keep) &&
           rpc_get_bool(rp, "stream", &req->stream) >= 0 &&
           rpc_get_bool(rp, "__debug", &req->debug) >= 0 && parse_mirostat(rp, s) && parse_unsupported_samplers(rp, s);
}

/* grammar: GBNF text ("" = none), checked against the vocabulary now rather than when it runs. */
static bool parse_grammar(rpc_params *rp, completion_request *req, specd_engine *e) {
    const char *grammar = NULL;
    int got = rpc_get_string(rp, "grammar", &grammar);
    if (got < 0) return false; /* not a string */
    if (got == 0 || !grammar[0]) return true; /* none */
    char *message = NULL;
    if (specd_grammar_check(e, grammar, &message) != SPECD_OK) {
        rpc_fail(rp->err, RPC_INVALID_PARAMS, "grammar", "completion params: %s", message ? message : "bad grammar");
        specd_free(message);
        return false;
    }
    size_t len = strlen(grammar) + 1;
    if (!(req->grammar = malloc(len))) return rpc_fail(rp->err, RPC_INTERNAL_ERROR, "grammar", "out of memory");
    memcpy(req->grammar, grammar, len);
    req->gen.grammar = req->grammar;
    return true;
}

/* n_probs: the target's top-n probabilities for every token (raw logits, temperature 1, as
 * llama-server); post_sampling_probs: those of the distribution it was drawn from instead. */
static bool parse_n_probs(rpc_params *rp, completion_request *req) {
    return rpc_read_int32(rp, "n_probs", 0, 100, &req->gen.n_probs) &&
           rpc_get_bool(rp, "post_sampling_probs", &req->gen.post_sampling_probs) >= 0;
}

/* logit_bias: [[token, bias], ...], bias a number or false (never sample the token). */
static bool parse_logit_bias(rpc_params *rp, completion_request *req, int32_t n_vocab) {
    json_t *list = rpc_get_value(rp, "logit_bias");
    if (!list) return true;
    const char *shape = "an array of [token id, bias] pairs, bias a number or false";
    if (!json_is_array(list))
        return rpc_fail(rp->err, RPC_INVALID_PARAMS, "logit_bias", "completion params: 'logit_bias' must be %s", shape);
    size_t n = json_array_size(list);
    req->bias = calloc(n + 1, sizeof *req->bias);
    if (!req->bias) return rpc_fail(rp->err, RPC_INTERNAL_ERROR, "logit_bias", "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *pair = json_array_get(list, i), *tok = json_array_get(pair, 0), *bias = json_array_get(pair, 1);
        bool ok = json_is_array(pair) && json_array_size(pair) == 2 && json_is_integer(tok) &&
                  json_integer_value(tok) >= 0 && json_integer_value(tok) < n_vocab &&
                  (json_is_number(bias) || json_is_false(bias));
        if (!ok)
            return rpc_fail(rp->err, RPC_INVALID_PARAMS, "logit_bias", "completion params: logit_bias[%zu] must be "
                            "[token id from 0 to %d, number or false]", i, n_vocab - 1);
        req->bias[i].token = (specd_token)json_integer_value(tok);
        req->bias[i].bias = json_is_false(bias) ? -INFINITY : (float)json_number_value(bias);
    }
    req->logit_bias_json = json_incref(list);
    req->gen.sampling.logit_bias = req->bias;
    req->gen.sampling.n_logit_bias = (int32_t)n;
    return true;
}

static bool parse_stop(rpc_params *rp, completion_request *req) {
    json_t *list = rpc_get_value(rp, "stop");
    if (!list) return true;
    if (!json_is_array(list))
        return rpc_fail(rp->err, RPC_INVALID_PARAMS, "stop", "completion params: 'stop' must be an array of strings");
    size_t n = json_array_size(list);
    req->stops = calloc(n + 1, sizeof *req->stops);
    if (!req->stops) return rpc_fail(rp->err, RPC_INTERNAL_ERROR, "stop", "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(list, i);
        if (!json_is_string(s) || json_string_length(s) == 0 || strlen(json_string_value(s)) != json_string_length(s))
            return rpc_fail(rp->err, RPC_INVALID_PARAMS, "stop", "completion params: stop[%zu] must be a non-empty "
                            "string without NUL characters", i);
        req->stops[i] = json_string_value(s);
    }
    req->stop_list = json_incref(list);
    req->n_stops = (int)n;
    return true;
}

/* ---- speculation ----------------------------------------------------------------------------- */

/* speculative.type: ["none"], ["draft"], or a list of drafters such as ["ngram-simple", "draft"]
 * (the same as `specd run --spec`): one entry sets the plain type, several make a drafter list. */
bool completion_parse_spec_type(rpc_params *sp, specd_spec_params *spec, bool has_draft) {
    json_t *type = rpc_get_value(sp, "type");
    if (!type) return true;
    size_t n = json_array_size(type);
    if (!json_is_array(type) || n == 0 || n > SPECD_SPEC_MAX_TYPES)
        return rpc_fail(sp->err, RPC_INVALID_PARAMS, "speculative.type",
                        "completion params: 'speculative.type' must be a list of 1 to %d of %s", SPECD_SPEC_MAX_TYPES,
                        specd_spec_type_names());
    const char *names[SPECD_SPEC_MAX_TYPES];
    bool lists_draft = false;
    for (size_t i = 0; i < n; i++) {
        names[i] = json_string_value(json_array_get(type, i));
        if (!names[i])
            return rpc_fail(sp->err, RPC_INVALID_PARAMS, "speculative.type",
                            "completion params: speculative.type[%zu] must be a string", i);
        specd_spec_type t;
        lists_draft |= specd_spec_type_from_name(names[i], &t) && t == SPECD_SPEC_DRAFT; /* or "draft-simple" */
    }
    char *message = NULL;
    if (specd_spec_params_set_types(spec, names, (int32_t)n, &message) != SPECD_OK) {
        rpc_fail(sp->err, RPC_INVALID_PARAMS, "speculative.type", "completion params: %s", message ? message : "");
        specd_free(message);
        return false;
    }
    if (lists_draft && !has_draft)
        return rpc_fail(sp->err, RPC_INVALID_PARAMS, "speculative.type",
                        "completion params: speculative.type \"draft\" needs a draft model: init with -md FILE");
    return true;
}

/* speculative.tree: "on", "off" or "auto" (true / false for on / off too). */
static bool parse_tree_mode(rpc_params *sp, specd_spec_params *spec) {
    json_t *v = rpc_get_value(sp, "tree");
    if (!v) return true;
    if (json_is_boolean(v)) {
        spec->tree = json_is_true(v) ? SPECD_DRAFT_TREE_ON : SPECD_DRAFT_TREE_OFF;
        return true;
    }
    if (json_is_string(v) && specd_draft_tree_mode_from_name(json_string_value(v), &spec->tree)) return true;
    return rpc_fail(sp->err, RPC_INVALID_PARAMS, "speculative.tree",
                    "completion params: 'speculative.tree' must be \"on\", \"off\" or \"auto\"");
}

static bool parse_speculative(rpc_params *rp, completion_request *req, bool has_draft) {
    json_t *obj = rpc_get_value(rp, "speculative");
    if (!obj) return true;
    if (!json_is_object(obj))
        return rpc_fail(rp->err, RPC_INVALID_PARAMS, "speculative", "completion params: 'speculative' must be an "
                        "object {type, n_max, n_min, p_min, suffix_branches, tree, branches, p_split, tree_nodes}");
    specd_spec_params *spec = &req->gen.speculative;
    rpc_params sp;
    rpc_params_open(&sp, obj, "completion params", "speculative.", rp->err);
    int32_t max = rpc_state_draft_max();
    if (!completion_parse_spec_type(&sp, spec, has_draft) ||
        !rpc_read_int32(&sp, "n_max", 0, max, &spec->draft_max) ||
        !rpc_read_int32(&sp, "n_min", 0, max, &spec->draft_min) ||
        !rpc_read_any_float(&sp, "p_min", &spec->draft_p_min) ||
        !rpc_read_any_int32(&sp, "suffix_branches", &spec->suffix_branches) || !parse_tree_mode(&sp, spec) ||
        !rpc_read_any_int32(&sp, "branches", &spec->draft_branches) ||
        !rpc_read_any_float(&sp, "p_split", &spec->draft_p_split) ||
        !rpc_read_any_int32(&sp, "tree_nodes", &spec->draft_tree_nodes))
        return false;
    return rpc_params_finish(&sp);
}

/* The server's -n / --n-predict (limits.h): a request that gives no n_predict (or -1, "until the
 * end") gets it, and one that asks for more is refused naming the field it used. */
static bool apply_n_predict_limit(completion_request *req, rpc_error *err) {
    int32_t max = rpc_limits_get().n_predict_max;
    if (max < 0) return true;
    if (req->gen.n_predict < 0) {
        req->gen.n_predict = max;
        req->n_predict_by_server = true;
        return true;
    }
    if (req->gen.n_predict <= max) return true;
    const char *field = req->n_predict_field ? req->n_predict_field : "n_predict";
    return rpc_fail(err, RPC_INVALID_PARAMS, field, "completion params: '%s' is %d, more than this server allows "
                    "(-n / --n-predict %d): ask for at most %d tokens, or leave it out to get %d",
                    field, req->gen.n_predict, max, max, max);
}

/* The library's names for the fields (specd_generation_params_validate) -> this API's names. */
static const char *api_field_name(const char *field) {
    static const struct {
        const char *library, *api;
    } names[] = {
        {"speculative.draft_max", "speculative.n_max"},
        {"speculative.draft_min", "speculative.n_min"},
        {"speculative.draft_p_min", "speculative.p_min"},
        {"speculative.draft_branches", "speculative.branches"},
        {"speculative.draft_p_split", "speculative.p_split"},
        {"speculative.draft_tree_nodes", "speculative.tree_nodes"},
        {"speculative.types", "speculative.type"},
        {"speculative.n_types", "speculative.type"},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(field, names[i].library) == 0) return names[i].api;
    const char *sampling = "sampling.";
    return strncmp(field, sampling, strlen(sampling)) == 0 ? field + strlen(sampling) : field;
}

/* Every range, decided by the library; the error names the field as this API spells it. */
static bool validate_ranges(completion_request *req, rpc_error *err) {
    if (req->n_keep < -1 || req->n_keep > req->n_ctx)
        return rpc_fail(err, RPC_INVALID_PARAMS, "n_keep", "completion params: 'n_keep' must be from -1 (the whole "
                        "prompt) to %d (the context of a slot), got %d", req->n_ctx, req->n_keep);
    req->gen.n_keep = req->n_keep;
    const char *field = NULL;
    char *message = NULL;
    if (specd_generation_params_validate(&req->gen, &field, &message) == SPECD_OK) return true;
    const char *name = field ? api_field_name(field) : "";
    const char *detail = message && field ? message + strlen(field) : " is out of range";
    rpc_fail(err, RPC_INVALID_PARAMS, name, "completion params: '%s'%s", name, detail);
    specd_free(message);
    return false;
}

/* ---- prompt ---------------------------------------------------------------------------------- */

static bool append_tokens(completion_request *req, const specd_token *t, int32_t n, int32_t *cap) {
    if (req->n_tokens + n > *cap) {
        int32_t grown_cap = (req->n_tokens + n) * 2 + 16;
        specd_token *grown = realloc(req->tokens, (size_t)grown_cap * sizeof *grown);
        if (!grown) return false;
        req->tokens = grown;
        *cap = grown_cap;
    }
    if (n) memcpy(req->tokens + req->n_tokens, t, (size_t)n * sizeof *t);
    req->n_tokens += n;
    return true;
}

static bool tokenize_piece(completion_request *req, specd_engine *e, const char *text, bool first,
                           int32_t *cap, rpc_error *err) {
    specd_token *t = NULL;
    int32_t n = 0;
    char *message = NULL;
    bool ok = specd_tokenize_special(e, text, first, req->parse_special, &t, &n, &message) == SPECD_OK;
    if (!ok) rpc_fail(err, RPC_INVALID_PARAMS, "prompt", "completion params: prompt: %s", message ? message : "");
    else if (!append_tokens(req, t, n, cap)) ok = rpc_fail(err, RPC_INTERNAL_ERROR, "prompt", "out of memory");
    specd_free(t);
    specd_free(message);
    return ok;
}

/* A string, or an array mixing strings and token ids (BOS only before a leading string). */
static bool tokenize_prompt(completion_request *req, json_t *prompt, specd_engine *e, rpc_error *err) {
    int32_t cap = 0, n_vocab = specd_engine_n_vocab(e);
    if (json_is_string(prompt)) return tokenize_piece(req, e, json_string_value(prompt), true, &cap, err);
    if (!json_is_array(prompt))
        return rpc_fail(err, RPC_INVALID_PARAMS, "prompt", "completion params: 'prompt' (a string, or an array of "
                        "strings and token ids) is required");
    size_t i;
    json_t *item;
    json_array_foreach(prompt, i, item) {
        if (json_is_string(item)) {
            if (!tokenize_piece(req, e, json_string_value(item), i == 0, &cap, err)) return false;
        } else if (json_is_integer(item) && json_integer_value(item) >= 0 && json_integer_value(item) < n_vocab) {
            specd_token t = (specd_token)json_integer_value(item);
            if (!append_tokens(req, &t, 1, &cap)) return rpc_fail(err, RPC_INTERNAL_ERROR, "prompt", "out of memory");
        } else {
            return rpc_fail(err, RPC_INVALID_PARAMS, "prompt", "completion params: prompt[%zu] must be a string or "
                            "a token id from 0 to %d", i, n_vocab - 1);
        }
    }
    return true;
}

/* A prompt that does not fit: keep the first n_keep tokens and drop whole blocks of half the
 * rest after them, as the old API (llama-server) did. */
static bool truncate_prompt(completion_request *req, rpc_error *err) {
    req->n_prompt_tokens = req->n_tokens;
    if (req->n_tokens == 0)
        return rpc_fail(err, RPC_INVALID_PARAMS, "prompt", "completion params: the prompt is empty (the model adds "
                        "no BOS token): give some text or token ids");
    if (req->n_tokens < req->n_ctx) return true;
    int32_t n_keep = req->n_keep < 0 ? req->n_tokens : req->n_keep;
    int32_t block = (req->n_ctx - n_keep) / 2;
    if (n_keep >= req->n_ctx - 1 || block < 1)
        return rpc_fail(err, RPC_INVALID_PARAMS, "n_keep", "completion params: the prompt has %d tokens, the "
                        "context holds %d, and n_keep (%d) leaves nothing to drop: lower n_keep, shorten the "
                        "prompt or init with a larger -c", req->n_tokens, req->n_ctx, req->n_keep);
    int32_t erased = (req->n_tokens - n_keep - block) / block * block;
    if (req->n_tokens - erased >= req->n_ctx) erased += block;
    memmove(req->tokens + n_keep, req->tokens + n_keep + erased,
            (size_t)(req->n_tokens - n_keep - erased) * sizeof *req->tokens);
    req->n_tokens -= erased;
    req->truncated = true;
    return true;
}

completion_request *completion_request_parse(json_t *params, specd_engine *e, rpc_error *err) {
    completion_request *req = calloc(1, sizeof *req);
    if (!req) {
        rpc_fail(err, RPC_INTERNAL_ERROR, "", "out of memory for the completion request");
        return NULL;
    }
    req->gen = specd_generation_default_params();
    req->n_ctx = specd_engine_n_ctx(e);
    req->seed_requested = -1;
    req->cache_prompt = true;
    rpc_params rp;
    rpc_params_open(&rp, params, "completion params", "", err);
    json_t *prompt = rpc_get_value(&rp, "prompt");
    bool ok = parse_sampling(&rp, req) && parse_grammar(&rp, req, e) && parse_n_probs(&rp, req) &&
              parse_logit_bias(&rp, req, specd_engine_n_vocab(e)) &&
              parse_stop(&rp, req) && parse_speculative(&rp, req, specd_engine_has_draft(e)) &&
              completion_parse_llama_fields(&rp, req, e) && rpc_params_finish(&rp) && apply_n_predict_limit(req, err) &&
              validate_ranges(req, err) &&
              tokenize_prompt(req, prompt, e, err) && truncate_prompt(req, err);
    if (!ok) {
        completion_request_free(req);
        return NULL;
    }
    req->prompt = json_incref(prompt);
    req->n_cached = rpc_state_cached_prefix(req->tokens, req->n_tokens);
    /* The old API shifted the context during generation (when the model's cache can). */
    req->gen.context_shift = specd_engine_can_shift_context(e);
    req->gen.n_keep = req->n_keep;
    return req;
}
