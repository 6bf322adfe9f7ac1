/* test_grammar.c - GBNF grammars end to end on the tiny generated models: greedy speculation under
 * a grammar equals target-only decoding under it (draft model, model-free drafters, trees), the
 * output always matches the grammar, sampling under a grammar is exact (llama.cpp's grammar
 * distribution, computed independently through llama's grammar sampler), a complete grammar ends
 * the generation, and bad grammars are refused with clear messages.
 *
 *   test_grammar MODELS_DIR */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "chi_square.h"
#include "engine_helpers.h"
#include "exact_pairs.h"
#include "llama.h"
#include "sample/sampler.h"
#include "specd.h"
#include "util/nesting.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char target_path[1024], draft_path[1024];
static specd_engine *engine; /* target + draft */

/* Words of the letters a to e, each after one space: far from what the tiny target writes
 * unconstrained (see test_grammar_constrains_the_output). */
static const char *const WORDS_A_TO_E = "root ::= (\" \" [a-e]+)*";

static const char *prompts[] = {
    "the little girl saw a big red ball",
    "one day the dog ran to the park with his mom",
    /* Text the grammar allows, repeated: prompt lookup and suffix drafts are often valid. */
    "she was happy a bad cab a bad cab a bad cab a bad cab a bad",
};

SPECD_TEST_ENGINE_FIXTURE_CTX(engine, target_path, draft_path, 512)

static specd_generation_params greedy(const specd_spec_type *types, int32_t n_types, const char *grammar) {
    /* draft 6 every step (not adaptive), so rejections and pruning happen */
    specd_generation_params g = greedy_params(n_types == 1 ? types[0] : SPECD_SPEC_NONE, 6, false);
    if (n_types > 1) {
        g.speculative.n_types = n_types;
        for (int32_t i = 0; i < n_types; i++) g.speculative.types[i] = types[i];
    }
    g.grammar = grammar;
    return g;
}

/* The output's text, token by token as the grammar sees it (heap; free()). */
static char *output_text(const specd_result *r) {
    size_t cap = 16 * (size_t)r->n_tokens + 1, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    for (int32_t i = 0; i < r->n_tokens; i++) {
        int32_t n = specd_token_to_piece(engine, r->tokens[i], text + len, (int32_t)(cap - len - 1));
        assert_true(n >= 0);
        len += (size_t)n;
    }
    text[len] = '\0';
    return text;
}

/* Does `text` match a prefix of (" " [a-e]+)* ? Written out by hand, independent of llama.cpp. */
static bool is_words_a_to_e_prefix(const char *text) {
    for (size_t i = 0; text[i]; i++) {
        char c = text[i];
        bool letter = c >= 'a' && c <= 'e';
        if (c == ' ' ? i > 0 && text[i - 1] == ' ' : !letter || i == 0) return false;
    }
    return true;
}

static void assert_words_a_to_e(const specd_result *r, const char *what) {
    char *text = output_text(r);
    if (!is_words_a_to_e_prefix(text)) fail_msg("%s: output '%s' does not match the grammar", what, text);
    free(text);
}

/* ---- lossless greedy ------------------------------------------------------------------------ */

static void test_grammar_constrains_the_output(void **state) {
    (void)state;
    for (size_t p = 0; p < 2; p++) {
        specd_generation_params free_run = greedy(NULL, 0, NULL);
        specd_result r = generate_text(engine, prompts[p], &free_run);
        char *text = output_text(&r);
        /* Without the grammar the target writes other text: the grammar does something below. */
        assert_false(is_words_a_to_e_prefix(text));
        free(text);
        specd_result_clear(&r);
        specd_generation_params constrained = greedy(NULL, 0, WORDS_A_TO_E);
        r = generate_text(engine, prompts[p], &constrained);
        assert_int_equal(r.n_tokens, 48);
        assert_words_a_to_e(&r, "target alone");
        specd_result_clear(&r);
    }
}

typedef struct outcome {
    int64_t drafted, accepted, steps;
} outcome;

