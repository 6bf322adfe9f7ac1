/* request_json.c - a completion request from JSON (see request_json.h): the old API's fields, each
 * read by one entry of a table (in the order its errors take precedence), the prompt, and the
 * dialects. llama-server's own fields are request_llama.c's, the speculative ones request_spec.c's. */
#include "request_json.h"

#include "../util/base64.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool not_supported(api_params *rp, const char *field, const char *why) {
    return api_fail(rp->err, API_INVALID_PARAMS, field, "completion params: '%s' is not supported yet: %s", field, why);
}

/* ---- sampling -------------------------------------------------------------------------------- */

/* Ranges are the library's to decide (serve_request_prepare checks them once everything is
 * read): the readers here check types, and only the API's own limits (n_predict, n_probs) besides.
 * The API is also stricter than the library where a value would silently mean "off": top_p 2 or
 * top_k -5 are a client's mistakes, so the probabilities must lie in [0, 1] (1 is off) and top_k
 * be 0 or -1 (off) or more. */

typedef bool (*field_reader)(json_request *jr, const char *name);

static specd_sampling_params *sampling(json_request *jr) { return &jr->req->gen.sampling; }

static bool read_n_predict(json_request *jr, const char *name) {
    return api_read_int32(jr->rp, name, -1, INT32_MAX, &jr->req->gen.n_predict);
}
static bool read_temperature(json_request *jr, const char *name) {
    return api_read_any_float(jr->rp, name, &sampling(jr)->temperature);
}
static bool read_top_k(json_request *jr, const char *name) {
    return api_read_int32(jr->rp, name, -1, INT32_MAX, &sampling(jr)->top_k);
}
static bool read_top_p(json_request *jr, const char *name) { return api_read_float(jr->rp, name, 0.0, 1.0, &sampling(jr)->top_p); }
static bool read_min_p(json_request *jr, const char *name) { return api_read_float(jr->rp, name, 0.0, 1.0, &sampling(jr)->min_p); }
static bool read_typical_p(json_request *jr, const char *name) {
    return api_read_float(jr->rp, name, 0.0, 1.0, &sampling(jr)->typical_p);
}
static bool read_repeat_last_n(json_request *jr, const char *name) {
    return api_read_any_int32(jr->rp, name, &sampling(jr)->repeat_last_n);
}
static bool read_repeat_penalty(json_request *jr, const char *name) {
    return api_read_any_float(jr->rp, name, &sampling(jr)->repeat_penalty);
}
static bool read_presence_penalty(json_request *jr, const char *name) {
    return api_read_any_float(jr->rp, name, &sampling(jr)->presence_penalty);
}
static bool read_frequency_penalty(json_request *jr, const char *name) {
    return api_read_any_float(jr->rp, name, &sampling(jr)->frequency_penalty);
}

static bool read_seed(json_request *jr, const char *name) {
    int64_t seed = -1;
    int got = api_get_int(jr->rp, name, -1, INT64_MAX, &seed);
    if (got <= 0) return got == 0; /* none given: the server's (api_host_request_defaults) */
    jr->req->seed_requested = seed;
    sampling(jr)->seed = seed < 0 ? SPECD_SEED_RANDOM : (uint64_t)seed;
    return true;
}
static bool read_reproducible(json_request *jr, const char *name) {
    return api_get_bool(jr->rp, name, &sampling(jr)->reproducible) >= 0;
}
static bool read_ignore_eos(json_request *jr, const char *name) {
    return api_get_bool(jr->rp, name, &jr->req->gen.ignore_eos) >= 0;
}
static bool read_n_keep(json_request *jr, const char *name) { return api_read_any_int32(jr->rp, name, &jr->req->n_keep); }
static bool read_stream(json_request *jr, const char *name) { return api_get_bool(jr->rp, name, &jr->req->stream) >= 0; }

static bool read_debug(json_request *jr, const char *name) {
    bool debug = false;
    if (api_get_bool(jr->rp, name, &debug) < 0) return false;
    if (jr->reply) jr->reply->debug = debug;
    return true;
}

/* mirostat 1 or 2 runs on the target alone (the engine turns speculation off; the answer says so). */
static bool read_mirostat(json_request *jr, const char *name) {
    return api_read_any_int32(jr->rp, name, &sampling(jr)->mirostat);
}
static bool read_mirostat_tau(json_request *jr, const char *name) {
    return api_read_any_float(jr->rp, name, &sampling(jr)->mirostat_tau);
}
static bool read_mirostat_eta(json_request *jr, const char *name) {
    return api_read_any_float(jr->rp, name, &sampling(jr)->mirostat_eta);
}

