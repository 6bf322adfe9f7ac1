/* verify.h - exact verification of a draft token tree against the target.
 *
 * Greedy: walk down from the root while some child holds the target's argmax; the target's argmax
 * after the last accepted node is emitted too. Output equals target-only greedy decoding.
 *
 * Stochastic (Leviathan et al. 2023; Chen et al. 2023; for several children, SpecInfer's
 * multi-candidate form): at node u with target distribution p, try the children in order; child x
 * drawn from q is accepted with probability min(1, p(x)/q(x)); on rejection p <- norm(max(0, p-q))
 * and the next child is tried; when no child is accepted a token is drawn from the final p (the
 * residual, or p itself when u has no children: the bonus token). The emitted tokens are then
 * distributed exactly as target-only sampling. Each child is tried with the q stored in its node,
 * which must be what it was really drawn from: siblings drawn independently keep q itself (SpecInfer),
 * siblings drawn without replacement keep q with the earlier siblings removed (SpecTr / recursive
 * rejection sampling; sibling_draws.h makes those). Both are exact; without replacement accepts more,
 * as no two siblings hold the same token.
 *
 * The verifier knows nothing of llama.cpp: it asks the caller for p at a node through callbacks, so
 * it is tested on synthetic distributions as well as real models. */
#ifndef SPECD_VERIFY_H
#define SPECD_VERIFY_H

#include "../sample/rng.h"
#include "token_tree.h"

typedef struct specd_verify_source {
    /* The target's processed distribution for the token that follows `node` (its path from the
     * root is the history). Returns false on failure. */
    bool (*target_dist)(void *ctx, const specd_token_tree *tree, int32_t node, specd_dist *out);
    /* The target's greedy choice after `node`. */
    specd_token (*target_argmax)(void *ctx, const specd_token_tree *tree, int32_t node);
    void *ctx;
} specd_verify_source;

typedef struct specd_verify_result {
    int32_t n_accepted;     /* draft tokens accepted */
    int32_t *path;          /* accepted node indices, root excluded (caller-sized: tree depth) */
    int32_t last_node;      /* deepest accepted node; 0 (the root) when none was accepted */
    specd_token next_token; /* the target's own token after the accepted path */
} specd_verify_result;

typedef struct specd_verifier {
    int32_t n_vocab;
    float *q_dense;         /* scratch, all zero between uses */
    specd_dist p;           /* scratch: current (residual) target distribution */
} specd_verifier;

bool specd_verifier_init(specd_verifier *v, int32_t n_vocab);
void specd_verifier_free(specd_verifier *v);

/* result->path must have room for the tree's depth. */
bool specd_verify_greedy(specd_verifier *v, const specd_token_tree *tree,
                         const specd_verify_source *src, specd_verify_result *result);
bool specd_verify_stochastic(specd_verifier *v, const specd_token_tree *tree,
                             const specd_verify_source *src, specd_rng *rng,
                             specd_verify_result *result);

#endif
