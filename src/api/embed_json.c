/* embed_json.c - /embedding, /embeddings and /v1/embeddings (embed_json.h): the inputs read as
 * llama-server's tokenize_input_prompts reads them, each embedded alone, the answer in its shapes. */
#define _POSIX_C_SOURCE 200809L
#include "embed_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- refusals -------------------------------------------------------------------------------- */

/* llama-server's HTTP status of each error type (format_error_response). */
static unsigned status_of(const char *type) {
    static const struct {
        const char *type;
        unsigned status;
    } types[] = {{"invalid_request_error", 400}, {"exceed_context_size_error", 400}, {"not_supported_error", 501},
                 {"unavailable_error", 503},     {"not_found_error", 404},          {"server_error", 500}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (!strcmp(type, types[i].type)) return types[i].status;
    return 500;
}

json_t *embed_fail(embed_error *err, const char *type, const char *fmt, ...) {
    memset(err, 0, sizeof *err);
    err->type = type;
    err->status = status_of(type);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return NULL;
}

json_t *embed_error_json(const embed_error *err) {
    json_t *e = json_pack("{s:i, s:s, s:s}", "code", (int)err->status, "message", err->message, "type", err->type);
    if (e && !strcmp(err->type, "exceed_context_size_error")) {
        json_object_set_new(e, "n_prompt_tokens", json_integer(err->n_prompt_tokens));
        json_object_set_new(e, "n_ctx", json_integer(err->n_ctx));
    }
    return json_pack("{s:o}", "error", e);
}

/* The serving engine, read-locked (release with api_host_release_engine), if it serves what is
 * asked: embeddings at all (llama-server's --embedding), or ranking (--rerank). */
static bool serving_engine(api_host *h, bool rank, specd_engine **e, embed_error *err) {
    api_error rerr;
    if (!api_host_acquire_engine(h, e, &rerr)) return embed_fail(err, "unavailable_error", "%s", rerr.message), false;
    specd_pooling pooling = specd_engine_pooling(*e);
    const char *refusal = pooling == SPECD_POOLING_DEFAULT ? "This server does not support embeddings. Start it with "
                                                             "`--embeddings`"
                        : rank && pooling != SPECD_POOLING_RANK ? "This server does not support reranking. Start it "
                                                                  "with `--reranking`"
                                                                : NULL;
    if (!refusal) return true;
    api_host_release_engine(h);
    embed_fail(err, "not_supported_error", "%s", refusal);
    return false;
}

/* ---- inputs ---------------------------------------------------------------------------------- */

/* The inputs' tokens, one list each (owned). */
typedef struct embed_inputs {
    specd_token **tokens;
    int32_t *n;
    size_t count, cap;
} embed_inputs;

static void inputs_free(embed_inputs *in) {
    for (size_t i = 0; i < in->count; i++) specd_free(in->tokens[i]);
    free(in->tokens);
    free(in->n);
}

/* Appends a list (taken); false: out of memory (the list freed). */
static bool inputs_add(embed_inputs *in, specd_token *tokens, int32_t n) {
    if (in->count == in->cap) {
        size_t cap = in->cap ? 2 * in->cap : 4;
        specd_token **t = realloc(in->tokens, cap * sizeof *t);
        if (t) in->tokens = t;
        int32_t *c = t ? realloc(in->n, cap * sizeof *c) : NULL;
        if (c) in->n = c;
        if (!t || !c) return specd_free(tokens), false;
        in->cap = cap;
    }
    in->tokens[in->count] = tokens;
    in->n[in->count++] = n;
    return true;
}

/* Tokens appended to a list being built (specd_free-able: malloc'd). */
static bool append_tokens(specd_token **list, int32_t *n, const specd_token *more, int32_t n_more) {
    specd_token *grown = realloc(*list, (size_t)(*n + n_more + 1) * sizeof *grown);
    if (!grown) return false;
    memcpy(grown + *n, more, (size_t)n_more * sizeof *more);
    *list = grown;
    *n += n_more;
    return true;
}

/* One element of an input: text (tokenized with special tokens parsed, BOS only for the input's
 * first element, as llama-server's tokenize_mixed) or a token id. */
static bool add_element(specd_engine *e, json_t *v, bool first, specd_token **list, int32_t *n, embed_error *err) {
    if (json_is_integer(v)) {
        json_int_t id = json_integer_value(v);
        if (id < 0 || id >= specd_engine_n_vocab(e))
            return embed_fail(err, "invalid_request_error", "token id %lld is not in the vocabulary (0 to %d)",
                              (long long)id, specd_engine_n_vocab(e) - 1), false;
        specd_token t = (specd_token)id;
        return append_tokens(list, n, &t, 1) || (embed_fail(err, "server_error", "out of memory"), false);
    }
    specd_token *text = NULL;
    int32_t n_text = 0;
    char *message = NULL;
    if (specd_tokenize_special(e, json_string_value(v), first, true, &text, &n_text, &message) != SPECD_OK) {
        embed_fail(err, "invalid_request_error", "tokenizing the input failed: %s", message ? message : "");
        specd_free(message);
        return false;
    }
    bool ok = append_tokens(list, n, text, n_text);
    specd_free(text);
    return ok || (embed_fail(err, "server_error", "out of memory"), false);
}

static const char SHAPES[] = "an input must be a string, a list of token ids, a list mixing strings and token ids, or "
                             "an object with \"prompt_string\"";

/* One input: a string, a list of token ids and strings, or {"prompt_string": one of those}. */
static bool read_input(specd_engine *e, json_t *v, embed_inputs *in, embed_error *err) {
    if (json_is_object(v)) {
        if (json_object_get(v, "multimodal_data"))
            return embed_fail(err, "invalid_request_error", "Multimodal data provided, but model does not support "
                              "multimodal requests."), false;
        v = json_object_get(v, "prompt_string");
    }
    if (!json_is_string(v) && !json_is_array(v)) return embed_fail(err, "invalid_request_error", "%s", SHAPES), false;
    specd_token *list = NULL;
    int32_t n = 0;
    size_t i;
    json_t *item;
    if (json_is_string(v)) return add_element(e, v, true, &list, &n, err) && inputs_add(in, list, n);
    json_array_foreach(v, i, item) {
        bool fits = json_is_string(item) || json_is_integer(item);
        if (!fits) embed_fail(err, "invalid_request_error", "%s (element %zu is neither)", SHAPES, i);
        if (!fits || !add_element(e, item, i == 0, &list, &n, err)) return specd_free(list), false;
    }
    return inputs_add(in, list, n);
}

static bool holds_numbers(json_t *v) {
    size_t i;
    json_t *item;
    json_array_foreach(v, i, item) if (json_is_number(item)) return true;
    return false;
}

/* The inputs of `v`: an array without numbers is one input per element, anything else one input
 * (llama-server's tokenize_input_prompts). Each must have a token, as llama-server checks. */
static bool read_inputs(specd_engine *e, json_t *v, const char *field, embed_inputs *in, embed_error *err) {
    bool several = json_is_array(v) && !holds_numbers(v);
    size_t count = several ? json_array_size(v) : 1;
    if (count == 0) return embed_fail(err, "invalid_request_error", "\"%s\" must not be empty", field), false;
    if (count > EMBED_INPUTS_MAX)
        return embed_fail(err, "invalid_request_error", "\"%s\" has %zu inputs: at most %d per request", field, count,
                          EMBED_INPUTS_MAX), false;
    for (size_t i = 0; i < count; i++)
        if (!read_input(e, several ? json_array_get(v, i) : v, in, err)) return false;
    for (size_t i = 0; i < in->count; i++)
        if (in->n[i] == 0) return embed_fail(err, "invalid_request_error", "Input content cannot be empty"), false;
    return true;
}

/* ---- the answer ------------------------------------------------------------------------------ */

static json_t *floats_json(const float *v, int32_t n) {
    json_t *a = json_array();
    for (int32_t i = 0; a && i < n; i++) json_array_append_new(a, json_real((double)v[i]));
    return a;
}

/* The floats' bytes (little-endian float32, as llama-server sends a vector's memory) in base64. */
static json_t *base64_json(const float *v, int32_t n) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *b = (const unsigned char *)v;
    size_t len = (size_t)n * sizeof *v, o = 0;
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t w = (uint32_t)b[i] << 16 | (i + 1 < len ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < len ? b[i + 2] : 0);
        out[o++] = digits[w >> 18 & 63];
        out[o++] = digits[w >> 12 & 63];
        out[o++] = i + 1 < len ? digits[w >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? digits[w & 63] : '=';
    }
    out[o] = '\0';
    json_t *s = json_string(out);
    free(out);
    return s;
}

