/* views.c - what the layers above see of an engine and of its views (engine.h): the active views,
 * the figures that size their buffers, the setup and the model's shape the cost model keys and
 * prices on, and the learned state the engine holds for them. */
#include "engine_internal.h"

#include <stdio.h>

/* The views are the engine's own to change: a const engine hands them out as strchr does. */
specd_model_slot *specd_engine_target(const specd_engine *e) { return (specd_model_slot *)&e->target; }

specd_model_slot *specd_engine_draft(const specd_engine *e) { return (specd_model_slot *)&e->draft; }

int32_t specd_engine_batch_cap(const specd_engine *e) { return e->batch_cap; }

unsigned specd_engine_stop_count(const specd_engine *e) {
    return atomic_load(&((specd_engine *)e)->stop_requests); /* an atomic read changes nothing */
}

/* The V cache type as attention.c gives it to llama.cpp (v_cache_type_of). */
static specd_cache_type resolved_v_cache(const specd_engine_params *p) {
    if (p->cache_type_v != SPECD_CACHE_TYPE_DEFAULT) return p->cache_type_v;
    return specd_plain_attention(p) ? SPECD_CACHE_TYPE_F32 : SPECD_CACHE_TYPE_F16;
}

/* The placement part of the setup: empty when no layer of either model is offloaded. */
static void describe_placement(const specd_engine *e, char *out, size_t size) {
    char target[160], draft[160] = "none";
    specd_placement_key(&e->target.placement, target, sizeof target);
    if (e->draft.model) specd_placement_key(&e->draft.placement, draft, sizeof draft);
    bool offloaded = e->target.placement.n_layers_offloaded > 0 ||
                     (e->draft.model && e->draft.placement.n_layers_offloaded > 0);
    if (offloaded) snprintf(out, size, "target=%s;draft=%s", target, draft);
    else out[0] = '\0';
}

void specd_engine_setup_of(const specd_engine *e, specd_engine_setup *out) {
    *out = (specd_engine_setup){.target_path = e->target_path, .draft_path = e->draft_path,
                                .calibration_cache = e->calibration_cache, .n_threads = e->params.n_threads,
                                .n_threads_batch = e->params.n_threads_batch == e->params.n_threads ? 0 : e->params.n_threads_batch,
                                .n_batch = e->n_batch, .flash_attn = e->params.flash_attn,
                                .cache_type_v = resolved_v_cache(&e->params), .draft_hold = e->params.draft_hold};
    describe_placement(e, out->placement, sizeof out->placement);
}

const char *specd_engine_backend_info(void) { return llama_print_system_info(); }

specd_model_shape specd_engine_target_shape(const specd_engine *e) {
    const struct llama_model *m = e->target.model;
    if (!m) return (specd_model_shape){0};
    bool offloaded = e->target.placement.n_layers_offloaded > 0;
    return (specd_model_shape){.n_params = (double)llama_model_n_params(m), .n_layer = llama_model_n_layer(m),
                               .n_embd = llama_model_n_embd(m), .recurrent = llama_model_is_recurrent(m),
                               .offloaded = offloaded,
                               .remote = offloaded && specd_placement_only_rpc(&e->target.placement)};
}

struct specd_learned *specd_engine_learned(const specd_engine *e) { return e->learned; }

void specd_engine_keep_learned(specd_engine *e, struct specd_learned *learned,
                               void (*free_learned)(struct specd_learned *learned)) {
    e->learned = learned;
    e->free_learned = free_learned;
}

bool specd_engine_can_shift_context(const specd_engine *e) { return e && specd_slot_can_shift(&e->target); }

/* ---- a view ---------------------------------------------------------------------------------- */

int32_t specd_slot_n_kv(const specd_model_slot *slot) { return slot->n_kv; }

int32_t specd_slot_n_seq_max(const specd_model_slot *slot) { return slot->n_seq_max; }

bool specd_slot_can_drop_tail(const specd_model_slot *slot) { return slot->can_drop_tail; }

const char *specd_slot_desc(const specd_model_slot *slot) { return slot->desc; }

double specd_slot_state_ms(const specd_model_slot *slot) {
    return slot->checkpoint_ms + slot->restore_ms + slot->redecode_ms;
}

/* ---- the slots' views (one per slot of each context; the active one is e->target / e->draft) ---- */

specd_model_slot *specd_engine_target_view(specd_engine *e, int32_t slot) {
    return slot == e->active_slot ? &e->target : &e->target_views[slot];
}

int64_t specd_engine_target_cells(specd_engine *e) {
    int64_t n = 0;
    for (int32_t i = 0; i < e->n_parallel; i++) n += specd_engine_target_view(e, i)->n_kv;
    return n;
}

specd_model_slot *specd_engine_draft_view(specd_engine *e, int32_t slot) {
    if (!e->draft_views) return NULL;
    return slot == e->active_slot ? &e->draft : &e->draft_views[slot];
}
