/* drafter_chain.c - choosing, per step, which drafter's proposal to verify (see .h).
 *
 * Value of a proposal cut at depth k (Leviathan et al.'s expected accepted length, per tree node):
 *   P(root) = 1, P(node) = P(parent) * a_d(confidence(node))
 *   E_k = sum of P over the kept nodes of depth <= k;  value_k = 1 + E_k - rate x T(nodes_k + 1)
 * where a_d is drafter d's acceptance by confidence, learned from its verified drafts (kept in the
 * engine across requests), T(n) the measured cost of a target pass over n tokens and rate what a
 * ms of the engine is worth in tokens (draft_length.h). Siblings are alternatives (at most one can
 * match the target), so summing their P is right. The draft model cannot be valued before it runs
 * (it costs a decode per token), so it is valued by its recent yield: moving averages of accepted
 * and drafted tokens per call, at the measured cost of a draft token; it runs at least every
 * MODEL_RETRY_EVERY steps to keep that estimate current. Without a plan (a fixed length), a
 * proposal's value is its expected tokens. */
#include "drafter_chain.h"
#include "learned.h"
#include "spec_types.h"

#include "../util/util.h"
#include "drafter_memory.h"
#include "drafter_registry.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_EMA 0.2
/* The draft model's yield is only learned when it runs: it runs at least this often. */
#define MODEL_RETRY_EVERY 16

typedef struct member {
    specd_spec_type type;
    bool decodes;                /* the draft model or a head: valued by its recent yield */
    int32_t steps_without;       /* decoding members: steps since it last ran */
    specd_drafter drafter;
    specd_token_tree candidate;  /* this step's proposal (model-free members) */
    specd_acceptance *cal;       /* acceptance by confidence: the engine's, per type */
    specd_drafter_stats *stats;
    int32_t depth;               /* this step: where to cut the proposal */
    double value;                /* this step: rate (adaptive) or expected accepted tokens */
} member;

typedef struct drafter_chain {
    specd_engine *e;
    specd_drafter_memory *memory;
    member m[SPECD_SPEC_MAX_TYPES];
    int32_t n;
    int32_t chosen;    /* member whose tree is being verified, or -1 */
    specd_accept_mode mode; /* how the step being verified is verified */
    double *p_node;    /* scratch: P per candidate node (-1: not kept) */
    int32_t p_cap;
    double *e_depth;   /* scratch: sum of P by depth */
    int32_t *n_depth;  /* scratch: kept nodes by depth */
    int32_t depth_cap;
} drafter_chain;

/* ---- which types, and are they valid ------------------------------------------------------- */

bool specd_drafter_chain_wanted(const specd_spec_params *sp) {
    if (sp->n_types > 0) return true;
    return sp->type != SPECD_SPEC_AUTO && sp->type != SPECD_SPEC_NONE && sp->type != SPECD_SPEC_DRAFT;
}

/* A type the engine cannot run: what it needs (the registry's requirement), and what the engine
 * has instead. */
static specd_status refuse_type(const specd_engine *e, const specd_drafter_kind *kind, char **error) {
    const char *has = specd_engine_head(e) != SPECD_HEAD_NONE ? specd_engine_head_desc(e) : NULL;
    const char *instead = kind->needs == SPECD_SPEC_NEEDS_DRAFT_MODEL ? "; the draft given is the " : "; the engine has the ";
    specd_set_error(error, "speculative type '%s' needs %s%s%s", kind->name, kind->requirement, has ? instead : "",
                    has ? has : "");
    return SPECD_ERR_INVALID_ARGUMENT;
}

/* Whether the engine loaded what the kind needs. */
static bool engine_has_needs(const specd_engine *e, const specd_drafter_kind *kind) {
    switch (kind->needs) {
    case SPECD_SPEC_NEEDS_DRAFT_MODEL: return specd_engine_has_draft(e);
    case SPECD_SPEC_NEEDS_TARGET_NEXTN:
    case SPECD_SPEC_NEEDS_HEAD_FILE: return specd_engine_head(e) == kind->head;
    default: return true;
    }
}

