/* verify.c - greedy and rejection-sampling verification of a token tree (see verify.h). */
#include "verify.h"

#include "../util/util.h"

#include <stdlib.h>
#include <string.h>

bool specd_verifier_init(specd_verifier *v, int32_t n_vocab) {
    memset(v, 0, sizeof *v);
    v->n_vocab = n_vocab;
    v->q_dense = specd_alloc_array((size_t)n_vocab, sizeof *v->q_dense);
    return v->q_dense != NULL;
}

void specd_verifier_free(specd_verifier *v) {
    free(v->q_dense);
    specd_dist_free(&v->p);
    memset(v, 0, sizeof *v);
}

/* The child of `node` whose token is `token`, or -1. */
static int32_t find_child(const specd_token_tree *tree, int32_t node, specd_token token) {
    for (int32_t i = node + 1; i < tree->n_nodes; i++)
        if (tree->nodes[i].parent == node && tree->nodes[i].token == token) return i;
    return -1;
}

static void accept_node(specd_verify_result *result, int32_t node) {
    result->path[result->n_accepted++] = node;
    result->last_node = node;
}

bool specd_verify_greedy(specd_verifier *v, const specd_token_tree *tree,
                         const specd_verify_source *src, specd_verify_result *result) {
    (void)v;
    result->n_accepted = 0;
    result->last_node = 0;
    for (int32_t node = 0;;) {
        specd_token want = src->target_argmax(src->ctx, tree, node);
        if (want < 0) return false; /* the source failed (out of memory) */
        int32_t child = find_child(tree, node, want);
        if (child < 0) {
            result->next_token = want;
            return true;
        }
        accept_node(result, child);
        node = child;
    }
}

/* p <- norm(max(0, p - q)). Returns false when nothing is left (p == q up to rounding), in which
 * case p is kept unchanged: a rejection then had probability zero, so any p-draw is exact. */
static bool subtract_and_normalize(specd_verifier *v, specd_dist *p, const specd_dist *q) {
    for (int32_t i = 0; i < q->n; i++) v->q_dense[q->ids[i]] = q->probs[i];
    double total = 0.0;
    for (int32_t i = 0; i < p->n; i++) {
        float r = p->probs[i] - v->q_dense[p->ids[i]];
        total += r > 0.0f ? r : 0.0f;
    }
    if (total > 0.0) {
        for (int32_t i = 0; i < p->n; i++) {
            float r = p->probs[i] - v->q_dense[p->ids[i]];
            p->probs[i] = r > 0.0f ? (float)(r / total) : 0.0f;
        }
    }
    for (int32_t i = 0; i < q->n; i++) v->q_dense[q->ids[i]] = 0.0f;
    return total > 0.0;
}

/* Tries the children of `node` in order; returns the accepted child or -1 (p is then the
 * distribution to draw the target's token from). */
static int32_t try_children(specd_verifier *v, const specd_token_tree *tree, int32_t node,
                            specd_rng *rng) {
    for (int32_t c = node + 1; c < tree->n_nodes; c++) {
        const specd_tree_node *child = &tree->nodes[c];
        if (child->parent != node) continue;
        float px = specd_dist_prob(&v->p, child->token);
        float qx = specd_dist_prob(&child->q, child->token);
        /* qx > 0 always (the token was drawn from q); guard against a broken drafter anyway. */
        double ratio = qx > 0.0f ? (double)px / qx : 0.0;
        if (specd_rng_uniform(rng) < ratio) return c;
        subtract_and_normalize(v, &v->p, &child->q);
    }
    return -1;
}

bool specd_verify_stochastic(specd_verifier *v, const specd_token_tree *tree,
                             const specd_verify_source *src, specd_rng *rng,
                             specd_verify_result *result) {
    result->n_accepted = 0;
    result->last_node = 0;
    for (int32_t node = 0;;) {
        if (!src->target_dist(src->ctx, tree, node, &v->p)) return false;
        int32_t child = try_children(v, tree, node, rng);
        if (child < 0) {
            result->next_token = specd_dist_sample(&v->p, rng);
            return true;
        }
        accept_node(result, child);
        node = child;
    }
}
