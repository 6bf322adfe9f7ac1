/* draft_length.c - the plan of one drafting step, weighed at the engine's rate (see .h). */
#include "draft_length.h"

#include <string.h>

/* The most drafts a lookahead considers past the current depth. */
#define LOOKAHEAD 16

static int32_t copies_of(const specd_draft_plan *p) { return p->params.copies > 1 ? p->params.copies : 1; }

double specd_draft_plan_pass_ms(const specd_draft_plan *p, int32_t n) {
    int32_t others = p->params.other_tokens > 0 ? p->params.other_tokens : 0;
    return specd_costs_pass_to_choose(p->params.costs, others + copies_of(p) * n, &p->params.fill);
}

/* Draft decodes of this chain and its copies (one token each) from the step's n-th on. */
static double draft_decodes_ms(const specd_draft_plan *p, int32_t from, int32_t n) {
    const specd_costs *c = p->params.costs;
    return (specd_costs_drafts(c, from + n) - specd_costs_drafts(c, from)) * copies_of(p);
}

double specd_draft_plan_net(const specd_draft_plan *p, double tokens, double ms) {
    return tokens - p->params.rate * ms;
}

double specd_draft_plan_acceptance(const specd_draft_plan *p, float confidence) {
    return specd_acceptance_of(p->params.acceptance, p->params.mode, confidence);
}

void specd_draft_plan_begin(specd_draft_plan *p, const specd_draft_plan_params *params) {
    memset(p, 0, sizeof *p);
    p->params = *params;
    p->p_all = 1.0;
    p->expected = copies_of(p);
    p->cost = specd_draft_plan_pass_ms(p, 1);
}

/* Keeping a draft at `depth`: one more token per chain in the target pass, and for the first
 * draft of a step the state a recurrent model saves. */
static double keep_ms(const specd_draft_plan *p, int32_t depth) {
    double state = depth == 0 ? p->params.costs->state_ms : 0.0;
    return specd_draft_plan_pass_ms(p, depth + 2) - specd_draft_plan_pass_ms(p, depth + 1) + state;
}

/* The most that drafting m more tokens (m = 1..) after `depth` kept ones can add, net of its time,
 * each accepted at its depth's rate (acceptance.h), when the chain so far is all accepted with
 * chance p_all; 0 when no m pays. Each token costs its draft decode and its share of the pass. */
static double best_future(const specd_draft_plan *p, int32_t depth, double p_all) {
    double gained = 0.0, best = 0.0, base = specd_draft_plan_pass_ms(p, depth + 1);
    int32_t decoded = p->n_decodes; /* the drafts so far: the next decode's place in the step */
    double state = depth == 0 ? p->params.costs->state_ms : 0.0;
    int32_t most = p->params.max_len - depth;
    if (most > LOOKAHEAD) most = LOOKAHEAD;
    for (int32_t m = 1; m <= most; m++) {
        p_all *= specd_acceptance_at_depth(p->params.acceptance, p->params.mode, depth + m);
        gained += p_all * copies_of(p);
        double ms = draft_decodes_ms(p, decoded, m) + specd_draft_plan_pass_ms(p, depth + 1 + m) - base + state;
        double net = specd_draft_plan_net(p, gained, ms);
        if (net > best) best = net;
    }
    return best;
}

/* What keeping a token of acceptance a at `depth` adds, net: its tokens, less its share of the
 * pass, and the best of drafting on after it. */
static double kept_value(const specd_draft_plan *p, int32_t depth, double a) {
    double with = p->p_all * a;
    return specd_draft_plan_net(p, with * copies_of(p), keep_ms(p, depth)) + best_future(p, depth + 1, with);
}

typedef struct draw_context {
    const specd_draft_plan *plan;
    int32_t depth;
} draw_context;

/* A drawn token is kept where that pays; greedy, it is dropped otherwise (nothing lost but its
 * draft decode); sampled, it stays (dropping a drawn token for its own probability biases the
 * output) and only drafting after it stops. */
static double drawn_value(double a, const void *context) {
    const draw_context *x = context;
    double kept = kept_value(x->plan, x->depth, a);
    bool greedy = x->plan->params.mode == SPECD_ACCEPT_GREEDY;
    return greedy && kept < 0.0 ? 0.0 : kept;
}

/* Drawing the next token is worth what it is expected to add over the confidence it may come with
 * (acceptance.h), less its draft decode. Priced at the mean acceptance instead, drawing looked worth
 * it where most drawn tokens were then not worth keeping: a fourth draft drawn and dropped at most
 * steps cost 8% of the step on the benchmark pair. */
bool specd_draft_plan_worth_continuing(const specd_draft_plan *p, int32_t depth) {
    draw_context x = {p, depth};
    double value = specd_acceptance_expect(p->params.acceptance, p->params.mode, drawn_value, &x);
    return specd_draft_plan_net(p, value, draft_decodes_ms(p, p->n_decodes, 1)) > 0.0;
}

void specd_draft_plan_add_draft_decode(specd_draft_plan *p) { p->cost += draft_decodes_ms(p, p->n_decodes++, 1); }

bool specd_draft_plan_worth_adding(const specd_draft_plan *p, int32_t depth, float confidence) {
    /* The token is drawn: its draft decode is spent. Keeping it adds its share of the pass, and
     * maybe more drafts after it. */
    return kept_value(p, depth, specd_draft_plan_acceptance(p, confidence)) > 0.0;
}

void specd_draft_plan_add(specd_draft_plan *p, int32_t depth, float confidence) {
    p->p_all *= specd_draft_plan_acceptance(p, confidence);
    p->expected += p->p_all * copies_of(p);
    p->cost += keep_ms(p, depth);
}
