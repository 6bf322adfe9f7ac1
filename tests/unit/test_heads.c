/* test_heads.c - the drafting heads end to end on the tiny generated models (make_tiny_model's
 * tiny_heads.c): the target's MTP layer (mtp-target.gguf, and qwen35-target.gguf: a hybrid target whose
 * recurrent state is checkpointed and rolled back beside the MTP context), and EAGLE-3, DFlash and
 * DSpark drafts for head-target.gguf. Each head, alone and in a list, in slots, across context shifts and with a
 * cached prompt, gives the target's own greedy text while its drafts are both accepted and rejected;
 * sampling at temperature 1 follows the target's distribution (chi-square, with a negative control);
 * heads that do not fit their target, and requests for a head the engine lacks, are refused with
 * messages that name the model and what is missing. (That the heads are driven as llama.cpp drives
 * them is tests/cli/test_heads_llama.py.)
 *
 *   test_heads MODELS_DIR */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "chi_square.h"
#include "engine_helpers.h"
#include "exact_pairs.h"
#include "specd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_CTX 512

static const char *models_dir;

typedef struct head_case {
    const char *name;
    specd_spec_type type;
    const char *target, *head; /* files in MODELS_DIR; head NULL: the target's own (MTP) */
    bool hybrid;               /* the target keeps a recurrent state: one slot, no context shift */
    specd_engine *engine;
} head_case;

static head_case cases[] = {
    {"mtp", SPECD_SPEC_MTP, "mtp-target.gguf", NULL, false, NULL},
    {"eagle3", SPECD_SPEC_EAGLE3, "head-target.gguf", "eagle3.gguf", false, NULL},
    {"dflash", SPECD_SPEC_DFLASH, "head-target.gguf", "dflash.gguf", false, NULL},
    {"dspark", SPECD_SPEC_DSPARK, "head-target.gguf", "dspark.gguf", false, NULL},
    /* a hybrid target (Qwen3.5 style): the recurrent state's checkpoints and the MTP context together */
    {"mtp on a hybrid", SPECD_SPEC_MTP, "qwen35-target.gguf", NULL, true, NULL},
};
#define N_CASES ((int)(sizeof cases / sizeof *cases))

static const char *prompts[] = {
    "the little girl saw a big red ball",
    "once upon a time there was a dog",
    "she was happy",
};
#define N_PROMPTS ((int)(sizeof prompts / sizeof *prompts))

static void model_path(char *out, size_t size, const char *file) { snprintf(out, size, "%s/%s", models_dir, file); }

/* Engine params for a case: its target, its head as the draft (or the target's MTP layers). */
static specd_engine_params case_params(const head_case *c, char *target, char *head, size_t size, int32_t n_ctx) {
    model_path(target, size, c->target);
    if (c->head) model_path(head, size, c->head);
    specd_engine_params p = test_engine_params(target, c->head ? head : NULL, n_ctx);
    p.mtp = c->head == NULL;
    return p;
}

static specd_engine *open_case(const head_case *c, int32_t n_ctx, int32_t n_parallel) {
    char target[1024], head[1024];
    specd_engine_params p = case_params(c, target, head, sizeof target, n_ctx * n_parallel);
    p.n_parallel = n_parallel;
    return open_engine_with(&p);
}

static int setup(void **state) {
    (void)state;
    for (int i = 0; i < N_CASES; i++) cases[i].engine = open_case(&cases[i], N_CTX, 1);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (int i = 0; i < N_CASES; i++) specd_engine_free(cases[i].engine);
    return 0;
}

/* Trees from the head: a sibling beside the chain's first tokens (draft_p_split 0: always). */
static void head_tree(specd_generation_params *g) {
    g->speculative.tree = SPECD_DRAFT_TREE_ON;
    g->speculative.draft_branches = 3;
    g->speculative.draft_p_split = 0.0f;
}

