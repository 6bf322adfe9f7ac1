/* learned.c - creating and freeing an engine's learned state (see learned.h). */
#include "learned.h"

#include "../util/util.h"

#include <stdlib.h>

static void free_learned(struct specd_learned *l) {
    if (!l) return;
    specd_drafter_memory_free(l->drafter_memory);
    specd_calibration_close(&l->calibration);
    free(l);
}

/* What the cache fill costs a pass (costs.h: specd_attention_cost), from the target's
 * shape: attention takes about 4 n_layer n_embd operations per token and cell read (scores and
 * values, every head), a pass 2 n_params per token. tools/pass_costs on the benchmark pair (2
 * threads) measured how fast the CPU does those operations, per flash attention setting (off: every
 * used cell read by every token and once more by the pass, at 0.021 ms per million operations, 1.2
 * times slower per operation than the matrix products; on, as auto is on the CPU: own cells at
 * 0.047 ms per million, 2.5 times slower, other used cells at 0.21 of that). A recurrent target
 * keeps no cells; a hybrid one is priced as if every layer attended (too dear, never too cheap);
 * where layers are offloaded the rate is not known, and the fill is left out. */
typedef struct attention_kernel {
    double slowdown, ms_per_mop_2_threads, own_weight, all_weight, pass_weight;
} attention_kernel;
static const attention_kernel ATTENTION_PLAIN = {1.2, 0.021, 0.0, 1.0, 1.0};
static const attention_kernel ATTENTION_FLASH = {2.5, 0.047, 1.0, 0.21, 0.0};

static void set_attention_cost(specd_costs *costs, const specd_engine *e) {
    specd_model_shape m = specd_engine_target_shape(e);
    if (m.n_params <= 0.0 || m.recurrent || m.offloaded) return;
    specd_engine_setup setup;
    specd_engine_setup_of(e, &setup);
    double params = m.n_params, ops = 4.0 * m.n_layer * m.n_embd;
    int32_t threads = setup.n_threads > 0 ? setup.n_threads : 1;
    const attention_kernel *k = setup.flash_attn == SPECD_FLASH_ATTN_OFF ? &ATTENTION_PLAIN : &ATTENTION_FLASH;
    specd_attention_cost a = {k->slowdown * ops / (2.0 * params), k->ms_per_mop_2_threads * ops / 1e6 * 2.0 / threads,
                              k->own_weight, k->all_weight, k->pass_weight};
    specd_costs_set_attention(costs, &a);
}

/* What the calibration cache keeps, in `l`. */
static specd_calibrated calibrated(specd_learned *l, const specd_engine *e) {
    return (specd_calibrated){&l->calibration, &l->costs, &l->acceptance, specd_engine_has_draft(e),
                              l->policy.hold ? &l->policy.held : NULL, l->policy.max_fixed};
}

specd_learned *specd_learned_get(specd_engine *e, char **error) {
    if (specd_engine_learned(e)) return specd_engine_learned(e);
    specd_learned *l = calloc(1, sizeof *l);
    if (!l) {
        specd_set_error(error, "out of memory for the engine's learned state");
        return NULL;
    }
    specd_costs_init(&l->costs);
    set_attention_cost(&l->costs, e);
    specd_acceptance_init(&l->acceptance);
    specd_length_policy_init(&l->policy);
    specd_round_gate_init(&l->gate);
    specd_length_policy_limit(&l->policy, specd_engine_draft_max(e));
    /* A target on a GPU runs a pass fastest while its size holds (length_policy.h); on rpc-servers
     * alone, whose devices are not known, once a change of size is seen to cost that much. */
    specd_engine_setup setup;
    specd_engine_setup_of(e, &setup);
    specd_model_shape shape = specd_engine_target_shape(e);
    bool automatic = setup.draft_hold == SPECD_DRAFT_HOLD_AUTO;
    specd_length_policy_hold(&l->policy, setup.draft_hold == SPECD_DRAFT_HOLD_ON ||
                                             (automatic && shape.offloaded && !shape.remote));
    l->policy.hold_once_resizes_matter = automatic && shape.remote;
    specd_engine_keep_learned(e, l, free_learned);
    specd_calibrated k = calibrated(l, e);
    specd_calibration_open(e, &k); /* the costs an earlier process measured, when the file fits */
    return l;
}

specd_drafter_memory *specd_learned_drafter_memory(specd_engine *e, char **error) {
    specd_learned *l = specd_learned_get(e, error);
    if (l && !l->drafter_memory) l->drafter_memory = specd_drafter_memory_new(error);
    return l ? l->drafter_memory : NULL;
}

void specd_learned_save(specd_engine *e) {
    specd_learned *l = specd_engine_learned(e);
    if (!l) return; /* nothing learnt yet */
    specd_calibrated k = calibrated(l, e);
    specd_calibration_save(&k);
}

specd_calibration_info specd_engine_calibration(specd_engine *e) {
    specd_learned *l = e ? specd_learned_get(e, NULL) : NULL; /* the first call reads the file */
    return l ? specd_calibration_describe(&l->calibration, &l->costs) : (specd_calibration_info){0};
}
