/* test_validate.c - specd_generation_params_validate, the one place that decides which request
 * parameters are in range: every bad value (NaN and infinities too) is refused with a message
 * naming the field, every boundary value that means something is accepted, and specd_generate
 * refuses what the validator refuses (before it touches the engine). */
#include "specd.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

typedef void (*mutate_fn)(specd_generation_params *p);

typedef struct bad_case {
    const char *field;   /* what the validator must name */
    const char *message; /* and a piece of what it must say */
    mutate_fn mutate;
} bad_case;

static void nan_temperature(specd_generation_params *p) { p->sampling.temperature = NAN; }
static void inf_temperature(specd_generation_params *p) { p->sampling.temperature = INFINITY; }
static void negative_top_p(specd_generation_params *p) { p->sampling.top_p = -0.1f; }
static void nan_min_p(specd_generation_params *p) { p->sampling.min_p = NAN; }
static void negative_typical(specd_generation_params *p) { p->sampling.typical_p = -0.5f; }
static void zero_repeat_penalty(specd_generation_params *p) { p->sampling.repeat_penalty = 0.0f; }
static void nan_repeat_penalty(specd_generation_params *p) { p->sampling.repeat_penalty = NAN; }
static void repeat_last_n_below(specd_generation_params *p) { p->sampling.repeat_last_n = -2; }
static void inf_presence(specd_generation_params *p) { p->sampling.presence_penalty = -INFINITY; }
static void nan_frequency(specd_generation_params *p) { p->sampling.frequency_penalty = NAN; }
static void mirostat_three(specd_generation_params *p) { p->sampling.mirostat = 3; }
static void mirostat_bad_tau(specd_generation_params *p) {
    p->sampling.mirostat = 2;
    p->sampling.mirostat_tau = -1.0f;
}
static void mirostat_nan_eta(specd_generation_params *p) {
    p->sampling.mirostat = 1;
    p->sampling.mirostat_eta = NAN;
}
static void bias_count_without_list(specd_generation_params *p) { p->sampling.n_logit_bias = 2; }
static const specd_logit_bias nan_bias[] = {{3, 1.0f}, {4, NAN}};
static void bias_nan(specd_generation_params *p) {
    p->sampling.logit_bias = nan_bias;
    p->sampling.n_logit_bias = 2;
}
static void unknown_type(specd_generation_params *p) { p->speculative.type = (specd_spec_type)42; }
static void too_many_types(specd_generation_params *p) { p->speculative.n_types = SPECD_SPEC_MAX_TYPES + 1; }
static void negative_types(specd_generation_params *p) { p->speculative.n_types = -1; }
static void auto_in_list(specd_generation_params *p) {
    p->speculative.types[0] = SPECD_SPEC_AUTO;
    p->speculative.n_types = 1;
}
static void twice_in_list(specd_generation_params *p) {
    p->speculative.types[0] = p->speculative.types[1] = SPECD_SPEC_SUFFIX;
    p->speculative.n_types = 2;
}
static void draft_max_negative(specd_generation_params *p) { p->speculative.draft_max = -1; }
static void draft_max_huge(specd_generation_params *p) { p->speculative.draft_max = 100000; }
static void draft_min_over_max(specd_generation_params *p) {
    p->speculative.draft_min = 5;
    p->speculative.draft_max = 4;
}
static void p_min_nan(specd_generation_params *p) { p->speculative.draft_p_min = NAN; }
static void p_min_over_one(specd_generation_params *p) { p->speculative.draft_p_min = 1.5f; }
static void ngram_n_zero(specd_generation_params *p) { p->speculative.ngram_n = 0; }
static void ngram_hits_zero(specd_generation_params *p) { p->speculative.ngram_min_hits = 0; }
static void suffix_nine(specd_generation_params *p) { p->speculative.suffix_branches = 9; }
static void nan_top_n_sigma(specd_generation_params *p) { p->sampling.top_n_sigma = NAN; }
static void negative_min_keep(specd_generation_params *p) { p->sampling.min_keep = -1; }
static void negative_dynatemp(specd_generation_params *p) { p->sampling.dynatemp_range = -0.5f; }
static void xtc_over_one(specd_generation_params *p) { p->sampling.xtc_probability = 1.5f; }
static void dry_base_below_one(specd_generation_params *p) { p->sampling.dry_base = 0.5f; }
static void dry_last_n_below(specd_generation_params *p) { p->sampling.dry_penalty_last_n = -2; }
static void dry_breakers_null(specd_generation_params *p) { p->sampling.n_dry_sequence_breakers = 1; }
static void dry_breaker_empty(specd_generation_params *p) {
    static const char *const empty[] = {"\n", ""};
    p->sampling.dry_sequence_breakers = empty;
    p->sampling.n_dry_sequence_breakers = 2;
}
static void n_keep_below(specd_generation_params *p) { p->n_keep = -2; }
static void n_probs_negative(specd_generation_params *p) { p->n_probs = -1; }

