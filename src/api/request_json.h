/* request_json.h - a completion request from the JSON API's JSON into the server's typed request
 * (serve/request.h), and the choices that shape its answer (reply_json.h). Every field checked for
 * its type as it is read (the ranges are serve_request_prepare's, once); unknown fields refused.
 * Two dialects: JSON-RPC's (the old API's fields plus llama-server's, null a wrong type) and
 * llama-server's POST /completion (null = absent, `stop` may be one string, `logit_bias` an object
 * {"id": bias}, probabilities in llama-server's shape and special-token text parsed by default,
 * several prompts in one request refused). */
#ifndef SPECD_API_REQUEST_JSON_H
#define SPECD_API_REQUEST_JSON_H

#include "reply_json.h"

typedef enum request_dialect { DIALECT_JSONRPC, DIALECT_LLAMA } request_dialect;

/* One request read by `rp` (params open over the request object). */
typedef struct json_request {
    api_params *rp;
    request_dialect dialect;
    serve_request *req;
    json_reply *reply; /* NULL: the caller shapes its answer itself (OpenAI) */
} json_request;

/* `params` (borrowed) into *req and *reply (both set up by the caller); false with *err set on any
 * wrong field. */
bool request_json_parse(json_t *params, request_dialect dialect, serve_request *req, json_reply *reply,
                        api_error *err);

/* The fields of this API named in `names` (a NULL-terminated list), each as the full parse reads
 * it, for a front end that passes some fields through as they are (OpenAI's temperature, top_p,
 * stop, logit_bias, speculative, ...). */
bool request_json_fields(json_request *jr, const char *const *names);
/* The same from `body` (borrowed) into *req in `dialect`, the params opened here (no answer shaped:
 * the caller shapes its own), then llama.cpp's sampler fields and `lora` as /completion reads them
 * (request_json_sampler_fields); false with *err set on a wrong field. */
bool request_json_read_fields(json_t *body, request_dialect dialect, serve_request *req, const char *const *names,
                              api_error *err);

/* request_lora.c: llama-server's list of LoRA adapter scales, [{id, scale}] (scale missing: 0),
 * appended to *out (malloc'd, *n entries; a request's `lora`: [] adds none, so the server's current
 * scales apply). The ids are checked against the engine's adapters later (serve/lora.h). False
 * with *err set naming `field` for a wrong shape (what was read stays in *out, the caller's). */
bool request_json_lora_list(json_t *list, const char *field, serve_lora **out, int32_t *n, api_error *err);

/* How this API names the library's fields and begins its messages ("completion params"). */
extern const serve_names request_json_names;

/* ---- request_spec.c -------------------------------------------------------------------------- */
/* speculative: the nested object {type, n_max, n_min, p_min, suffix_branches, tree, branches,
 * p_split, tree_nodes}, and llama-server's flat keys (speculative.n_max, speculative.type as a name
 * or a comma list, ...), which may not set what the object sets. */
bool request_json_speculative(json_request *jr);
bool request_json_flat_speculative(json_request *jr);

/* ---- request_llama.c ------------------------------------------------------------------------- */
/* llama.cpp's samplers beyond the old API's (DRY, XTC, top_n_sigma, dynatemp, min_keep), a
 * request's `lora` list and `samplers` (checked against every sampler's setting, so read after the
 * table's fields): the names in request_json_sampler_names (NULL-terminated). One reader for
 * /completion and the OpenAI routes, which llama-server both lets set them. */
extern const char *const request_json_sampler_names[];
bool request_json_sampler_fields(json_request *jr);

/* llama-server's fields the old API lacked: aliases, json_schema, return_tokens, samplers, ..., and
 * those specd does not implement, accepted at values that change nothing (request_llama.c). */
bool request_json_llama_fields(json_request *jr);

#endif
