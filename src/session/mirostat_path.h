/* mirostat_path.h - mirostat's mu along a draft tree. mu follows the tokens drawn, so a drafted
 * position is verified with the mu it would have had after the drafts before it: the root's mu
 * moved by each ancestor's surprise under the target's distribution there. Drafts are drawn with
 * the root's mu (their q), which keeps verification exact whatever q is. */
#ifndef SPECD_MIROSTAT_PATH_H
#define SPECD_MIROSTAT_PATH_H

#include "../sample/sampler.h"
#include "../verify/token_tree.h"

typedef struct specd_mu_path {
    bool on;    /* mirostat samples (else every call does nothing) */
    float *mu;  /* per tree node, filled as verification walks down */
    float root; /* the sampler's mu while the step verifies */
} specd_mu_path;

/* For trees of up to `cap` nodes; false when out of memory. */
bool specd_mu_path_init(specd_mu_path *m, const specd_sampler *s, int32_t cap);
void specd_mu_path_free(specd_mu_path *m);
/* A step's verification begins: the root has the sampler's mu. */
void specd_mu_path_begin(specd_mu_path *m, const specd_sampler *s);
/* The target's distribution at `node` is computed with that node's mu. */
void specd_mu_path_enter(const specd_mu_path *m, specd_sampler *s, int32_t node);
/* After it (p: that distribution): the mu of the node's children, and the sampler back at the root's. */
void specd_mu_path_leave(specd_mu_path *m, specd_sampler *s, const specd_token_tree *t, int32_t node,
                         const specd_dist *p);
/* The step is accepted up to `last` and `token` drawn from p there: the sampler's mu for the next
 * step. */
void specd_mu_path_accept(specd_mu_path *m, specd_sampler *s, int32_t last, const specd_dist *p, specd_token token);

#endif
