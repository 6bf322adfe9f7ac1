/* learned.c - creating and freeing an engine's learned state (see learned.h). */
#include "learned.h"

#include "../util/util.h"
#include "drafter_memory.h"

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
    const struct llama_model *m = e->target.model;
    if (!m || llama_model_is_recurrent(m) || e->target.placement.n_layers_offloaded > 0) return;
    double params = (double)llama_model_n_params(m), ops = 4.0 * llama_model_n_layer(m) * llama_model_n_embd(m);
    int32_t threads = e->params.n_threads > 0 ? e->params.n_threads : 1;
    if (params <= 0.0) return;
    const attention_kernel *k = e->params.flash_attn == SPECD_FLASH_ATTN_OFF ? &ATTENTION_PLAIN : &ATTENTION_FLASH;
    specd_attention_cost a = {k->slowdown * ops / (2.0 * params), k->ms_per_mop_2_threads * ops / 1e6 * 2.0 / threads,
                              k->own_weight, k->all_weight, k->pass_weight};
    specd_costs_set_attention(costs, &a);
}

specd_learned *specd_learned_get(specd_engine *e, char **error) {
    if (e->learned) return e->learned;
    specd_learned *l = calloc(1, sizeof *l);
    if (!l) {
        specd_set_error(error, "out of memory for the engine's learned state");
        return NULL;
    }
    specd_costs_init(&l->costs);
    set_attention_cost(&l->costs, e);
    specd_acceptance_init(&l->acceptance);
    specd_length_policy_init(&l->policy);
    e->learned = l;
    e->free_learned = free_learned;
    specd_calibration_open(e); /* the costs an earlier process measured, when the file fits */
    return l;
}