specd_status specd_drafter_chain_validate(const specd_engine *e, const specd_spec_params *sp, char **error) {
    /* Ranges, unknown and repeated types: specd_generation_params_validate. What needs the engine: */
    specd_spec_type types[SPECD_SPEC_MAX_TYPES];
    int32_t n = specd_spec_resolve_types(sp, specd_spec_auto_type(e), types);
    for (int32_t i = 0; i < n; i++) {
        const specd_drafter_kind *kind = specd_drafter_kind_of(types[i]);
        if (kind && !engine_has_needs(e, kind)) return refuse_type(e, kind, error);
    }
    return SPECD_OK;
}

/* ---- valuing proposals ---------------------------------------------------------------------- */

static bool reserve_scratch(drafter_chain *c, int32_t n_nodes, int32_t depth) {
    if (n_nodes > c->p_cap) {
        double *p = specd_grow_array(c->p_node, (size_t)n_nodes, sizeof *p);
        if (!p) return false;
        c->p_node = p;
        c->p_cap = n_nodes;
    }
    if (depth + 1 > c->depth_cap) {
        double *ed = specd_grow_array(c->e_depth, (size_t)depth + 1, sizeof *ed);
        if (ed) c->e_depth = ed;
        int32_t *nd = specd_grow_array(c->n_depth, (size_t)depth + 1, sizeof *nd);
        if (nd) c->n_depth = nd;
        if (!ed || !nd) return false;
        c->depth_cap = depth + 1;
    }
    return true;
}

/* Fills p_node for the nodes a proposal may keep (confidence >= p_min, parent kept, at most
 * max_len nodes in array order) and sums them by depth; returns the deepest kept depth. */
static int32_t sum_by_depth(drafter_chain *c, const member *m, const specd_draft_request *req) {
    const specd_token_tree *t = &m->candidate;
    int32_t kept = 0, deepest = 0;
    c->p_node[0] = 1.0;
    for (int32_t d = 0; d <= req->max_len; d++) c->e_depth[d] = 0.0, c->n_depth[d] = 0;
    for (int32_t i = 1; i < t->n_nodes; i++) {
        const specd_tree_node *node = &t->nodes[i];
        double parent_p = c->p_node[node->parent];
        bool keep = parent_p >= 0.0 && node->confidence >= req->p_min && kept < req->max_len &&
                    node->depth <= req->max_len;
        c->p_node[i] = keep ? parent_p * specd_acceptance_of(m->cal, req->acceptance_mode, node->confidence) : -1.0;
        if (!keep) continue;
        kept++;
        c->e_depth[node->depth] += c->p_node[i];
        c->n_depth[node->depth]++;
        if (node->depth > deepest) deepest = node->depth;
    }
    return deepest;
}

/* Chooses m->depth and m->value for a model-free member's proposal. */
static bool value_candidate(drafter_chain *c, member *m, const specd_draft_request *req) {
    m->depth = 0;
    m->value = -INFINITY;
    if (m->candidate.n_nodes <= 1) return true;
    if (!reserve_scratch(c, m->candidate.n_nodes, req->max_len)) return false;
    int32_t deepest = sum_by_depth(c, m, req);
    double expected = 0.0;
    int32_t nodes = 0;
    int32_t min_depth = req->min_len < deepest ? req->min_len : deepest;
    for (int32_t k = 1; k <= deepest; k++) {
        expected += c->e_depth[k];
        nodes += c->n_depth[k];
        double value = req->plan ? specd_draft_plan_net(req->plan, 1.0 + expected, specd_draft_plan_pass_ms(req->plan, nodes + 1))
                                 : expected;
        if (k >= min_depth && (value > m->value || !req->plan)) {
            m->value = value;
            m->depth = k;
        }
    }
    return true;
}

/* A decoding member's expected value from its recent calls. Its cost per call is the measured cost
 * of a draft token times the tokens it drafts: the wall time of a call also holds catching up on
 * tokens the model-free drafters proposed, a one-off that would make the model look slow. */
static double model_value(const drafter_chain *c, const member *m, const specd_draft_request *req) {
    const specd_drafter_memory *mem = c->memory;
    double drafted = mem->model_drafted[m->type], accepted = mem->model_accepted[m->type];
    if (m->steps_without >= MODEL_RETRY_EVERY) return INFINITY;
    if (!req->plan) return accepted;
    double draft_ms = specd_costs_drafts(&specd_engine_learned(c->e)->costs, (int32_t)lround(drafted));
    int32_t n = (int32_t)lround(drafted) + 1;
    return specd_draft_plan_net(req->plan, 1.0 + accepted, specd_draft_plan_pass_ms(req->plan, n) + draft_ms);
}