/* Every prompt: speculative output under the grammar equals target-only output under it. */
static outcome check_lossless(const specd_spec_type *types, int32_t n_types, const char *what) {
    outcome o = {0, 0, 0};
    for (size_t p = 0; p < sizeof prompts / sizeof *prompts; p++) {
        specd_generation_params base = greedy(NULL, 0, WORDS_A_TO_E);
        specd_result want = generate_text(engine, prompts[p], &base);
        specd_generation_params g = greedy(types, n_types, WORDS_A_TO_E);
        specd_result got = generate_text(engine, prompts[p], &g);
        char label[128];
        snprintf(label, sizeof label, "%s, prompt %zu", what, p);
        assert_same_tokens(&got, &want, label);
        assert_words_a_to_e(&got, label);
        o.drafted += got.stats.n_drafted;
        o.accepted += got.stats.n_accepted;
        o.steps += got.stats.n_steps;
        specd_result_clear(&got);
        specd_result_clear(&want);
    }
    print_message("%s under the grammar: %lld drafted, %lld accepted\n", what, (long long)o.drafted,
                  (long long)o.accepted);
    return o;
}

static void test_greedy_draft_model_under_grammar_is_lossless(void **state) {
    (void)state;
    specd_spec_type draft[] = {SPECD_SPEC_DRAFT};
    outcome o = check_lossless(draft, 1, "draft");
    assert_true(o.accepted > 0 && o.accepted < o.drafted);
    /* The draft model drafts under the grammar: its 6-token drafts survive pruning whole, but for
     * the last steps, whose budget is what remains of n_predict. Drafting without the grammar,
     * most drafts would lose their first token. */
    assert_true(o.drafted >= 4 * o.steps);
}

static void test_greedy_model_free_drafters_under_grammar_are_lossless(void **state) {
    (void)state;
    specd_spec_type ngram[] = {SPECD_SPEC_NGRAM_SIMPLE};
    outcome o = check_lossless(ngram, 1, "ngram-simple");
    assert_true(o.drafted > 0);
    specd_spec_type suffix[] = {SPECD_SPEC_SUFFIX}; /* trees: pruning keeps branches apart */
    o = check_lossless(suffix, 1, "suffix");
    assert_true(o.drafted > 0);
    specd_spec_type list[] = {SPECD_SPEC_NGRAM_SIMPLE, SPECD_SPEC_SUFFIX, SPECD_SPEC_DRAFT};
    o = check_lossless(list, 3, "ngram-simple,suffix,draft");
    assert_true(o.accepted > 0);
}

/* ---- exact sampling ------------------------------------------------------------------------- */

/* Lower-case words after a space. With top_k 8 the target's top tokens at the first two positions
 * include refused ones, so the grammar's distribution c [allowed] + m g differs from g alone (the
 * allowed tokens' transforms) by a total variation of about 0.04, which 10000 samples show. */
static const char *const WORDS = "root ::= (\" \" [a-z]+)+";

/* Without a truncating transform (top_k 0) the grammar's distribution is c renormalized over
 * allowed tokens, which masking before the transforms gives as well; top_k tells them apart. */
static void check_sampling_under_grammar_is_exact(specd_spec_type type, const specd_token *prompt, int32_t n,
                                                  int32_t top_k, int n_samples) {
    const char *grammar = WORDS;
    specd_sampling_params sp = plain_sampling(1.0f);
    sp.top_k = top_k;
    exact_pairs ex = exact_first_two_grammar(target_path, prompt, n, &sp, grammar);
    assert_non_null(ex.prob);
    specd_generation_params g = greedy(&type, 1, grammar);
    g.sampling = sp;
    g.sampling.reproducible = false; /* rejection sampling */
    /* End-of-generation stays possible once the grammar is complete (after one word), as in the
     * reference; a second token that ends the generation counts as the end token. */
    g.ignore_eos = false;
    g.speculative.draft_max = g.speculative.draft_min = 3;
    char label[96];
    snprintf(label, sizeof label, "%s sampling under a grammar (top_k %d)", specd_spec_type_name(type), top_k);
    assert_first_two_follow(engine, prompt, n, g, &ex, n_samples, label);
    free(ex.prob);
}

static void test_sampling_with_draft_model_under_grammar_is_exact(void **state) {
    (void)state;
    specd_token *prompt = NULL;
    int32_t n = 0;
    assert_int_equal(specd_tokenize(engine, "she was happy", true, &prompt, &n, NULL), SPECD_OK);
    check_sampling_under_grammar_is_exact(SPECD_SPEC_DRAFT, prompt, n, 0, 10000);
    check_sampling_under_grammar_is_exact(SPECD_SPEC_DRAFT, prompt, n, 8, 10000);
    specd_free(prompt);
}

