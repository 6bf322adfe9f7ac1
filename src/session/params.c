/* params.c - default parameters, names and derived statistics of the public API. */
#include "specd.h"

#include "../draft/spec_types.h"
#include "../draft/suffix.h"

#include <string.h>

specd_generation_params specd_generation_default_params(void) {
    specd_generation_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = (uint32_t)sizeof p;
    p.n_predict = -1;
    /* llama.cpp's defaults, so the same request samples the same distribution. */
    p.sampling.temperature = 0.8f;
    p.sampling.top_k = 40;
    p.sampling.top_p = 0.95f;
    p.sampling.min_p = 0.05f;
    p.sampling.repeat_last_n = 64;
    p.sampling.repeat_penalty = 1.0f;
    p.sampling.seed = SPECD_SEED_RANDOM;
    p.sampling.mirostat_tau = 5.0f;
    p.sampling.mirostat_eta = 0.1f;
    p.sampling.typical_p = 1.0f;
    p.sampling.reproducible = true;
    p.sampling.top_n_sigma = -1.0f;
    p.sampling.dynatemp_exponent = 1.0f;
    p.sampling.xtc_threshold = 0.1f;
    p.sampling.dry_base = 1.75f;
    p.sampling.dry_allowed_length = 2;
    p.sampling.dry_penalty_last_n = 64;
    p.speculative.type = SPECD_SPEC_AUTO;
    p.speculative.draft_max = 8;
    p.speculative.draft_min = 0;
    p.speculative.draft_p_min = 0.0f;
    p.speculative.adaptive = true;
    p.speculative.ngram_n = 3;
    p.speculative.ngram_min_hits = 2;
    p.speculative.suffix_branches = SPECD_SUFFIX_DEFAULT_BRANCHES;
    p.speculative.tree = SPECD_DRAFT_TREE_AUTO;
    p.speculative.draft_branches = 4;
    p.speculative.draft_p_split = 0.1f;
    p.speculative.draft_tree_nodes = 16;
    return p;
}

static const char *const draft_tree_mode_names[] = {"auto", "off", "on"};

const char *specd_draft_tree_mode_name(specd_draft_tree_mode mode) {
    return (unsigned)mode < 3 ? draft_tree_mode_names[mode] : NULL;
}

bool specd_draft_tree_mode_from_name(const char *name, specd_draft_tree_mode *mode) {
    for (int i = 0; name && i < 3; i++) {
        if (strcmp(draft_tree_mode_names[i], name) == 0) {
            *mode = (specd_draft_tree_mode)i;
            return true;
        }
    }
    return false;
}

const char *specd_stop_reason_name(specd_stop_reason reason) {
    switch (reason) {
    case SPECD_STOP_LIMIT: return "limit";
    case SPECD_STOP_EOG: return "eos";
    case SPECD_STOP_CONTEXT: return "context";
    case SPECD_STOP_CALLBACK: return "cancelled";
    }
    return "unknown";
}

double specd_stats_acceptance_rate(const specd_stats *s) {
    return s->n_drafted > 0 ? (double)s->n_accepted / s->n_drafted : 0.0;
}

double specd_stats_mean_accepted_per_step(const specd_stats *s) {
    return s->n_steps > 0 ? (double)s->n_accepted / s->n_steps : 0.0;
}

double specd_stats_decode_tokens_per_s(const specd_stats *s) {
    return s->decode_ms > 0.0 ? s->n_predicted * 1000.0 / s->decode_ms : 0.0;
}

int32_t specd_generation_drafters(const specd_engine *e, const specd_generation_params *p,
                                  specd_spec_type out[SPECD_SPEC_MAX_TYPES], specd_spec_off *why) {
    const specd_spec_params *sp = &p->speculative;
    specd_spec_off off = SPECD_SPEC_ON;
    int32_t n = specd_spec_resolve_types(sp, specd_spec_auto_type(e), out);
    if (sp->draft_max == 0) off = SPECD_SPEC_OFF_DRAFT_MAX;
    else if (n == 0) off = sp->type == SPECD_SPEC_AUTO ? SPECD_SPEC_OFF_NO_DRAFT : SPECD_SPEC_OFF_NONE;
    if (why) *why = off;
    return off == SPECD_SPEC_ON ? n : 0;
}
