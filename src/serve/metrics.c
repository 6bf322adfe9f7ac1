/* metrics.c - a server's counters (see metrics.h), summed over the completions that finished,
 * whatever API submitted them; read from any thread. */
#include "metrics.h"

#include <string.h>

void metrics_counter_init(metrics_counter *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->lock, NULL);
}

void metrics_counter_destroy(metrics_counter *m) { pthread_mutex_destroy(&m->lock); }

static serve_drafter_metrics *drafter_slot(serve_metrics *t, specd_spec_type type) {
    for (int i = 0; i < t->n_drafters; i++)
        if (t->drafters[i].type == type) return &t->drafters[i];
    if (t->n_drafters == SERVE_METRICS_MAX_DRAFTERS) return NULL;
    serve_drafter_metrics *d = &t->drafters[t->n_drafters++];
    memset(d, 0, sizeof *d);
    d->type = type;
    return d;
}

static void add_drafter(serve_metrics *t, specd_spec_type type, int64_t drafted, int64_t accepted, int64_t chosen) {
    serve_drafter_metrics *d = drafter_slot(t, type);
    if (!d) return;
    d->drafted += drafted;
    d->accepted += accepted;
    d->chosen += chosen;
}

void metrics_counter_record(metrics_counter *m, const specd_stats *s, specd_spec_type single_drafter) {
    pthread_mutex_lock(&m->lock);
    serve_metrics *t = &m->totals;
    t->requests_total++;
    t->prompt_tokens_total += s->n_prompt - s->n_prompt_cached;
    t->prompt_seconds_total += s->prompt_ms / 1000.0;
    t->tokens_predicted_total += s->n_predicted;
    t->predicted_seconds_total += s->decode_ms / 1000.0;
    t->n_steps_total += s->n_steps;
    t->drafted_total += s->n_drafted;
    t->accepted_total += s->n_accepted;
    for (int32_t i = 0; i < s->n_drafters; i++)
        add_drafter(t, s->drafters[i].type, s->drafters[i].n_drafted, s->drafters[i].n_accepted, s->drafters[i].n_chosen);
    /* one drafter (the draft model): the totals are its own */
    if (s->n_drafters == 0 && (s->n_drafted > 0 || s->n_steps > 0) && single_drafter != SPECD_SPEC_NONE)
        add_drafter(t, single_drafter, s->n_drafted, s->n_accepted, s->n_steps);
    pthread_mutex_unlock(&m->lock);
}

void metrics_counter_set_graphs(metrics_counter *m, specd_graph_info graphs) {
    pthread_mutex_lock(&m->lock);
    m->totals.graphs = graphs;
    pthread_mutex_unlock(&m->lock);
}

serve_metrics metrics_counter_get(metrics_counter *m) {
    pthread_mutex_lock(&m->lock);
    serve_metrics copy = m->totals;
    pthread_mutex_unlock(&m->lock);
    return copy;
}
