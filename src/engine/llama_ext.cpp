// llama_ext.cpp - specd's one C++ file: llama.cpp's staging API (src/llama-ext.h) behind the C
// functions of llama_ext.h. Each call is wrapped in try/catch: an exception must not cross into C.
//
// The declarations below are the staging header's own (the pinned release's src/llama-ext.h, C++
// linkage). When the build finds that header (CMake: SPECD_LLAMA_EXT_H) it is included too, so the
// compiler checks them against it; an install prefix without llama.cpp's source still builds.
#include "llama_ext.h"

#ifdef SPECD_LLAMA_EXT_H_PATH
#include SPECD_LLAMA_EXT_H_PATH
#endif

LLAMA_API void llama_set_embeddings_nextn(struct llama_context * ctx, bool value, bool masked);
LLAMA_API float * llama_get_embeddings_nextn(struct llama_context * ctx);
LLAMA_API float * llama_get_embeddings_nextn_ith(struct llama_context * ctx, int32_t i);
LLAMA_API void llama_set_embeddings_layer_inp(struct llama_context * ctx, uint32_t lid, bool value);
LLAMA_API float * llama_get_embeddings_layer_inp(struct llama_context * ctx, uint32_t lid);
LLAMA_API int32_t llama_model_dflash_selector_top_k(const struct llama_model * model);
LLAMA_API const int32_t * llama_model_target_layer_ids(const struct llama_model * model);
LLAMA_API uint32_t llama_model_target_layer_ids_n(const struct llama_model * model);

extern "C" {

bool specd_ext_output_nextn(struct llama_context * ctx, bool on, bool masked) {
    try {
        llama_set_embeddings_nextn(ctx, on, masked);
        return true;
    } catch (...) {
        return false;
    }
}

const float * specd_ext_nextn_rows(struct llama_context * ctx) {
    try {
        return llama_get_embeddings_nextn(ctx);
    } catch (...) {
        return nullptr;
    }
}

const float * specd_ext_nextn_row(struct llama_context * ctx, int32_t i) {
    try {
        return llama_get_embeddings_nextn_ith(ctx, i);
    } catch (...) {
        return nullptr;
    }
}

bool specd_ext_output_layer_input(struct llama_context * ctx, uint32_t layer, bool on) {
    try {
        llama_set_embeddings_layer_inp(ctx, layer, on);
        return true;
    } catch (...) {
        return false;
    }
}

const float * specd_ext_layer_input_rows(struct llama_context * ctx, uint32_t layer) {
    try {
        return llama_get_embeddings_layer_inp(ctx, layer);
    } catch (...) {
        return nullptr;
    }
}

int32_t specd_ext_target_layers(const struct llama_model * model, const int32_t ** ids) {
    try {
        *ids = llama_model_target_layer_ids(model);
        return *ids ? (int32_t) llama_model_target_layer_ids_n(model) : 0;
    } catch (...) {
        *ids = nullptr;
        return 0;
    }
}

int32_t specd_ext_dflash_selector_top_k(const struct llama_model * model) {
    try {
        return llama_model_dflash_selector_top_k(model);
    } catch (...) {
        return 0;
    }
}

} // extern "C"
