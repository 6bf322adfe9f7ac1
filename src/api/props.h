/* props.h - what llama-server's GET /props and GET /slots answer, built by the JSON API from a
 * host's serving server; `specd serve` only sends them. Thread-safe. */
#ifndef SPECD_API_PROPS_H
#define SPECD_API_PROPS_H

#include "host.h"

/* {default_generation_settings {id, id_task, n_ctx, speculative, is_processing, params},
 *  total_slots, model_path, model_alias, chat_template, modalities, build_info, is_sleeping,
 *  has_draft, chat_template_caps, batch_invariant}; chat_template and its caps those of template_src
 *  (the server's --chat-template-file) when given, else of the model's own template. NULL with *err
 *  set when no model is loaded (API_NO_MODEL). New reference. */
json_t *api_props_json(api_host *h, const char *template_src, api_error *err);
/* [{id, id_task, n_ctx, is_processing, state, n_prompt_tokens, n_cached, n_decoded, params,
 * speculative}] per slot (its latest request's). New reference; NULL with *err set when no model
 * is loaded. */
json_t *api_slots_json(api_host *h, api_error *err);
/* /tokenize's with_pieces: [{id, piece}] for token ids (from the tokenize method), the piece a
 * string when it is valid UTF-8, else its bytes (as llama-server). New reference; NULL with *err
 * set when no model is loaded. */
json_t *api_tokens_with_pieces(api_host *h, json_t *ids, api_error *err);

#endif
