/* methods.h - the JSON-RPC methods the dispatcher (rpc.c) calls, on a host's models. Each
 * returns the result (new reference) or NULL with *err set; `params` may be NULL.
 *   methods_model.c       init, status, shutdown
 *   methods_tokens.c      tokenize, detokenize
 *   methods_completion.c  completion, completion.start, completion.poll, completion.cancel
 *   methods_lora.c        lora_adapters, lora_adapters.set
 *   methods_embed.c       embeddings, rerank */
#ifndef SPECD_RPC_METHODS_H
#define SPECD_RPC_METHODS_H

#include "../api/completion.h"

json_t *rpc_method_init(api_host *h, json_t *params, api_error *err);
json_t *rpc_method_status(api_host *h, json_t *params, api_error *err);
json_t *rpc_method_shutdown(api_host *h, json_t *params, api_error *err);
json_t *rpc_method_tokenize(api_host *h, json_t *params, api_error *err);
json_t *rpc_method_detokenize(api_host *h, json_t *params, api_error *err);
json_t *rpc_method_completion(api_host *h, json_t *params, api_error *err);
json_t *rpc_method_completion_start(api_host *h, json_t *params, api_error *err);
json_t *rpc_method_completion_poll(api_host *h, json_t *params, api_error *err);
json_t *rpc_method_completion_cancel(api_host *h, json_t *params, api_error *err);
/* llama-server's GET /lora-adapters, [{id, path, scale, task_name, prompt_prefix}], and POST
 * /lora-adapters, params {adapters: [{id, scale}]} (left out: 0), the scales of later requests that
 * give none ({success: true}). The scales set last until another model is loaded. */
json_t *rpc_method_lora_adapters(api_host *h, json_t *params, api_error *err);
json_t *rpc_method_lora_adapters_set(api_host *h, json_t *params, api_error *err);
/* llama-server's embeddings and rerank (embed_json.h): params as the body of POST /v1/embeddings
 * ("content" instead of "input": /embedding's answer) or of POST /rerank, the result that answer. */
json_t *rpc_method_embeddings(api_host *h, json_t *params, api_error *err);
json_t *rpc_method_rerank(api_host *h, json_t *params, api_error *err);

#endif