static const bad_case bad_cases[] = {
    {"sampling.temperature", "must be a finite number (got nan)", nan_temperature},
    {"sampling.temperature", "must be a finite number (got inf)", inf_temperature},
    {"sampling.top_p", "must be a finite number >= 0 (got -0.1", negative_top_p},
    {"sampling.min_p", "(got nan)", nan_min_p},
    {"sampling.typical_p", ">= 0 (got -0.5)", negative_typical},
    {"sampling.repeat_penalty", "must be a finite number > 0, 1 for off (got 0)", zero_repeat_penalty},
    {"sampling.repeat_penalty", "(got nan)", nan_repeat_penalty},
    {"sampling.repeat_last_n", "must be from -1 to", repeat_last_n_below},
    {"sampling.presence_penalty", "(got -inf)", inf_presence},
    {"sampling.frequency_penalty", "(got nan)", nan_frequency},
    {"sampling.mirostat", "must be 0 (off), 1 or 2 (got 3)", mirostat_three},
    {"sampling.mirostat_tau", "must be a finite number >= 0 (got -1)", mirostat_bad_tau},
    {"sampling.mirostat_eta", "(got nan)", mirostat_nan_eta},
    {"sampling.top_n_sigma", "(got nan)", nan_top_n_sigma},
    {"sampling.min_keep", "must be from 0 to", negative_min_keep},
    {"sampling.dynatemp_range", ">= 0 (got -0.5)", negative_dynatemp},
    {"sampling.xtc_probability", "from 0 to 1 (got 1.5)", xtc_over_one},
    {"sampling.dry_base", ">= 1 (got 0.5)", dry_base_below_one},
    {"sampling.dry_penalty_last_n", "must be from -1 to", dry_last_n_below},
    {"sampling.dry_sequence_breakers", "list NULL", dry_breakers_null},
    {"sampling.dry_sequence_breakers", "entry 1 is empty", dry_breaker_empty},
    {"sampling.logit_bias", "list NULL", bias_count_without_list},
    {"sampling.logit_bias", "entry 1: the bias must be a finite number or -infinity (got nan)", bias_nan},
    {"speculative.type", "is 42, not a speculative type", unknown_type},
    {"speculative.n_types", "must be from 0 to 8 (got 9)", too_many_types},
    {"speculative.n_types", "(got -1)", negative_types},
    {"speculative.types", "entry 0 is -1, not a drafter", auto_in_list},
    {"speculative.types", "'suffix' is listed twice", twice_in_list},
    {"speculative.draft_max", "must be from 0 to 256 (got -1)", draft_max_negative},
    {"speculative.draft_max", "(got 100000)", draft_max_huge},
    {"speculative.draft_min", "must not exceed the draft maximum (got 5 > 4)", draft_min_over_max},
    {"speculative.draft_p_min", "from 0 to 1 (got nan)", p_min_nan},
    {"speculative.draft_p_min", "(got 1.5)", p_min_over_one},
    {"speculative.ngram_n", "must be from 1 to 64 (got 0)", ngram_n_zero},
    {"speculative.ngram_min_hits", "(got 0)", ngram_hits_zero},
    {"speculative.suffix_branches", "must be from 1 to 8 (got 9)", suffix_nine},
    {"n_keep", "must be from -1 to", n_keep_below},
    {"n_probs", "must be from 0 to", n_probs_negative},
};