/* llama-server's own shape of one input: {index, embedding: [row, ...]}. */
static json_t *llama_item(const specd_embedding *m, size_t index) {
    json_t *rows = json_array();
    for (int32_t r = 0; rows && r < m->n_rows; r++)
        json_array_append_new(rows, floats_json(m->values + (size_t)r * (size_t)m->n_dims, m->n_dims));
    return json_pack("{s:I, s:o}", "index", (json_int_t)index, "embedding", rows);
}

/* OpenAI's: {embedding, index, object[, encoding_format]}. */
static json_t *openai_item(const specd_embedding *m, size_t index, bool base64) {
    json_t *item = json_pack("{s:o, s:I, s:s}", "embedding", base64 ? base64_json(m->values, m->n_dims)
                                                                     : floats_json(m->values, m->n_dims),
                             "index", (json_int_t)index, "object", "embedding");
    if (item && base64) json_object_set_new(item, "encoding_format", json_string("base64"));
    return item;
}

json_t *embed_json_failed(specd_status st, const char *message, int32_t n, specd_engine *e, embed_error *err) {
    if (st == SPECD_ERR_CONTEXT) {
        embed_fail(err, "exceed_context_size_error", "%s", message ? message : "the input is too long");
        err->n_prompt_tokens = n;
        err->n_ctx = specd_engine_embed_n_max(e);
        return NULL;
    }
    return embed_fail(err, st == SPECD_ERR_INVALID_ARGUMENT ? "invalid_request_error" : "server_error", "%s",
                      message ? message : "the embedding failed");
}