/* Drafts were made, and verification both accepted and rejected some. */
static void assert_accepted_and_rejected(const specd_result *r, const char *what) {
    if (!(r->stats.n_drafted > r->stats.n_accepted && r->stats.n_accepted > 0))
        fail_msg("%s: drafted %d, accepted %d", what, r->stats.n_drafted, r->stats.n_accepted);
}

/* ---- greedy: the target's own text ----------------------------------------------------------- */

static void test_each_head_alone_gives_the_targets_text(void **state) {
    (void)state;
    for (int c = 0; c < N_CASES; c++) {
        for (int p = 0; p < N_PROMPTS; p++) {
            specd_generation_params none = greedy_params(SPECD_SPEC_NONE, 4, false);
            specd_result alone = generate_text(cases[c].engine, prompts[p], &none);
            for (int adaptive = 0; adaptive < 2; adaptive++) {
                specd_generation_params g = greedy_params(cases[c].type, 4, adaptive);
                specd_result r = generate_text(cases[c].engine, prompts[p], &g);
                char what[96];
                snprintf(what, sizeof what, "%s %s, prompt %d", cases[c].name, adaptive ? "adaptive" : "fixed 4", p);
                assert_same_tokens(&r, &alone, what);
                assert_int_equal(r.stats.n_drafters, 1);
                assert_int_equal(r.stats.drafters[0].type, cases[c].type);
                assert_int_equal(r.stats.drafters[0].n_drafted, r.stats.n_drafted);
                if (!adaptive) assert_accepted_and_rejected(&r, what);
                /* the head's draft decodes are priced like the draft model's */
                if (!adaptive) assert_true(r.stats.draft_token_ms > 0.0);
                specd_result_clear(&r);
            }
            specd_result_clear(&alone);
        }
    }
}

/* A block head drafts at most its trained block (8 here): DFlash the positions after the root (7),
 * DSpark from the root's own (8), however long a draft the request allows. */
static void test_blocks_draft_within_their_size(void **state) {
    (void)state;
    for (int c = 0; c < N_CASES; c++) {
        if (cases[c].type != SPECD_SPEC_DFLASH && cases[c].type != SPECD_SPEC_DSPARK) continue;
        int32_t most = cases[c].type == SPECD_SPEC_DSPARK ? 8 : 7;
        specd_generation_params none = greedy_params(SPECD_SPEC_NONE, 12, false),
                                g = greedy_params(cases[c].type, 12, false);
        specd_result alone = generate_text(cases[c].engine, prompts[0], &none), r = generate_text(cases[c].engine, prompts[0], &g);
        assert_same_tokens(&r, &alone, cases[c].name);
        assert_true(r.stats.draft_len_hist[most] > 0);
        for (int32_t k = most + 1; k < SPECD_STATS_MAX_DRAFT; k++) assert_int_equal(r.stats.draft_len_hist[k], 0);
        specd_result_clear(&r);
        specd_result_clear(&alone);
    }
}

static void test_auto_drafts_with_the_loaded_head(void **state) {
    (void)state;
    for (int c = 0; c < N_CASES; c++) {
        specd_generation_params g = greedy_params(SPECD_SPEC_AUTO, 4, false);
        specd_spec_type drafters[SPECD_SPEC_MAX_TYPES];
        assert_int_equal(specd_generation_drafters(cases[c].engine, &g, drafters, NULL), 1);
        assert_int_equal(drafters[0], cases[c].type);
        specd_result r = generate_text(cases[c].engine, prompts[0], &g);
        assert_true(r.stats.n_drafted > 0);
        specd_result_clear(&r);
    }
}

