/* params.c - default parameters, names and derived statistics of the public API. */
#include "specd.h"

#include <string.h>

specd_generation_params specd_generation_default_params(void) {
    specd_generation_params p;
    memset(&p, 0, sizeof p);
    p.n_predict = -1;
    /* llama.cpp's defaults, so the same request samples the same distribution. */
    p.sampling.temperature = 0.8f;
    p.sampling.top_k = 40;
    p.sampling.top_p = 0.95f;
    p.sampling.min_p = 0.05f;
    p.sampling.repeat_last_n = 64;
    p.sampling.repeat_penalty = 1.0f;
    p.sampling.seed = SPECD_SEED_RANDOM;
    p.speculative.type = SPECD_SPEC_AUTO;
    p.speculative.draft_max = 8;
    p.speculative.draft_min = 0;
    p.speculative.draft_p_min = 0.0f;
    p.speculative.adaptive = true;
    return p;
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