/* ---- drafting ------------------------------------------------------------------------------- */

static specd_status propose_all(drafter_chain *c, const specd_draft_request *req, specd_token root, char **error) {
    for (int32_t i = 0; i < c->n; i++) {
        member *m = &c->m[i];
        if (m->decodes) continue;
        if (!specd_tree_reset(&m->candidate, root)) goto oom;
        double t0 = specd_now_ms();
        specd_status st = m->drafter.ops->draft(m->drafter.self, req, &m->candidate, error);
        m->stats->draft_ms += specd_now_ms() - t0;
        m->stats->n_calls++;
        if (st != SPECD_OK) return st;
        if (!value_candidate(c, m, req)) goto oom;
    }
    return SPECD_OK;
oom:
    specd_set_error(error, "out of memory while comparing drafts");
    return SPECD_ERR_NO_MEMORY;
}

/* Copies the chosen proposal's kept nodes of depth <= m->depth into the tree. */
static bool copy_candidate(drafter_chain *c, const member *m, specd_token_tree *tree) {
    const specd_token_tree *t = &m->candidate;
    int32_t *index = (int32_t *)specd_alloc_array((size_t)t->n_nodes, sizeof *index);
    if (!index) return false;
    index[0] = 0;
    bool ok = true;
    for (int32_t i = 1; i < t->n_nodes && ok; i++) {
        const specd_tree_node *node = &t->nodes[i];
        index[i] = -1;
        if (c->p_node[i] < 0.0 || node->depth > m->depth || index[node->parent] < 0) continue;
        index[i] = specd_tree_add(tree, index[node->parent], node->token, &node->q, node->confidence);
        ok = index[i] >= 0;
    }
    free(index);
    return ok;
}

static specd_status run_model(member *m, const specd_draft_request *req, specd_token_tree *tree, char **error) {
    double t0 = specd_now_ms();
    specd_status st = m->drafter.ops->draft(m->drafter.self, req, tree, error);
    m->stats->draft_ms += specd_now_ms() - t0;
    m->stats->n_calls++;
    return st;
}

static specd_status chain_draft(void *self, const specd_draft_request *req, specd_token_tree *tree, char **error) {
    drafter_chain *c = self;
    c->chosen = -1;
    c->mode = req->acceptance_mode;
    specd_status st = propose_all(c, req, tree->nodes[0].token, error);
    if (st != SPECD_OK) return st;
    /* Drafting nothing is worth one token per single-token pass; a forced draft (min_len) is not
     * allowed to choose it. */
    bool may_skip = req->min_len <= 0;
    double skip = req->plan ? specd_draft_plan_net(req->plan, 1.0, specd_draft_plan_pass_ms(req->plan, 1)) : 0.0;
    double best = may_skip ? skip : -INFINITY;
    for (int32_t i = 0; i < c->n; i++) {
        const member *m = &c->m[i];
        double value = m->decodes ? model_value(c, m, req) : m->depth > 0 ? m->value : -INFINITY;
        if (value > best) {
            best = value;
            c->chosen = i;
        }
    }
    for (int32_t i = 0; i < c->n; i++) c->m[i].steps_without = c->chosen == i ? 0 : c->m[i].steps_without + 1;
    if (c->chosen < 0) return SPECD_OK;
    member *m = &c->m[c->chosen];
    tree->drafter = c->chosen;
    if (m->decodes) st = run_model(m, req, tree, error);
    else if (!copy_candidate(c, m, tree)) {
        specd_set_error(error, "out of memory while drafting");
        st = SPECD_ERR_NO_MEMORY;
    }
    if (specd_tree_n_drafted(tree) > 0) m->stats->n_chosen++;
    return st;
}

/* ---- learning from the verdict --------------------------------------------------------------- */

