/* sampled_chain.c - see sampled_chain.h. */
#include "sampled_chain.h"

#include "chain_siblings.h"

#include "../sample/coupled.h"
#include "../sample/grammar.h"
#include "../sample/softmax.h"
#include "../util/util.h"

#include <math.h>

/* Probability of `token` under the softmax of raw logits: the confidence of a greedy draft. */
static float softmax_prob(const float *logits, int32_t n_vocab, specd_token token) {
    float max;
    double sum = specd_softmax_denominator(logits, n_vocab, &max);
    return (float)(exp((double)logits[token] - max) / sum);
}

specd_token specd_chain_draw(specd_dist *q, const specd_draft_request *req, const float *logits, int32_t n_history,
                             const specd_token_filter *filter, float *confidence) {
    specd_sampler *s = req->sampler;
    if (specd_sampler_is_greedy(s)) {
        specd_token t = specd_sampler_argmax_filtered(s, logits, req->history, n_history, filter);
        if (!specd_dist_set_one_hot(q, t)) return -1;
        *confidence = softmax_prob(s->logits, s->n_vocab, t);
        return t;
    }
    if (!specd_sampler_dist_filtered(s, logits, req->history, n_history, filter, q)) return -1;
    specd_token t = req->coupled ? specd_coupled_draw(q, req->coupled_seed,
                                                      req->coupled_index + (n_history - req->n_history))
                                 : specd_dist_sample(q, req->rng);
    *confidence = specd_dist_prob(q, t);
    return t;
}

bool specd_chain_keep(const specd_draft_request *req, int32_t depth, float confidence) {
    bool forced = depth < req->min_len;
    if (!forced && confidence < req->p_min) return false;
    if (!req->plan) return true;
    if (!forced && !specd_draft_plan_worth_adding(req->plan, depth, confidence)) return false;
    specd_draft_plan_add(req->plan, depth, confidence);
    return true;
}

bool specd_chain_more(const specd_draft_request *req, int32_t depth) {
    if (depth >= req->max_len) return false;
    bool forced = depth < req->min_len;
    if (!req->plan) return true;
    if (!forced && !specd_draft_plan_worth_continuing(req->plan, depth)) return false;
    specd_draft_plan_add_draft_decode(req->plan);
    return true;
}

static specd_status out_of_memory(char **error) {
    specd_set_error(error, "out of memory while drafting");
    return SPECD_ERR_NO_MEMORY;
}

/* The chain: one token per depth, each drawn under the grammar state `gs` (NULL: no grammar),
 * which follows the chain. */
static specd_status draw_chain(const specd_chain_source *src, specd_dist *q, const specd_draft_request *req,
                               specd_token_tree *tree, specd_grammar_state *gs, char **error) {
    const float *logits = NULL;
    specd_status st = src->first(src->self, req, &logits, error);
    if (st != SPECD_OK || !logits) return st; /* no logits: the source cannot draft here */
    specd_token_filter filter;
    if (gs) filter = specd_grammar_filter(req->grammar, gs);
    int32_t parent = 0, n_history = req->n_history;
    for (int32_t depth = 0;; depth++) {
        float confidence = 0.0f;
        specd_token t = specd_chain_draw(q, req, logits, n_history, gs ? &filter : NULL, &confidence);
        if (t < 0) return out_of_memory(error);
        /* Refused only when the grammar allows nothing here (t is then its end token). */
        if (gs && !specd_grammar_advance(req->grammar, gs, t)) break;
        if (req->drawn) specd_acceptance_record_drawn(req->drawn, req->acceptance_mode, confidence);
        /* A sampled token stays even when it does not pay: dropping a drawn token for its own
         * probability biases the output toward what the draft likes (z = 22..29 in
         * test_draft_tree's chi-square with --draft-p-min 0.02..0.2 at temperature 1). Only
         * drafting after it stops. Greedy drafts are not drawn: dropping them is exact. */
        bool keep = specd_chain_keep(req, depth, confidence);
        if (!keep && specd_sampler_is_greedy(req->sampler)) break;
        if (!keep && req->plan) specd_draft_plan_add(req->plan, depth, confidence);
        int32_t child = specd_tree_add(tree, parent, t, q, confidence);
        if (child < 0) return out_of_memory(error);
        /* a sibling beside it (no grammar: its state follows the chain only) */
        if (src->siblings && !gs &&
            !specd_chain_sibling(src->siblings, req, q, tree, parent, depth, t, confidence, n_history))
            return out_of_memory(error);
        parent = child;
        req->history[n_history++] = t;
        if (!keep || !specd_chain_more(req, depth + 1)) break;
        st = src->next(src->self, req, t, &logits, error);
        if (st != SPECD_OK || !logits) return st; /* no logits: the source has no more (a block's end) */
    }
    return SPECD_OK;
}

specd_status specd_sampled_chain(const specd_chain_source *src, specd_dist *q, const specd_draft_request *req,
                                 specd_token_tree *tree, char **error) {
    if (!specd_chain_more(req, 0)) return SPECD_OK;
    if (!req->grammar) return draw_chain(src, q, req, tree, NULL, error);
    /* The grammar state follows the chain in a fork; the request's stays at the root. */
    specd_grammar_state *gs = specd_grammar_state_fork(req->grammar->state);
    if (!gs) {
        specd_set_error(error, "out of memory for the grammar state of a draft");
        return SPECD_ERR_NO_MEMORY;
    }
    specd_status st = draw_chain(src, q, req, tree, gs, error);
    specd_grammar_state_free(gs);
    return st;
}
