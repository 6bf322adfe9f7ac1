/* mirostat_path.c - mu per drafted position (mirostat_path.h). */
#include "mirostat_path.h"

#include "../util/util.h"

#include <stdlib.h>

bool specd_mu_path_init(specd_mu_path *m, const specd_sampler *s, int32_t cap) {
    m->on = specd_sampler_uses_mirostat(s);
    m->mu = m->on ? specd_alloc_array((size_t)cap, sizeof *m->mu) : NULL;
    return !m->on || m->mu;
}

void specd_mu_path_free(specd_mu_path *m) {
    free(m->mu);
    m->mu = NULL;
}

void specd_mu_path_begin(specd_mu_path *m, const specd_sampler *s) {
    if (!m->on) return;
    m->root = specd_sampler_mu(s);
    m->mu[0] = m->root;
}

void specd_mu_path_enter(const specd_mu_path *m, specd_sampler *s, int32_t node) {
    if (m->on) specd_sampler_set_mu(s, m->mu[node]);
}

void specd_mu_path_leave(specd_mu_path *m, specd_sampler *s, const specd_token_tree *t, int32_t node,
                         const specd_dist *p) {
    if (!m->on) return;
    for (int32_t c = node + 1; c < t->n_nodes; c++) /* children come after their parent */
        if (t->nodes[c].parent == node)
            m->mu[c] = specd_mirostat_next_mu(&s->mirostat, m->mu[node], specd_dist_prob(p, t->nodes[c].token));
    specd_sampler_set_mu(s, m->root);
}

void specd_mu_path_accept(specd_mu_path *m, specd_sampler *s, int32_t last, const specd_dist *p, specd_token token) {
    if (!m->on) return;
    m->root = specd_mirostat_next_mu(&s->mirostat, m->mu[last], specd_dist_prob(p, token));
    specd_sampler_set_mu(s, m->root);
}