static void test_each_bad_value_is_refused_naming_its_field(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
        specd_generation_params p = specd_generation_default_params();
        bad_cases[i].mutate(&p);
        const char *field = NULL;
        char *err = NULL;
        specd_status st = specd_generation_params_validate(&p, &field, &err);
        if (st != SPECD_ERR_INVALID_ARGUMENT || !field || strcmp(field, bad_cases[i].field) != 0 || !err ||
            strncmp(err, bad_cases[i].field, strlen(bad_cases[i].field)) != 0 ||
            !strstr(err, bad_cases[i].message))
            fail_msg("case %zu (%s): status %d, field '%s', message '%s'; wanted '%s ... %s'", i,
                     bad_cases[i].field, st, field ? field : "(none)", err ? err : "(none)", bad_cases[i].field,
                     bad_cases[i].message);
        specd_free(err);
    }
}

static void test_defaults_and_meaningful_boundaries_pass(void **state) {
    (void)state;
    specd_generation_params p = specd_generation_default_params();
    const char *field = "unset";
    char *err = (char *)1;
    assert_int_equal(specd_generation_params_validate(&p, &field, &err), SPECD_OK);
    assert_null(field);
    assert_null(err);
    p.sampling.temperature = -1.0f; /* greedy */
    p.sampling.top_k = -5;          /* off */
    p.sampling.top_p = 1.5f;        /* off */
    p.sampling.typical_p = 0.0f;
    p.sampling.repeat_last_n = -1;  /* whole context */
    p.sampling.presence_penalty = -2.0f;
    p.sampling.mirostat_tau = NAN;  /* ignored while mirostat is off */
    static const specd_logit_bias forbid[] = {{7, -INFINITY}};
    p.sampling.logit_bias = forbid;
    p.sampling.n_logit_bias = 1;
    p.speculative.types[0] = SPECD_SPEC_NGRAM_SIMPLE;
    p.speculative.types[1] = SPECD_SPEC_NONE; /* skipped in a list */
    p.speculative.types[2] = SPECD_SPEC_NONE;
    p.speculative.types[3] = SPECD_SPEC_DRAFT;
    p.speculative.n_types = 4;
    p.speculative.draft_min = p.speculative.draft_max = 0;
    p.speculative.draft_p_min = 1.0f;
    p.speculative.suffix_branches = 8;
    p.n_keep = -1;
    p.n_predict = -7; /* any negative: until the end */
    assert_int_equal(specd_generation_params_validate(&p, NULL, NULL), SPECD_OK);
}