static void test_sampling_with_prompt_lookup_under_grammar_is_exact(void **state) {
    (void)state;
    specd_token prompt[128];
    specd_generation_params lead = greedy(NULL, 0, WORDS); /* G: 6 greedy tokens */
    lead.n_predict = 6;
    int32_t n = repeating_prompt(engine, prompts[0], &lead, prompt, 128);
    check_sampling_under_grammar_is_exact(SPECD_SPEC_NGRAM_SIMPLE, prompt, n, 8, 10000);
}

/* ---- grammars that end ------------------------------------------------------------------- */

static void test_complete_grammar_ends_generation(void **state) {
    (void)state;
    const char *grammar = "root ::= \" a\" [b-e] \" ba\"";
    specd_spec_type types[] = {SPECD_SPEC_NONE, SPECD_SPEC_DRAFT, SPECD_SPEC_NGRAM_SIMPLE};
    for (int ignore_eos = 0; ignore_eos <= 1; ignore_eos++) {
        for (int t = 0; t < 3; t++) {
            specd_generation_params g = greedy(&types[t], 1, grammar);
            g.ignore_eos = ignore_eos;
            specd_result r = generate_text(engine, prompts[2], &g);
            char *text = output_text(&r);
            /* " a", one letter of b-e, " ba": then the grammar allows only the end. */
            if (strlen(text) != 6 || strncmp(text, " a", 2) != 0 || text[2] < 'b' || text[2] > 'e' ||
                strcmp(text + 3, " ba") != 0)
                fail_msg("%s, ignore_eos %d: output '%s'", specd_spec_type_name(types[t]), ignore_eos, text);
            assert_int_equal(r.stop_reason, SPECD_STOP_EOG);
            free(text);
            specd_result_clear(&r);
        }
    }
}

/* ---- errors --------------------------------------------------------------------------------- */

static void expect_grammar_error(const char *grammar, const char *needle) {
    char *err = NULL;
    assert_int_equal(specd_grammar_check(engine, grammar, &err), SPECD_ERR_INVALID_ARGUMENT);
    if (!err || !strstr(err, needle)) fail_msg("grammar '%s': error '%s' lacks '%s'", grammar, err, needle);
    specd_free(err);
    specd_token prompt[] = {1, 300};
    specd_generation_params g = greedy(NULL, 0, grammar);
    specd_result r;
    assert_int_equal(specd_generate(engine, prompt, 2, &g, &r, &err), SPECD_ERR_INVALID_ARGUMENT);
    if (!err || !strstr(err, needle)) fail_msg("generate with '%s': error '%s' lacks '%s'", grammar, err, needle);
    assert_int_equal(r.n_tokens, 0);
    specd_free(err);
}

static void test_bad_grammars_are_refused_with_clear_messages(void **state) {
    (void)state;
    expect_grammar_error("word ::= [a-z]+", "no 'root' rule");
    expect_grammar_error("root ::= (\" \" [a-e]+", "grammar: llama.cpp cannot parse it");
    expect_grammar_error("root ::= undefined-rule", "grammar: llama.cpp cannot parse it");
    expect_grammar_error("root ::= root \"a\"", "grammar: llama.cpp cannot parse it");
    char *err = NULL;
    assert_int_equal(specd_grammar_check(engine, WORDS_A_TO_E, &err), SPECD_OK);
    assert_null(err);
    assert_int_equal(specd_grammar_check(engine, "", &err), SPECD_OK); /* empty: no grammar */
}

/* A grammar of `n` alternatives ("w0000000" | ...; heap). */
static char *alternatives(int n) {
    char *g = malloc((size_t)n * 16 + 16);
    size_t at = (size_t)sprintf(g, "root ::= ");
    for (int i = 0; i < n; i++) at += (size_t)sprintf(g + at, "%s\"w%07d\"", i ? " | " : "", i);
    return g;
}

/* The least of five prices of `grammar` without a budget (*whole) and with one of 0.001 ms (*cut),
 * taken in turn: pricing is CPU time, which what runs beside this process only ever adds to, and
 * the two in turn see the same machine. */
