/* generate.c - the decoding loop:
 *   prompt ingest -> [draft -> one batched target pass over the tree -> verify -> keep the accepted
 *   path in the KV caches -> emit] until n_predict, end of generation, or the context is full.
 *
 * The last emitted token (the root) is never in the target's KV cache between steps: each target
 * pass decodes it together with the drafts, so every pass yields at least one new token, and with
 * speculation off a step is exactly one single-token decode, as in plain llama.cpp. */
#include "../draft/drafter_chain.h"
#include "../draft/drafter_registry.h"
#include "../engine/engine.h"
#include "../util/util.h"
#include "../verify/verify.h"
#include "../draft/calibrate.h"
#include "../draft/learned.h"
#include "../draft/exploration.h"
#include "context_shift.h"
#include "../draft/draft_length.h"
#include "../draft/length_policy.h"
#include "mirostat_path.h"
#include "probs.h"
#include "../sample/coupled.h"
#include "../verify/grammar_prune.h"

#include <stdatomic.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Where a session is in its step: draft, then verify, then accept. */
typedef enum step_phase { PHASE_DRAFT, PHASE_VERIFY, PHASE_ACCEPT } step_phase;

/* One generation (specd_session in specd.h): everything one request decodes with, so several can
 * run against one engine. What outlives it (costs, drafters' memory) is the engine's learned state. */
typedef struct specd_session {
    specd_engine *e;
    const specd_generation_params *params; /* = &params_copy */
    specd_generation_params params_copy;   /* its pointers (logit_bias, grammar) are the caller's */
    specd_sampler sampler;
    specd_verifier verifier;
    specd_rng rng;
    /* A reproducible seeded request (specd_sampling_params.reproducible): every token is the
     * coupled draw at its output index (sample/coupled.h), verified by the greedy walk. */
    bool coupled;
    specd_dist coupled_dist;  /* scratch for the target's distribution at a node */
    specd_mu_path mu_path;    /* mirostat's mu at each drafted position */
    float lora_scales[SPECD_MAX_LORA]; /* the target's LoRA scales this generation decodes with */
    specd_token_tree tree;
    specd_drafter drafter;    /* ops == NULL: speculation off */
    specd_learned *learned;   /* the engine's costs, acceptance and length policy, all generations */
    specd_draft_plan plan;    /* the step's draft length plan (draft_length.h) */
    bool planned;             /* the step's length is the planner's (not fixed, forced or plain) */
    double step_t0;           /* when the step's draft part began (0: no step under way) */
    int32_t step_share;       /* sessions sharing the step's round (its time is theirs) */
    specd_fill step_fill;     /* the cache the step's pass attends */
    double step_draft_ms;     /* what the step's drafting took */
    int32_t step_history;     /* the history's length when the step began */
    double step_verify_mark;  /* stats.verify_ms when the step began */
    float *step_confidences;  /* scratch: the step's draft confidences for on_step (batch_cap) */
    specd_token *step_drafts; /* scratch: the step's draft tokens for on_step (batch_cap) */
    specd_token *history;     /* prompt + emitted, with room for a tree's depth past the end */
    int32_t n_history;
    int32_t *path;            /* scratch for verification */
    specd_token *step_tokens; /* scratch: the tokens one step emits */
    specd_tree_token *tree_tokens; /* scratch: the tree as the engine decodes it */
    specd_probs probs;        /* n_probs lists of the step's tokens (off: n == 0) */
    specd_grammar *grammar;   /* NULL: the request has none; else points to grammar_state */
    specd_grammar grammar_state;
    int32_t steps_since_plain; /* steps since one without drafts */
    specd_exploration *exploration; /* the engine's: when a draft is forced (draft/exploration.h) */
    bool lean_round;          /* this round's pass ends another slot's prompt: no draft (specd_sessions_draft) */
    int32_t round_sessions;   /* sessions in this round's pass (specd_sessions_draft); 0: stepped alone */
    bool gate_plain;          /* this round's gate says no drafts (draft/round_gate.h) */
    bool gate_timed;          /* this round is timed by the gate: its accept counts its tokens */
    bool drafted_last;        /* the last step verified drafts */
    double state_mark_ms;     /* what both slots had spent on their state when the step began */
    specd_result *result;                  /* = &own_result */
    specd_result own_result;
    int32_t result_cap;
    step_phase phase;
    specd_verify_result vr;                /* the verified step, until it is accepted */
    bool done;                             /* finished: result->stop_reason says why */
    specd_status failed;                   /* a step failed: the session can go no further */
    int32_t slot;                          /* the engine slot whose KV sequences it uses */
    int32_t n_pending;                     /* prompt tokens not in the target's cache yet (begin_in_slot) */
    double prompt_t0;                      /* when the prompt's ingestion began */
    int32_t batch_tokens;                  /* specd_sessions_draft: other slots' tokens in the next pass */
    atomic_bool stop;                      /* specd_session_request_stop */
    unsigned stop_requests;                /* the engine's count when it began */
} generation;

/* ---- set-up and tear-down -------------------------------------------------------------------- */

/* The longest draft a request may verify: its own limit, capped by the engine's buffers. */
static int32_t draft_max_len_limit(const specd_engine *e, const specd_spec_params *sp) {
    int32_t engine_max = specd_engine_draft_max(e);
    return sp->draft_max < engine_max ? sp->draft_max : engine_max;
}