static void test_heads_in_a_list_give_the_targets_text(void **state) {
    (void)state;
    for (int c = 0; c < N_CASES; c++) {
        specd_generation_params g = greedy_params(SPECD_SPEC_AUTO, 4, true);
        g.speculative.types[0] = SPECD_SPEC_NGRAM_SIMPLE;
        g.speculative.types[1] = cases[c].type;
        g.speculative.types[2] = SPECD_SPEC_SUFFIX;
        g.speculative.n_types = 3;
        g.speculative.draft_min = 2; /* every step drafts: the head is chosen where the others have nothing */
        specd_generation_params none = greedy_params(SPECD_SPEC_NONE, 4, false);
        g.n_predict = none.n_predict = 96; /* long enough for the head to be tried again (MODEL_RETRY_EVERY) */
        int32_t head_steps = 0;
        for (int p = 0; p < N_PROMPTS; p++) {
            specd_result alone = generate_text(cases[c].engine, prompts[p], &none);
            specd_result r = generate_text(cases[c].engine, prompts[p], &g);
            assert_same_tokens(&r, &alone, cases[c].name);
            assert_int_equal(r.stats.n_drafters, 3);
            head_steps += r.stats.drafters[1].n_chosen;
            specd_result_clear(&r);
            specd_result_clear(&alone);
        }
        if (head_steps == 0) fail_msg("%s: the head was never chosen in the list", cases[c].name);
    }
}

/* Trees from each head give the target's text; siblings get accepted. On the hybrid target (one
 * sequence to verify with) the head drafts its chain. */
static void test_head_trees_give_the_targets_text(void **state) {
    (void)state;
    for (int c = 0; c < N_CASES; c++) {
        int32_t tree_accepted = 0;
        for (int p = 0; p < N_PROMPTS; p++) {
            specd_generation_params none = greedy_params(SPECD_SPEC_NONE, 4, false),
                                    g = greedy_params(cases[c].type, 4, false);
            head_tree(&g);
            specd_result alone = generate_text(cases[c].engine, prompts[p], &none);
            specd_result r = generate_text(cases[c].engine, prompts[p], &g);
            char what[96];
            snprintf(what, sizeof what, "%s with trees, prompt %d", cases[c].name, p);
            assert_same_tokens(&r, &alone, what);
            if (cases[c].hybrid) assert_int_equal(r.stats.n_tree_steps, 0);
            else assert_true(r.stats.n_tree_steps > 0);
            assert_accepted_and_rejected(&r, what);
            tree_accepted += r.stats.n_tree_accepted;
            specd_result_clear(&r);
            specd_result_clear(&alone);
        }
        if (!cases[c].hybrid && tree_accepted == 0) fail_msg("%s: no tree step accepted a draft", cases[c].name);
    }
}

/* MTP is the target's own layers: a draft model can stand beside it in a list. */
static void test_mtp_beside_a_draft_model(void **state) {
    (void)state;
    char target[1024], draft[1024];
    model_path(target, sizeof target, "mtp-target.gguf");
    model_path(draft, sizeof draft, "draft.gguf");
    specd_engine_params p = test_engine_params(target, draft, N_CTX);
    p.mtp = true;
    specd_engine *e = open_engine_with(&p);
    /* the draft model stays the engine's beside the head */
    assert_true(specd_engine_has_draft(e) && specd_engine_placement(e, true).n_layers > 0);
    specd_generation_params g = greedy_params(SPECD_SPEC_AUTO, 4, false);
    g.speculative.types[0] = SPECD_SPEC_MTP;
    g.speculative.types[1] = SPECD_SPEC_DRAFT;
    g.speculative.n_types = 2;
    specd_generation_params none = greedy_params(SPECD_SPEC_NONE, 4, false);
    specd_result alone = generate_text(e, prompts[1], &none), r = generate_text(e, prompts[1], &g);
    assert_same_tokens(&r, &alone, "mtp,draft");
    assert_true(r.stats.drafters[0].n_drafted > 0 || r.stats.drafters[1].n_drafted > 0);
    specd_result_clear(&r);
    /* the draft model's trees between MTP's chains: a tree pass leaves no rows for MTP (its branches
     * share positions), so the target decodes the accepted path again for it */
    g.speculative.tree = SPECD_DRAFT_TREE_ON;
    g.speculative.draft_p_split = 0.0f;
    g.n_predict = none.n_predict = 96;
    specd_result_clear(&alone);
    alone = generate_text(e, prompts[1], &none);
    r = generate_text(e, prompts[1], &g);
    assert_same_tokens(&r, &alone, "mtp,draft with trees");
    assert_true(r.stats.n_tree_steps > 0 && r.stats.drafters[0].n_chosen > 0);
    specd_result_clear(&r);
    specd_result_clear(&alone);
    specd_engine_free(e);
}

