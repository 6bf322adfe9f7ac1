/* llama_ext.h - the C door to what drafting heads need from llama.cpp beyond llama.h.
 *
 * llama.cpp exposes the target's hidden states and a head's metadata only in its staging header
 * (src/llama-ext.h: C++ linkage, no stable API). llama_ext.cpp is specd's one C++ file: it calls
 * those functions, catches any C++ exception (C callers cannot), and offers them here as C. The
 * README lists them ("llama.cpp beyond llama.h"); nothing else in specd uses llama-ext.h. */
#ifndef SPECD_LLAMA_EXT_H
#define SPECD_LLAMA_EXT_H

#include "llama.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The context outputs the hidden state a nextn (MTP) layer reads: for every token of a batch
 * (masked false: rows by batch index, logits flags or not), or for the tokens with logits only
 * (masked true: rows by output index). llama_set_embeddings_nextn. */
bool specd_ext_output_nextn(struct llama_context *ctx, bool on, bool masked);
/* The last decode's nextn rows (llama_get_embeddings_nextn), row i (llama_get_embeddings_nextn_ith);
 * NULL when there are none. */
const float *specd_ext_nextn_rows(struct llama_context *ctx);
const float *specd_ext_nextn_row(struct llama_context *ctx, int32_t i);
/* The context outputs the input of `layer` for every token (llama_set_embeddings_layer_inp), and
 * the last decode's rows of it by batch index (llama_get_embeddings_layer_inp; NULL when none). */
bool specd_ext_output_layer_input(struct llama_context *ctx, uint32_t layer, bool on);
const float *specd_ext_layer_input_rows(struct llama_context *ctx, uint32_t layer);
/* The target layers an EAGLE-3 or DFlash model reads (llama_model_target_layer_ids(_n)): their
 * count, and *ids (NULL when none). */
int32_t specd_ext_target_layers(const struct llama_model *model, const int32_t **ids);
/* A DFlash2 model's selector width (llama_model_dflash_selector_top_k); 0 for DFlash and DSpark. */
int32_t specd_ext_dflash_selector_top_k(const struct llama_model *model);

#ifdef __cplusplus
}
#endif

#endif
