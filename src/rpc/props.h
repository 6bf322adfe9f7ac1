/* props.h - what llama-server's GET /props and GET /slots answer, built by the JSON API (which owns
 * the engine and the completions); `specd serve` only sends them. Thread-safe. */
#ifndef SPECD_RPC_PROPS_H
#define SPECD_RPC_PROPS_H

#include "rpc_internal.h"

/* {default_generation_settings {id, id_task, n_ctx, speculative, is_processing, params},
 *  total_slots, model_path, model_alias, chat_template, modalities, build_info, is_sleeping,
 *  has_draft}; NULL with *err set when no model is loaded (RPC_NO_MODEL). New reference. */
json_t *rpc_props_json(rpc_error *err);
/* [{id, id_task, n_ctx, is_processing, state, n_prompt_tokens, n_decoded, params, speculative}]
 * for the one slot (its latest request). New reference. */
json_t *rpc_slots_json(rpc_error *err);
/* /tokenize's with_pieces: [{id, piece}] for token ids (from the tokenize method), the piece a
 * string when it is valid UTF-8, else its bytes (as llama-server). New reference; NULL with *err
 * set when no model is loaded. */
json_t *rpc_tokens_with_pieces(json_t *ids, rpc_error *err);

#endif
