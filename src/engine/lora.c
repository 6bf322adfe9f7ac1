/* lora.c - LoRA adapters (llama.cpp's): loaded with each model, applied to the target's passes
 * with the scales of the slot being decoded. The draft's adapters (lora_draft) are set once on
 * its context and never change. A slot's cache holds what was computed with its scales: a
 * session with other scales empties it first (specd_slot_use_lora, in kv.c). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "engine_internal.h"

#include "../util/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static specd_status load_set(specd_lora_set *set, struct llama_model *model, const specd_lora_adapter *list,
                             int32_t n, const char *role, bool without_apply, char **error) {
    if (n < 0 || n > SPECD_MAX_LORA || (n > 0 && !list)) {
        specd_set_error(error, "the %s model's LoRA adapters: %d given, at most %d", role, n, SPECD_MAX_LORA);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    for (int32_t i = 0; i < n; i++) {
        if (!list[i].path || !*list[i].path || !isfinite(list[i].scale)) {
            specd_set_error(error, "the %s model's LoRA adapter %d: needs a file and a finite scale", role, i);
            return SPECD_ERR_INVALID_ARGUMENT;
        }
        set->paths[i] = strdup(list[i].path);
        set->adapters[i] = set->paths[i] ? llama_adapter_lora_init(model, list[i].path) : NULL;
        if (!set->adapters[i]) {
            specd_set_error(error, "cannot load the LoRA adapter '%s' for the %s model: not a llama.cpp LoRA "
                            "adapter (GGUF, general.type adapter) made for this model's architecture and "
                            "shapes", list[i].path, role);
            return SPECD_ERR_MODEL_LOAD;
        }
        set->scales[i] = without_apply ? 0.0f : list[i].scale;
        set->n++;
    }
    return SPECD_OK;
}

specd_status specd_lora_load(specd_engine *e, const specd_engine_params *p, char **error) {
    specd_status st = load_set(&e->lora, e->target.model, p->lora, p->n_lora, "target", p->lora_init_without_apply,
                               error);
    if (st == SPECD_OK && e->draft.model)
        st = load_set(&e->lora_draft, e->draft.model, p->lora_draft, p->n_lora_draft, "draft", false, error);
    else if (st == SPECD_OK && p->n_lora_draft > 0) {
        specd_set_error(error, "LoRA adapters for the draft (--lora-draft) but no draft model (-md)");
        st = SPECD_ERR_INVALID_ARGUMENT;
    }
    return st;
}

/* The adapters themselves go with their model (llama.cpp frees a model's adapters with it). */
static void free_set(specd_lora_set *set) {
    for (int32_t i = 0; i < SPECD_MAX_LORA; i++) free(set->paths[i]);
    memset(set, 0, sizeof *set);
}

void specd_lora_free(specd_engine *e) {
    free_set(&e->lora);
    free_set(&e->lora_draft);
}

/* Sets `scales` on ctx: the adapters of non-zero scale (llama.cpp builds a product for every
 * adapter it is given, whatever its scale). */
static void apply(struct llama_context *ctx, const specd_lora_set *set, const float *scales) {
    struct llama_adapter_lora *on[SPECD_MAX_LORA];
    float on_scales[SPECD_MAX_LORA];
    size_t n = 0;
    for (int32_t i = 0; i < set->n; i++)
        if (scales[i] != 0.0f) on[n] = set->adapters[i], on_scales[n++] = scales[i];
    llama_set_adapters_lora(ctx, on, n, on_scales);
}

void specd_lora_apply_defaults(specd_engine *e, struct llama_context *ctx) {
    if (e->lora.n > 0) apply(ctx, &e->lora, e->lora.scales);
}

void specd_lora_apply_draft(specd_engine *e) {
    if (e->draft.ctx && e->lora_draft.n > 0) apply(e->draft.ctx, &e->lora_draft, e->lora_draft.scales);
}

void specd_lora_apply(specd_engine *e, const specd_model_slot *view) {
    if (view->ctx == e->target.ctx && e->lora.n > 0) apply(view->ctx, &e->lora, view->lora_scales);
}

specd_status specd_lora_validate(const specd_engine *e, const float *scales, int32_t n, char **error) {
    if (!scales) return SPECD_OK;
    if (n != e->lora.n) {
        specd_set_error(error, "lora_scales: %d given, the engine has %d LoRA adapters (one scale each)", n, e->lora.n);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    for (int32_t i = 0; i < n; i++)
        if (!isfinite(scales[i])) {
            specd_set_error(error, "lora_scales: adapter %d's scale must be a finite number (got %g)", i,
                            (double)scales[i]);
            return SPECD_ERR_INVALID_ARGUMENT;
        }
    return SPECD_OK;
}

const float *specd_lora_scales_of(const specd_engine *e, const float *scales) { return scales ? scales : e->lora.scales; }

int32_t specd_engine_n_lora(const specd_engine *e) { return e ? e->lora.n : 0; }

bool specd_engine_lora(const specd_engine *e, int32_t i, const char **path, float *scale) {
    if (!e || i < 0 || i >= e->lora.n) return false;
    if (path) *path = e->lora.paths[i];
    if (scale) *scale = e->lora.scales[i];
    return true;
}