static void least_prices(const char *grammar, double *whole, double *cut) {
    *whole = *cut = -1.0;
    for (int i = 0; i < 5; i++) {
        double ms[2] = {-1.0, -1.0}, budget[2] = {0.0, 0.001}, *least[2] = {whole, cut};
        for (int k = 0; k < 2; k++) {
            char *err = NULL;
            assert_int_equal(specd_grammar_price(engine, grammar, budget[k], &ms[k], &err), SPECD_OK);
            if (*least[k] < 0.0 || ms[k] < *least[k]) *least[k] = ms[k];
        }
    }
}

/* The price of a grammar (its build and one step over the vocabulary, CPU time): a small one is
 * cheap, one of 20000 alternatives dearer by far; the budget cuts the step's pricing short (the
 * build, some 290 ms of the big one's 320 here, is paid either way: the least of five runs each,
 * so that a busy machine does not hide the 30 ms); a bad grammar is refused as specd_grammar_check
 * refuses it. */
static void test_a_grammar_is_priced(void **state) {
    (void)state;
    double cheap = -1.0, none = -1.0;
    char *err = NULL, *big = alternatives(20000);
    assert_int_equal(specd_grammar_price(engine, WORDS_A_TO_E, 0.0, &cheap, &err), SPECD_OK);
    double dear = -1.0, cut = -1.0;
    least_prices(big, &dear, &cut);
    assert_int_equal(specd_grammar_price(engine, "", 0.0, &none, &err), SPECD_OK);
    print_message("price: small %.2f ms, 20000 alternatives %.1f ms (%.1f ms with a budget of 0.001 ms)\n", cheap, dear,
                  cut);
    assert_true(cheap >= 0.0 && cheap < dear / 10.0);
    assert_true(cut < dear);
    assert_true(none == 0.0);
    assert_int_equal(specd_grammar_price(engine, "word ::= [a-z]+", 0.0, &cheap, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "no 'root' rule"));
    specd_free(err);
    free(big);
}

/* "root ::= " + `open` x n + `inner` + `close` x n (heap). */
static char *nested(const char *open, size_t n, const char *inner, const char *close) {
    size_t o = strlen(open), i = strlen(inner), c = strlen(close), len = 9 + (o + c) * n + i;
    char *out = malloc(len + 1), *p = out;
    assert_non_null(out);
    p += sprintf(p, "root ::= ");
    for (size_t k = 0; k < n; k++) p += sprintf(p, "%s", open);
    p += sprintf(p, "%s", inner);
    for (size_t k = 0; k < n; k++) p += sprintf(p, "%s", close);
    return out;
}

/* llama.cpp's GBNF parser recursed once per nested group and crashed the server at 20000 levels:
 * the grammar is now refused before llama.cpp sees it, with a message saying what to do, and a
 * grammar within the bound still parses. */
static void test_deeply_nested_grammar_is_refused_before_llama_cpp(void **state) {
    (void)state;
    char *deep = nested("(", 20000, "\"a\"", ")");
    char *at_limit = nested("(", 1000, "\"a\"", ")");
    char *over = nested("(", 1001, "\"a\"", ")");
    expect_grammar_error(deep, "grammar: its ( ) groups nest 20000 deep, more than the 1000 allowed");
    expect_grammar_error(over, "nest 1001 deep");
    char *err = NULL;
    assert_int_equal(specd_grammar_check(engine, at_limit, &err), SPECD_OK);
    assert_null(err);
    free(deep);
    free(at_limit);
    free(over);
}

/* A chain of n rules, each the next one's only alternative (heap): llama.cpp expanded it recursively
 * and crashed the server at 80000 rules (55000 passed), inside the default 1 MiB body. */
static char *rule_chain(int n) {
    char *g = malloc((size_t)n * 24 + 64), *p = g;
    assert_non_null(g);
    p += sprintf(p, "root ::= r0\n");
    for (int i = 0; i < n; i++) p += sprintf(p, "r%d ::= r%d\n", i, i + 1);
    sprintf(p, "r%d ::= \"a\"\n", n);
    return g;
}