/* Fields whose only supported value is "off": refusing anything else beats ignoring it. */
static bool read_tfs_z(json_request *jr, const char *name) {
    double tfs_z = 1.0;
    if (api_get_number(jr->rp, name, 0.0, 1e9, &tfs_z) < 0) return false;
    return tfs_z == 1.0 || not_supported(jr->rp, name, "tail-free sampling is gone from llama.cpp; use 1 (off)");
}
static bool read_penalize_nl(json_request *jr, const char *name) {
    bool penalize_nl = false;
    if (api_get_bool(jr->rp, name, &penalize_nl) < 0) return false;
    return !penalize_nl || sampling(jr)->repeat_penalty == 1.0f ||
           not_supported(jr->rp, name, "newlines are never penalized; use false");
}

/* grammar: GBNF text ("" = none), checked against the vocabulary by serve_request_prepare. */
static bool read_grammar(json_request *jr, const char *name) {
    const char *grammar = NULL;
    int got = api_get_string(jr->rp, name, &grammar);
    if (got < 0) return false;
    return got == 0 || serve_request_set_grammar(jr->req, grammar) ||
           api_fail(jr->rp->err, API_INTERNAL_ERROR, name, "out of memory");
}

/* n_probs: the target's top-n probabilities for every token (raw logits, temperature 1, as
 * llama-server); post_sampling_probs: those of the distribution it was drawn from instead. */
static bool read_n_probs(json_request *jr, const char *name) {
    return api_read_int32(jr->rp, name, 0, 100, &jr->req->gen.n_probs);
}
static bool read_post_sampling_probs(json_request *jr, const char *name) {
    return api_get_bool(jr->rp, name, &jr->req->gen.post_sampling_probs) >= 0;
}

/* ---- logit_bias and stop ------------------------------------------------------------------------ */

static const char *const BIAS_SHAPE = "an array of [token id, bias] pairs, bias a number or false";

static bool bias_pair(api_params *rp, json_t *token, json_t *bias, size_t i, specd_logit_bias *out) {
    bool ok = json_is_integer(token) && json_integer_value(token) >= INT32_MIN &&
              json_integer_value(token) <= INT32_MAX && (json_is_number(bias) || json_is_false(bias));
    if (!ok)
        return api_fail(rp->err, API_INVALID_PARAMS, "logit_bias", "completion params: logit_bias[%zu] must be "
                        "[token id, number or false]", i);
    /* the id's range (the vocabulary) is serve_request_prepare's */
    *out = (specd_logit_bias){(specd_token)json_integer_value(token), json_is_false(bias) ? -INFINITY
                                                                                         : (float)json_number_value(bias)};
    return true;
}

/* An object {"token id": bias} (OpenAI's form, which llama-server takes too): a key that is not a
 * token id is refused naming logit_bias (specd does not tokenize bias keys). */
static bool bias_object(api_params *rp, json_t *object, specd_logit_bias *bias) {
    const char *key;
    json_t *value;
    size_t i = 0;
    json_object_foreach(object, key, value) {
        char *end = NULL;
        long long id = strtoll(key, &end, 10);
        json_t *token = *key && end && !*end ? json_integer(id) : json_string(key);
        bool ok = bias_pair(rp, token, value, i, &bias[i]);
        json_decref(token);
        if (!ok) return false;
        i++;
    }
    return true;
}

/* logit_bias: [[token, bias], ...], bias a number or false (never sample the token); in the
 * llama dialect also the object form. */
static bool read_logit_bias(json_request *jr, const char *name) {
    api_params *rp = jr->rp;
    json_t *list = api_get_value(rp, name);
    if (!list) return true;
    bool object = jr->dialect == DIALECT_LLAMA && json_is_object(list);
    if (!json_is_array(list) && !object)
        return api_fail(rp->err, API_INVALID_PARAMS, name, "completion params: 'logit_bias' must be %s", BIAS_SHAPE);
    size_t n = object ? json_object_size(list) : json_array_size(list);
    specd_logit_bias *bias = calloc(n + 1, sizeof *bias);
    if (!bias) return api_fail(rp->err, API_INTERNAL_ERROR, name, "out of memory");
    bool ok = !object || bias_object(rp, list, bias);
    for (size_t i = 0; ok && !object && i < n; i++) {
        json_t *pair = json_array_get(list, i);
        ok = (json_is_array(pair) && json_array_size(pair) == 2) ||
             api_fail(rp->err, API_INVALID_PARAMS, name, "completion params: logit_bias[%zu] must be [token id, "
                      "number or false]", i);
        ok = ok && bias_pair(rp, json_array_get(pair, 0), json_array_get(pair, 1), i, &bias[i]);
    }
    if (!ok) {
        free(bias);
        return false;
    }
    serve_request_take_logit_bias(jr->req, bias, (int32_t)n);
    return true;
}

