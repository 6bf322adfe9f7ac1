/* attention.c - the attention settings every context of the engine gets from its parameters
 * (the target's, the draft's and a drafting head's companion, head.c): flash attention and the V
 * cache's type, so that all of them decode alike. */
#include "engine_internal.h"

static enum llama_flash_attn_type flash_attn_type_of(specd_flash_attn f) {
    switch (f) {
    case SPECD_FLASH_ATTN_ON: return LLAMA_FLASH_ATTN_TYPE_ENABLED;
    case SPECD_FLASH_ATTN_AUTO: return LLAMA_FLASH_ATTN_TYPE_AUTO;
    default: return LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
}

static enum ggml_type v_cache_type_of(const specd_engine_params *p) {
    switch (p->cache_type_v) {
    case SPECD_CACHE_TYPE_F16: return GGML_TYPE_F16;
    case SPECD_CACHE_TYPE_F32: return GGML_TYPE_F32;
    default: return p->flash_attn == SPECD_FLASH_ATTN_OFF ? GGML_TYPE_F32 : GGML_TYPE_F16;
    }
}

void specd_apply_attention_settings(const specd_engine_params *p, struct llama_context_params *cp) {
    cp->flash_attn_type = flash_attn_type_of(p->flash_attn);
    cp->type_v = v_cache_type_of(p);
}
