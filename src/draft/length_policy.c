/* length_policy.c - the engine's rate, and fixed lengths against the planner (see .h). */
#include "length_policy.h"

#include <string.h>

/* Sums decay by this per step: about the last 64 steps count. */
#define DECAY (1.0 - 1.0 / 64.0)
/* The engine's own rate counts once it holds this many steps' worth of time. */
#define RATE_MIN_STEPS 8.0
/* A trial's paired sums are halved past this many steps, so a long trial follows the text. */
#define TRIAL_WINDOW 64

void specd_length_policy_init(specd_length_policy *p) {
    memset(p, 0, sizeof *p);
    p->fixed = -1;
    p->spell = SPECD_POLICY_FIRST_SPELL;
    p->max_fixed = SPECD_POLICY_MAX_FIXED;
}

void specd_length_policy_limit(specd_length_policy *p, int32_t max) {
    p->max_fixed = max < 1 ? 1 : max > SPECD_POLICY_MAX_FIXED ? SPECD_POLICY_MAX_FIXED : max;
    if (p->hold && p->held.length > p->max_fixed) p->held.length = p->max_fixed;
}

void specd_length_policy_record_time(specd_length_policy *p, int32_t tokens, double ms) {
    if (tokens <= 0 || !(ms > 0.0)) return;
    if (p->hold) specd_held_lengths_record_time(&p->held, tokens, ms);
    p->tokens = DECAY * p->tokens + tokens;
    p->ms = DECAY * p->ms + ms;
}

int32_t specd_length_policy_fixed(const specd_length_policy *p) { return p->hold ? p->held.length : p->fixed; }

void specd_length_policy_hold(specd_length_policy *p, bool hold) {
    p->hold = hold;
    specd_held_lengths_init(&p->held, p->max_fixed);
    p->fixed = -1; /* the planner's spells start over; while holding, the held length drives */
}

/* Tokens a chain cut at k would have given on this step's drafts (see the header); past the
 * drafted chain, each depth at its acceptance once the depths before it were accepted. */
static double tokens_at(const specd_policy_step *s, int32_t k, const specd_acceptance *a) {
    if (k <= s->n_chain) return (s->n_accepted < k ? s->n_accepted : k) + 1.0;
    if (s->n_accepted < s->n_chain) return s->n_accepted + 1.0;
    double tokens = s->n_chain + 1.0, p = 1.0;
    for (int32_t i = s->n_chain; i < k; i++) tokens += (p *= specd_acceptance_at_depth(a, s->mode, i + 1));
    return tokens;
}

/* This slot's share of a pass in which each of the step's n_sharing slots puts `tokens`: the
 * policy is the engine's, so a fixed length is every slot's. Priced as if the slot ran alone, a
 * draft of 3 looked cheap at 8 slots (T(4) against T(1)) where it makes the shared pass 32 tokens
 * instead of 8, and 8 clients on the Q8 pair ran at 0.79-0.90x llama-server. */
static double pass_share(const specd_costs *c, const specd_policy_step *s, int32_t tokens) {
    int32_t m = s->n_sharing > 1 ? s->n_sharing : 1;
    return specd_costs_pass(c, m * tokens, &s->fill) / m;
}

/* A step of a chain of k drafts, by the cost model: its pass, k draft decodes, the state. Slots
 * that share a pass draft jointly (one draft decode a depth for all of them), and a slot's
 * measured draft time is its share of that (generate.c): its fixed lengths pay the same share. */
static double ms_at(const specd_costs *c, const specd_policy_step *s, int32_t k) {
    if (k == 0) return pass_share(c, s, 1);
    int32_t m = s->n_sharing > 1 ? s->n_sharing : 1;
    return pass_share(c, s, k + 1) + specd_costs_drafts(c, k) / m + c->state_ms;
}

static int32_t best_of(const specd_length_policy *p, const double *tokens, const double *ms) {
    int32_t best = 0;
    for (int32_t k = 1; k <= p->max_fixed; k++)
        if (ms[k] > 0.0 && tokens[k] * ms[best] > tokens[best] * ms[k]) best = k;
    return best;
}

/* The best fixed length's tokens per ms by the cost model alone: each depth at its acceptance. */
static double modelled_best_rate(const specd_length_policy *p, const specd_costs *c, const specd_acceptance *a,
                                 specd_accept_mode mode, const specd_fill *fill) {
    specd_policy_step plain = {.mode = mode, .fill = fill ? *fill : (specd_fill){0.0, 0.0}};
    double best = 0.0;
    for (int32_t k = 0; k <= p->max_fixed; k++) {
        double rate = tokens_at(&plain, k, a) / ms_at(c, &plain, k);
        if (rate > best) best = rate;
    }
    return best;
}

double specd_length_policy_rate(const specd_length_policy *p, const specd_costs *c, const specd_acceptance *a,
                                specd_accept_mode mode, const specd_fill *fill) {
    double best;
    if (p->fixed_ms[0] > 0.0) {
        int32_t k = best_of(p, p->fixed_tokens, p->fixed_ms);
        best = p->fixed_tokens[k] / p->fixed_ms[k];
    } else {
        best = modelled_best_rate(p, c, a, mode, fill);
    }
    double own = p->ms > RATE_MIN_STEPS * specd_costs_pass(c, 1, NULL) ? p->tokens / p->ms : 0.0;
    return own > best ? own : best;
}

static void start_trial(specd_length_policy *p) {
    p->fixed = -1;
    p->plan_tokens = p->plan_ms = 0.0;
    p->plan_steps = 0;
    memset(p->trial_tokens, 0, sizeof p->trial_tokens);
    memset(p->trial_ms, 0, sizeof p->trial_ms);
}

