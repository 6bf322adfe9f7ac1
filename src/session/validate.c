/* validate.c - specd_generation_params_validate: the one place that decides which request
 * parameters are in range. The CLI, the JSON API and the old ABI parse types only and call this;
 * specd_generate calls it too, so a library caller gets the same answer. Checks that need the
 * engine (a draft model for 'draft', logit-bias tokens inside the vocabulary, a cache that can
 * shift) stay in specd_generate. */
#include "specd.h"

#include "../engine/grammar_lazy.h"
#include "../util/nesting.h"
#include "../util/util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest draft one step may ask for; the engine caps it further by its draft_max. */
#define MAX_DRAFT 256
#define MAX_NGRAM_N 64

typedef struct checker {
    const char *field; /* the first field out of range, or NULL */
    char **error;
} checker;

/* Records the first failure only: one message, about the first bad field in struct order. */
static bool fail(checker *c, const char *field, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static bool fail(checker *c, const char *field, const char *fmt, ...) {
    if (c->field) return false;
    c->field = field;
    char detail[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    specd_set_error(c->error, "%s %s", field, detail);
    return false;
}

static bool number_at_least(checker *c, const char *field, float v, double min) {
    if (isfinite(v) && v >= min) return true;
    return fail(c, field, "must be a finite number >= %g (got %g)", min, (double)v);
}

static bool number_between(checker *c, const char *field, float v, double min, double max) {
    if (isfinite(v) && v >= min && v <= max) return true;
    return fail(c, field, "must be a finite number from %g to %g (got %g)", min, max, (double)v);
}

static bool int_between(checker *c, const char *field, int64_t v, int64_t min, int64_t max) {
    if (v >= min && v <= max) return true;
    return fail(c, field, "must be from %lld to %lld (got %lld)", (long long)min, (long long)max, (long long)v);
}

static void check_logit_bias(checker *c, const specd_sampling_params *s) {
    if (s->n_logit_bias < 0 || (s->n_logit_bias > 0 && !s->logit_bias)) {
        fail(c, "sampling.logit_bias", "needs n_logit_bias >= 0 entries (got %d, list %s)", s->n_logit_bias,
             s->logit_bias ? "given" : "NULL");
        return;
    }
    for (int32_t i = 0; i < s->n_logit_bias; i++) /* -INFINITY forbids a token; NaN and +inf mean nothing */
        if (isnan(s->logit_bias[i].bias) || s->logit_bias[i].bias == INFINITY)
            fail(c, "sampling.logit_bias", "entry %d: the bias must be a finite number or -infinity (got %g)", i,
                 (double)s->logit_bias[i].bias);
}

/* DRY, top-n-sigma, min_keep, dynatemp, XTC: llama.cpp's ranges (any top_n_sigma: <= 0 is off). */
static void check_llama_samplers(checker *c, const specd_sampling_params *s) {
    if (!isfinite(s->top_n_sigma)) fail(c, "sampling.top_n_sigma", "must be a finite number, <= 0 for off (got %g)",
                                        (double)s->top_n_sigma);
    int_between(c, "sampling.min_keep", s->min_keep, 0, INT32_MAX);
    number_at_least(c, "sampling.dynatemp_range", s->dynatemp_range, 0.0);
    number_at_least(c, "sampling.dynatemp_exponent", s->dynatemp_exponent, 0.0);
    number_between(c, "sampling.xtc_probability", s->xtc_probability, 0.0, 1.0);
    number_between(c, "sampling.xtc_threshold", s->xtc_threshold, 0.0, 1.0);
    number_at_least(c, "sampling.dry_multiplier", s->dry_multiplier, 0.0);
    number_at_least(c, "sampling.dry_base", s->dry_base, 1.0);
    int_between(c, "sampling.dry_allowed_length", s->dry_allowed_length, 0, INT32_MAX);
    int_between(c, "sampling.dry_penalty_last_n", s->dry_penalty_last_n, -1, INT32_MAX);
    if (s->n_dry_sequence_breakers < 0 || (s->n_dry_sequence_breakers > 0 && !s->dry_sequence_breakers))
        fail(c, "sampling.dry_sequence_breakers", "needs n_dry_sequence_breakers >= 0 strings (got %d, list %s)",
             s->n_dry_sequence_breakers, s->dry_sequence_breakers ? "given" : "NULL");
    for (int32_t i = 0; s->dry_sequence_breakers && i < s->n_dry_sequence_breakers; i++)
        if (!s->dry_sequence_breakers[i] || !s->dry_sequence_breakers[i][0])
            fail(c, "sampling.dry_sequence_breakers", "entry %d is %s: each breaker is a non-empty string", i,
                 s->dry_sequence_breakers[i] ? "empty" : "NULL");
}

static void check_sampling(checker *c, const specd_sampling_params *s) {
    /* temperature <= 0 is greedy, so any finite value is meaningful */
    if (!isfinite(s->temperature)) fail(c, "sampling.temperature", "must be a finite number (got %g)", (double)s->temperature);
    number_at_least(c, "sampling.top_p", s->top_p, 0.0);
    number_at_least(c, "sampling.min_p", s->min_p, 0.0);
    number_at_least(c, "sampling.typical_p", s->typical_p, 0.0);
    int_between(c, "sampling.repeat_last_n", s->repeat_last_n, -1, INT32_MAX);
    /* the penalty divides positive logits: 0 would divide by zero */
    if (!(isfinite(s->repeat_penalty) && s->repeat_penalty > 0.0f))
        fail(c, "sampling.repeat_penalty", "must be a finite number > 0, 1 for off (got %g)", (double)s->repeat_penalty);
    if (!isfinite(s->presence_penalty))
        fail(c, "sampling.presence_penalty", "must be a finite number (got %g)", (double)s->presence_penalty);
    if (!isfinite(s->frequency_penalty))
        fail(c, "sampling.frequency_penalty", "must be a finite number (got %g)", (double)s->frequency_penalty);
    check_logit_bias(c, s);
    if (s->mirostat < 0 || s->mirostat > 2)
        fail(c, "sampling.mirostat", "must be 0 (off), 1 or 2 (got %d)", s->mirostat);
    else if (s->mirostat != 0) {
        number_at_least(c, "sampling.mirostat_tau", s->mirostat_tau, 0.0);
        number_at_least(c, "sampling.mirostat_eta", s->mirostat_eta, 0.0);
    }
    check_llama_samplers(c, s);
}

static bool known_type(specd_spec_type t) { return specd_spec_type_name(t) != NULL; }

static void check_type_list(checker *c, const specd_spec_params *sp) {
    if (!int_between(c, "speculative.n_types", sp->n_types, 0, SPECD_SPEC_MAX_TYPES)) return;
    for (int32_t i = 0; i < sp->n_types; i++) {
        specd_spec_type t = sp->types[i];
        if (t == SPECD_SPEC_AUTO || !known_type(t)) { /* none in a list is skipped */
            fail(c, "speculative.types", "entry %d is %d, not a drafter (%s)", i, (int)t, specd_spec_type_names());
            return;
        }
        for (int32_t j = 0; j < i; j++)
            if (sp->types[j] == t && t != SPECD_SPEC_NONE) {
                fail(c, "speculative.types", "'%s' is listed twice", specd_spec_type_name(t));
                return;
            }
    }
}

static void check_speculative(checker *c, const specd_spec_params *sp) {
    if (!known_type(sp->type))
        fail(c, "speculative.type", "is %d, not a speculative type (auto, %s)", (int)sp->type, specd_spec_type_names());
    check_type_list(c, sp);
    if (int_between(c, "speculative.draft_max", sp->draft_max, 0, MAX_DRAFT) &&
        int_between(c, "speculative.draft_min", sp->draft_min, 0, MAX_DRAFT) && sp->draft_min > sp->draft_max)
        fail(c, "speculative.draft_min", "must not exceed the draft maximum (got %d > %d)", sp->draft_min, sp->draft_max);
    number_between(c, "speculative.draft_p_min", sp->draft_p_min, 0.0, 1.0);
    int_between(c, "speculative.ngram_n", sp->ngram_n, 1, MAX_NGRAM_N);
    int_between(c, "speculative.ngram_min_hits", sp->ngram_min_hits, 1, INT32_MAX);
    int_between(c, "speculative.suffix_branches", sp->suffix_branches, 1, SPECD_TREE_MAX_BRANCHES);
    if (!specd_draft_tree_mode_name(sp->tree))
        fail(c, "speculative.tree", "is %d, not a tree mode (auto, off, on)", (int)sp->tree);
    int_between(c, "speculative.draft_branches", sp->draft_branches, 1, SPECD_TREE_MAX_BRANCHES);
    number_between(c, "speculative.draft_p_split", sp->draft_p_split, 0.0, 1.0);
    int_between(c, "speculative.draft_tree_nodes", sp->draft_tree_nodes, 1, MAX_DRAFT);
}

/* A lazy grammar's trigger patterns go to std::regex, whose compiler recurses once per character
 * and per nested group (a 100000-character pattern or 20000 nested groups overflow the stack) and
 * copies a group once per {m,n} count: bounded well under what crashes (real triggers are a tag
 * or a few hundred characters), then compiled once here so a bad one is refused naming its field
 * before a session starts. */
#define TRIGGER_MAX_BYTES 4096
#define TRIGGER_MAX_NESTING 100
#define TRIGGER_MAX_STATES 10000
#define EXCERPT 40

static void check_trigger_pattern(checker *c, int32_t i, const char *pattern) {
    const char *field = "grammar_trigger_patterns";
    if (!pattern) {
        fail(c, field, "pattern %d is NULL: each is a regular expression", i);
        return;
    }
    size_t len = strlen(pattern);
    const char *more = len > EXCERPT ? "..." : "";
    if (len > TRIGGER_MAX_BYTES) {
        fail(c, field, "pattern %d ('%.*s%s') is %zu bytes as a regular expression, more than the %d allowed: use a "
             "shorter trigger", i, EXCERPT, pattern, more, len, TRIGGER_MAX_BYTES);
        return;
    }
    int32_t depth = specd_regex_nesting(pattern);
    size_t states = specd_regex_states(pattern);
    char *why = NULL;
    if (depth > TRIGGER_MAX_NESTING)
        fail(c, field, "pattern %d ('%.*s%s') nests its ( ) groups %d deep, more than the %d allowed", i, EXCERPT,
             pattern, more, (int)depth, TRIGGER_MAX_NESTING);
    else if (states > TRIGGER_MAX_STATES)
        fail(c, field, "pattern %d ('%.*s%s') grows to %zu atoms with its {m,n} repetitions written out, more than "
             "the %d allowed: use smaller counts", i, EXCERPT, pattern, more, states, TRIGGER_MAX_STATES);
    else if (!specd_regex_check(pattern, &why))
        fail(c, field, "pattern %d ('%.*s%s') is not a valid regular expression (ECMAScript, as std::regex reads "
             "it): %s", i, EXCERPT, pattern, more, why ? why : "it could not be compiled");
    free(why);
}

static void check_triggers(checker *c, const specd_generation_params *p) {
    if (p->n_grammar_trigger_patterns < 0 || (p->n_grammar_trigger_patterns > 0 && !p->grammar_trigger_patterns)) {
        fail(c, "grammar_trigger_patterns", "needs n_grammar_trigger_patterns >= 0 entries (got %d, list %s)",
             p->n_grammar_trigger_patterns, p->grammar_trigger_patterns ? "given" : "NULL");
        return;
    }
    for (int32_t i = 0; i < p->n_grammar_trigger_patterns && !c->field; i++)
        check_trigger_pattern(c, i, p->grammar_trigger_patterns[i]);
    if (p->n_grammar_trigger_tokens < 0 || (p->n_grammar_trigger_tokens > 0 && !p->grammar_trigger_tokens))
        fail(c, "grammar_trigger_tokens", "needs n_grammar_trigger_tokens >= 0 entries (got %d, list %s)",
             p->n_grammar_trigger_tokens, p->grammar_trigger_tokens ? "given" : "NULL");
}

specd_status specd_generation_params_validate(const specd_generation_params *p, const char **field, char **error) {
    if (error) *error = NULL;
    if (field) *field = NULL;
    checker c = {.field = NULL, .error = error};
    if (!p) {
        fail(&c, "params", "must not be NULL: start from specd_generation_default_params()");
    } else if (p->struct_size != sizeof *p) {
        fail(&c, "struct_size", "is %u, this libspecd %s expects %zu: start from "
             "specd_generation_default_params() and build against the specd.h of the library you link",
             p->struct_size, SPECD_VERSION_STRING, sizeof *p);
    } else {
        check_sampling(&c, &p->sampling);
        check_speculative(&c, &p->speculative);
        int_between(&c, "n_keep", p->n_keep, -1, INT32_MAX);
        int_between(&c, "n_probs", p->n_probs, 0, INT32_MAX);
        check_triggers(&c, p);
    }
    if (field) *field = c.field;
    return c.field ? SPECD_ERR_INVALID_ARGUMENT : SPECD_OK;
}
