/* chain_siblings.c - see chain_siblings.h. */
#include "chain_siblings.h"

#include "../sample/coupled.h"
#include "../sample/softmax.h"
#include "../sample/top_k.h"

#include <math.h>
#include <string.h>

void specd_chain_siblings_begin(specd_chain_siblings *s, const specd_draft_request *req, int32_t depths,
                                int32_t target_branches) {
    bool wanted = req->tree_branches > 1 && !req->grammar && !req->tree_auto && target_branches > 1;
    int32_t most = req->tree_branches < target_branches ? req->tree_branches : target_branches;
    s->depths = wanted ? depths : 0;
    s->max_leaves = most < SPECD_TREE_MAX_BRANCHES ? most : SPECD_TREE_MAX_BRANCHES;
    s->n_leaves = 1;
    s->path_p = 1.0;
}

/* Greedy: the second-best token of the sampler's transformed logits (the draw left them there). */
static specd_token second_greedy(const specd_draft_request *req, specd_token best, float *confidence) {
    specd_sampler *sm = req->sampler;
    specd_token heap[2];
    specd_top_k_heap(sm->logits, sm->n_vocab, 2, heap);
    specd_token a = specd_top_k_pop(heap, 2, sm->logits), b = specd_top_k_pop(heap, 1, sm->logits);
    specd_token second = b == best ? a : b; /* the pops come worst first */
    float max;
    double sum = specd_softmax_denominator(sm->logits, sm->n_vocab, &max);
    *confidence = (float)(exp((double)sm->logits[second] - max) / sum);
    return second;
}

/* Seeded reproducible: the second-highest key at this output index. -1: none (or out of memory). */
static specd_token second_coupled(const specd_draft_request *req, const specd_dist *q, int32_t n_history,
                                  float *confidence) {
    specd_token ranked[2];
    float ranked_p[2];
    int64_t index = req->coupled_index + (n_history - req->n_history); /* as the chain's draw */
    if (specd_coupled_top_k(q, req->coupled_seed, index, 2, ranked, ranked_p) < 2) return -1;
    *confidence = ranked_p[1];
    return ranked[1];
}

/* Sampling: q without the chain's token; the sibling's expected probability (sum over what is left
 * of q(x)^2 / mass left, as draft_tree.c), known before it is drawn. */
static double expected_sampled(specd_chain_siblings *s, const specd_dist *q, specd_token token) {
    if (!specd_sibling_draws_begin(&s->draws, q)) return -1.0;
    s->draws.mass_left = 1.0 - specd_dist_remove(&s->draws.rest, token);
    if (!specd_sibling_draws_left(&s->draws)) return 0.0;
    double sum = 0.0;
    for (int32_t j = 0; j < s->draws.rest.n; j++) sum += (double)s->draws.rest.probs[j] * s->draws.rest.probs[j];
    return s->draws.mass_left * sum;
}

static bool room(const specd_chain_siblings *s, const specd_draft_request *req, const specd_token_tree *tree,
                 int32_t depth) {
    return depth < s->depths && s->n_leaves < s->max_leaves && specd_tree_n_drafted(tree) < req->tree_max_nodes;
}

bool specd_chain_sibling(specd_chain_siblings *s, const specd_draft_request *req, const specd_dist *q,
                         specd_token_tree *tree, int32_t parent, int32_t depth, specd_token token, float confidence,
                         int32_t n_history) {
    double parent_p = s->path_p;
    s->path_p *= confidence;
    if (!room(s, req, tree, depth)) return true;
    bool greedy = specd_sampler_is_greedy(req->sampler);
    float sibling_p = 0.0f;
    specd_token sibling = -1;
    if (greedy) sibling = second_greedy(req, token, &sibling_p);
    else if (req->coupled) sibling = second_coupled(req, q, n_history, &sibling_p);
    if (greedy || req->coupled) {
        if (sibling < 0 || sibling_p <= 0.0f || parent_p * sibling_p < req->tree_p_split) return true;
        s->n_leaves++;
        return specd_tree_add(tree, parent, sibling, NULL, sibling_p) >= 0;
    }
    double expected = expected_sampled(s, q, token);
    if (expected < 0.0) return false;
    if (expected <= 0.0 || parent_p * expected < req->tree_p_split) return true;
    if (!specd_sibling_draw(&s->draws, req->rng, &sibling, &s->q_i)) return false;
    s->n_leaves++;
    return specd_tree_add(tree, parent, sibling, &s->q_i, specd_dist_prob(q, sibling)) >= 0;
}

void specd_chain_siblings_free(specd_chain_siblings *s) {
    specd_sibling_draws_free(&s->draws);
    specd_dist_free(&s->q_i);
}