/* A struct from another specd.h (another size) is refused before any field is read. */
static void test_struct_size_from_another_header_is_refused(void **state) {
    (void)state;
    specd_generation_params p = specd_generation_default_params();
    assert_int_equal(p.struct_size, sizeof p);
    p.struct_size -= 8;
    const char *field = NULL;
    char *err = NULL;
    assert_int_equal(specd_generation_params_validate(&p, &field, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_string_equal(field, "struct_size");
    assert_non_null(strstr(err, "specd_generation_default_params()"));
    specd_free(err);
    specd_engine_params ep = specd_engine_default_params();
    assert_int_equal(ep.struct_size, sizeof ep);
    ep.target_path = "any.gguf";
    ep.struct_size = 4;
    specd_engine *e = (specd_engine *)&ep;
    assert_int_equal(specd_engine_new(&ep, &e, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_null(e);
    assert_non_null(strstr(err, "specd_engine_params.struct_size is 4"));
    specd_free(err);
}

static void test_null_params_is_an_error(void **state) {
    (void)state;
    char *err = NULL;
    assert_int_equal(specd_generation_params_validate(NULL, NULL, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "specd_generation_default_params"));
    specd_free(err);
}

/* specd_generate runs the validator before anything else: no engine is needed to be refused, and
 * the message is the validator's. */
static void test_generate_refuses_what_the_validator_refuses(void **state) {
    (void)state;
    specd_generation_params p = specd_generation_default_params();
    p.sampling.repeat_penalty = 0.0f; /* reached a division in the sampler before */
    specd_token t = 1;
    specd_result r;
    char *err = NULL;
    assert_int_equal(specd_generate((specd_engine *)&t, &t, 1, &p, &r, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(err);
    assert_non_null(strstr(err, "sampling.repeat_penalty must be a finite number > 0"));
    assert_null(r.tokens);
    specd_free(err);
}

/* The pattern `head` + `middle` x n + `tail` (heap). */
static char *repeated(const char *head, const char *middle, size_t n, const char *tail) {
    size_t h = strlen(head), m = strlen(middle), t = strlen(tail);
    char *out = malloc(h + m * n + t + 1);
    assert_non_null(out);
    memcpy(out, head, h);
    for (size_t i = 0; i < n; i++) memcpy(out + h + i * m, middle, m);
    memcpy(out + h + m * n, tail, t + 1);
    return out;
}

/* One lazy-grammar trigger pattern: the validator's answer, its field and message checked. */
static void expect_trigger(const char *pattern, const char *needle) {
    specd_generation_params p = specd_generation_default_params();
    const char *patterns[] = {"<tool_call>", pattern};
    p.grammar = "root ::= \"a\"";
    p.grammar_lazy = true;
    p.grammar_trigger_patterns = patterns;
    p.n_grammar_trigger_patterns = 2;
    const char *field = NULL;
    char *err = NULL;
    specd_status st = specd_generation_params_validate(&p, &field, &err);
    if (!needle) {
        if (st != SPECD_OK) fail_msg("pattern '%.60s' refused: %s", pattern, err);
        return;
    }
    if (st != SPECD_ERR_INVALID_ARGUMENT || !field || strcmp(field, "grammar_trigger_patterns") != 0 || !err ||
        !strstr(err, needle))
        fail_msg("pattern '%.60s': status %d, field %s, error '%s' (wanted '%s')", pattern, (int)st,
                 field ? field : "(none)", err ? err : "(none)", needle);
    assert_non_null(strstr(err, "pattern 1 ("));
    specd_free(err);
}

/* std::regex's compiler recursed on these and overflowed the session thread's stack (a 100000-byte
 * word or pattern, 20000 nested groups); a group repeated {1000}{1000} is a million states. Each is
 * refused naming the field before it reaches std::regex, and so is a pattern std::regex refuses;
 * real triggers pass. */
static void test_trigger_patterns_are_bounded(void **state) {
    (void)state;
    char *long_word = repeated("", "a", 100000, "");
    char *deep = repeated("", "(", 20000, "a");
    char *deep_closed = repeated(deep, ")", 20000, "");
    char *at_limit = repeated("", "b", 4096, "");
    char *open_101 = repeated("", "(", 101, "x");
    char *nest_101 = repeated(open_101, ")", 101, "");
    expect_trigger(long_word, "is 100000 bytes as a regular expression, more than the 4096 allowed");
    expect_trigger(deep_closed, "more than the 4096 allowed");
    expect_trigger(nest_101, "nests its ( ) groups 101 deep, more than the 100 allowed");
    expect_trigger("(a{1000}){1000}", "grows to 1001000 atoms");
    expect_trigger("x{20000}", "grows to 20000 atoms");
    expect_trigger("(a", "is not a valid regular expression");
    expect_trigger("a{2,1}", "is not a valid regular expression");
    expect_trigger(at_limit, NULL);
    expect_trigger("[\\s\\S]*?(<function=[a-z_]+>|\\{\"name\": \"(?:get_weather|search)\")[\\s\\S]*", NULL);
    expect_trigger("^\\s*(\\[TOOL_CALLS\\])[\\s\\S]*$", NULL);
    expect_trigger("[(((]x\\(\\(\\(a{10}", NULL); /* groups in brackets and escaped do not count */
    free(long_word);
    free(deep);
    free(deep_closed);
    free(at_limit);
    free(open_101);
    free(nest_101);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_bad_value_is_refused_naming_its_field),
        cmocka_unit_test(test_defaults_and_meaningful_boundaries_pass),
        cmocka_unit_test(test_null_params_is_an_error),
        cmocka_unit_test(test_struct_size_from_another_header_is_refused),
        cmocka_unit_test(test_generate_refuses_what_the_validator_refuses),
        cmocka_unit_test(test_trigger_patterns_are_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