static void chain_observe(void *self, const specd_token_tree *tree, const specd_verify_result *vr) {
    drafter_chain *c = self;
    if (c->chosen < 0 || tree->drafter != c->chosen) return;
    member *m = &c->m[c->chosen];
    int32_t n_drafted = specd_tree_n_drafted(tree);
    m->stats->n_drafted += n_drafted;
    m->stats->n_accepted += vr->n_accepted;
    /* A decoding member's outcomes calibrate the engine's length controller, as the draft model's do
     * without a chain (its plan prices their drafts). */
    specd_acceptance *cal = m->decodes ? &specd_engine_learned(c->e)->acceptance : m->cal;
    for (int32_t i = 1; i < tree->n_nodes; i++) {
        const specd_tree_node *node = &tree->nodes[i];
        bool accepted = node->depth <= vr->n_accepted && vr->path[node->depth - 1] == i;
        bool rejected = node->depth == vr->n_accepted + 1 && node->parent == vr->last_node;
        if (accepted || rejected) specd_acceptance_record(cal, c->mode, node->depth, node->confidence, accepted);
    }
    if (m->decodes) {
        specd_drafter_memory *mem = c->memory;
        mem->model_drafted[m->type] = (1.0 - MODEL_EMA) * mem->model_drafted[m->type] + MODEL_EMA * n_drafted;
        mem->model_accepted[m->type] = (1.0 - MODEL_EMA) * mem->model_accepted[m->type] + MODEL_EMA * vr->n_accepted;
    }
    if (m->drafter.ops->observe) m->drafter.ops->observe(m->drafter.self, tree, vr);
}

static specd_status chain_prepare(void *self, const specd_token *tokens, int32_t n, char **error) {
    drafter_chain *c = self;
    for (int32_t i = 0; i < c->n; i++) {
        specd_status st = c->m[i].drafter.ops->prepare(c->m[i].drafter.self, tokens, n, error);
        if (st != SPECD_OK) return st;
    }
    return SPECD_OK;
}

static specd_status chain_shift(void *self, int32_t n_keep, int32_t n_discard, const specd_token *tokens,
                                int32_t n, char **error) {
    drafter_chain *c = self;
    for (int32_t i = 0; i < c->n; i++) {
        specd_status st = specd_drafter_shift(&c->m[i].drafter, n_keep, n_discard, tokens, n, error);
        if (st != SPECD_OK) return st;
    }
    return SPECD_OK;
}

static void chain_destroy(void *self) {
    drafter_chain *c = self;
    if (!c) return;
    for (int32_t i = 0; i < c->n; i++) {
        if (c->m[i].drafter.ops) c->m[i].drafter.ops->destroy(c->m[i].drafter.self);
        specd_tree_free(&c->m[i].candidate);
    }
    free(c->p_node);
    free(c->e_depth);
    free(c->n_depth);
    free(c);
}

static const specd_drafter_ops chain_ops = {
    .name = "chain",
    .prepare = chain_prepare,
    .draft = chain_draft,
    .destroy = chain_destroy,
    .observe = chain_observe,
    .shift = chain_shift,
};

/* ---- construction --------------------------------------------------------------------------- */

specd_status specd_drafter_chain_new(specd_engine *e, const specd_spec_params *sp, specd_stats *stats,
                                     specd_drafter *out, char **error) {
    specd_status st = specd_drafter_chain_validate(e, sp, error);
    if (st != SPECD_OK) return st;
    drafter_chain *c = calloc(1, sizeof *c);
    specd_drafter_memory *mem = specd_learned_drafter_memory(e, error);
    if (!c || !mem) {
        free(c);
        if (mem) specd_set_error(error, "out of memory for the drafter chain");
        return SPECD_ERR_NO_MEMORY;
    }
    c->e = e;
    c->memory = mem;
    c->chosen = -1;
    specd_spec_type types[SPECD_SPEC_MAX_TYPES];
    int32_t n = specd_spec_resolve_types(sp, specd_spec_auto_type(e), types);
    stats->n_drafters = n;
    specd_drafter_env env = {e, mem, sp};
    for (int32_t i = 0; i < n && st == SPECD_OK; i++) {
        member *m = &c->m[i];
        m->type = types[i];
        m->decodes = specd_drafter_kind_decodes(specd_drafter_kind_of(types[i]));
        m->cal = &mem->calibration[types[i]];
        m->stats = &stats->drafters[i];
        m->stats->type = types[i];
        st = specd_drafter_create(&env, types[i], &m->drafter, error);
        if (st == SPECD_OK) c->n++;
    }
    if (st != SPECD_OK) {
        chain_destroy(c);
        return st;
    }
    out->ops = &chain_ops;
    out->self = c;
    return SPECD_OK;
}
