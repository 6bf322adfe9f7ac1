/* embed_json.h - llama-server's embeddings and rerank over JSON: a request body read as
 * llama-server reads it, its inputs tokenized and run through the serving engine's embedding
 * context (specd_embed, specd_rerank), the answer in llama-server's shapes, and every refusal in
 * its error shape ({"error": {code, message, type}}). The engine is read-locked for the whole
 * request (a model swap waits for it; generation does not: the embedding context is its own). */
#ifndef SPECD_API_EMBED_JSON_H
#define SPECD_API_EMBED_JSON_H

#include "host.h"

/* The answers' two shapes: llama-server's own (/embedding, /embeddings: [{index, embedding: rows}])
 * and OpenAI's (/v1/embeddings: {model, object, usage, data}). */
typedef enum embed_api { EMBED_LLAMA, EMBED_OPENAI } embed_api;

/* The most inputs (or rerank documents) of one request: each is a pass of its own. */
#define EMBED_INPUTS_MAX 2048

/* A refusal as llama-server's format_error_response makes it. */
typedef struct embed_error {
    unsigned status;       /* the HTTP status, llama-server's for the type */
    const char *type;      /* "invalid_request_error", "not_supported_error", "unavailable_error", ... */
    char message[768];
    int32_t n_prompt_tokens, n_ctx; /* exceed_context_size_error's (the input's tokens, the most), else 0 */
} embed_error;

/* /embedding, /embeddings (EMBED_LLAMA) or /v1/embeddings (EMBED_OPENAI): the answer (new) to
 * `body` (borrowed), "model" in it being `model_name` unless the body names one; NULL with *err. */
json_t *embed_json_embeddings(api_host *h, json_t *body, embed_api api, const char *model_name, embed_error *err);
/* /rerank, /v1/rerank: Jina's shape ({model, object, usage, results} by relevance_score), or TEI's
 * (an array of {index, score[, text]}) when the body gives "texts". */
json_t *embed_json_rerank(api_host *h, json_t *body, const char *model_name, embed_error *err);
/* For rerank_json.c (embed_json.c): the serving engine read-locked (api_host_release_engine) when
 * it serves embeddings (rank: ranking), else false with llama-server's refusal; the answer's
 * "model" (new): the body's own, else model_name. */
bool embed_json_serving_engine(api_host *h, bool rank, specd_engine **e, embed_error *err);
json_t *embed_json_model(json_t *body, const char *model_name);
/* The engine's refusal (st, its message) of an input of n tokens in llama-server's types: an
 * input too long is exceed_context_size_error (400, with n and the most), a bad one
 * invalid_request_error, the rest server_error. Returns NULL. */
json_t *embed_json_failed(specd_status st, const char *message, int32_t n, specd_engine *e, embed_error *err);
/* {"error": {code, message, type[, n_prompt_tokens, n_ctx]}} (new). */
json_t *embed_error_json(const embed_error *err);
/* Sets *err (status from the type) and returns NULL, for `return embed_fail(...)`. */
json_t *embed_fail(embed_error *err, const char *type, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
