/* policy_replay.c - the draft length policy on recorded steps, against every fixed length.
 *
 *   policy_replay --trace FILE --costs "T1 T2 ... T16" --draft "FIRST NEXT" [--sampled]
 *                 [--runs N] [--noise S] [--seed X] [--warm] [--verbose] [--min-ratio R] [--resize MS]
 *                 [--hold] [--remote] [--cached]
 *
 * FILE: steps recorded drafting a fixed 15 tokens (specd run --draft-fixed --draft-max 15
 * --trace-steps FILE): per line the history length, drafted, accepted, three times, then the 15
 * confidences. For any length k <= 15 a step's outcome is known: min(accepted, k) + 1 tokens.
 * Costs: a target pass over n tokens T(n) ms (tools/pass_costs --short prints them), a step's
 * first draft token and each next one, ms. Each time the policy measures gets lognormal noise S
 * (default 0.05), and one pass in 20 is 30% slower (the machine was busy); the fixed lengths pay
 * the same noise.
 *
 * Each run is one generation of 128 tokens over the trace's steps in order, each run starting at
 * another step; --runs (default 60) of them. The policy runs as the session runs it (generate.c:
 * plain steps to learn T(1), the plan, the length policy's fixed spells, the trusted depth, a draft
 * forced after steps without one: exploration.h), on an engine state that is fresh for every run,
 * or with --warm kept from run to run (a server, or a process after others). --sampled: verified
 * by rejection sampling (a drawn token stays). Prints the tokens per ms (x 1000) of each fixed
 * length and of the policy, its ratio to the best fixed length, and how many drafts its steps
 * kept. This is how the policy was tuned: its goal is never to lose to the best fixed length
 * (docs/performance.md). --min-ratio R: exit 3 when the policy's ratio to the best fixed length is
 * under R (tests/CMakeLists.txt keeps the recorded traces in tests/data above their floors, so a
 * change to the policy cannot lose speed unseen).
 * --resize MS: a pass whose size differs from the pass before costs MS more (llama.cpp builds its
 * graph anew: on a GPU a third of a pass; costs.h); a fixed length's passes keep one size.
 * --hold: held lengths, as an engine whose target is offloaded runs them (length_policy.h).
 * --remote: the planner until held lengths pay, as an engine whose target is on rpc-servers alone
 * runs it (length_policy.h).
 * --cached: each run's fresh engine starts from the calibration cache (calibrate.h) an earlier
 * process wrote: before each run, one process started from the file makes a generation half the
 * trace away (other text) and writes it; the run's engine reads it as the engine does (its sizes and
 * draft costs as priors, re-measured; acceptance at half weight; held lengths' timings, the best
 * driving first). Not with --warm. */
#include "draft/draft_length.h"
#include "draft/exploration.h"
#include "draft/length_policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STEPS 4096
#define CHAIN 15
#define TOKENS 128

typedef struct step {
    int32_t accepted;
    float conf[CHAIN];
} step;

static step steps[MAX_STEPS];
static int n_steps;
static double T[17], d_first, d_next, noise = 0.05, resize_ms;
static bool warm, verbose, hold, remote, cached;
static uint64_t rng_state = 42;

