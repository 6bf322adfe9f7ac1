/* metrics.c - what `specd serve`'s /metrics and /slots report (see metrics.h): counters summed
 * over the completions that finished, and the one slot's latest request. Updated by completion.c
 * at the start and end of each completion, whatever the transport; read from any thread. */
#include "metrics.h"

#include <pthread.h>
#include <string.h>

static struct {
    pthread_mutex_t lock;
    rpc_metrics totals;
    /* the slot: the latest completion (running or done) */
    int64_t id_task;
    int32_t n_prompt_tokens;
    int32_t n_ctx;
    json_t *params;          /* its generation_settings (owned) */
    bool has_result;
    specd_stats last;        /* its statistics once done */
} m = {.lock = PTHREAD_MUTEX_INITIALIZER, .id_task = -1};

static rpc_drafter_metrics *drafter_slot(rpc_metrics *t, specd_spec_type type) {
    for (int i = 0; i < t->n_drafters; i++)
        if (t->drafters[i].type == type) return &t->drafters[i];
    if (t->n_drafters == RPC_METRICS_MAX_DRAFTERS) return NULL;
    rpc_drafter_metrics *d = &t->drafters[t->n_drafters++];
    memset(d, 0, sizeof *d);
    d->type = type;
    return d;
}

void rpc_metrics_begin(int64_t id_task, int32_t n_prompt_tokens, int32_t n_ctx, json_t *params) {
    pthread_mutex_lock(&m.lock);
    json_decref(m.params);
    m.params = params;
    m.id_task = id_task;
    m.n_prompt_tokens = n_prompt_tokens;
    m.n_ctx = n_ctx;
    m.has_result = false;
    pthread_mutex_unlock(&m.lock);
}

void rpc_metrics_record(const specd_stats *s, specd_spec_type single_drafter) {
    pthread_mutex_lock(&m.lock);
    rpc_metrics *t = &m.totals;
    t->requests_total++;
    t->prompt_tokens_total += s->n_prompt - s->n_prompt_cached;
    t->prompt_seconds_total += s->prompt_ms / 1000.0;
    t->tokens_predicted_total += s->n_predicted;
    t->predicted_seconds_total += s->decode_ms / 1000.0;
    t->n_steps_total += s->n_steps;
    t->drafted_total += s->n_drafted;
    t->accepted_total += s->n_accepted;
    if (s->n_drafters > 0) {
        for (int32_t i = 0; i < s->n_drafters; i++) {
            rpc_drafter_metrics *d = drafter_slot(t, s->drafters[i].type);
            if (!d) continue;
            d->drafted += s->drafters[i].n_drafted;
            d->accepted += s->drafters[i].n_accepted;
            d->chosen += s->drafters[i].n_chosen;
        }
    } else if (s->n_drafted > 0 || s->n_steps > 0) {
        /* one drafter (the draft model): the totals are its own */
        rpc_drafter_metrics *d = single_drafter != SPECD_SPEC_NONE ? drafter_slot(t, single_drafter) : NULL;
        if (d) {
            d->drafted += s->n_drafted;
            d->accepted += s->n_accepted;
            d->chosen += s->n_steps;
        }
    }
    m.last = *s;
    m.has_result = true;
    pthread_mutex_unlock(&m.lock);
}

rpc_metrics rpc_metrics_get(void) {
    pthread_mutex_lock(&m.lock);
    rpc_metrics copy = m.totals;
    pthread_mutex_unlock(&m.lock);
    return copy;
}

json_t *rpc_metrics_slot_json(bool is_processing, int32_t n_ctx) {
    pthread_mutex_lock(&m.lock);
    json_t *slot = json_pack("{s:i, s:I, s:i, s:b, s:s, s:i}", "id", 0, "id_task", (json_int_t)m.id_task, "n_ctx",
                             m.id_task >= 0 ? m.n_ctx : n_ctx, "is_processing", is_processing, "state",
                             is_processing ? "processing" : "idle",
                             "n_prompt_tokens", m.n_prompt_tokens);
    if (slot) {
        json_object_set_new(slot, "params", m.params ? json_deep_copy(m.params) : json_object());
        const specd_stats *s = &m.last;
        json_t *spec = m.has_result
            ? json_pack("{s:i, s:i, s:i, s:f}", "steps", s->n_steps, "drafted", s->n_drafted, "accepted",
                        s->n_accepted, "acceptance_rate", specd_stats_acceptance_rate(s))
            : json_null();
        json_object_set_new(slot, "speculative", spec);
        json_object_set_new(slot, "n_decoded", json_integer(m.has_result ? s->n_predicted : 0));
    }
    pthread_mutex_unlock(&m.lock);
    return slot;
}
