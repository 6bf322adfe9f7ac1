/* attention.c - the attention settings every context of the engine gets from its parameters
 * (the target's, the draft's and a drafting head's companion, head.c): flash attention and the K
 * and V caches' types, so that all of them decode alike; and llama.cpp's names of the cache types. */
#include "engine_internal.h"

#include <string.h>

/* llama.cpp's --cache-type-k/-v names (common/arg.cpp's kv_cache_types) and their ggml types. */
static const struct {
    const char *name;
    specd_cache_type type;
    enum ggml_type ggml;
} cache_types[] = {
    {"f32", SPECD_CACHE_TYPE_F32, GGML_TYPE_F32},       {"f16", SPECD_CACHE_TYPE_F16, GGML_TYPE_F16},
    {"bf16", SPECD_CACHE_TYPE_BF16, GGML_TYPE_BF16},    {"q8_0", SPECD_CACHE_TYPE_Q8_0, GGML_TYPE_Q8_0},
    {"q4_0", SPECD_CACHE_TYPE_Q4_0, GGML_TYPE_Q4_0},    {"q4_1", SPECD_CACHE_TYPE_Q4_1, GGML_TYPE_Q4_1},
    {"iq4_nl", SPECD_CACHE_TYPE_IQ4_NL, GGML_TYPE_IQ4_NL}, {"q5_0", SPECD_CACHE_TYPE_Q5_0, GGML_TYPE_Q5_0},
    {"q5_1", SPECD_CACHE_TYPE_Q5_1, GGML_TYPE_Q5_1},
};
#define N_CACHE_TYPES (sizeof cache_types / sizeof cache_types[0])

const char *specd_cache_type_name(specd_cache_type type) {
    if (type == SPECD_CACHE_TYPE_DEFAULT) return "default";
    for (size_t i = 0; i < N_CACHE_TYPES; i++)
        if (cache_types[i].type == type) return cache_types[i].name;
    return NULL;
}

static enum ggml_type ggml_of(specd_cache_type type) {
    for (size_t i = 0; i < N_CACHE_TYPES; i++)
        if (cache_types[i].type == type) return cache_types[i].ggml;
    return GGML_TYPE_F16;
}

bool specd_plain_attention(const specd_engine_params *p) {
    return p->flash_attn == SPECD_FLASH_ATTN_OFF || p->flash_attn == SPECD_FLASH_ATTN_DEFAULT;
}

static enum llama_flash_attn_type flash_attn_type_of(specd_flash_attn f) {
    switch (f) {
    case SPECD_FLASH_ATTN_ON: return LLAMA_FLASH_ATTN_TYPE_ENABLED;
    case SPECD_FLASH_ATTN_AUTO: return LLAMA_FLASH_ATTN_TYPE_AUTO;
    default: return LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
}

/* A draft's DEFAULT follows the target's setting; the target's K defaults to f16 (llama.cpp's) and
 * its V to f32 with flash attention off (see specd_cache_type), f16 with it on. */
enum ggml_type specd_ggml_cache_type(const specd_engine_params *p, bool v, bool draft) {
    specd_cache_type t = v ? p->cache_type_v : p->cache_type_k;
    specd_cache_type d = v ? p->cache_type_v_draft : p->cache_type_k_draft;
    if (draft && d != SPECD_CACHE_TYPE_DEFAULT) t = d;
    if (t != SPECD_CACHE_TYPE_DEFAULT) return ggml_of(t);
    return v && specd_plain_attention(p) ? GGML_TYPE_F32 : GGML_TYPE_F16;
}

/* V in f32 (the default under plain attention) buys batch invariance on the CPU; a target whose
 * layers run on a GPU is not made invariant (invariance.c), so there it would only double the V
 * cache's memory: V takes llama.cpp's f16 instead, for the target and a draft that follows it. */
void specd_settle_default_v_cache(specd_engine_params *p, bool target_on_gpu) {
    if (target_on_gpu && p->cache_type_v == SPECD_CACHE_TYPE_DEFAULT) p->cache_type_v = SPECD_CACHE_TYPE_F16;
}

void specd_settle_default_attention(specd_engine_params *p, bool target_on_gpu, bool rows_agree) {
    if (p->flash_attn != SPECD_FLASH_ATTN_DEFAULT) return;
    /* Several slots keep what they had before 0.8 (plain attention unless asked: `specd serve` asks
     * for llama.cpp's auto, which their invariance needs); so do a GPU and targets whose weights
     * pad one-row passes under either kernel. */
    if (p->n_parallel > 1 || target_on_gpu || !p->batch_invariant || !rows_agree) {
        p->flash_attn = SPECD_FLASH_ATTN_OFF;
        return;
    }
    /* No pass needs padding: the weights agree across rows, flash attention computes each row
     * alone, and bf16 caches keep one-row passes off the split kernel (invariance.c). */
    p->flash_attn = SPECD_FLASH_ATTN_ON;
    if (p->cache_type_k == SPECD_CACHE_TYPE_DEFAULT) p->cache_type_k = SPECD_CACHE_TYPE_BF16;
    if (p->cache_type_v == SPECD_CACHE_TYPE_DEFAULT) p->cache_type_v = SPECD_CACHE_TYPE_BF16;
}

void specd_apply_context_settings(const specd_engine_params *p, bool draft, struct llama_context_params *cp) {
    cp->flash_attn_type = flash_attn_type_of(p->flash_attn);
    cp->type_k = specd_ggml_cache_type(p, false, draft);
    cp->type_v = specd_ggml_cache_type(p, true, draft);
}

void specd_apply_attention_settings(const specd_engine_params *p, struct llama_context_params *cp) {
    specd_apply_context_settings(p, false, cp);
}