/* ---- slots, a cached prompt, a shifted context ------------------------------------------------ */

static void run_sessions(specd_engine *e, specd_session **s, int n) {
    for (int steps = 0, busy = n; busy > 0; steps++) {
        assert_true(steps < 1000);
        specd_session *ready[4];
        int m = 0;
        busy = 0;
        for (int i = 0; i < n; i++) {
            char *err = NULL;
            if (specd_session_done(s[i])) continue;
            busy++;
            if (specd_session_draft(s[i], NULL, &err) != SPECD_OK) fail_msg("draft: %s", err);
            if (!specd_session_done(s[i])) ready[m++] = s[i];
        }
        char *errs[4] = {0};
        if (m > 0 && specd_sessions_verify(ready, m, NULL, NULL, errs) != SPECD_OK) fail_msg("pass: %s", errs[0]);
        for (int k = 0; k < m; k++)
            if (specd_session_accept(ready[k], NULL, NULL) != SPECD_OK) fail_msg("accept failed");
    }
    (void)e;
}

static void test_heads_in_slots_give_the_targets_text(void **state) {
    (void)state;
    for (int c = 0; c < N_CASES; c++) {
        specd_engine *e = open_case(&cases[c], 256, 2);
        /* a hybrid target keeps a recurrent state: it serves one slot (engine.c), in two rounds */
        int n_slots = specd_engine_n_parallel(e);
        assert_int_equal(n_slots, cases[c].hybrid ? 1 : 2);
        specd_generation_params g = greedy_params(cases[c].type, 3, false),
                                none = greedy_params(SPECD_SPEC_NONE, 3, false);
        for (int round = 0; round < 2; round++) {
            specd_session *s[2];
            specd_token *tok[2];
            int32_t n[2];
            for (int i = 0; i < n_slots; i++) {
                assert_int_equal(specd_tokenize(e, prompts[i], true, &tok[i], &n[i], NULL), SPECD_OK);
                assert_int_equal(specd_session_new_in_slot(e, i, tok[i], n[i], &g, &s[i], NULL), SPECD_OK);
            }
            run_sessions(e, s, n_slots);
            for (int i = 0; i < n_slots; i++) {
                specd_result alone = generate_text(cases[c].engine, prompts[i], &none);
                assert_same_tokens(specd_session_result(s[i]), &alone, cases[c].name);
                assert_accepted_and_rejected(specd_session_result(s[i]), cases[c].name);
                /* the second round finds the prompt in its slot, and the head's sequence with it */
                if (round) assert_int_equal(specd_session_result(s[i])->stats.n_prompt_cached, n[i] - 1);
                specd_result_clear(&alone);
                specd_session_free(s[i]);
                specd_free(tok[i]);
            }
        }
        specd_engine_free(e);
    }
}

static void test_heads_across_context_shifts(void **state) {
    (void)state;
    for (int c = 0; c < N_CASES; c++) {
        specd_engine *e = open_case(&cases[c], 64, 1);
        /* a recurrent state cannot drop its oldest tokens: the request is refused (test_recurrent) */
        assert_int_equal(specd_engine_can_shift_context(e), !cases[c].hybrid);
        if (cases[c].hybrid) {
            specd_engine_free(e);
            continue;
        }
        specd_generation_params g = greedy_params(cases[c].type, 4, false),
                                none = greedy_params(SPECD_SPEC_NONE, 4, false);
        g.n_predict = none.n_predict = 150;
        g.context_shift = none.context_shift = true;
        specd_result alone = generate_text(e, prompts[0], &none), r = generate_text(e, prompts[0], &g);
        assert_same_tokens(&r, &alone, cases[c].name);
        assert_true(r.stats.n_context_shifts >= 2);
        assert_int_equal(r.stats.n_context_shifts, alone.stats.n_context_shifts);
        assert_accepted_and_rejected(&r, cases[c].name);
        specd_result_clear(&r);
        specd_result_clear(&alone);
        specd_engine_free(e);
    }
}

