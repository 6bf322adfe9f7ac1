/* drafter.h - the one interface every drafter implements: given the token history, propose a
 * token tree under the root (the last emitted token). A chain is a tree with one branch.
 * Drafters are exact by construction only if each node's q is what its token was drawn from. */
#ifndef SPECD_DRAFTER_H
#define SPECD_DRAFTER_H

#include "../sample/rng.h"
#include "../sample/sampler.h"
#include "draft_length.h"
#include "../verify/token_tree.h"
#include "../verify/verify.h"
#include "specd.h"

typedef struct specd_draft_request {
    /* Prompt and emitted tokens; the last one is the root. The buffer has room for max_len more
     * tokens past n_history, which a drafter may use as scratch (e.g. for penalty histories). */
    specd_token *history;
    int32_t n_history;
    int32_t max_len;          /* longest chain (tree depth) allowed this step */
    int32_t min_len;          /* draft at least this much when possible */
    float p_min;              /* stop when the drafter's confidence falls below */
    specd_sampler *sampler;   /* the request's transforms: q uses the same ones as p */
    specd_rng *rng;
    /* The step's length plan (draft_length.h): each drawn token is weighed against it. NULL: no
     * adaptive length, only the bounds above. */
    struct specd_draft_plan *plan;
    specd_costs *costs;       /* the engine's: where measured draft decodes go (NULL: nowhere) */
    specd_acceptance *drawn;  /* the engine's: where the draft model's drawn tokens go (NULL: nowhere) */
    specd_accept_mode acceptance_mode; /* how this request's drafts are verified (acceptance.h) */
    /* The request's grammar (NULL: none), at the root in grammar->state. A drafter that samples
     * (the draft model) draws from q under it; the loop cuts every draft at its first token the
     * grammar refuses, so model-free drafters may ignore it. */
    struct specd_grammar *grammar;
    /* Draft-model trees (draft_tree.h): the most branches (1: chains only), the path probability
     * a split needs, the most draft tokens in the tree, and whether the cost model decides each
     * split (auto) or every split that passes p_split is drafted (on). */
    int32_t tree_branches;
    float tree_p_split;
    int32_t tree_max_nodes;
    bool tree_auto;
    /* Coupled draws (sample/coupled.h) for a reproducible seeded request: the draft model proposes
     * its coupled draw from q at each depth, output index coupled_index + depth, under
     * coupled_seed, so that it meets the target's draw under the same noise. */
    bool coupled;
    uint64_t coupled_seed;
    int64_t coupled_index;
} specd_draft_request;

typedef struct specd_drafter specd_drafter;

typedef struct specd_drafter_ops {
    const char *name;
    /* Brings the drafter up to date with a new prompt (e.g. ingests it into a draft model). */
    specd_status (*prepare)(void *self, const specd_token *tokens, int32_t n, char **error);
    /* Adds draft nodes under tree->nodes[0]; adding none is fine. */
    specd_status (*draft)(void *self, const specd_draft_request *req, specd_token_tree *tree,
                          char **error);
    void (*destroy)(void *self);
    /* Optional: the verdict on the tree just drafted, for drafters that learn from it. A drafter
     * with observe calibrates its own confidence: the loop then leaves the engine's draft-model
     * calibration alone. */
    void (*observe)(void *self, const specd_token_tree *tree, const specd_verify_result *vr);
    /* Optional: a context shift cut history positions [n_keep, n_keep + n_discard) out and moved
     * the rest back; tokens[0..n) is the history now, without the root (as prepare gets it). A
     * drafter whose state holds history positions must follow. NULL: prepare(tokens, n) is called
     * instead, so the drafter starts over on the new history. */
    specd_status (*shift)(void *self, int32_t n_keep, int32_t n_discard, const specd_token *tokens, int32_t n,
                          char **error);
    /* Optional: drafts for n sessions in n slots at once, every drafters[i] of these same ops (and
     * no grammar), their decodes joined: one decode per depth for every chain still growing,
     * instead of one per chain and depth. Each tree is what draft would give alone. `costs` (may
     * be NULL) learns a draft token's cost from the joint decodes; status[i] and errors[i] (NULL or
     * a message) say how chain i went. NULL: each session drafts alone. */
    void (*draft_joint)(specd_engine *engine, specd_drafter *const *drafters, const int32_t *slots,
                        const specd_draft_request *reqs, specd_token_tree *const *trees, int32_t n, specd_costs *costs,
                        specd_status *status, char **errors);
    /* Whether the decoding loop's length policy plans this drafter's lengths and the engine's
     * draft-token costs price them (the draft model alone; a list prices its members itself). */
    bool plans_length;
} specd_drafter_ops;

struct specd_drafter {
    const specd_drafter_ops *ops;
    void *self;
};

/* Whether the loop's length policy plans this drafter (its ops' plans_length). */
static inline bool specd_drafter_plans_length(const specd_drafter *d) {
    return d && d->ops && d->ops->plans_length;
}

/* Tells a drafter about a context shift: its shift op, or prepare when it has none. */
static inline specd_status specd_drafter_shift(const specd_drafter *d, int32_t n_keep, int32_t n_discard,
                                               const specd_token *tokens, int32_t n, char **error) {
    if (d->ops->shift) return d->ops->shift(d->self, n_keep, n_discard, tokens, n, error);
    return d->ops->prepare(d->self, tokens, n, error);
}

/* Where history position `pos` is after a shift that cut [n_keep, n_keep + n_discard): a count
 * of tokens processed ("the first pos are indexed") stays a count of the same tokens; one that
 * ended inside the cut ends at n_keep (what it had not reached yet of the cut is gone). */
static inline int32_t specd_shifted_count(int32_t pos, int32_t n_keep, int32_t n_discard) {
    if (pos <= n_keep) return pos;
    return pos >= n_keep + n_discard ? pos - n_discard : n_keep;
}

#endif