/* Each input embedded in turn (a client that went away stops the rest). */
static json_t *run_inputs(specd_engine *e, const embed_inputs *in, int32_t normalize, bool openai, bool base64,
                          int64_t *n_tokens, embed_error *err) {
    json_t *data = json_array();
    for (size_t i = 0; data && i < in->count; i++) {
        if (!api_thread_still_wanted()) {
            json_decref(data);
            return embed_fail(err, "server_error", "the client went away");
        }
        specd_embedding m;
        char *message = NULL;
        specd_status st = specd_embed(e, in->tokens[i], in->n[i], normalize, &m, &message);
        if (st != SPECD_OK) {
            embed_json_failed(st, message, in->n[i], e, err);
            specd_free(message);
            json_decref(data);
            return NULL;
        }
        *n_tokens += m.n_tokens;
        json_array_append_new(data, openai ? openai_item(&m, i, base64) : llama_item(&m, i));
        specd_embedding_clear(&m);
    }
    return data ? data : embed_fail(err, "server_error", "out of memory");
}

/* ---- the request ----------------------------------------------------------------------------- */

typedef struct embed_request {
    json_t *input;     /* borrowed */
    const char *field; /* "input" or "content" */
    bool openai;       /* the answer's shape: "content" answers llama-server's own even on /v1 */
    bool base64;
    int32_t normalize;
} embed_request;

static bool read_request(json_t *body, embed_api api, int32_t normalize, embed_request *r, embed_error *err) {
    *r = (embed_request){.openai = api == EMBED_OPENAI, .normalize = normalize}; /* --embd-normalize's */
    if ((r->input = json_object_get(body, "input"))) r->field = "input";
    else if ((r->input = json_object_get(body, "content"))) r->field = "content", r->openai = false;
    else return embed_fail(err, "invalid_request_error", "\"input\" or \"content\" must be provided"), false;
    json_t *format = json_object_get(body, "encoding_format");
    if (format) {
        const char *f = json_string_value(format);
        if (!f || (strcmp(f, "float") && strcmp(f, "base64")))
            return embed_fail(err, "invalid_request_error", "The format to return the embeddings in. Can be either "
                              "float or base64"), false;
        r->base64 = !strcmp(f, "base64");
    }
    json_t *norm = json_object_get(body, "embd_normalize");
    if (norm && (!json_is_integer(norm) || json_integer_value(norm) < -1 || json_integer_value(norm) > 1000))
        return embed_fail(err, "invalid_request_error", "\"embd_normalize\" must be an integer: -1 none, 0 max "
                          "absolute (int16), 1 taxicab, 2 euclidean, p > 2 the p-norm"), false;
    if (norm) r->normalize = (int32_t)json_integer_value(norm);
    return true;
}

/* The OpenAI shape's model: the body's own "model" when it gives one, as llama-server echoes it. */
static json_t *model_json(json_t *body, const char *model_name) {
    json_t *given = json_object_get(body, "model");
    return given ? json_incref(given) : json_string(model_name ? model_name : "");
}

json_t *embed_json_embeddings(api_host *h, json_t *body, embed_api api, const char *model_name, embed_error *err) {
    specd_engine *e;
    if (!serving_engine(h, false, &e, err)) return NULL;
    specd_pooling pooling = specd_engine_pooling(e);
    embed_request r = {0};
    embed_inputs in = {0};
    json_t *data = NULL, *answer = NULL;
    int64_t n_tokens = 0;
    if (api == EMBED_OPENAI && pooling == SPECD_POOLING_NONE)
        embed_fail(err, "invalid_request_error", "Pooling type 'none' is not OAI compatible. Please use a different "
                   "pooling type");
    else if (pooling == SPECD_POOLING_RANK)
        embed_fail(err, "invalid_request_error", "this server ranks (--rerank, --pooling rank): its output is a "
                   "relevance score, not an embedding; use /rerank");
    else if (read_request(body, api, api_host_embd_normalize(h), &r, err) && read_inputs(e, r.input, r.field, &in, err))
        data = run_inputs(e, &in, r.normalize, r.openai, r.base64, &n_tokens, err);
    api_host_release_engine(h);
    inputs_free(&in);
    if (!data || !r.openai) return data;
    answer = json_pack("{s:o, s:s, s:{s:I, s:I}, s:o}", "model", model_json(body, model_name), "object", "list",
                       "usage", "prompt_tokens", (json_int_t)n_tokens, "total_tokens", (json_int_t)n_tokens,
                       "data", data);
    return answer ? answer : embed_fail(err, "server_error", "out of memory");
}

/* For rerank_json.c: the same engine check. */
bool embed_json_serving_engine(api_host *h, bool rank, specd_engine **e, embed_error *err) {
    return serving_engine(h, rank, e, err);
}

json_t *embed_json_model(json_t *body, const char *model_name) { return model_json(body, model_name); }