static bool add_stop(json_request *jr, json_t *s, size_t i) {
    if (!json_is_string(s) || json_string_length(s) == 0 || strlen(json_string_value(s)) != json_string_length(s))
        return api_fail(jr->rp->err, API_INVALID_PARAMS, "stop", "completion params: stop[%zu] must be a non-empty "
                        "string without NUL characters", i);
    return serve_request_add_stop(jr->req, json_string_value(s)) ||
           api_fail(jr->rp->err, API_INTERNAL_ERROR, "stop", "out of memory");
}

/* stop: an array of strings; in the llama dialect also one string. */
static bool read_stop(json_request *jr, const char *name) {
    json_t *list = api_get_value(jr->rp, name);
    if (!list) return true;
    if (jr->dialect == DIALECT_LLAMA && json_is_string(list)) return add_stop(jr, list, 0);
    if (!json_is_array(list))
        return api_fail(jr->rp->err, API_INVALID_PARAMS, name, "completion params: 'stop' must be an array of strings");
    size_t i;
    json_t *s;
    json_array_foreach(list, i, s) if (!add_stop(jr, s, i)) return false;
    return true;
}

static bool read_speculative(json_request *jr, const char *name) {
    (void)name;
    return request_json_speculative(jr);
}

static bool read_return_origins(json_request *jr, const char *name) {
    return api_get_bool(jr->rp, name, &jr->req->return_origins) >= 0;
}

/* id_slot (llama-server's): the slot to run in, -1 any; its range is checked against the server's
 * slots by serve_request_prepare (request.h). */
static bool read_id_slot(json_request *jr, const char *name) {
    return api_read_int32(jr->rp, name, INT32_MIN, INT32_MAX, &jr->req->slot);
}

/* ---- the table ------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    field_reader read;
} fields[] = {
    {"n_predict", read_n_predict},
    {"temperature", read_temperature},
    {"top_k", read_top_k},
    {"top_p", read_top_p},
    {"min_p", read_min_p},
    {"typical_p", read_typical_p},
    {"repeat_last_n", read_repeat_last_n},
    {"repeat_penalty", read_repeat_penalty},
    {"presence_penalty", read_presence_penalty},
    {"frequency_penalty", read_frequency_penalty},
    {"seed", read_seed},
    {"reproducible", read_reproducible},
    {"ignore_eos", read_ignore_eos},
    {"n_keep", read_n_keep},
    {"stream", read_stream},
    {"__debug", read_debug},
    {"mirostat", read_mirostat},
    {"mirostat_tau", read_mirostat_tau},
    {"mirostat_eta", read_mirostat_eta},
    {"tfs_z", read_tfs_z},
    {"penalize_nl", read_penalize_nl},
    {"grammar", read_grammar},
    {"n_probs", read_n_probs},
    {"post_sampling_probs", read_post_sampling_probs},
    {"logit_bias", read_logit_bias},
    {"stop", read_stop},
    {"speculative", read_speculative},
    {"return_origins", read_return_origins},
    {"id_slot", read_id_slot},
};

bool request_json_fields(json_request *jr, const char *const *names) {
    for (; *names; names++) {
        size_t i = 0;
        while (i < sizeof fields / sizeof *fields && strcmp(fields[i].name, *names) != 0) i++;
        if (i == sizeof fields / sizeof *fields || !fields[i].read(jr, fields[i].name)) return false;
    }
    return true;
}

bool request_json_read_fields(json_t *body, request_dialect dialect, serve_request *req, const char *const *names,
                              api_error *err) {
    api_params rp;
    api_params_open(&rp, body, "completion params", "", err);
    json_request jr = {&rp, dialect, req, NULL};
    return request_json_fields(&jr, names) && request_json_sampler_fields(&jr);
}

static bool read_all_fields(json_request *jr) {
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        if (!fields[i].read(jr, fields[i].name)) return false;
    return true;
}

/* ---- the prompt ------------------------------------------------------------------------------ */

/* Several prompts in one request (an array of two or more strings, or of arrays) make several
 * completions in llama-server; this API would read them as one prompt, so they are refused. */
static bool several_prompts(json_t *prompt) {
    if (!json_is_array(prompt) || json_array_size(prompt) < 2) return false;
    size_t i;
    json_t *item;
    json_array_foreach(prompt, i, item) if (!json_is_string(item) && !json_is_array(item)) return false;
    return true;
}

/* One item of the prompt: text, or a token id (a wrong one is the token -1, which
 * serve_request_prepare refuses naming its index and the vocabulary's range). */