static specd_status validate_prompt(const specd_engine *e, const specd_token *prompt, int32_t n,
                                    char **error) {
    if (!prompt || n < 1) {
        specd_set_error(error, "the prompt is empty: give at least one token");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    int32_t n_ctx = specd_engine_n_ctx(e), n_vocab = specd_engine_n_vocab(e);
    if (n >= n_ctx) {
        specd_set_error(error, "the prompt has %d tokens but the context holds %d: shorten it or raise "
                        "the context size (-c)", n, n_ctx);
        return SPECD_ERR_CONTEXT;
    }
    for (int32_t i = 0; i < n; i++) {
        if (prompt[i] < 0 && specd_engine_image_known(e, prompt[i]) && i < n - 1) continue; /* an image's */
        if (prompt[i] < 0 && i == n - 1 && specd_engine_image_known(e, prompt[i])) {
            specd_set_error(error, "the prompt ends with an image: put text after it (the first token is "
                            "predicted from a text position)");
            return SPECD_ERR_INVALID_ARGUMENT;
        }
        if (prompt[i] < 0) {
            specd_set_error(error, "prompt token %d at index %d is outside the vocabulary (0..%d) and no position of "
                            "an image the engine holds: an image no longer held (the engine keeps the latest 16 + 4 "
                            "per slot) is held again by specd_image_tokens", prompt[i], i, n_vocab - 1);
            return SPECD_ERR_INVALID_ARGUMENT;
        }
        if (prompt[i] >= n_vocab) {
            specd_set_error(error, "prompt token %d at index %d is outside the vocabulary (0..%d)",
                            prompt[i], i, n_vocab - 1);
            return SPECD_ERR_INVALID_ARGUMENT;
        }
    }
    return SPECD_OK;
}

static specd_status validate_spec(const specd_engine *e, const specd_spec_params *sp, char **error) {
    if (specd_drafter_chain_wanted(sp)) {
        specd_status st = specd_drafter_chain_validate(e, sp, error);
        if (st != SPECD_OK) return st;
    }
    /* A recurrent state holds one sequence, and so does each context of one slot whose target is
     * offloaded (engine.h): they verify chains, not trees (kv.c). */
    const specd_model_slot *target = specd_engine_target(e);
    bool recurrent_target = !specd_slot_can_drop_tail(target);
    if ((recurrent_target || specd_engine_one_sequence(e)) && sp->suffix_branches > 1 && specd_drafter_chain_wanted(sp)) {
        specd_set_error(error, "draft trees (speculative.suffix_branches %d) cannot be verified on the %s: %s; use "
                        "suffix_branches 1 (chains)", sp->suffix_branches, specd_slot_desc(target),
                        recurrent_target ? "its recurrent state holds one sequence"
                                         : "with one slot and its layers offloaded (a GPU, an RPC server) its context "
                                           "keeps one sequence");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    /* The same for draft-model trees asked for by name, on a recurrent target or draft (auto drafts
     * chains there, as it may). */
    const specd_model_slot *draft = specd_engine_draft(e);
    const specd_model_slot *recurrent = !specd_slot_can_drop_tail(target) ? target : draft; /* a draft's too */
    if (!specd_slot_can_drop_tail(recurrent) && sp->tree == SPECD_DRAFT_TREE_ON && sp->draft_branches > 1 &&
        specd_engine_has_draft(e) && specd_spec_names_need(sp, SPECD_SPEC_NEEDS_DRAFT_MODEL, true)) {
        specd_set_error(error, "draft trees (--draft-tree on, speculative.tree \"on\") cannot be %s on the %s: its "
                        "recurrent state holds one sequence; use --draft-tree auto or off (chains)",
                        recurrent == target ? "verified" : "drafted", specd_slot_desc(recurrent));
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    /* a single type (draft, a head) needs what the engine loaded, as in a list */
    if (sp->draft_max > 0 && !specd_drafter_chain_wanted(sp)) return specd_drafter_chain_validate(e, sp, error);
    return SPECD_OK;
}

/* End-of-generation tokens, to forbid when the request ignores them. */
static specd_token *eog_tokens(const specd_engine *e, int32_t *n_out) {
    int32_t n = 0;
    int32_t n_vocab = specd_engine_n_vocab(e);
    for (specd_token t = 0; t < n_vocab; t++) n += specd_token_is_eog(e, t);
    specd_token *list = n ? specd_alloc_array((size_t)n, sizeof *list) : NULL;
    *n_out = 0;
    if (!list) return NULL;
    for (specd_token t = 0; t < n_vocab; t++)
        if (specd_token_is_eog(e, t)) list[(*n_out)++] = t;
    return list;
}

static uint64_t pick_seed(uint64_t seed) {
    return seed != SPECD_SEED_RANDOM ? seed : (uint64_t)(specd_now_ms() * 1000.0);
}

/* The grammar reads grammar_prefill first: text the prompt already ends with (a chat template's
 * generation prompt), so that the output starts where the grammar expects it to. */
static specd_status prefill_grammar(generation *g, char **error) {
    const char *text = g->params->grammar_prefill;
    if (!text || !text[0]) return SPECD_OK;
    specd_token *tokens = NULL;
    int32_t n = 0;
    specd_status st = specd_tokenize_special(g->e, text, false, true, &tokens, &n, error);
    for (int32_t i = 0; st == SPECD_OK && i < n; i++) {
        /* a tokenizer that puts a space before the text (SentencePiece) gives a token the prompt
         * does not end with: skipped, as llama.cpp's sampler does */
        char piece[8];
        if (i == 0 && !isspace((unsigned char)text[0]) && specd_token_to_piece(g->e, tokens[0], piece, sizeof piece) > 0 &&
            isspace((unsigned char)piece[0]))
            continue;
        if (!specd_grammar_advance(g->grammar, g->grammar->state, tokens[i])) {
            specd_set_error(error, "the grammar refuses its prefill '%.200s' at token %d of %d", text, i + 1, n);
            st = SPECD_ERR_INVALID_ARGUMENT;
        }
    }
    specd_free(tokens);
    return st;
}

static specd_status init_sampling(generation *g, char **error) {
    specd_token *forbidden = NULL;
    int32_t n_forbidden = 0;
    if (g->params->ignore_eos) forbidden = eog_tokens(g->e, &n_forbidden);
    bool ok = specd_sampler_init(&g->sampler, &g->params->sampling, specd_engine_n_vocab(g->e), forbidden,
                                 n_forbidden, error);
    free(forbidden);
    if (!ok) return SPECD_ERR_INVALID_ARGUMENT;
    specd_rng_seed(&g->rng, pick_seed(g->params->sampling.seed));
    const specd_sampling_params *sp = &g->params->sampling;
    g->coupled = sp->reproducible && sp->seed != SPECD_SEED_RANDOM && !specd_sampler_is_greedy(&g->sampler);
    if (!specd_sampler_init_dry(&g->sampler, g->e, error)) return SPECD_ERR_NO_MEMORY;
    if (!specd_mu_path_init(&g->mu_path, &g->sampler, specd_engine_batch_cap(g->e))) {
        specd_set_error(error, "out of memory for mirostat's state");
        return SPECD_ERR_NO_MEMORY;
    }
    if (!specd_verifier_init(&g->verifier, specd_engine_n_vocab(g->e))) {
        specd_set_error(error, "out of memory for the verifier");
        return SPECD_ERR_NO_MEMORY;
    }
    const char *grammar = g->params->grammar;
    if (!grammar || !grammar[0]) return SPECD_OK;
    g->grammar = &g->grammar_state; /* set first: free_generation frees it even when init fails */
    const specd_generation_params *p = g->params;
    specd_grammar_triggers triggers = {p->grammar_trigger_patterns, p->n_grammar_trigger_patterns,
                                       p->grammar_trigger_tokens, p->n_grammar_trigger_tokens};
    specd_status st = specd_grammar_init_lazy(g->grammar, g->e, grammar, p->grammar_lazy ? &triggers : NULL, error);
    return st == SPECD_OK ? prefill_grammar(g, error) : st;
}

static specd_status init_generation(generation *g, specd_engine *e, const specd_token *prompt,
                                    int32_t n_prompt, const specd_generation_params *params,
                                    specd_result *result_out, char **error) {
    memset(g, 0, sizeof *g);
    g->e = e;
    g->params_copy = *params;
    g->params = &g->params_copy;
    g->result = result_out ? result_out : &g->own_result;
    params = g->params; /* the drafters may keep pointers into it: the session's own copy */
    specd_result *result = g->result;
    result->stats.held_draft_length = -1; /* until a held length drives (report_costs) */
    specd_status st = init_sampling(g, error);
    if (st != SPECD_OK) return st;
    int32_t n_ctx = specd_engine_n_ctx(e), draft_max = specd_engine_draft_max(e), batch_cap = specd_engine_batch_cap(e);
    g->history = specd_alloc_array((size_t)(n_ctx + draft_max + 2), sizeof *g->history);
    g->path = specd_alloc_array((size_t)draft_max + 2, sizeof *g->path);
    g->step_tokens = specd_alloc_array((size_t)draft_max + 2, sizeof *g->step_tokens);
    g->tree_tokens = specd_alloc_array((size_t)batch_cap, sizeof *g->tree_tokens);
    g->step_confidences = specd_alloc_array((size_t)batch_cap, sizeof *g->step_confidences);
    g->step_drafts = specd_alloc_array((size_t)batch_cap, sizeof *g->step_drafts);
    if (!g->history || !g->path || !g->step_tokens || !g->tree_tokens || !g->step_confidences || !g->step_drafts ||
        !specd_tree_reset(&g->tree, prompt[n_prompt - 1]) ||
        !specd_probs_init(&g->probs, params->n_probs, params->post_sampling_probs, specd_engine_n_vocab(e),
                          draft_max + 2)) {
        specd_set_error(error, "out of memory for a generation of up to %d tokens", n_ctx);
        return SPECD_ERR_NO_MEMORY;
    }
    memcpy(g->history, prompt, (size_t)n_prompt * sizeof *prompt);
    g->n_history = n_prompt;
    result->n_probs = g->probs.n; /* set even when no token comes: the stride is known up front */
    specd_learned *learned = specd_learned_get(e, error);
    if (!learned) return SPECD_ERR_NO_MEMORY;
    g->learned = learned;
    g->exploration = &learned->exploration;
    specd_spec_type drafters[SPECD_SPEC_MAX_TYPES];
    if (specd_generation_drafters(e, params, drafters, NULL) == 0) return SPECD_OK;
    /* A list, a model-free type or a head goes through the drafter chain (draft/drafter_chain.h). */
    bool chain = specd_drafter_chain_wanted(&params->speculative) || drafters[0] != SPECD_SPEC_DRAFT;
    /* No timed calibration passes: the costs come from the calibration cache or are learnt from
     * this generation's own passes (calibrate.h), so nothing clears the prompt cache. */
    specd_drafter_env env = {e, NULL, &params->speculative}; /* the draft model keeps nothing across requests */
    return chain ? specd_drafter_chain_new(e, &params->speculative, &result->stats, &g->drafter, error)
                 : specd_drafter_create(&env, SPECD_SPEC_DRAFT, &g->drafter, error);
}

static void free_generation(generation *g) {
    specd_sampler_free(&g->sampler);
    specd_mu_path_free(&g->mu_path);
    specd_verifier_free(&g->verifier);
    specd_dist_free(&g->coupled_dist);
    specd_tree_free(&g->tree);
    if (g->drafter.ops) g->drafter.ops->destroy(g->drafter.self);
    if (g->grammar) specd_grammar_free(g->grammar);
    free(g->history);
    free(g->path);
    free(g->step_tokens);
    free(g->tree_tokens);
    free(g->step_confidences);
    free(g->step_drafts);
    specd_probs_free(&g->probs);
}

/* ---- one step -------------------------------------------------------------------------------- */

static int32_t draft_max_len(const generation *g) {
    int32_t k = draft_max_len_limit(g->e, &g->params->speculative);
    int32_t room = specd_context_room(g->e, g->n_history); /* the root sits at n_history - 1 */
    if (k > room) k = room;
    if (g->params->n_predict >= 0) {
        int32_t remaining = g->params->n_predict - g->result->n_tokens;
        if (k > remaining - 1) k = remaining - 1; /* the target adds one token itself */
    }
    return k > 0 ? k : 0;
}

/* Whether the draft length (none included) is the engine's policy to choose: adaptive, and no
 * floor of the caller's (a request's draft_min, llama-server's speculative.n_min). */
static bool policy_chooses_length(const specd_spec_params *sp) { return sp->adaptive && sp->draft_min < 1; }

/* Adaptive drafting compares every draft against the step without one, T(1). Its cost is learnt
 * from real plain steps: scaled from the passes that drafts make, the prior's shape can be far off
 * (T(2) is 2.5 T(1) on some CPUs, where the prior says 1.15), and an engine that never measures
 * T(1) keeps drafting where drafting loses (benchmark pair, AMD EPYC, 2 threads: 75 tokens/s
 * drafting against 90 without). One first (a plain step of the memory-bound pair costs 1.5 tokens
 * of drafting's), then one every PLAIN_EVERY steps until T(1) has PLAIN_PASSES (a busy moment
 * during the first would otherwise decide for good), also where a calibration file gives it: a
 * file is a starting point (costs.h), and a busy machine's file held T(1) 3.5x too dear. The plain
 * steps produce their tokens as usual. Replayed on recorded steps (tools/policy_replay), one plain
 * step first instead of two and a wait of 32 instead of 16 gave the memory-bound pair 2% more. */
#define PLAIN_PASSES 3
#define PLAIN_EVERY 32
static bool needs_plain_step(const generation *g) {
    const specd_spec_params *sp = &g->params->speculative;
    /* With several slots in the pass, the step without a draft is a pass over a root each: that is
     * the size to learn (a 1-token pass never comes while they all run, and waiting for one kept
     * two busy slots from drafting at all). */
    int32_t plain = g->round_sessions > 1 ? g->round_sessions : 1;
    const specd_costs *c = &g->learned->costs;
    int32_t size = plain < SPECD_COSTS_MAX_BATCH ? plain : SPECD_COSTS_MAX_BATCH, passes = c->seen[size];
    if (!policy_chooses_length(sp) || passes >= PLAIN_PASSES) return false;
    /* Held lengths take none: no drafts are priced by the cost model until they are tried
     * (held_lengths.h). On a GPU a lone plain step among drafting ones cost 1.6x a settled one and
     * slowed the two after it by 20-65%, and three at the start cost a 128-token run 4% on the
     * H200 with the 8.8 GB target (their own steps and one change of pass size more). */
    if (g->learned->policy.hold) return false;
    return passes < 1 || g->steps_since_plain >= PLAIN_EVERY;
}

/* Whether the step may draft a tree: forced, or auto where trees pay (engine.h: not where verifying
 * one loses the bit-for-bit invariance a chain keeps, which is worth more than a tree's few tokens,
 * nor on a GPU); never where each context keeps one sequence (one slot offloaded, engine.h). */
static bool trees_may_pay(const generation *g, const specd_spec_params *sp) {
    if (specd_engine_one_sequence(g->e)) return false;
    return sp->tree != SPECD_DRAFT_TREE_AUTO || specd_engine_auto_trees(g->e);
}

/* The most draft tokens of a tree: the request's, within the room the context has left (every tree
 * node takes a KV cell in both caches until the step is verified) and the engine's batch. */
static int32_t tree_max_nodes(const generation *g, const specd_spec_params *sp, int32_t max_len) {
    int32_t n = sp->draft_tree_nodes;
    int32_t room = specd_context_room(g->e, g->n_history);
    if (n > room) n = room;
    if (n > specd_engine_batch_cap(g->e) - 1) n = specd_engine_batch_cap(g->e) - 1;
    return n > max_len ? n : max_len; /* a chain of max_len always fits */
}

static specd_accept_mode accept_mode_of(const generation *g) {
    return specd_sampler_is_greedy(&g->sampler) || g->coupled ? SPECD_ACCEPT_GREEDY : SPECD_ACCEPT_SAMPLED;
}

/* The cache the step's pass attends: priced by the cost model. */
static specd_fill fill_of(const generation *g) {
    return (specd_fill){g->n_history - 1, (double)specd_engine_target_cells(g->e)};
}

/* The step's plan (draft_length.h), alone or as one of `copies` chains drafted together beside
 * other_tokens tokens of other slots. */
static void begin_plan(generation *g, int32_t max_len, int32_t other_tokens, int32_t copies) {
    specd_learned *l = g->learned;
    specd_draft_plan_params params = {
        .costs = &l->costs,
        .acceptance = &l->acceptance,
        .mode = accept_mode_of(g),
        .rate = specd_length_policy_rate(&l->policy, &l->costs, &l->acceptance, accept_mode_of(g), &g->step_fill),
        .fill = g->step_fill,
        .max_len = max_len,
        .other_tokens = other_tokens,
        .copies = copies,
    };
    specd_draft_plan_begin(&g->plan, &params);
}

/* A calibration file's draft costs, not measured yet in this process: the step drafts two tokens
 * to measure them (the catch-up and a next decode). A busy machine's file priced a draft token at
 * 78 ms where it costs 4, and the plan never drafted to find out. */
#define REMEASURE_DRAFTS 2
static bool draft_costs_unmeasured(const generation *g) {
    const specd_costs *c = &g->learned->costs;
    return g->params->speculative.adaptive && specd_drafter_plans_length(&g->drafter) && c->draft_decodes == 0 &&
           (c->draft_ms > 0.0 || c->first_draft_ms > 0.0);
}

/* Verdicts at a depth before the plan may draft one deeper. */
#define TRUST_VERDICTS 1.0

static int32_t min_draft_len(int32_t step_needs, int32_t caller_min) {
    return step_needs > caller_min ? step_needs : caller_min;
}

/* This step's draft request; false when the step drafts nothing (no drafter, no room, a plain step,
 * a fixed spell of no drafts). The length policy's fixed spell (length_policy.h) drafts a chain of
 * its length, as a fixed-length request would. */
static bool plan_draft(generation *g, specd_draft_request *req, bool *explore) {
    int32_t max_len = draft_max_len(g);
    g->planned = false;
    if (!g->drafter.ops || max_len == 0 || g->lean_round || g->gate_plain) return false;
    if (needs_plain_step(g)) {
        g->steps_since_plain = 0;
        return false;
    }
    const specd_spec_params *sp = &g->params->speculative;
    /* A request's draft_min (llama-server's speculative.n_min) is the caller's floor: the policy's
     * fixed spells (one of no drafts above all) would put how many tokens are drafted at the
     * mercy of this machine's timings, which the caller asked not to be. */
    int32_t fixed = policy_chooses_length(sp) && specd_drafter_plans_length(&g->drafter)
                        ? specd_length_policy_fixed(&g->learned->policy) : -1;
    if (fixed > 0 && fixed < max_len) max_len = fixed;
    bool remeasure = draft_costs_unmeasured(g);
    if (fixed == 0 && !remeasure) return false;
    /* A held length of none (a calibration file's best) re-measures with the two drafts it needs:
     * without a plan the chain would run to the whole max_len. */
    if (fixed == 0 && max_len > REMEASURE_DRAFTS) max_len = REMEASURE_DRAFTS;
    *explore = remeasure || (fixed < 0 && specd_exploration_due(g->exploration));
    bool planning = sp->adaptive && fixed < 0;
    g->planned = planning && !*explore;
    if (planning && !remeasure) { /* no longer than the verdicts so far vouch for (acceptance.h) */
        int32_t trusted = specd_acceptance_trusted_depth(&g->learned->acceptance, accept_mode_of(g), TRUST_VERDICTS);
        if (max_len > trusted && sp->draft_min < trusted) max_len = trusted;
    }
    if (planning) begin_plan(g, max_len, g->batch_tokens, 1);
    *req = (specd_draft_request){
        .history = g->history,
        .n_history = g->n_history,
        .max_len = max_len,
        .min_len = min_draft_len(fixed > 0 ? max_len : remeasure ? REMEASURE_DRAFTS : *explore ? 1 : 0, sp->draft_min),
        .p_min = fixed > 0 ? 0.0f : sp->draft_p_min,
        .sampler = &g->sampler,
        .rng = &g->rng,
        .plan = planning ? &g->plan : NULL,
        .costs = &g->learned->costs,
        .drawn = &g->learned->acceptance,
        .acceptance_mode = accept_mode_of(g),
        .grammar = g->grammar,
        /* seeded reproducible (coupled): the siblings are the draft's next-best keys under the same
         * keyed noise (draft_tree.c), verified by the greedy walk */
        .tree_branches = sp->tree == SPECD_DRAFT_TREE_OFF || fixed > 0 || !trees_may_pay(g, sp) ? 1 : sp->draft_branches,
        .tree_p_split = sp->draft_p_split,
        .tree_max_nodes = tree_max_nodes(g, sp, max_len),
        .tree_auto = sp->tree == SPECD_DRAFT_TREE_AUTO,
        .coupled = g->coupled,
        .coupled_seed = g->params->sampling.seed,
        .coupled_index = g->result->n_tokens,
    };
    if (req->min_len > max_len) req->min_len = max_len;
    return true;
}

/* A model-free drafter copies what followed a match in the history, which may be an image's
 * positions (negative tokens): those are no tokens the target could emit, so they and what hangs
 * below them are cut. False when out of memory. */
static bool drop_image_drafts(generation *g) {
    specd_token_tree *t = &g->tree;
    bool any = false;
    for (int32_t i = 1; i < t->n_nodes && !any; i++) any = specd_token_is_image(t->nodes[i].token);
    if (!any) return true;
    int32_t *keep = malloc((size_t)t->n_nodes * sizeof *keep);
    if (!keep) return false;
    keep[0] = 1;
    for (int32_t i = 1; i < t->n_nodes; i++)
        keep[i] = keep[t->nodes[i].parent] && !specd_token_is_image(t->nodes[i].token);
    specd_tree_keep(t, keep);
    free(keep);
    return true;
}

/* After the drafter ran (ms): the grammar's cut and the step's statistics. */
static specd_status finish_draft(generation *g, specd_status st, double ms, bool explore, char **error) {
    if (st == SPECD_OK && !drop_image_drafts(g)) {
        specd_set_error(error, "out of memory for a draft tree");
        st = SPECD_ERR_NO_MEMORY;
    }
    if (st == SPECD_OK && g->grammar && !specd_grammar_prune(g->grammar, &g->tree)) {
        specd_set_error(error, "out of memory for the grammar states of a draft");
        st = SPECD_ERR_NO_MEMORY;
    }
    int32_t n = specd_tree_n_drafted(&g->tree);
    g->result->stats.draft_ms += ms;
    g->step_draft_ms = ms;
    g->steps_since_plain = n > 0 ? g->steps_since_plain + 1 : 0;
    specd_exploration_note(g->exploration, explore, n > 0);
    return st;
}

static specd_status draft_step(generation *g, char **error) {
    specd_draft_request req;
    bool explore = false;
    g->step_draft_ms = 0.0;
    if (!plan_draft(g, &req, &explore)) return SPECD_OK;
    double t0 = specd_now_ms();
    specd_status st = g->drafter.ops->draft(g->drafter.self, &req, &g->tree, error);
    return finish_draft(g, st, specd_now_ms() - t0, explore, error);
}

/* The draft tree as the engine decodes it, in g->tree_tokens. */
static specd_status prepare_tree_tokens(generation *g, char **error) {
    specd_token_tree *tree = &g->tree;
    if (!specd_tree_assign_branches(tree)) {
        specd_set_error(error, "the draft tree has more than %d branches", SPECD_TREE_MAX_BRANCHES);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (tree->n_nodes > specd_engine_batch_cap(g->e)) {
        specd_set_error(error, "the draft tree has %d nodes; the engine verifies at most %d (draft_max)",
                        tree->n_nodes, specd_engine_batch_cap(g->e));
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    for (int32_t i = 0; i < tree->n_nodes; i++)
        g->tree_tokens[i] = (specd_tree_token){tree->nodes[i].token, tree->nodes[i].depth, tree->nodes[i].branch_mask};
    return SPECD_OK;
}

/* This session's part of a joint target pass. */
static specd_tree_pass tree_pass_of(generation *g) {
    return (specd_tree_pass){specd_engine_target_view(g->e, g->slot), g->tree_tokens, g->tree.n_nodes,
                             g->tree.n_branches, g->n_history - 1, false, false, 0};
}

/* The cells the passes' tokens attend in their own sequences (draft_length.h: the cache fill), a
 * chain's padding included (it attends the chain). */
static double own_work_of(const specd_tree_pass *passes, int32_t n) {
    double work = 0.0;
    for (int32_t k = 0; k < n; k++) {
        for (int32_t i = 0; i < passes[k].n_tokens; i++) work += passes[k].pos_root + passes[k].tokens[i].depth + 1;
        for (int32_t i = 0; i < passes[k].n_padding; i++) work += passes[k].pos_root + passes[k].n_tokens + i + 1;
    }
    return work;
}

/* The target's passes keep their size where a change of size costs more than padding it
 * (costs.h: specd_costs_padding; a GPU) while the planner chooses the lengths, step by step: held
 * lengths and the length policy's fixed spells keep one size already, and a held length's trial
 * must cost what that length costs held (held_lengths.h), not a padded pass. The padding goes after
 * the last chain of the pass, as trees and prompt chunks take none. Returns the tokens added. */
static int32_t pad_to_last_size(generation *g, specd_tree_pass *passes, int32_t n, int32_t total) {
    specd_tree_pass *last = &passes[n - 1];
    const specd_length_policy *policy = &g->learned->policy;
    if (last->n_branches != 1 || last->prompt_chunk || policy->hold || specd_length_policy_fixed(policy) >= 0)
        return 0;
    /* at the fill the planner priced the step's lengths at */
    last->n_padding = specd_costs_padding(&g->learned->costs, total, &g->step_fill, specd_engine_batch_cap(g->e));
    return last->n_padding;
}

/* One target pass over the draft tree (the engine decodes it: kv.c). */
static specd_status target_pass(generation *g, char **error) {
    specd_status st = prepare_tree_tokens(g, error);
    if (st != SPECD_OK) return st;
    double ms = 0.0;
    specd_tree_pass pass = tree_pass_of(g);
    int32_t n = g->tree.n_nodes + pad_to_last_size(g, &pass, 1, g->tree.n_nodes);
    int64_t cells = specd_engine_target_cells(g->e);
    st = specd_slots_decode_trees(g->e, &pass, 1, &ms, error);
    g->result->stats.verify_ms += ms;
    if (st == SPECD_OK) specd_costs_record_pass(&g->learned->costs, n, own_work_of(&pass, 1), cells, ms);
    return st;
}

/* Verification callbacks: the target's logits for the token after `node`, with the path to it
 * appended to the history so penalties see the drafts before this position. */
static int32_t history_through(generation *g, const specd_token_tree *tree, int32_t node) {
    int32_t len = specd_tree_path(tree, node, g->history + g->n_history - 1);
    return g->n_history - 1 + len;
}

/* The grammar after `node` (the drafts were pruned to what it allows), or NULL without one. */
static const specd_token_filter *node_filter(generation *g, int32_t node, specd_token_filter *f) {
    if (!g->grammar) return NULL;
    *f = specd_grammar_node_filter(g->grammar, node);
    return f;
}

static bool target_dist_cb(void *ctx, const specd_token_tree *tree, int32_t node, specd_dist *out) {
    generation *g = ctx;
    int32_t n = history_through(g, tree, node);
    specd_token_filter f;
    specd_mu_path_enter(&g->mu_path, &g->sampler, node);
    bool ok = specd_sampler_dist_filtered(&g->sampler, specd_slot_logits(specd_engine_target(g->e), node), g->history,
                                          n, node_filter(g, node, &f), out);
    specd_mu_path_leave(&g->mu_path, &g->sampler, tree, node, out);
    return ok;
}

static specd_token target_argmax_cb(void *ctx, const specd_token_tree *tree, int32_t node) {
    generation *g = ctx;
    int32_t n = history_through(g, tree, node);
    specd_token_filter f;
    return specd_sampler_argmax_filtered(&g->sampler, specd_slot_logits(specd_engine_target(g->e), node), g->history,
                                         n, node_filter(g, node, &f));
}

/* A reproducible seeded request's token after `node`: the coupled draw from the target's
 * distribution there, at that token's index in the output (-1 when out of memory). */
static specd_token target_coupled_cb(void *ctx, const specd_token_tree *tree, int32_t node) {
    generation *g = ctx;
    if (!target_dist_cb(g, tree, node, &g->coupled_dist)) return -1;
    return specd_coupled_draw(&g->coupled_dist, g->params->sampling.seed,
                              (int64_t)g->result->n_tokens + tree->nodes[node].depth);
}

static specd_status verify_step(generation *g, specd_verify_result *vr, char **error) {
    specd_verify_source src = {target_dist_cb, g->coupled ? target_coupled_cb : target_argmax_cb, g};
    vr->path = g->path;
    specd_mu_path_begin(&g->mu_path, &g->sampler);
    double t0 = specd_now_ms();
    bool ok = specd_sampler_is_greedy(&g->sampler) || g->coupled
                  ? specd_verify_greedy(&g->verifier, &g->tree, &src, vr)
                  : specd_verify_stochastic(&g->verifier, &g->tree, &src, &g->rng, vr);
    g->result->stats.sample_ms += specd_now_ms() - t0;
    if (!ok) {
        specd_set_error(error, "out of memory during verification");
        return SPECD_ERR_NO_MEMORY;
    }
    return SPECD_OK;
}

/* Keeps only the accepted path in the target's KV cache, as sequence 0. */
static void keep_accepted_path(generation *g, const specd_verify_result *vr) {
    uint32_t mask = g->tree.nodes[vr->last_node].branch_mask;
    int32_t keep = 0;
    while (!(mask & (1u << keep))) keep++;
    specd_token *path = g->step_tokens; /* scratch until the step's tokens are emitted */
    path[0] = g->tree.nodes[0].token;
    for (int32_t i = 0; i < vr->n_accepted; i++) path[1 + i] = g->tree.nodes[vr->path[i]].token;
    specd_slot_keep_branch(specd_engine_target(g->e), keep, g->tree.n_branches, g->n_history - 1, path, vr->n_accepted + 1);
}

/* ---- emitting and statistics ----------------------------------------------------------------- */

/* The tokens, and their probability lists when asked for, grow together. */
static bool grow_result(generation *g) {
    specd_result *r = g->result;
    int32_t cap = g->result_cap ? g->result_cap * 2 : 256;
    specd_token *grown = specd_grow_array(r->tokens, (size_t)cap, sizeof *grown);
    if (!grown) return false;
    r->tokens = grown;
    if (g->probs.n > 0) {
        specd_token_prob *probs = specd_grow_array(r->probs, (size_t)cap * (size_t)g->probs.n, sizeof *probs);
        if (!probs) return false;
        r->probs = probs;
    }
    g->result_cap = cap;
    return true;
}

/* Appends the step's token j (and its probability list). */
static bool append_result(generation *g, const specd_token *tokens, int32_t j) {
    specd_result *r = g->result;
    if (r->n_tokens == g->result_cap && !grow_result(g)) return false;
    if (g->probs.n > 0)
        memcpy(r->probs + (size_t)r->n_tokens * (size_t)g->probs.n, g->probs.step + (size_t)j * (size_t)g->probs.n,
               (size_t)g->probs.n * sizeof *r->probs);
    r->tokens[r->n_tokens++] = tokens[j];
    return true;
}

/* Emits the step's tokens in order; returns true when generation must stop (reason set). */
static bool emit_tokens(generation *g, const specd_token *tokens, int32_t n, char **error,
                        specd_status *st) {
    const specd_generation_params *p = g->params;
    specd_result *r = g->result;
    int32_t first = r->n_tokens, emitted = 0;
    bool stop = false;
    for (int32_t i = 0; i < n && !stop; i++) {
        /* With a grammar, ignore_eos forbids end-of-generation tokens: one comes only when the
         * grammar allows nothing else, and then generation is over. */
        if ((!p->ignore_eos || g->grammar) && specd_token_is_eog(g->e, tokens[i])) {
            r->stop_reason = SPECD_STOP_EOG;
            stop = true;
            break;
        }
        if (g->grammar && !specd_grammar_advance(g->grammar, g->grammar->state, tokens[i])) {
            specd_set_error(error, "grammar: token %d is not allowed after the output so far: the grammar "
                            "allows nothing more and the model has no end-of-generation token to end with",
                            tokens[i]);
            *st = SPECD_ERR_INVALID_ARGUMENT;
            return true;
        }
        if (!append_result(g, tokens, i)) {
            specd_set_error(error, "out of memory for the output");
            *st = SPECD_ERR_NO_MEMORY;
            return true;
        }
        g->history[g->n_history++] = tokens[i];
        emitted++;
        if (p->n_predict >= 0 && r->n_tokens >= p->n_predict) {
            r->stop_reason = SPECD_STOP_LIMIT;
            stop = true;
        }
    }
    if (emitted > 0 && p->on_tokens && !p->on_tokens(r->tokens + first, emitted, p->user_data)) {
        r->stop_reason = SPECD_STOP_CALLBACK;
        stop = true;
    }
    return stop;
}

static void record_step(generation *g, const specd_verify_result *vr) {
    specd_stats *s = &g->result->stats;
    int32_t n_drafted = specd_tree_n_drafted(&g->tree);
    /* A drafter that observes its verdicts calibrates itself (see drafter.h). */
    bool self_calibrating = g->drafter.ops && g->drafter.ops->observe;
    s->n_steps++;
    bool tree_step = g->tree.n_branches > 1;
    s->n_tree_steps += tree_step;
    s->n_tree_drafted += tree_step ? n_drafted : 0;
    s->n_tree_accepted += tree_step ? vr->n_accepted : 0;
    s->n_drafted += n_drafted;
    s->n_accepted += vr->n_accepted;
    s->draft_len_hist[n_drafted < SPECD_STATS_MAX_DRAFT ? n_drafted : SPECD_STATS_MAX_DRAFT - 1]++;
    /* Chains: outcome by depth. Positions past the first rejection were never tested. */
    for (int32_t i = 1; i < g->tree.n_nodes; i++) {
        const specd_tree_node *node = &g->tree.nodes[i];
        int32_t depth = node->depth;
        bool accepted = depth <= vr->n_accepted && vr->path[depth - 1] == i;
        bool rejected = depth == vr->n_accepted + 1 && node->parent == vr->last_node;
        if (!accepted && !rejected) continue; /* never tested, or a sibling of an accepted node */
        int32_t slot = depth - 1 < SPECD_STATS_MAX_DRAFT ? depth - 1 : SPECD_STATS_MAX_DRAFT - 1;
        s->drafted_at[slot]++;
        s->accepted_at[slot] += accepted;
        if (!self_calibrating)
            specd_acceptance_record(&g->learned->acceptance, accept_mode_of(g), depth, node->confidence, accepted);
    }
    if (self_calibrating) g->drafter.ops->observe(g->drafter.self, &g->tree, vr);
}

/* The chain a fixed length would have drafted: from the root, each node's first child (the draft
 * model's first choice at each depth; a chain's every node). Its length, and how many of it
 * verification accepted into *n_accepted. */
static int32_t main_chain(const specd_token_tree *t, const specd_verify_result *vr, int32_t *n_accepted) {
    int32_t node = 0, depth = 0, accepted = 0;
    bool on_path = true;
    for (int32_t i = 1; i < t->n_nodes; i++) { /* children come after their parents */
        if (t->nodes[i].parent != node) continue;
        node = i;
        depth++;
        on_path = on_path && depth <= vr->n_accepted && vr->path[depth - 1] == i;
        accepted += on_path;
    }
    *n_accepted = accepted;
    return depth;
}

/* A step of the draft model, for the check of the planned lengths against fixed ones. */
static void record_policy_step(generation *g, const specd_verify_result *vr) {
    if (!specd_drafter_plans_length(&g->drafter)) return;
    specd_learned *l = g->learned;
    specd_policy_step step = {
        .mode = accept_mode_of(g),
        .fill = g->step_fill,
        .n_nodes = g->tree.n_nodes,
        .n_emitted = vr->n_accepted + 1,
        .draft_ms = g->step_draft_ms,
        .planned = g->planned,
        .n_sharing = g->step_share,
    };
    step.n_chain = main_chain(&g->tree, vr, &step.n_accepted);
    specd_length_policy_record_step(&l->policy, &l->costs, &l->acceptance, &step);
}

/* The step, to the request's on_step (specd_step_info), before the tree is reset. */
static void report_step(generation *g, const specd_verify_result *vr, double accept_t0) {
    if (!g->params->on_step) return;
    int32_t n = 0;
    for (int32_t i = 1; i < g->tree.n_nodes; i++, n++) {
        g->step_confidences[n] = g->tree.nodes[i].confidence;
        g->step_drafts[n] = g->tree.nodes[i].token;
    }
    const specd_stats *s = &g->result->stats;
    specd_step_info info = {
        .n_history = g->step_history,
        .n_drafted = n,
        .n_accepted = vr->n_accepted,
        .draft_ms = g->step_draft_ms,
        .verify_ms = s->verify_ms - g->step_verify_mark,
        .step_ms = g->step_t0 > 0.0 ? specd_now_ms() - g->step_t0 : specd_now_ms() - accept_t0,
        .confidences = g->step_confidences,
        .drafts = g->step_drafts,
    };
    g->params->on_step(&info, g->params->user_data);
}

/* The step's tokens for the engine's rate: made in its share of the round's time. */
static void record_step_time(generation *g, int32_t emitted) {
    if (g->step_t0 <= 0.0) return;
    double ms = (specd_now_ms() - g->step_t0) / (g->step_share > 1 ? g->step_share : 1);
    specd_length_policy_record_time(&g->learned->policy, emitted, ms);
    g->step_t0 = 0.0;
}

/* The probability lists of the step's tokens: token j's position is the tree's root for j = 0,
 * else the accepted node before it, so drafted tokens get the target's real probabilities. */
static specd_status step_probs(generation *g, const specd_verify_result *vr, char **error) {
    for (int32_t j = 0; g->probs.n > 0 && j <= vr->n_accepted; j++) {
        int32_t node = j == 0 ? 0 : vr->path[j - 1];
        int32_t n_history = history_through(g, &g->tree, node);
        specd_token_filter f; /* post-sampling lists are the grammar's distribution too */
        specd_mu_path_enter(&g->mu_path, &g->sampler, node); /* mirostat's mu there */
        bool ok = specd_probs_fill(&g->probs, j, specd_slot_logits(specd_engine_target(g->e), node),
                                   specd_engine_n_vocab(g->e), &g->sampler, g->history, n_history,
                                   node_filter(g, node, &f));
        specd_mu_path_enter(&g->mu_path, &g->sampler, 0);
        if (!ok) {
            specd_set_error(error, "out of memory for the token probabilities");
            return SPECD_ERR_NO_MEMORY;
        }
    }
    return SPECD_OK;
}

/* ---- the loop ------------------------------------------------------------------------------- */

static void report_costs(const specd_learned *l, bool adaptive, specd_stats *s) {
    const specd_costs *costs = &l->costs;
    for (int32_t n = 1; n <= SPECD_STATS_MAX_DRAFT; n++) s->verify_cost_ms[n - 1] = specd_costs_pass(costs, n, NULL);
    s->draft_token_ms = costs->draft_ms;
    s->resize_ms = specd_costs_resize(costs);
    s->held_draft_length = l->policy.hold && adaptive ? l->policy.held.length : -1;
}

static specd_status ingest_prompt(generation *g, const specd_token *prompt, int32_t n, char **error) {
    specd_engine *e = g->e;
    double t0 = specd_now_ms();
    int32_t cached = 0;
    /* Everything but the last token: that one is the first step's root. */
    specd_status st = specd_slot_sync(e, specd_engine_target(e), prompt, n - 1, false, NULL, &cached, error);
    /* A recurrent target keeps its state after the prompt: a later request with the same prompt
     * (or one that extends it) starts from there instead of decoding it again. */
    if (st == SPECD_OK) st = specd_slot_checkpoint(specd_engine_target(e), SPECD_CHECKPOINT_PROMPT, error);
    if (st == SPECD_OK && g->drafter.ops) st = g->drafter.ops->prepare(g->drafter.self, prompt, n - 1, error);
    g->result->stats.n_prompt = n;
    g->result->stats.n_prompt_cached = cached;
    g->result->stats.prompt_ms = specd_now_ms() - t0;
    return st;
}

/* Deferred ingestion (specd_session_begin_in_slot): the slot keeps the prompt's cached prefix, the
 * rest is decoded later, in chunks that join the rounds' passes. */
static void begin_ingest(generation *g, const specd_token *prompt, int32_t n) {
    specd_engine *e = g->e;
    g->prompt_t0 = specd_now_ms();
    int32_t cached = specd_engine_slot_cached(e, g->slot, prompt, n);
    specd_model_slot *target = specd_engine_target_view(e, g->slot);
    specd_slot_truncate(target, cached);
    if (specd_slot_n_kv(target) < cached) cached = specd_slot_n_kv(target); /* a recurrent state went back to a checkpoint */
    g->n_pending = n - 1 - cached;
    g->result->stats.n_prompt = n;
    g->result->stats.n_prompt_cached = cached;
}

/* The prompt is in the target: the drafters learn it, unless the session is over already (the
 * active slot must be the session's). */
static specd_status learn_prompt(generation *g, specd_status st, char **error) {
    if (st == SPECD_OK && g->drafter.ops && !g->done) st = g->drafter.ops->prepare(g->drafter.self, g->history, g->n_history - 1, error);
    g->n_pending = 0;
    g->result->stats.prompt_ms = specd_now_ms() - g->prompt_t0;
    return st;
}

/* The prompt is in (or the rest goes in now, in one go): the drafters learn it. The active slot
 * must be the session's. */
static specd_status finish_ingest(generation *g, char **error) {
    specd_engine *e = g->e;
    specd_status st = specd_slot_sync(e, specd_engine_target(e), g->history, g->n_history - 1, false, NULL, NULL, error);
    /* as ingest_prompt: a recurrent target keeps its state after the prompt */
    if (st == SPECD_OK) st = specd_slot_checkpoint(specd_engine_target(e), SPECD_CHECKPOINT_PROMPT, error);
    return learn_prompt(g, st, error);
}

/* ---- a session, step by step ------------------------------------------------------------- */

/* Ends the generation: final statistics, and the costs it learnt kept for the next process. */
static void finish(generation *g) {
    if (g->done) return;
    g->done = true;
    g->result->stats.n_predicted = g->result->n_tokens;
    if (g->drafter.ops) {
        report_costs(g->learned, g->params->speculative.adaptive && specd_drafter_plans_length(&g->drafter),
                     &g->result->stats);
        specd_learned_save(g->e); /* when this generation learnt a cost, for the next process */
    }
}

static specd_status fail(generation *g, specd_status st) {
    if (st != SPECD_OK) g->failed = st;
    return st;
}

/* Whether the session may take the given part of a step now; an error saying why not otherwise. */
static bool may_run(const generation *g, step_phase phase, char **error) {
    static const char *const names[] = {"specd_session_draft", "specd_session_verify", "specd_session_accept"};
    if (g->failed != SPECD_OK) specd_set_error(error, "this session failed in an earlier step: free it");
    else if (g->done) specd_set_error(error, "this session has finished (stop: %s)",
                                      specd_stop_reason_name(g->result->stop_reason));
    else if (g->phase != phase) specd_set_error(error, "%s now, not %s: a step is draft, verify, accept",
                                                names[g->phase], names[phase]);
    return g->failed == SPECD_OK && !g->done && g->phase == phase;
}

/* The start of each part of a step: outputs cleared, and SPECD_OK only when this part may run now. */
static specd_status begin_part(generation *g, step_phase phase, int32_t *out, char **error) {
    if (error) *error = NULL;
    if (out) *out = 0;
    if (g && may_run(g, phase, error)) {
        specd_engine_use_slot(g->e, g->slot); /* another slot's session may have run in between */
        return SPECD_OK;
    }
    return g && g->failed ? g->failed : SPECD_ERR_INVALID_ARGUMENT;
}

/* On recurrent models, what the last drafting step paid for the state of both models (kv.c,
 * state.c: checkpoints, going back, decoding the accepted tokens again, the target's in this
 * step's sync, the draft's in its previous draft) goes to the cost model. */
static void record_state_cost(generation *g) {
    const specd_engine *e = g->e;
    const specd_model_slot *target = specd_engine_target(e), *draft = specd_engine_draft(e);
    bool recurrent = !specd_slot_can_drop_tail(target) || (specd_engine_has_draft(e) && !specd_slot_can_drop_tail(draft));
    double spent = specd_slot_state_ms(target) + specd_slot_state_ms(draft);
    if (recurrent && g->drafted_last) specd_costs_record_state(&g->learned->costs, spent - g->state_mark_ms);
    g->state_mark_ms = spent;
}

/* The engine's caches hold this session's history: another session may have run in between
 * (the longest common prefix is kept, the rest decoded again), and a full context is shifted. */
static specd_status make_caches_ours(generation *g, char **error) {
    /* another session may have used other adapters */
    specd_slot_use_lora(g->e, specd_engine_target(g->e), g->lora_scales);
    specd_status st = specd_slot_sync(g->e, specd_engine_target(g->e), g->history, g->n_history - 1, false, NULL, NULL, error);
    if (st != SPECD_OK) return st;
    record_state_cost(g);
    if (g->n_history >= specd_engine_n_ctx(g->e) && !specd_context_make_room(g->e, g->params, g->history, &g->n_history,
                                                                &g->drafter, g->result, &st, error))
        finish(g); /* no room: stopped (reason set), or st says what failed */
    return st;
}

/* What comes before the drafters in a draft part: the rest of a pending prompt, a stop asked for,
 * the caches made this session's (a context shift maybe). */
static specd_status before_drafting(generation *g, char **error) {
    g->step_t0 = specd_now_ms();
    g->step_share = g->round_sessions;
    g->step_history = g->n_history;
    g->step_verify_mark = g->result->stats.verify_ms;
    specd_status st = g->n_pending > 0 ? finish_ingest(g, error) : SPECD_OK; /* stepped on its own */
    bool stop = specd_engine_stop_count(g->e) != g->stop_requests || atomic_load(&g->stop);
    if (st == SPECD_OK && stop) {
        g->result->stop_reason = SPECD_STOP_CALLBACK;
        finish(g);
    } else if (st == SPECD_OK) {
        st = make_caches_ours(g, error);
    }
    g->step_fill = fill_of(g);
    return st;
}

/* The end of a draft part that began at t0. */
static specd_status after_drafting(generation *g, specd_status st, double t0, int32_t *n_drafted) {
    if (st == SPECD_OK && !g->done) g->phase = PHASE_VERIFY;
    if (n_drafted) *n_drafted = specd_tree_n_drafted(&g->tree);
    g->result->stats.decode_ms += specd_now_ms() - t0;
    return fail(g, st);
}

specd_status specd_session_draft(specd_session *g, int32_t *n_drafted, char **error) {
    specd_status begun = begin_part(g, PHASE_DRAFT, n_drafted, error);
    if (begun != SPECD_OK) return begun;
    double t0 = specd_now_ms();
    specd_status st = before_drafting(g, error);
    if (st == SPECD_OK && !g->done) st = draft_step(g, error);
    return after_drafting(g, st, t0, n_drafted);
}

/* Verification once the target's logits for the tree are there. */
static specd_status verify_after_pass(generation *g, int32_t *n_accepted, char **error) {
    memset(&g->vr, 0, sizeof g->vr);
    specd_status st = verify_step(g, &g->vr, error);
    if (st == SPECD_OK) st = step_probs(g, &g->vr, error);
    if (st == SPECD_OK) g->phase = PHASE_ACCEPT;
    if (n_accepted) *n_accepted = g->vr.n_accepted;
    return st;
}

static specd_engine *e_of(generation *g) { return g->e; }

/* Whether a session's draft can join the others' whose drafters have these ops (a drafter with a
 * draft_joint op, drafter.h: the draft model's decodes joined per depth). */
static bool joins_draft(const generation *g, const specd_drafter_ops *ops) {
    return g && g->n_pending == 0 && !g->done && g->failed == SPECD_OK && g->phase == PHASE_DRAFT && !g->grammar &&
           ops && ops->draft_joint && g->drafter.ops == ops;
}

/* The ops of the first session whose draft may be joined (NULL: none). */
static const specd_drafter_ops *joint_ops(specd_session *const *s, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (s[i] && joins_draft(s[i], s[i]->drafter.ops)) return s[i]->drafter.ops;
    return NULL;
}

/* The tokens drafted so far in a round: what the pass holds before the next slot's. */
typedef struct round_load {
    int32_t tokens;
} round_load;

/* Session i drafted alone (a model-free drafter, a grammar, a pending prompt), knowing the load. */
static specd_status draft_alone(generation *g, int32_t later, round_load *load, char **error) {
    if (g && g->n_pending > 0) { /* still ingesting: its next chunk joins the pass instead */
        if (specd_engine_stop_count(e_of(g)) != g->stop_requests || atomic_load(&g->stop)) {
            g->result->stop_reason = SPECD_STOP_CALLBACK; /* stopped before its prompt was in */
            g->result->stats.prompt_ms = specd_now_ms() - g->prompt_t0;
            finish(g);
            return SPECD_OK;
        }
        load->tokens += 1; /* at least; the chunk takes what room the pass has left */
        return SPECD_OK;
    }
    if (g) g->batch_tokens = load->tokens + later; /* before it: the trees so far; after it: each root */
    int32_t n_drafted = 0;
    specd_status st = specd_session_draft(g, &n_drafted, error);
    if (g) g->batch_tokens = 0;
    if (st == SPECD_OK && !specd_session_done(g)) load->tokens += n_drafted + 1;
    return st;
}

static bool first_step_joins_chunk(const generation *g, int32_t room);

/* One joint draft (draft model, one decode per depth) for m sessions; outcomes into st/err. */
typedef struct joint_part {
    generation *g;
    double t0;
    bool explore, drafting;
    specd_draft_request req;
} joint_part;

static void draft_jointly(generation **gs, int32_t m, const round_load *load, specd_status *st, char **err) {
    joint_part parts[SPECD_MAX_PARALLEL];
    specd_drafter *drafters[SPECD_MAX_PARALLEL];
    int32_t slots[SPECD_MAX_PARALLEL], at[SPECD_MAX_PARALLEL], k = 0;
    specd_draft_request reqs[SPECD_MAX_PARALLEL];
    specd_token_tree *trees[SPECD_MAX_PARALLEL];
    for (int32_t i = 0; i < m; i++) {
        generation *g = gs[i];
        parts[i] = (joint_part){.g = g, .t0 = specd_now_ms()};
        specd_engine_use_slot(g->e, g->slot);
        st[i] = before_drafting(g, &err[i]);
        g->step_draft_ms = 0.0;
        if (st[i] != SPECD_OK || g->done || !plan_draft(g, &parts[i].req, &parts[i].explore)) continue;
        /* the m chains alike, beside the tokens of the slots drafted before them */
        if (parts[i].req.plan) begin_plan(g, parts[i].req.max_len, load->tokens, m);
        parts[i].drafting = true;
        drafters[k] = &g->drafter, slots[k] = g->slot, reqs[k] = parts[i].req, trees[k] = &g->tree, at[k++] = i;
    }
    specd_status jst[SPECD_MAX_PARALLEL];
    char *jerr[SPECD_MAX_PARALLEL] = {0};
    double t0 = specd_now_ms();
    if (k > 0) drafters[0]->ops->draft_joint(gs[0]->e, drafters, slots, reqs, trees, k, &gs[0]->learned->costs, jst, jerr);
    /* each chain's part of the joint decodes is its part of the tokens drafted (a root at least) */
    double elapsed = specd_now_ms() - t0, weight[SPECD_MAX_PARALLEL], weights = 0.0;
    for (int32_t j = 0; j < k; j++) weights += weight[j] = 1.0 + specd_tree_n_drafted(trees[j]);
    for (int32_t j = 0; j < k; j++) {
        generation *g = gs[at[j]];
        st[at[j]] = finish_draft(g, jst[j], elapsed * weight[j] / weights, parts[at[j]].explore, &jerr[j]);
        specd_free(err[at[j]]);
        err[at[j]] = jerr[j];
    }
    for (int32_t i = 0; i < m; i++) st[i] = after_drafting(gs[i], st[i], parts[i].t0, NULL);
}

/* Whether this round's pass ends the prompt of one of the sessions (its first token then comes
 * from that pass: first_step_joins_chunk), counting a root for each of the others. */
static bool a_prompt_ends_this_round(specd_session *const *s, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (s[i] && s[i]->n_pending > 0 && first_step_joins_chunk(s[i], specd_engine_batch_cap(s[i]->e) - (n - 1))) return true;
    return false;
}

_Static_assert(SPECD_GATE_MAX_LOAD >= SPECD_MAX_PARALLEL, "the round gate times every load a round can have");

/* Whether the round gate may keep a session from drafting: the policy's to choose, not the caller's. */
static bool gated(const generation *g) {
    return g->drafter.ops && policy_chooses_length(&g->params->speculative);
}

/* Whether this round drafts at all (draft/round_gate.h), by its load's arm; the round is timed
 * where it is like the others of its load: every slot gated, no prompt chunk in its pass. */
static void gate_round(specd_session *const *s, int32_t n, bool lean) {
    specd_learned *learned = n > 0 && s[0] ? s[0]->learned : NULL;
    bool timed = !lean;
    for (int32_t i = 0; i < n; i++)
        if (!s[i] || s[i]->learned != learned || !gated(s[i]) || s[i]->n_pending > 0) timed = false;
    if (!learned) return;
    bool drafts = specd_round_gate_begin(&learned->gate, n, timed, specd_now_ms());
    for (int32_t i = 0; i < n; i++) {
        if (!s[i] || s[i]->learned != learned) continue;
        s[i]->gate_plain = !drafts && gated(s[i]);
        s[i]->gate_timed = timed;
    }
}

specd_status specd_sessions_draft(specd_session *const *s, int32_t n, specd_status *status, char **errors) {
    specd_status st[SPECD_MAX_PARALLEL];
    char *err[SPECD_MAX_PARALLEL] = {0};
    if (n > SPECD_MAX_PARALLEL) n = SPECD_MAX_PARALLEL;
    /* The round that brings a new request's first token drafts nothing for the others: their drafts
     * would lengthen both the draft part before the pass and the pass itself, all of it time to
     * that first token (p99 2 clients: 153-179 ms against llama-server's 127-133). One plain step
     * per new request is what it costs the running slots. */
    bool lean = a_prompt_ends_this_round(s, n);
    for (int32_t i = 0; i < n; i++)
        if (s[i]) s[i]->lean_round = lean, s[i]->round_sessions = n;
    gate_round(s, n, lean);
    const specd_drafter_ops *ops = joint_ops(s, n);
    int32_t n_joint = 0;
    for (int32_t i = 0; i < n; i++) n_joint += joins_draft(s[i], ops);
    if (n_joint < 2) n_joint = 0; /* alone, a chain is drafted as always */
    round_load load = {0};
    generation *joint[SPECD_MAX_PARALLEL];
    int32_t where[SPECD_MAX_PARALLEL], m = 0, later = n - 1;
    for (int32_t i = 0; i < n; i++) {
        st[i] = SPECD_OK;
        /* one token per joint chain goes in each joint draft decode: at most a batch of them */
        if (n_joint > 0 && joins_draft(s[i], ops) && m < specd_engine_batch_cap(s[i]->e)) {
            joint[m] = s[i], where[m++] = i;
            continue;
        }
        st[i] = draft_alone(s[i], later--, &load, &err[i]);
    }
    if (m > 0) {
        specd_status jst[SPECD_MAX_PARALLEL];
        char *jerr[SPECD_MAX_PARALLEL] = {0};
        draft_jointly(joint, m, &load, jst, jerr);
        for (int32_t j = 0; j < m; j++) st[where[j]] = jst[j], err[where[j]] = jerr[j];
    }
    specd_status first = SPECD_OK;
    for (int32_t i = 0; i < n; i++) {
        if (status) status[i] = st[i];
        if (errors) errors[i] = err[i];
        else specd_free(err[i]);
        if (st[i] != SPECD_OK && first == SPECD_OK) first = st[i];
        if (s[i]) s[i]->lean_round = false, s[i]->round_sessions = 0, s[i]->gate_plain = false;
    }
    return first;
}

specd_status specd_session_verify(specd_session *g, int32_t *n_accepted, char **error) {
    specd_status begun = begin_part(g, PHASE_VERIFY, n_accepted, error);
    if (begun != SPECD_OK) return begun;
    double t0 = specd_now_ms();
    specd_status st = target_pass(g, error);
    if (st == SPECD_OK) st = verify_after_pass(g, n_accepted, error);
    g->result->stats.decode_ms += specd_now_ms() - t0;
    return fail(g, st);
}

/* Whether session g may join a pass now: drafted and ready to verify, or still ingesting its prompt. */
static bool may_join_pass(const generation *g, char **error) {
    if (g->n_pending > 0 && g->failed == SPECD_OK && !g->done) return true;
    return may_run(g, PHASE_VERIFY, error);
}

/* Whether the sessions decode with the same LoRA scales (a pass applies one set to all its tokens). */
static bool same_adapters(specd_session *const *s, int32_t n) {
    for (int32_t i = 1; i < n; i++)
        if (memcmp(s[i]->lora_scales, s[0]->lora_scales, sizeof s[0]->lora_scales)) return false;
    return true;
}

/* Whether the sessions may share one pass: all ready, on one engine, in different slots. */
static bool may_verify_together(specd_session *const *s, int32_t n, char **error) {
    uint64_t slots_seen[(SPECD_MAX_PARALLEL + 63) / 64] = {0};
    for (int32_t i = 0; i < n; i++) {
        if (!s[i] || !may_join_pass(s[i], error)) return false;
        if (s[i]->e != s[0]->e) {
            specd_set_error(error, "specd_sessions_verify: session %d is on another engine than session 0", i);
            return false;
        }
        uint64_t bit = 1ull << (s[i]->slot % 64);
        if (slots_seen[s[i]->slot / 64] & bit) {
            specd_set_error(error, "specd_sessions_verify: two sessions in slot %d: give one session per slot",
                            s[i]->slot);
            return false;
        }
        slots_seen[s[i]->slot / 64] |= bit;
    }
    return true;
}

/* Whether the session's first step may ride on the pass that ends its prompt: the root decoded at
 * the end of the chunk and the first token verified from its logits at once, which saves a whole
 * round before the first token (llama-server samples it straight from the prompt's pass too).
 * Not on recurrent states (their prompt checkpoint comes before the root), nor when a stop was
 * asked (the draft part sees to that). */
static bool first_step_joins_chunk(const generation *g, int32_t room) {
    const specd_engine *e = g->e;
    bool recurrent = !specd_slot_can_drop_tail(specd_engine_target_view(g->e, g->slot)) ||
                     (specd_engine_has_draft(e) && !specd_slot_can_drop_tail(specd_engine_draft_view(g->e, g->slot)));
    bool stop = specd_engine_stop_count(e) != g->stop_requests || atomic_load(&g->stop);
    return g->n_pending + 1 <= room && !recurrent && !stop && g->n_history < specd_engine_n_ctx(e);
}

/* The next chunk of a session's prompt (at most `room` tokens) as a pass, in its tree_tokens; the
 * last chunk takes the root along when the first step may join it. */
static specd_tree_pass prompt_chunk_of(generation *g, int32_t room) {
    specd_model_slot *view = specd_engine_target_view(g->e, g->slot);
    bool with_root = first_step_joins_chunk(g, room);
    int32_t n = with_root ? g->n_pending + 1 : g->n_pending < room ? g->n_pending : room;
    int32_t n_kv = specd_slot_n_kv(view);
    for (int32_t i = 0; i < n; i++) g->tree_tokens[i] = (specd_tree_token){g->history[n_kv + i], i, 1u};
    return (specd_tree_pass){view, g->tree_tokens, n, 1, n_kv, true, with_root, 0};
}

/* The first step on the logits of the root at the end of the prompt's last chunk: a step with
 * nothing drafted, verified and its token emitted now (so no accept follows this pass); only
 * then do the drafters learn the prompt (the draft model decodes it), not to delay the token.
 * The history less its new root is then the prompt, as learn_prompt has it otherwise. */
static specd_status first_step_from_chunk(generation *g, char **error) {
    specd_status st = prepare_tree_tokens(g, error); /* the root-only tree's branch (the chunk is decoded) */
    if (st == SPECD_OK) st = verify_after_pass(g, NULL, error);
    if (st == SPECD_OK) st = specd_session_accept(g, NULL, error);
    return learn_prompt(g, st, error);
}

/* After a pass that held this session's chunk: what is left, and the drafters once it is all in. */
static specd_status after_chunk(generation *g, const specd_tree_pass *chunk, char **error) {
    if (!chunk->ends_at_root) g->n_pending -= chunk->n_tokens;
    if (g->n_pending > 0 && !chunk->ends_at_root) return SPECD_OK;
    specd_engine_use_slot(g->e, g->slot);
    return chunk->ends_at_root ? first_step_from_chunk(g, error) : finish_ingest(g, error);
}

/* Session i's outcome into the caller's arrays (either may be NULL); the message is taken. */
static void set_outcome(specd_status *status, char **errors, int32_t i, specd_status st, char *message) {
    if (status) status[i] = st;
    if (errors) errors[i] = message;
    else specd_free(message);
}

/* Each session verified on its own pass, ingesting ones by a chunk of their own: when the trees
 * do not fit one batch together. */
static void verify_each(specd_session *const *s, int32_t n, int32_t *n_accepted, specd_status *status,
                        char **errors) {
    for (int32_t i = 0; i < n; i++) {
        generation *g = s[i];
        char *message = NULL;
        specd_status st;
        if (g->n_pending == 0) {
            st = specd_session_verify(g, n_accepted ? &n_accepted[i] : NULL, &message);
        } else {
            specd_tree_pass chunk = prompt_chunk_of(g, specd_engine_batch_cap(g->e));
            st = specd_slots_decode_trees(g->e, &chunk, 1, NULL, &message);
            if (st == SPECD_OK) st = after_chunk(g, &chunk, &message);
            fail(g, st);
        }
        set_outcome(status, errors, i, st, message);
    }
}

/* The first failure among the outcomes, or SPECD_OK. */
static specd_status first_failure(const specd_status *status, int32_t n) {
    for (int32_t i = 0; status && i < n; i++)
        if (status[i] != SPECD_OK) return status[i];
    return SPECD_OK;
}

/* Trees that do not fit one batch together go in as few shared passes as hold them (first fit, in
 * order) rather than one pass each: with batch invariance the batch holds 62 tokens, and 8 slots
 * drafting 8 each made 8 target passes a round where 2 hold them. Ingesting sessions join the last
 * group, whose room their prompt chunks fill, or make one of their own when it has none. */
static void verify_in_groups(specd_session *const *s, int32_t n, int32_t batch_cap, int32_t *n_accepted,
                             specd_status *status, char **errors) {
    int32_t group_of[SPECD_MAX_PARALLEL], used[SPECD_MAX_PARALLEL], n_groups = 0;
    for (int32_t i = 0; i < n; i++) {
        group_of[i] = status[i] != SPECD_OK ? -2 : -1; /* -2: failed already, its outcome set */
        if (group_of[i] == -2 || s[i]->n_pending > 0) continue;
        int32_t size = s[i]->tree.n_nodes, g = 0;
        while (g < n_groups && used[g] + size > batch_cap) g++;
        if (g == n_groups) used[n_groups++] = 0;
        used[g] += size;
        group_of[i] = g;
    }
    int32_t ingest = n_groups > 0 && used[n_groups - 1] < batch_cap ? n_groups - 1 : n_groups;
    for (int32_t i = 0; i < n; i++)
        if (group_of[i] == -1) group_of[i] = ingest;
    if (ingest == n_groups) n_groups++;
    for (int32_t g = 0; g < n_groups; g++) {
        specd_session *members[SPECD_MAX_PARALLEL];
        int32_t where[SPECD_MAX_PARALLEL], accepted[SPECD_MAX_PARALLEL], k = 0;
        specd_status st[SPECD_MAX_PARALLEL];
        char *err[SPECD_MAX_PARALLEL];
        for (int32_t i = 0; i < n; i++)
            if (group_of[i] == g) members[k] = s[i], where[k++] = i;
        if (k == 0) continue;
        specd_sessions_verify(members, k, accepted, st, err);
        for (int32_t j = 0; j < k; j++) {
            if (n_accepted) n_accepted[where[j]] = accepted[j];
            set_outcome(status, errors, where[j], st[j], err[j]);
        }
    }
}

specd_status specd_sessions_verify(specd_session *const *s, int32_t n, int32_t *n_accepted, specd_status *status,
                                   char **errors) {
    specd_status own[SPECD_MAX_PARALLEL];
    if (!status && n <= SPECD_MAX_PARALLEL) status = own;
    for (int32_t i = 0; i < n; i++) {
        if (n_accepted) n_accepted[i] = 0;
        set_outcome(status, errors, i, SPECD_OK, NULL);
    }
    if (n <= 0) return SPECD_OK;
    char *message = NULL;
    if (!s || n > SPECD_MAX_PARALLEL || !may_verify_together(s, n, &message)) {
        if (n > SPECD_MAX_PARALLEL && !message)
            specd_set_error(&message, "specd_sessions_verify: %d sessions, at most %d", n, SPECD_MAX_PARALLEL);
        for (int32_t i = 0; i < n && i < SPECD_MAX_PARALLEL; i++)
            set_outcome(status, errors, i, SPECD_ERR_INVALID_ARGUMENT, i == 0 ? message : NULL);
        return SPECD_ERR_INVALID_ARGUMENT; /* nothing has changed */
    }
    specd_engine *e = s[0]->e;
    double t0 = specd_now_ms();
    specd_tree_pass passes[SPECD_MAX_PARALLEL];
    specd_session *in_pass[SPECD_MAX_PARALLEL];
    int32_t at[SPECD_MAX_PARALLEL], m = 0, total = 0, n_trees = 0;
    for (int32_t i = 0; i < n; i++) {
        if (s[i]->n_pending > 0) continue;
        specd_status st = prepare_tree_tokens(s[i], &message);
        if (st != SPECD_OK) { /* this one fails alone; the others go on */
            fail(s[i], st);
            set_outcome(status, errors, i, st, message);
            message = NULL;
            continue;
        }
        passes[m] = tree_pass_of(s[i]);
        total += passes[m].n_tokens;
        in_pass[m] = s[i], at[m++] = i;
        n_trees++;
    }
    int32_t batch_cap = specd_engine_batch_cap(e);
    if (total > batch_cap && same_adapters(s, n)) {
        verify_in_groups(s, n, batch_cap, n_accepted, status, errors);
        return first_failure(status, n);
    }
    if (total > batch_cap || (m < n && total == batch_cap) || !same_adapters(s, n)) {
        for (int32_t k = 0; k < m; k++) { /* each on its own pass */
            char *msg = NULL;
            specd_status st = specd_session_verify(in_pass[k], n_accepted ? &n_accepted[at[k]] : NULL, &msg);
            set_outcome(status, errors, at[k], st, msg);
        }
        specd_session *ingesting[SPECD_MAX_PARALLEL];
        int32_t where[SPECD_MAX_PARALLEL], n_ingesting = 0;
        for (int32_t i = 0; i < n; i++)
            if (s[i]->n_pending > 0) ingesting[n_ingesting] = s[i], where[n_ingesting++] = i;
        specd_status st_ing[SPECD_MAX_PARALLEL];
        char *err_ing[SPECD_MAX_PARALLEL];
        verify_each(ingesting, n_ingesting, NULL, st_ing, err_ing);
        for (int32_t k = 0; k < n_ingesting; k++) set_outcome(status, errors, where[k], st_ing[k], err_ing[k]);
        return first_failure(status, n);
    }
    /* prompt chunks fill the room the trees leave, first come first */
    for (int32_t i = 0; i < n; i++) {
        if (s[i]->n_pending == 0) continue;
        passes[m] = prompt_chunk_of(s[i], batch_cap - total);
        total += passes[m].n_tokens;
        in_pass[m] = s[i], at[m++] = i;
    }
    if (m == n_trees && m > 0) total += pad_to_last_size(in_pass[m - 1], passes, m, total);
    double ms = 0.0;
    int64_t cells = specd_engine_target_cells(e);
    specd_status st = specd_slots_decode_trees(e, passes, m, &ms, &message);
    /* T(the pass), when it holds trees only: a prompt chunk's tokens take no logits, so a pass with
     * one costs less than a pass of as many tree tokens (a server learnt T(14) at half its cost). */
    if (st == SPECD_OK && n_trees > 0 && m == n_trees)
        specd_costs_record_pass(&s[0]->learned->costs, total, own_work_of(passes, m), cells, ms);
    double elapsed = specd_now_ms() - t0;
    for (int32_t k = 0; k < m; k++) {
        generation *g = in_pass[k];
        double t1 = specd_now_ms();
        specd_status sti = st;
        char *msg = NULL; /* a failed pass fails everyone in it, each with its message */
        if (st != SPECD_OK && message) specd_set_error(&msg, "%s", message);
        if (sti == SPECD_OK && passes[k].prompt_chunk) {
            sti = after_chunk(g, &passes[k], &msg);
        } else if (sti == SPECD_OK) {
            /* each request's part of the shared pass is its tokens' part, so its verify_ms stays
             * part of its decode_ms and requests' figures add up to the pass */
            double part = total > 0 ? (double)(passes[k].n_tokens + passes[k].n_padding) / total : 1.0 / m;
            g->result->stats.verify_ms += ms * part;
            specd_engine_use_slot(e, g->slot);
            sti = verify_after_pass(g, n_accepted ? &n_accepted[at[k]] : NULL, &msg);
            g->result->stats.decode_ms += elapsed * part + (specd_now_ms() - t1);
        }
        fail(g, sti);
        set_outcome(status, errors, at[k], sti, msg);
    }
    specd_free(message);
    return first_failure(status, n);
}

specd_status specd_session_accept(specd_session *g, int32_t *n_emitted, char **error) {
    specd_status begun = begin_part(g, PHASE_ACCEPT, n_emitted, error);
    if (begun != SPECD_OK) return begun;
    double t0 = specd_now_ms();
    const specd_verify_result *vr = &g->vr;
    keep_accepted_path(g, vr);
    record_step(g, vr);
    record_policy_step(g, vr);
    g->drafted_last = specd_tree_n_drafted(&g->tree) > 0;
    if (g->mu_path.on && target_dist_cb(g, &g->tree, vr->last_node, &g->coupled_dist)) /* after step_probs */
        specd_mu_path_accept(&g->mu_path, &g->sampler, vr->last_node, &g->coupled_dist, vr->next_token);
    specd_token *out = g->step_tokens;
    int32_t n = 0, before = g->result->n_tokens;
    for (int32_t i = 0; i < vr->n_accepted; i++) out[n++] = g->tree.nodes[vr->path[i]].token;
    out[n++] = vr->next_token;
    specd_status st = SPECD_OK;
    bool stop = emit_tokens(g, out, n, error, &st);
    if (n_emitted) *n_emitted = g->result->n_tokens - before;
    if (g->gate_timed) specd_round_gate_emitted(&g->learned->gate, g->result->n_tokens - before, specd_now_ms());
    g->gate_timed = false;
    report_step(g, vr, t0);
    record_step_time(g, g->result->n_tokens - before);
    g->phase = PHASE_DRAFT;
    if (st == SPECD_OK && !stop && !specd_tree_reset(&g->tree, vr->next_token)) {
        specd_set_error(error, "out of memory for the draft tree");
        st = SPECD_ERR_NO_MEMORY;
    }
    g->result->stats.decode_ms += specd_now_ms() - t0;
    if (st == SPECD_OK && stop) finish(g);
    return fail(g, st);
}

specd_status specd_session_step(specd_session *s, bool *done, char **error) {
    specd_status st = specd_session_draft(s, NULL, error);
    if (st == SPECD_OK && !s->done) st = specd_session_verify(s, NULL, error);
    if (st == SPECD_OK && !s->done) st = specd_session_accept(s, NULL, error);
    if (done) *done = st != SPECD_OK || s->done;
    return st;
}

bool specd_session_done(const specd_session *s) { return !s || s->done || s->failed != SPECD_OK; }

const specd_result *specd_session_result(const specd_session *s) { return s ? s->result : NULL; }

void specd_session_take_result(specd_session *s, specd_result *out) {
    *out = *s->result;
    memset(s->result, 0, sizeof *s->result);
    s->result_cap = 0;
    s->result->n_probs = s->probs.n;
}

static bool holds_image(const specd_token *prompt, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (specd_token_is_image(prompt[i])) return true;
    return false;
}

/* A session writing into `result_out` (the caller's, so on_tokens sees it fill as documented for
 * specd_generate), or into its own result when NULL. */
static specd_status open_session(specd_engine *e, int32_t slot, bool deferred, const specd_token *prompt,
                                 int32_t n_prompt, const specd_generation_params *params, specd_result *result_out,
                                 specd_session **out, char **error) {
    if (error) *error = NULL;
    if (out) *out = NULL;
    if (!e || !params || !out) {
        specd_set_error(error, "specd_session_new needs an engine, parameters and a place for the session");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    specd_status st = specd_generation_params_validate(params, NULL, error); /* first: needs no engine */
    int32_t n_parallel = specd_engine_n_parallel(e);
    if (st == SPECD_OK && (slot < 0 || slot >= n_parallel)) {
        specd_set_error(error, "slot %d does not exist: the engine has %d (0 to %d; n_parallel)", slot, n_parallel,
                        n_parallel - 1);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (st == SPECD_OK) st = validate_prompt(e, prompt, n_prompt, error);
    if (st == SPECD_OK) st = validate_spec(e, &params->speculative, error);
    if (st == SPECD_OK) st = specd_context_shift_validate(e, params, error);
    if (st == SPECD_OK) st = specd_lora_validate(e, params->lora_scales, params->n_lora_scales, error);
    if (st != SPECD_OK) return st;
    generation *g = malloc(sizeof *g);
    if (!g) {
        specd_set_error(error, "out of memory for a session");
        return SPECD_ERR_NO_MEMORY;
    }
    specd_engine_use_slot(e, slot);
    st = init_generation(g, e, prompt, n_prompt, params, result_out, error);
    g->slot = slot;
    g->stop_requests = specd_engine_stop_count(e); /* a stop asked before this session is not for it */
    atomic_init(&g->stop, false);
    if (st == SPECD_OK) { /* the slot's cache is the prompt cache only when made with the same adapters */
        memcpy(g->lora_scales, specd_lora_scales_of(e, params->lora_scales),
               (size_t)specd_engine_n_lora(e) * sizeof *g->lora_scales); /* the rest stays 0 (init_generation) */
        specd_slot_use_lora(e, specd_engine_target(e), g->lora_scales);
    }
    /* An image goes in from its embeddings, in passes of its own (kv.c), which a prompt chunk in a
     * round's joint pass cannot be: such a prompt goes in now, whole. */
    if (st == SPECD_OK && deferred && !holds_image(prompt, n_prompt)) begin_ingest(g, prompt, n_prompt);
    else if (st == SPECD_OK) st = ingest_prompt(g, prompt, n_prompt, error);
    if (st != SPECD_OK) {
        specd_session_free(g);
        return st;
    }
    if (params->n_predict == 0) finish(g);
    *out = g;
    return SPECD_OK;
}

specd_status specd_session_new(specd_engine *e, const specd_token *prompt, int32_t n_prompt,
                               const specd_generation_params *params, specd_session **out, char **error) {
    return open_session(e, 0, false, prompt, n_prompt, params, NULL, out, error);
}

specd_status specd_session_new_in_slot(specd_engine *e, int32_t slot, const specd_token *prompt, int32_t n_prompt,
                                       const specd_generation_params *params, specd_session **out, char **error) {
    return open_session(e, slot, false, prompt, n_prompt, params, NULL, out, error);
}

specd_status specd_session_begin_in_slot(specd_engine *e, int32_t slot, const specd_token *prompt, int32_t n_prompt,
                                         const specd_generation_params *params, specd_session **out, char **error) {
    return open_session(e, slot, true, prompt, n_prompt, params, NULL, out, error);
}

int32_t specd_session_pending_prompt(const specd_session *s) { return s ? s->n_pending : 0; }

void specd_session_request_stop(specd_session *s) {
    if (s) atomic_store(&s->stop, true);
}

void specd_session_free(specd_session *s) {
    if (!s) return;
    free_generation(s);
    specd_result_clear(&s->own_result);
    free(s);
}

specd_status specd_generate(specd_engine *e, const specd_token *prompt, int32_t n_prompt,
                            const specd_generation_params *params, specd_result *result, char **error) {
    if (error) *error = NULL;
    memset(result, 0, sizeof *result);
    specd_session *s = NULL;
    specd_status st = open_session(e, 0, false, prompt, n_prompt, params, result, &s, error);
    for (bool done = st != SPECD_OK || specd_session_done(s); !done;) st = specd_session_step(s, &done, error);
    specd_session_free(s);
    if (st != SPECD_OK) specd_result_clear(result);
    return st;
}

void specd_result_clear(specd_result *result) {
    if (!result) return;
    free(result->tokens);
    free(result->probs);
    memset(result, 0, sizeof *result);
}