static double uniform(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static double noisy(double ms) {
    double u1 = uniform() + 1e-12, u2 = uniform();
    return ms * exp(noise * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static int load(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096];
    while (fgets(line, sizeof line, f) && n_steps < MAX_STEPS) {
        if (line[0] == 'P') continue;
        int nh, nd, na;
        double a, b, c;
        int pos = 0;
        if (sscanf(line, "%d %d %d %lf %lf %lf%n", &nh, &nd, &na, &a, &b, &c, &pos) != 6 || nd != CHAIN) continue;
        step *s = &steps[n_steps];
        s->accepted = na;
        char *p = line + pos;
        int k = 0;
        for (; k < CHAIN; k++) {
            char *end;
            s->conf[k] = strtof(p, &end);
            if (end == p) break;
            p = end;
        }
        if (k == CHAIN) n_steps++;
    }
    fclose(f);
    return n_steps;
}

/* A fixed length k over one run from step `first`: tokens per ms. */
static double run_fixed(int32_t k, int first) {
    double tokens = 0.0, ms = 0.0;
    for (int i = first; tokens < TOKENS; i = (i + 1) % n_steps) {
        const step *s = &steps[i];
        tokens += (s->accepted < k ? s->accepted : k) + 1;
        for (int32_t j = 0; j < k; j++) ms += noisy(j == 0 ? d_first : d_next);
        ms += noisy(T[k + 1]) * (uniform() < 0.05 ? 1.3 : 1.0);
    }
    return tokens / ms;
}

/* The policy as the session runs it (generate.c, draft_model.c), on the engine's learned state. */
typedef struct engine_state {
    specd_costs costs;
    specd_acceptance acceptance;
    specd_length_policy policy;
    int32_t steps_since_plain;
    specd_exploration exploration; /* when a draft is forced (learned.h: the engine's) */
    int32_t last_pass; /* the size of the pass before (--resize) */
} engine_state;

/* As generate.c's needs_plain_step: one plain step first, then one every 32 until T(1) has 3;
 * none under held lengths. */
static bool plain_due(const engine_state *e) {
    int32_t passes = e->costs.seen[1];
    if (passes >= 3 || e->policy.hold) return false;
    return passes < 1 || e->steps_since_plain >= 32;
}

/* As generate.c's draft_costs_unmeasured: a calibration file's draft costs, not measured yet in
 * this process, are re-measured by a step of REMEASURE_DRAFTS drafts (--cached). */
#define REMEASURE_DRAFTS 2
static bool draft_costs_unmeasured(const specd_costs *c) {
    return c->draft_decodes == 0 && (c->draft_ms > 0.0 || c->first_draft_ms > 0.0);
}

/* One step; returns tokens, adds ms. */
static int32_t policy_step(engine_state *e, const step *s, specd_accept_mode mode, double *ms, int32_t *drafted_out) {
    specd_fill fill = {0.0, 0.0};
    int32_t fixed = specd_length_policy_fixed(&e->policy);
    bool remeasure = draft_costs_unmeasured(&e->costs);
    bool plain = plain_due(e) || (fixed == 0 && !remeasure);
    /* generate.c's plan_draft: a forced draft after steps without one (exploration.h) */
    bool explore = remeasure || (fixed < 0 && specd_exploration_due(&e->exploration));
    int32_t m = 0, decodes = 0;
    bool planned = !plain && fixed < 0 && !explore;
    if (plain) {
        e->steps_since_plain = 0;
    } else if (fixed >= 0) {
        m = fixed > 0 ? fixed : REMEASURE_DRAFTS;
        decodes = m;
    } else {
        specd_draft_plan plan;
        specd_draft_plan_params pp = {.costs = &e->costs, .acceptance = &e->acceptance, .mode = mode,
                                      .rate = specd_length_policy_rate(&e->policy, &e->costs, &e->acceptance, mode, &fill),
                                      .fill = fill, .max_len = CHAIN, .other_tokens = 0, .copies = 1};
        int32_t trusted = specd_acceptance_trusted_depth(&e->acceptance, mode, 1.0); /* generate.c's TRUST_VERDICTS */
        if (pp.max_len > trusted && !remeasure) pp.max_len = trusted;
        int32_t forced = remeasure ? REMEASURE_DRAFTS : explore ? 1 : 0; /* generate.c's min_len */
        specd_draft_plan_begin(&plan, &pp);
        for (int32_t depth = 0; depth < pp.max_len; depth++) {
            if (depth >= forced && !specd_draft_plan_worth_continuing(&plan, depth)) break;
            specd_draft_plan_add_draft_decode(&plan);
            decodes++;
            float c = s->conf[depth];
            specd_acceptance_record_drawn(&e->acceptance, mode, c);
            bool keep = depth < forced || specd_draft_plan_worth_adding(&plan, depth, c);
            if (keep || mode == SPECD_ACCEPT_SAMPLED) specd_draft_plan_add(&plan, depth, c), m++;
            if (!keep) break;
        }
    }
    if (!plain) { /* generate.c's finish_draft */
        e->steps_since_plain = m > 0 ? e->steps_since_plain + 1 : 0;
        specd_exploration_note(&e->exploration, explore, m > 0);
    }
    /* time: draft decodes, then the target pass */
    double draft = 0.0;
    for (int32_t i = 0; i < decodes; i++) {
        double t = noisy(i == 0 ? d_first : d_next);
        draft += t;
        if (i == 0) specd_costs_record_first_draft(&e->costs, t);
        else specd_costs_record_draft(&e->costs, 1, t);
    }
    /* While the planner drives (no fixed spell, no held lengths), a pass smaller than the one before
     * is padded to its size where that costs less than a resize (generate.c: pad_to_last_size). */
    int32_t padding = fixed < 0 && !e->policy.hold ? specd_costs_padding(&e->costs, m + 1, NULL, CHAIN + 1) : 0;
    int32_t size = m + 1 + padding;
    double pass = noisy(T[size]) * (uniform() < 0.05 ? 1.3 : 1.0); /* now and then the machine is busy */
    if (e->last_pass != 0 && e->last_pass != size) pass += resize_ms;
    e->last_pass = size;
    specd_costs_record_verify(&e->costs, size, pass);
    *ms += draft + pass;
    int32_t r = s->accepted < m ? s->accepted : m;
    for (int32_t j = 0; j < m && j <= r; j++)
        if (j < r || j < m) specd_acceptance_record(&e->acceptance, mode, j + 1, s->conf[j], j < r);
    specd_policy_step ps = {.mode = mode, .fill = fill, .n_nodes = m + 1, .n_chain = m, .n_accepted = r,
                            .n_emitted = r + 1, .draft_ms = draft, .planned = planned};
    specd_length_policy_record_step(&e->policy, &e->costs, &e->acceptance, &ps);
    specd_length_policy_record_time(&e->policy, r + 1, draft + pass);
    *drafted_out = m;
    if (verbose)
        fprintf(stderr, "m %2d r %2d plain %d fixed %2d hold %d resize %.2f rate %.4f a1 %.2f T1 %.1f T4 %.1f T8 %.1f d %.2f/%.2f\n",
                m, r, plain, fixed, e->policy.hold, specd_costs_resize(&e->costs),
                specd_length_policy_rate(&e->policy, &e->costs, &e->acceptance, mode, &fill),
                specd_acceptance_at_depth(&e->acceptance, mode, 1), specd_costs_pass(&e->costs, 1, NULL),
                specd_costs_pass(&e->costs, 4, NULL), specd_costs_pass(&e->costs, 8, NULL),
                specd_costs_first_draft_token(&e->costs), specd_costs_draft_token(&e->costs));
    return r + 1;
}

/* A new engine, as learned.c makes one. */
static void engine_new(engine_state *e) {
    memset(e, 0, sizeof *e);
    specd_costs_init(&e->costs);
    specd_acceptance_init(&e->acceptance);
    specd_length_policy_init(&e->policy);
    specd_length_policy_limit(&e->policy, CHAIN); /* the trace drafted 15: the draft_max of these runs */
    specd_length_policy_hold(&e->policy, hold);
    e->policy.hold_once_resizes_matter = remote && !hold;
}

/* What a calibration file keeps (calibrate.h) after an engine's generations: its known sizes, its
 * draft costs, its acceptance counts as text, its held lengths' timings. */
typedef struct calibration_file {
    bool written;
    double target_ms[SPECD_COSTS_MAX_BATCH + 1];
    double draft_ms, first_draft_ms;
    char acceptance[SPECD_ACCEPT_MODES][2048];
    double held[SPECD_HELD_MAX + 1][3];
} calibration_file;

static void file_save(calibration_file *f, const engine_state *e) {
    memset(f, 0, sizeof *f);
    f->written = true;
    for (int32_t n = 1; n <= SPECD_COSTS_MAX_BATCH; n++) f->target_ms[n] = e->costs.base_ms[n];
    f->draft_ms = e->costs.draft_ms, f->first_draft_ms = e->costs.first_draft_ms;
    for (int m = 0; m < SPECD_ACCEPT_MODES; m++)
        specd_acceptance_format(&e->acceptance, (specd_accept_mode)m, f->acceptance[m], sizeof f->acceptance[m]);
    for (int32_t k = 0; hold && k <= SPECD_HELD_MAX; k++)
        if (e->policy.held.steps[k] > 0.0 && e->policy.held.ms[k] > 0.0)
            f->held[k][0] = e->policy.held.tokens[k], f->held[k][1] = e->policy.held.ms[k],
            f->held[k][2] = e->policy.held.steps[k];
}

/* A new engine started from the file, as calibrate.c's apply_costs does (acceptance at its
 * FILE_ACCEPTANCE_WEIGHT, a half). */
static void file_load(engine_state *e, const calibration_file *f) {
    if (!f->written) return;
    for (int32_t n = 1; n <= SPECD_COSTS_MAX_BATCH; n++)
        if (f->target_ms[n] > 0.0) specd_costs_record_calibration(&e->costs, n, f->target_ms[n]);
    specd_costs_bound(&e->costs);
    if (f->draft_ms > 0.0 || f->first_draft_ms > 0.0)
        specd_costs_record_calibration_draft(&e->costs, f->first_draft_ms, f->draft_ms);
    for (int m = 0; m < SPECD_ACCEPT_MODES; m++)
        specd_acceptance_parse(&e->acceptance, (specd_accept_mode)m, f->acceptance[m], 0.5);
    bool restored = false;
    for (int32_t k = 0; hold && k <= SPECD_HELD_MAX; k++)
        if (f->held[k][2] > 0.0)
            restored |= specd_held_lengths_restore(&e->policy.held, k, f->held[k][0], f->held[k][1], f->held[k][2]);
    if (restored) specd_held_lengths_start_at_best(&e->policy.held, e->policy.max_fixed);
}

/* One generation of TOKENS from step `first`: tokens per ms. */
static double generate(engine_state *e, int first, specd_accept_mode mode, int32_t *hist) {
    double tokens = 0.0, ms = 0.0;
    for (int i = first; tokens < TOKENS; i = (i + 1) % n_steps) {
        int32_t m = 0;
        tokens += policy_step(e, &steps[i], mode, &ms, &m);
        if (hist) hist[m]++;
    }
    return tokens / ms;
}

/* --cached: before each run an earlier process, itself started from the file, makes one generation
 * half the trace away (other text) and writes the file the run's engine starts from. */
static void earlier_process(calibration_file *f, int first, specd_accept_mode mode) {
    static engine_state p;
    engine_new(&p);
    file_load(&p, f);
    generate(&p, (first + n_steps / 2) % n_steps, mode, NULL);
    file_save(f, &p);
}

static double run_policy(int first, specd_accept_mode mode, int32_t *hist) {
    static engine_state e;
    static calibration_file file;
    static bool started;
    if (!started || !warm) { /* --warm: one engine for all runs, as a server */
        engine_new(&e);
        if (cached) earlier_process(&file, first, mode), file_load(&e, &file);
        started = true;
    }
    return generate(&e, first, mode, hist);
}

static void usage(const char *self) {
    fprintf(stderr, "usage: %s --trace FILE --costs \"T1 .. T16\" --draft \"FIRST NEXT\" [--sampled] [--runs N] "
                    "[--noise S] [--seed X] [--warm] [--verbose] [--min-ratio R] [--resize MS] [--hold] [--remote] [--cached]\n", self);
}

/* n numbers from a space-separated string; false when it holds fewer or anything else. */
static bool parse_numbers(const char *s, double *out, int n) {
    char *end;
    for (int i = 0; i < n; i++, s = end) {
        out[i] = strtod(s, &end);
        if (end == s || !(out[i] > 0.0)) return false;
    }
    while (*s == ' ') s++;
    return *s == '\0';
}

int main(int argc, char **argv) {
    const char *trace = NULL;
    bool costs = false, drafts = false;
    specd_accept_mode mode = SPECD_ACCEPT_GREEDY;
    int runs = 60;
    double min_ratio = 0.0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--sampled")) mode = SPECD_ACCEPT_SAMPLED;
        else if (!strcmp(f, "--warm")) warm = true;
        else if (!strcmp(f, "--verbose")) verbose = true;
        else if (!strcmp(f, "--hold")) hold = true;
        else if (!strcmp(f, "--remote")) remote = true;
        else if (!strcmp(f, "--cached")) cached = true;
        else if (v && !strcmp(f, "--trace")) trace = v, i++;
        else if (v && !strcmp(f, "--costs")) costs = parse_numbers(v, T + 1, 16), i++;
        else if (v && !strcmp(f, "--draft")) {
            double d[2];
            drafts = parse_numbers(v, d, 2), d_first = d[0], d_next = d[1], i++;
        } else if (v && !strcmp(f, "--runs")) runs = atoi(v), i++;
        else if (v && !strcmp(f, "--noise")) noise = atof(v), i++;
        else if (v && !strcmp(f, "--min-ratio")) min_ratio = atof(v), i++;
        else if (v && !strcmp(f, "--resize")) resize_ms = atof(v), i++;
        else if (v && !strcmp(f, "--seed")) rng_state = (strtoull(v, NULL, 10) << 1) | 1, i++; /* odd, and one per seed */
        else {
            usage(argv[0]);
            return 2;
        }
    }
    if (!trace || !costs || !drafts || runs < 1 || noise < 0.0 || resize_ms < 0.0 || (cached && warm)) {
        usage(argv[0]);
        return 2;
    }
    if (load(trace) <= 0) {
        fprintf(stderr, "policy_replay: no steps of %d drafts in %s\n", CHAIN, trace);
        return 1;
    }
    double fixed[CHAIN + 1] = {0}, policy = 0.0;
    int32_t hist[CHAIN + 1] = {0};
    for (int r = 0; r < runs; r++) {
        int first = (int)((long)r * n_steps / runs);
        for (int32_t k = 0; k <= 10; k++) fixed[k] += run_fixed(k, first) / runs;
        policy += run_policy(first, mode, hist) / runs;
    }
    int32_t best = 0;
    for (int32_t k = 0; k <= 10; k++) {
        printf("fixed %2d: %.1f\n", k, 1000.0 * fixed[k]);
        if (fixed[k] > fixed[best]) best = k;
    }
    printf("policy  : %.1f (%.3fx the best fixed length, %d)\n", 1000.0 * policy, policy / fixed[best], best);
    printf("drafts:");
    for (int32_t k = 0; k <= CHAIN; k++) printf(" %d:%d", k, hist[k]);
    printf("\n");
    if (policy / fixed[best] < min_ratio) {
        fprintf(stderr, "policy_replay: the policy gave %.3fx the best fixed length (%d) on %s, under the floor %.3f\n",
                policy / fixed[best], best, trace, min_ratio);
        return 3;
    }
    return 0;
}