static bool add_prompt_item(serve_request *req, json_t *item) {
    if (json_is_string(item)) return serve_request_add_text(req, json_string_value(item));
    bool id = json_is_integer(item) && json_integer_value(item) >= 0 && json_integer_value(item) <= INT32_MAX;
    return serve_request_add_token(req, id ? (specd_token)json_integer_value(item) : -1);
}

/* llama-server's multimodal prompt: {"prompt_string": text with a marker per image,
 * "multimodal_data": [base64 of each image file, in order]}. */
static bool read_multimodal_prompt(json_t *prompt, serve_request *req, api_error *err) {
    json_t *text = json_object_get(prompt, "prompt_string"), *data = json_object_get(prompt, "multimodal_data");
    if (!json_is_string(text) || (data && !json_is_array(data)))
        return api_fail(err, API_INVALID_PARAMS, "prompt", "completion params: a 'prompt' object is {\"prompt_string\": "
                        "text with %s per image, \"multimodal_data\": [base64 of each image]}", specd_image_marker());
    size_t i;
    json_t *item;
    json_array_foreach(data, i, item) {
        bool bad = !json_is_string(item);
        size_t size = 0;
        unsigned char *bytes = bad ? NULL : specd_base64_decode(json_string_value(item), &size, &bad);
        if (bad)
            return api_fail(err, API_INVALID_PARAMS, "prompt", "completion params: 'prompt.multimodal_data[%zu]' must "
                            "be the base64 of an image file", i);
        if (!bytes || !serve_request_take_image(req, bytes, size))
            return api_fail(err, API_INTERNAL_ERROR, "prompt", "out of memory");
    }
    return serve_request_add_text(req, json_string_value(text)) || api_fail(err, API_INTERNAL_ERROR, "prompt",
                                                                            "out of memory");
}

/* A string, or an array mixing strings and token ids (BOS only before a leading string), or a
 * multimodal prompt object. */
static bool read_prompt(json_t *prompt, serve_request *req, api_error *err) {
    if (json_is_object(prompt)) return read_multimodal_prompt(prompt, req, err);
    if (!json_is_string(prompt) && !json_is_array(prompt))
        return api_fail(err, API_INVALID_PARAMS, "prompt", "completion params: 'prompt' (a string, or an array of "
                        "strings and token ids) is required");
    if (json_is_string(prompt) && !add_prompt_item(req, prompt))
        return api_fail(err, API_INTERNAL_ERROR, "prompt", "out of memory");
    size_t i;
    json_t *item;
    json_array_foreach(prompt, i, item) if (!add_prompt_item(req, item)) return api_fail(err, API_INTERNAL_ERROR,
                                                                                         "prompt", "out of memory");
    return true;
}

/* ---- the whole request ----------------------------------------------------------------------- */

/* The llama dialect's defaults: llama-server's probabilities, prompts tokenized as it does
 * (special-token text becomes those tokens). */
static void dialect_defaults(request_dialect dialect, serve_request *req, json_reply *reply) {
    if (dialect != DIALECT_LLAMA) return;
    req->parse_special = true;
    reply->probs_server_shape = true;
}

bool request_json_parse(json_t *params, request_dialect dialect, serve_request *req, json_reply *reply,
                        api_error *err) {
    if (dialect == DIALECT_LLAMA && several_prompts(json_object_get(params, "prompt")))
        return api_fail(err, API_INVALID_PARAMS, "prompt", "completion params: 'prompt' holds several prompts (an "
                        "array of strings or of arrays): specd makes one completion per request; send one request "
                        "per prompt, or one string, or one array mixing text and token ids");
    dialect_defaults(dialect, req, reply);
    api_params rp;
    api_params_open(&rp, params, "completion params", "", err);
    rp.null_is_absent = dialect == DIALECT_LLAMA;
    json_request jr = {&rp, dialect, req, reply};
    json_t *prompt = api_get_value(&rp, "prompt");
    if (!read_all_fields(&jr) || !request_json_llama_fields(&jr) || !api_params_finish(&rp) ||
        !read_prompt(prompt, req, err))
        return false;
    reply->prompt = json_incref(prompt);
    return true;
}

/* ---- names ----------------------------------------------------------------------------------- */

/* The library's names for the fields (specd_generation_params_validate) -> this API's names. */
static const char *library_field_name(const char *field) {
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
        {"grammar_trigger_patterns", "grammar_triggers"},
        {"grammar_trigger_tokens", "grammar_triggers"},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(field, names[i].library) == 0) return names[i].api;
    const char *prefix = "sampling.";
    return strncmp(field, prefix, strlen(prefix)) == 0 ? field + strlen(prefix) : field;
}

const serve_names request_json_names = {.where = "completion params", .field = library_field_name};