static void test_grammar_of_too_many_rules_is_refused_before_llama_cpp(void **state) {
    (void)state;
    char *long_chain = rule_chain(80000), *over = rule_chain(20000), *within = rule_chain(5000);
    expect_grammar_error(long_chain, "grammar: it makes 80002 rules");
    expect_grammar_error(over, "more than the 20000 allowed");
    char *err = NULL;
    assert_int_equal(specd_grammar_check(engine, within, &err), SPECD_OK);
    assert_null(err);
    /* groups are rules too: 30 rules nested 999 deep make a chain of 30000 (and 32 rules of their own) */
    char *nested_rules = malloc(30 * 2100 + 64), *p = nested_rules;
    assert_non_null(nested_rules);
    p += sprintf(p, "root ::= r0\n");
    for (int i = 0; i < 30; i++) {
        p += sprintf(p, "r%d ::= ", i);
        for (int k = 0; k < 999; k++) *p++ = '(';
        p += sprintf(p, "r%d", i + 1);
        for (int k = 0; k < 999; k++) *p++ = ')';
        *p++ = '\n';
    }
    sprintf(p, "r30 ::= \"a\"\n");
    expect_grammar_error(nested_rules, "it makes 30002 rules");
    free(long_chain);
    free(over);
    free(within);
    free(nested_rules);
}

/* The depth is counted where llama.cpp's parser meets groups: not inside strings, classes, <tokens>
 * or comments, and a string's characters read as llama.cpp reads them (a UTF-8 lead byte takes the
 * next bytes whatever they are, so "\xF0"" ... does not close the string where it seems to). */
static void test_grammar_nesting_is_counted_as_llama_cpp_parses(void **state) {
    (void)state;
    assert_int_equal(specd_gbnf_measure("root ::= ((\"a\") | [b])*").depth, 2);
    assert_int_equal(specd_gbnf_measure("root ::= \"((((\\\"((\" [(((\\]((] <((((> # ((((\n x ::= (\"(\")").depth, 1);
    assert_int_equal(specd_gbnf_measure("root ::= ))) (\"a\")").depth, 1); /* too many closing: no negative depth */
    /* F0 takes the quote and the two bytes after it: the string goes on to the last quote. */
    assert_int_equal(specd_gbnf_measure("root ::= \"\xF0\"((((\" ((\"a\"))").depth, 2);
    /* C3 takes one byte only: the string ends at the second quote, and the groups after it count. */
    assert_int_equal(specd_gbnf_measure("root ::= \"\xC3" "a\" (((\"a\")))").depth, 3);
    /* a lead byte at the very end takes nothing past it */
    assert_int_equal(specd_gbnf_measure("root ::= (\"\xF0").depth, 1);
    assert_int_equal(specd_gbnf_measure("").depth, 0);
    /* rules: each ::=, group, * + ? and {m,n}; none inside strings, classes, comments */
    specd_gbnf_shape shape = specd_gbnf_measure("root ::= (\"a\"* [b]+)? x{2,5} y{3} z{4,} # w ::= (\n"
                                                "x ::= \"::= ( *\" [(*?]\ny ::= \"y\"\nz ::= \"z\"");
    assert_int_equal(shape.depth, 1);
    assert_int_equal(shape.rules, 4 + 1 + 3 + 3);
    char *err = NULL;
    char *in_string = nested("\"", 1, "((((((((((((((((((((((((((((((((((((((((", "\"");
    assert_int_equal(specd_grammar_check(engine, in_string, &err), SPECD_OK);
    free(in_string);
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target_path, draft_path, sizeof target_path)) return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grammar_constrains_the_output),
        cmocka_unit_test(test_a_grammar_is_priced),
        cmocka_unit_test(test_greedy_draft_model_under_grammar_is_lossless),
        cmocka_unit_test(test_greedy_model_free_drafters_under_grammar_are_lossless),
        cmocka_unit_test(test_sampling_with_draft_model_under_grammar_is_exact),
        cmocka_unit_test(test_sampling_with_prompt_lookup_under_grammar_is_exact),
        cmocka_unit_test(test_complete_grammar_ends_generation),
        cmocka_unit_test(test_bad_grammars_are_refused_with_clear_messages),
        cmocka_unit_test(test_deeply_nested_grammar_is_refused_before_llama_cpp),
        cmocka_unit_test(test_grammar_of_too_many_rules_is_refused_before_llama_cpp),
        cmocka_unit_test(test_grammar_nesting_is_counted_as_llama_cpp_parses),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