/* ---- sampling: exact at temperature 1 ------------------------------------------------------------ */

#define SAMPLES 6000

/* The first two tokens SAMPLES times with fixed chains of 3 drafts from the head. */
static int64_t *first_two_counts(const head_case *c, const specd_token *prompt, int32_t n, bool reproducible,
                                 bool tree, int64_t *drafted, int64_t *accepted) {
    int32_t nv = specd_engine_n_vocab(c->engine);
    int64_t *counts = calloc((size_t)nv * (size_t)nv, sizeof *counts);
    assert_non_null(counts);
    specd_generation_params g = greedy_params(c->type, 3, false);
    g.sampling = plain_sampling(1.0f);
    g.sampling.reproducible = reproducible;
    if (tree) head_tree(&g);
    g.n_predict = 2;
    for (int i = 0; i < SAMPLES; i++) {
        g.sampling.seed = (uint64_t)i + 1;
        specd_result r;
        assert_int_equal(specd_generate(c->engine, prompt, n, &g, &r, NULL), SPECD_OK);
        assert_int_equal(r.n_tokens, 2);
        counts[(size_t)r.tokens[0] * (size_t)nv + (size_t)r.tokens[1]]++;
        *drafted += r.stats.n_drafted;
        *accepted += r.stats.n_accepted;
        specd_result_clear(&r);
    }
    return counts;
}

static void check_head_sampling(const head_case *c, bool reproducible, bool tree) {
    char target[1024];
    model_path(target, sizeof target, c->target);
    specd_token *prompt = NULL;
    int32_t n = 0;
    assert_int_equal(specd_tokenize(c->engine, prompts[2], true, &prompt, &n, NULL), SPECD_OK);
    specd_sampling_params sp = plain_sampling(1.0f), colder = plain_sampling(0.8f);
    exact_pairs ex = exact_first_two(target, prompt, n, &sp), wrong = exact_first_two(target, prompt, n, &colder);
    assert_non_null(ex.prob);
    assert_non_null(wrong.prob);
    /* the samples are drawn with ignore_eos */
    exact_pairs_forbid(&ex, ex.eos);
    exact_pairs_forbid(&wrong, wrong.eos);
    int64_t drafted = 0, accepted = 0;
    int64_t *counts = first_two_counts(c, prompt, n, reproducible, tree, &drafted, &accepted);
    chi_square_result fit = chi_square_test(ex.prob, counts, ex.n_vocab * ex.n_vocab, SAMPLES);
    /* negative control: the same counts are told apart from a distribution close to the target's */
    chi_square_result off = chi_square_test(wrong.prob, counts, ex.n_vocab * ex.n_vocab, SAMPLES);
    print_message("%s %s%s: chi2 z %.2f (df %d), against temperature 0.8: z %.2f, acceptance %.3f\n", c->name,
                  reproducible ? "coupled" : "rejection", tree ? " with trees" : "", fit.z, fit.df, off.z, (double)accepted / (double)drafted);
    assert_true(accepted > 0 && accepted < drafted);
    assert_true(fit.df >= 10);
    assert_true(fit.z < CHI_SQUARE_MAX_Z);
    assert_true(off.z > 2.0 * CHI_SQUARE_MAX_Z);
    free(counts);
    free(ex.prob);
    free(wrong.prob);
    specd_free(prompt);
}