static void halve_trial(specd_length_policy *p) {
    p->plan_tokens *= 0.5, p->plan_ms *= 0.5;
    for (int32_t k = 0; k <= SPECD_POLICY_MAX_FIXED; k++) p->trial_tokens[k] *= 0.5, p->trial_ms[k] *= 0.5;
}

/* After a step the planner drove: does a fixed length beat it on the trial's steps? */
static void judge_trial(specd_length_policy *p) {
    if (p->plan_steps < SPECD_POLICY_TRIAL || !(p->plan_ms > 0.0)) return;
    int32_t k = best_of(p, p->trial_tokens, p->trial_ms);
    double fixed_rate = p->trial_tokens[k] / p->trial_ms[k], plan_rate = p->plan_tokens / p->plan_ms;
    if (fixed_rate > plan_rate * (1.0 + SPECD_POLICY_MARGIN)) {
        p->fixed = best_of(p, p->fixed_tokens, p->fixed_ms);
        p->spell_left = p->spell;
        p->spell = p->spell * 2 < SPECD_POLICY_MAX_SPELL ? p->spell * 2 : SPECD_POLICY_MAX_SPELL;
        p->n_spells++;
    } else if (p->plan_steps >= 4 * SPECD_POLICY_TRIAL) {
        p->spell = SPECD_POLICY_FIRST_SPELL; /* the planner has held its own: a later loss starts over */
    }
}

/* What the step's pass paid for a size other than the step's before (see the header); a pass that
 * slots share changes size with every slot's draft, whatever the policy does. */
static double resize_share(const specd_length_policy *p, const specd_costs *c, const specd_policy_step *s) {
    if (s->n_sharing > 1 || p->last_nodes == 0 || s->n_nodes == p->last_nodes) return 0.0;
    return specd_costs_resize(c);
}

static bool resizes_matter(const specd_costs *c) { return specd_costs_resizes_matter(c); }

/* The fixed length that drives the rest of a spell: the one that would have done best lately;
 * where changing the pass size costs (resizes_matter), the one the spell began with. Past the
 * drafted chain a fixed length is priced at the mean acceptance, so while 2 drove with both drafts
 * accepted 3 looked better, while 3 drove it was rejected at its third, and the spell changed
 * length every third step: each change a rebuild. */
static int32_t spell_length(const specd_length_policy *p, const specd_costs *c) {
    return resizes_matter(c) ? p->fixed : best_of(p, p->fixed_tokens, p->fixed_ms);
}

/* What the check's sums say of each length, per step, for held lengths (held_lengths.h). A size
 * no pass has priced is priced as a choice prices it (costs.h: a little below the model's guess):
 * below the sizes passed, the model's line from them priced T(1) 18% dear on the H200's F32 pair,
 * and the held length stayed at 2 where 1 made 8% more. */
static void held_view(const specd_length_policy *p, const specd_costs *c, specd_held_view *v) {
    double w = p->fixed_steps > 0.0 ? p->fixed_steps : 1.0;
    for (int32_t k = 0; k <= SPECD_HELD_MAX && k <= SPECD_POLICY_MAX_FIXED; k++) {
        double pass = specd_costs_pass(c, k + 1, NULL), unsure = pass > 0.0 ? specd_costs_pass_to_choose(c, k + 1, NULL) / pass : 1.0;
        v->tokens[k] = p->fixed_tokens[k] / w, v->model_ms[k] = p->fixed_ms[k] / w * unsure;
    }
    v->draft_token_ms = specd_costs_draft_token(c);
    v->steps = p->fixed_steps;
}

void specd_length_policy_record_step(specd_length_policy *p, const specd_costs *c, const specd_acceptance *a,
                                    const specd_policy_step *s) {
    if (p->hold_once_resizes_matter && !p->hold && resizes_matter(c)) {
        specd_length_policy_hold(p, true);
        p->hold_once_resizes_matter = false;
    }
    bool trial = s->planned && p->fixed < 0;
    double resize = resize_share(p, c, s);
    p->last_nodes = s->n_nodes;
    p->fixed_steps = DECAY * p->fixed_steps + 1.0;
    for (int32_t k = 0; k <= SPECD_POLICY_MAX_FIXED; k++) {
        double tokens = tokens_at(s, k, a), ms = ms_at(c, s, k);
        p->fixed_tokens[k] = DECAY * p->fixed_tokens[k] + tokens;
        p->fixed_ms[k] = DECAY * p->fixed_ms[k] + ms;
        if (trial) p->trial_tokens[k] += tokens, p->trial_ms[k] += ms;
    }
    if (p->hold) {
        specd_held_lengths_record_step(&p->held, s->n_nodes - 1);
        specd_held_view view; /* priced only when a spell ends: 17 sizes of the cost model */
        bool choosing = specd_held_lengths_spell_ends(&p->held);
        if (choosing) held_view(p, c, &view);
        specd_held_lengths_step_done(&p->held, choosing ? &view : NULL, p->max_fixed);
        return;
    }
    if (p->fixed >= 0) {
        /* a spell: the fixed length that would have done best lately drives, until the next trial */
        p->fixed = spell_length(p, c);
        if (--p->spell_left <= 0) start_trial(p);
        return;
    }
    if (!trial) return;
    double drafting = s->n_nodes > 1 ? c->state_ms : 0.0;
    p->plan_tokens += s->n_emitted;
    p->plan_ms += pass_share(c, s, s->n_nodes) + s->draft_ms + drafting + resize;
    if (++p->plan_steps % TRIAL_WINDOW == 0) halve_trial(p);
    judge_trial(p);
}