static void test_sampling_with_each_head_is_exact(void **state) {
    (void)state;
    for (int c = 0; c < N_CASES; c++) check_head_sampling(&cases[c], false, false);
    check_head_sampling(&cases[0], true, false); /* the seeded coupled draws too */
    check_head_sampling(&cases[N_CASES - 1], true, false); /* and on the hybrid */
}

/* A head's trees: the siblings are draws from q without the chain's token (recursive rejection
 * sampling), or the next keys (coupled). */
static void test_sampling_with_head_trees_is_exact(void **state) {
    (void)state;
    check_head_sampling(&cases[0], false, true);
    check_head_sampling(&cases[1], false, true);
    check_head_sampling(&cases[3], false, true);
    check_head_sampling(&cases[0], true, true);
}

/* A hybrid target's cached prompt keeps its state: request after request (drafts all accepted, or
 * some rejected; the prompt decoded anew or found in the slot, its last row decoded again for the
 * head), the first token's probabilities stay those of the prompt decoded alone. (A rollback in
 * place right after a checkpoint's restore read llama.cpp's snapshots of the decode before it:
 * the 8th request here got another state.) */
static void test_hybrid_prompt_state_survives_requests(void **state) {
    (void)state;
    const head_case *c = &cases[N_CASES - 1];
    assert_true(c->hybrid);
    specd_token *prompt = NULL;
    int32_t n = 0;
    assert_int_equal(specd_tokenize(c->engine, prompts[2], true, &prompt, &n, NULL), SPECD_OK);
    specd_token_prob first[4];
    for (int i = 0; i < 16; i++) {
        specd_generation_params g = greedy_params(i == 0 ? SPECD_SPEC_NONE : c->type, 3, false);
        g.sampling = plain_sampling(1.0f);
        g.sampling.seed = 5 + (uint64_t)i;
        g.n_predict = 2;
        g.n_probs = 4;
        specd_result r;
        assert_int_equal(specd_generate(c->engine, prompt, n, &g, &r, NULL), SPECD_OK);
        if (i == 0) memcpy(first, r.probs, sizeof first);
        for (int k = 0; k < 4; k++) {
            if (r.probs[k].token != first[k].token || fabsf(r.probs[k].prob - first[k].prob) > 1e-4f)
                fail_msg("request %d: candidate %d is %d (p %.4f), alone %d (p %.4f)", i, k, r.probs[k].token,
                         (double)r.probs[k].prob, first[k].token, (double)first[k].prob);
        }
        specd_result_clear(&r);
    }
    specd_free(prompt);
}

/* ---- what is refused ------------------------------------------------------------------------------ */

/* Opening `target` with `head` (as the draft; NULL: none) and mtp fails, naming `needle`. */
static void assert_refused(const char *target_file, const char *head_file, bool mtp, specd_engine_input input,
                           const char *needle) {
    char target[1024], head[1024];
    model_path(target, sizeof target, target_file);
    if (head_file) model_path(head, sizeof head, head_file);
    specd_engine_params p = test_engine_params(target, head_file ? head : NULL, 256);
    p.mtp = mtp;
    specd_engine *e = NULL;
    char *err = NULL;
    specd_engine_input failed = SPECD_INPUT_NONE;
    p.failed_input = &failed;
    assert_int_not_equal(specd_engine_new(&p, &e, &err), SPECD_OK);
    assert_null(e);
    if (!err || !strstr(err, needle)) fail_msg("expected '%s' in: %s", needle, err ? err : "(none)");
    assert_int_equal(failed, input);
    /* the message names the file at fault */
    assert_non_null(strstr(err, head_file ? head_file : target_file));
    specd_free(err);
}

static void test_heads_that_do_not_fit_are_refused(void **state) {
    (void)state;
    assert_refused("target.gguf", NULL, true, SPECD_INPUT_TARGET, "has no multi-token-prediction (nextn) layers");
    assert_refused("head-target.gguf", "eagle3-wide.gguf", false, SPECD_INPUT_DRAFT,
                   "was made for a target of hidden size 48, but the target model");
    assert_refused("head-target.gguf", "eagle3-deep.gguf", false, SPECD_INPUT_DRAFT,
                   "reads target layer 9, but the target model");
    assert_refused("head-target.gguf", "dflash-deep.gguf", false, SPECD_INPUT_DRAFT,
                   "reads target layer 7, but the target model");
    assert_refused("head-target.gguf", "eagle3-vocab.gguf", false, SPECD_INPUT_DRAFT,
                   "cannot draft for the target model");
    assert_refused("mtp-target.gguf", "eagle3.gguf", true, SPECD_INPUT_DRAFT, "load one head at a time");
    /* two nextn layers where llama.cpp's graph asserts one (it would abort the process) */
    assert_refused("mtp2-target.gguf", NULL, true, SPECD_INPUT_TARGET,
                   "(glm4moe) has 2 nextn layers, but llama.cpp's MTP graph for glm4moe runs exactly one");
    assert_refused("qwen35-mtp2-target.gguf", NULL, true, SPECD_INPUT_TARGET,
                   "(qwen35) has 2 nextn layers, but llama.cpp's MTP graph for qwen35 runs exactly one");
}

/* Generating with `type` on `e` is refused with `needle` in the message. */
static void assert_request_refused(specd_engine *e, specd_spec_type type, const char *needle) {
    specd_generation_params g = greedy_params(type, 4, false);
    specd_token prompt[] = {1, 300, 301};
    specd_result r;
    char *err = NULL;
    assert_int_equal(specd_generate(e, prompt, 3, &g, &r, &err), SPECD_ERR_INVALID_ARGUMENT);
    if (!err || !strstr(err, needle)) fail_msg("expected '%s' in: %s", needle, err ? err : "(none)");
    specd_free(err);
}

static void test_requests_for_a_missing_head_are_refused(void **state) {
    (void)state;
    specd_engine *mtp = cases[0].engine, *eagle3 = cases[1].engine;
    assert_request_refused(mtp, SPECD_SPEC_EAGLE3, "needs an EAGLE-3 head: give its GGUF (architecture eagle3) as "
                                                   "the draft (-md); the engine has the MTP layers of the target");
    assert_request_refused(eagle3, SPECD_SPEC_MTP, "needs the target's MTP layers");
    assert_request_refused(eagle3, SPECD_SPEC_DSPARK, "needs a DSpark head");
    assert_request_refused(eagle3, SPECD_SPEC_DRAFT, "needs a draft model: load one (-md) or leave 'draft' out of the "
                                                     "list; the draft given is the EAGLE-3 head");
    char target[1024];
    model_path(target, sizeof target, "head-target.gguf");
    specd_engine *plain = open_engine(target, NULL, 256);
    assert_request_refused(plain, SPECD_SPEC_DFLASH, "needs a DFlash head");
    specd_engine_free(plain);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODELS_DIR\n", argv[0]);
        return 2;
    }
    models_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_head_alone_gives_the_targets_text),
        cmocka_unit_test(test_blocks_draft_within_their_size),
        cmocka_unit_test(test_auto_drafts_with_the_loaded_head),
        cmocka_unit_test(test_heads_in_a_list_give_the_targets_text),
        cmocka_unit_test(test_head_trees_give_the_targets_text),
        cmocka_unit_test(test_mtp_beside_a_draft_model),
        cmocka_unit_test(test_heads_in_slots_give_the_targets_text),
        cmocka_unit_test(test_heads_across_context_shifts),
        cmocka_unit_test(test_sampling_with_each_head_is_exact),
        cmocka_unit_test(test_sampling_with_head_trees_is_exact),
        cmocka_unit_test(test_hybrid_prompt_state_survives_requests),
        cmocka_unit_test(test_heads_that_do_not_fit_are_refused),
        cmocka_unit_test(test_requests_for_a_missing_head_are_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
