/* test_context_shift.c - generation past a full context (generation_params.context_shift) on the
 * tiny generated models, with a 64-token context and 200 tokens to generate:
 *  - target alone: the output equals a plain llama.cpp loop that shifts by llama-server's rule
 *    (seq_rm + seq_add), the statistics count the same shifts, and both KV caches hold the
 *    shifted history at the shifted positions afterwards;
 *  - speculation (draft model, model-free drafters, chains) gives the same output and shifts;
 *  - n_keep (-1, a count, more than fits) and the stops: shifting off, or n_predict < 0.
 *
 *   test_context_shift MODELS_DIR */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "engine/engine_internal.h"
#include "engine_helpers.h"
#include "llama.h"
#include "specd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_CTX 64
#define N_PREDICT 200
#define KEEP_MARGIN 4 /* llama-server keeps at most n_ctx - 4 */

static char target_path[1024], draft_path[1024];
static specd_engine *engine;    /* target + draft, N_CTX */
static specd_engine *reference; /* target only: its context is driven by hand (reference_run) */

static const char *prompt_text = "the little girl saw a big red ball";

static int setup(void **state) {
    (void)state;
    engine = open_engine(target_path, draft_path, N_CTX);
    reference = open_engine(target_path, NULL, N_CTX);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    specd_engine_free(engine);
    specd_engine_free(reference);
    return 0;
}

static specd_generation_params shift_params(specd_spec_type type, int32_t draft_max, bool adaptive) {
    specd_generation_params g = greedy_params(type, draft_max, adaptive);
    g.n_predict = N_PREDICT;
    g.context_shift = true;
    return g;
}

static specd_token *tokenize(specd_engine *e, int32_t *n) {
    specd_token *t = NULL;
    char *err = NULL;
    if (specd_tokenize(e, prompt_text, true, &t, n, &err) != SPECD_OK) fail_msg("tokenize: %s", err);
    return t;
}

/* ---- the rule, replayed independently -------------------------------------------------------- */

typedef struct replay {
    specd_token h[N_CTX + 1];
    int32_t n;
    int32_t shifts, discarded;
} replay;

/* llama-server's shift when the history (the last token not yet cached) fills the context. */
static void replay_shift(replay *r, int32_t keep) {
    int32_t n_left = r->n - 1 - keep;
    int32_t discard = n_left / 2;
    if (discard > n_left - 1) discard = n_left - 1;
    assert_true(discard >= 1);
    memmove(r->h + keep, r->h + keep + discard, (size_t)(r->n - keep - discard) * sizeof *r->h);
    r->n -= discard;
    r->shifts++;
    r->discarded += discard;
}

/* The history a generation of `out` from `prompt` ends with, and its shifts. */
static void replay_history(replay *r, const specd_token *prompt, int32_t n_prompt, const specd_token *out,
                           int32_t n_out, int32_t keep) {
    memset(r, 0, sizeof *r);
    memcpy(r->h, prompt, (size_t)n_prompt * sizeof *prompt);
    r->n = n_prompt;
    for (int32_t i = 0; i < n_out; i++) {
        if (r->n >= N_CTX) replay_shift(r, keep);
        r->h[r->n++] = out[i];
    }
}

/* ---- a plain llama.cpp loop with the same shifts --------------------------------------------- */

static specd_token argmax_not_eog(const float *logits, int32_t n_vocab) {
    const struct llama_vocab *vocab = llama_model_get_vocab(reference->target.model);
    specd_token best = -1;
    for (specd_token t = 0; t < n_vocab; t++)
        if (!llama_vocab_is_eog(vocab, t) && (best < 0 || logits[t] > logits[best])) best = t;
    return best;
}

static void decode_one(struct llama_context *ctx, specd_token token, int32_t pos) {
    struct llama_batch b = llama_batch_init(1, 0, 1);
    b.n_tokens = 1;
    b.token[0] = token;
    b.pos[0] = pos;
    b.n_seq_id[0] = 1;
    b.seq_id[0][0] = 0;
    b.logits[0] = 1;
    assert_int_equal(llama_decode(ctx, b), 0);
    llama_batch_free(b);
}

/* What the reference loop produced: its tokens, how far each led the runner-up, and when it
 * shifted. */
typedef struct reference_output {
    specd_token tokens[N_PREDICT];
    float lead[N_PREDICT];   /* logit of the token chosen minus the best other one */
    int32_t shifts;
    int32_t second_shift_at; /* the token generated right after the second shift */
} reference_output;

static float lead_over_runner_up(const float *logits, int32_t n_vocab, specd_token best) {
    const struct llama_vocab *vocab = llama_model_get_vocab(reference->target.model);
    float runner_up = -INFINITY;
    for (specd_token t = 0; t < n_vocab; t++)
        if (t != best && !llama_vocab_is_eog(vocab, t) && logits[t] > runner_up) runner_up = logits[t];
    return logits[best] - runner_up;
}

/* Greedy decoding one token at a time, shifting as llama-server does: the reference output. */
static void reference_run(const specd_token *prompt, int32_t n_prompt, int32_t keep, reference_output *out) {
    struct llama_context *ctx = reference->target.ctx;
    llama_memory_t mem = llama_get_memory(ctx);
    llama_memory_clear(mem, true);
    reference->target.n_kv = 0; /* its bookkeeping no longer describes the cache */
    struct llama_batch b = llama_batch_init(n_prompt, 0, 1);
    b.n_tokens = n_prompt - 1; /* as the engine: the last prompt token is decoded with the next step */
    for (int32_t i = 0; i < b.n_tokens; i++) {
        b.token[i] = prompt[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 0;
    }
    assert_int_equal(llama_decode(ctx, b), 0);
    llama_batch_free(b);
    replay r;
    replay_history(&r, prompt, n_prompt, NULL, 0, keep);
    out->second_shift_at = N_PREDICT;
    for (int32_t i = 0; i < N_PREDICT; i++) {
        if (r.n >= N_CTX) {
            int32_t before = r.discarded;
            replay_shift(&r, keep);
            int32_t discard = r.discarded - before;
            llama_memory_seq_rm(mem, 0, keep, keep + discard);
            llama_memory_seq_add(mem, 0, keep + discard, -1, -discard);
            if (r.shifts == 2) out->second_shift_at = i;
        }
        decode_one(ctx, r.h[r.n - 1], r.n - 1);
        const float *logits = llama_get_logits_ith(ctx, 0);
        int32_t n_vocab = specd_engine_n_vocab(reference);
        out->tokens[i] = argmax_not_eog(logits, n_vocab);
        out->lead[i] = lead_over_runner_up(logits, n_vocab, out->tokens[i]);
        r.h[r.n++] = out->tokens[i];
    }
    out->shifts = r.shifts;
}

/* A target pass over several tokens rounds differently from single-token passes (logits differ
 * by up to about 4e-5), so where the reference's best two tokens are that close either may win
 * with speculation. The outputs may part there, and only there; the part compared must cover two
 * shifts. */
#define NEAR_TIE 1e-3f

static void assert_follows_reference(const specd_result *got, const reference_output *want, const char *what) {
    for (int32_t t = 0; t < N_PREDICT; t++) {
        if (got->tokens[t] == want->tokens[t]) continue;
        if (want->lead[t] < NEAR_TIE && t > want->second_shift_at) {
            print_message("%s: parts from the reference at token %d, a near tie (lead %.1e)\n", what, t,
                          (double)want->lead[t]);
            return;
        }
        fail_msg("%s, token %d: specd %d, llama.cpp loop %d (which led by %.1e)", what, t, got->tokens[t],
                 want->tokens[t], (double)want->lead[t]);
    }
}

/* ---- checks ---------------------------------------------------------------------------------- */

static void assert_tokens_valid(const specd_result *r) {
    for (int32_t i = 0; i < r->n_tokens; i++)
        if (r->tokens[i] < 0 || r->tokens[i] >= specd_engine_n_vocab(engine))
            fail_msg("token %d is %d: outside the vocabulary", i, r->tokens[i]);
}

/* The slot holds the history as replayed, at positions 0..n_kv-1 (the shift moved them). */
static void assert_slot_holds(const specd_model_slot *slot, const replay *r, const char *what) {
    int32_t n = slot->n_kv < r->n - 1 ? slot->n_kv : r->n - 1; /* a draft slot may hold drafts past it */
    for (int32_t i = 0; i < n; i++)
        if (slot->kv_tokens[i] != r->h[i]) fail_msg("%s: cached token %d is %d, the history has %d", what, i,
                                                    slot->kv_tokens[i], r->h[i]);
    llama_pos pos_max = llama_memory_seq_pos_max(llama_get_memory(slot->ctx), 0);
    if (pos_max != slot->n_kv - 1) fail_msg("%s: the cache ends at position %d, its tokens at %d", what, pos_max,
                                            slot->n_kv - 1);
}

/* Generates with `g` and checks the result against the replayed rule: limit reached, tokens
 * valid, shifts counted, the caches in step. */
static specd_result generate_shifted(const specd_generation_params *g, int32_t keep) {
    int32_t n_prompt = 0;
    specd_token *prompt = tokenize(engine, &n_prompt);
    specd_result r;
    char *err = NULL;
    if (specd_generate(engine, prompt, n_prompt, g, &r, &err) != SPECD_OK) fail_msg("generate: %s", err);
    assert_int_equal(r.stop_reason, SPECD_STOP_LIMIT);
    assert_int_equal(r.n_tokens, N_PREDICT);
    assert_tokens_valid(&r);
    replay want;
    replay_history(&want, prompt, n_prompt, r.tokens, r.n_tokens, keep);
    assert_true(want.shifts >= 2);
    assert_int_equal(r.stats.n_context_shifts, want.shifts);
    assert_int_equal(r.stats.n_context_discarded, want.discarded);
    assert_int_equal(r.stats.n_context_kept, keep);
    assert_int_equal(engine->target.n_kv, want.n - 1);
    assert_slot_holds(&engine->target, &want, "target");
    /* The draft's cache is synced when a step drafts: after a run that drafted to its end (fixed
     * lengths) it holds the history; an adaptive run may stop drafting for its last steps (a fixed
     * spell of none, length_policy.h), its cache then holding an older history and that step's
     * rejected drafts, moved by the shifts since, which the next draft's sync replaces. */
    if (r.stats.n_drafted > 0 && engine->draft.n_kv > 0 && !g->speculative.adaptive)
        assert_slot_holds(&engine->draft, &want, "draft");
    specd_free(prompt);
    return r;
}

/* ---- target alone ----------------------------------------------------------------------------- */

static void test_target_alone_equals_a_plain_llama_loop_with_shifts(void **state) {
    (void)state;
    int32_t n_prompt = 0;
    specd_token *prompt = tokenize(engine, &n_prompt);
    assert_int_equal(prompt[0], llama_vocab_bos(engine->vocab)); /* so n_keep 0 keeps the BOS */
    specd_generation_params g = shift_params(SPECD_SPEC_NONE, 0, false);
    specd_result got = generate_shifted(&g, 1);
    reference_output want;
    reference_run(prompt, n_prompt, 1, &want);
    /* The same single-token passes: equal to the last token, near ties included. */
    for (int32_t i = 0; i < N_PREDICT; i++)
        if (got.tokens[i] != want.tokens[i])
            fail_msg("token %d: specd %d, llama.cpp loop %d", i, got.tokens[i], want.tokens[i]);
    assert_int_equal(got.stats.n_context_shifts, want.shifts);
    specd_free(prompt);
    specd_result_clear(&got);
}

/* ---- speculation ------------------------------------------------------------------------------ */

static void test_draft_model_with_shifts_equals_target_alone(void **state) {
    (void)state;
    specd_generation_params base = shift_params(SPECD_SPEC_NONE, 0, false);
    specd_result want = generate_shifted(&base, 1);
    const int32_t lengths[] = {1, 3, 8};
    int64_t drafted = 0, accepted = 0;
    for (int fixed = 0; fixed <= 1; fixed++) {
        for (size_t l = 0; l < 3; l++) {
            specd_generation_params g = shift_params(SPECD_SPEC_DRAFT, lengths[l], !fixed);
            specd_result got = generate_shifted(&g, 1);
            char what[96];
            snprintf(what, sizeof what, "draft_max %d, %s", lengths[l], fixed ? "fixed" : "adaptive");
            assert_same_tokens(&got, &want, what);
            assert_int_equal(got.stats.n_context_shifts, want.stats.n_context_shifts);
            drafted += got.stats.n_drafted;
            accepted += got.stats.n_accepted;
            specd_result_clear(&got);
        }
    }
    print_message("shifted: %lld drafted, %lld accepted\n", (long long)drafted, (long long)accepted);
    assert_true(accepted > 0 && accepted < drafted);
    specd_result_clear(&want);
}

static void test_model_free_drafters_with_shifts_equal_target_alone(void **state) {
    (void)state;
    specd_generation_params base = shift_params(SPECD_SPEC_NONE, 0, false);
    specd_result want = generate_shifted(&base, 1);
    const specd_spec_type singles[] = {SPECD_SPEC_NGRAM_SIMPLE, SPECD_SPEC_NGRAM_MAP, SPECD_SPEC_NGRAM_CACHE,
                                       SPECD_SPEC_SUFFIX};
    for (size_t i = 0; i < sizeof singles / sizeof *singles; i++) {
        specd_generation_params g = shift_params(singles[i], 6, true);
        specd_result got = generate_shifted(&g, 1);
        assert_same_tokens(&got, &want, specd_spec_type_name(singles[i]));
        if (singles[i] == SPECD_SPEC_NGRAM_SIMPLE) assert_true(got.stats.n_drafted > 0);
        specd_result_clear(&got);
    }
    const specd_spec_type chain[] = {SPECD_SPEC_SUFFIX, SPECD_SPEC_NGRAM_SIMPLE, SPECD_SPEC_DRAFT};
    specd_generation_params g = shift_params(SPECD_SPEC_AUTO, 6, true);
    g.speculative.n_types = 3;
    memcpy(g.speculative.types, chain, sizeof chain);
    specd_result got = generate_shifted(&g, 1);
    assert_same_tokens(&got, &want, "suffix, ngram-simple, draft");
    assert_true(got.stats.n_drafted > 0);
    specd_result_clear(&got);
    specd_result_clear(&want);
}

static void test_sampling_with_shifts_runs_to_the_limit(void **state) {
    (void)state;
    specd_generation_params g = shift_params(SPECD_SPEC_DRAFT, 4, true);
    g.sampling.temperature = 1.0f;
    g.sampling.seed = 3;
    specd_result r = generate_shifted(&g, 1);
    specd_result_clear(&r);
}

/* ---- n_keep ----------------------------------------------------------------------------------- */

static void test_n_keep_sets_what_each_shift_keeps(void **state) {
    (void)state;
    int32_t n_prompt = 0;
    specd_token *prompt = tokenize(engine, &n_prompt);
    const struct {
        int32_t n_keep, kept;
    } cases[] = {
        {-1, n_prompt},                /* the whole prompt (its BOS included) */
        {5, 6},                        /* 5 after the BOS */
        {1000, N_CTX - KEEP_MARGIN},   /* capped: each shift then drops one token */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        specd_generation_params g = shift_params(SPECD_SPEC_DRAFT, 4, true);
        g.n_keep = cases[i].n_keep;
        specd_result got = generate_shifted(&g, cases[i].kept);
        reference_output want;
        reference_run(prompt, n_prompt, cases[i].kept, &want);
        char what[32];
        snprintf(what, sizeof what, "n_keep %d", cases[i].n_keep);
        assert_follows_reference(&got, &want, what);
        assert_int_equal(got.stats.n_context_shifts, want.shifts);
        specd_result_clear(&got);
    }
    specd_generation_params bad = shift_params(SPECD_SPEC_NONE, 0, false);
    bad.n_keep = -2;
    specd_result r;
    char *err = NULL;
    assert_int_equal(specd_generate(engine, prompt, n_prompt, &bad, &r, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "n_keep"));
    specd_free(err);
    specd_free(prompt);
}

/* ---- when it stops instead ------------------------------------------------------------------- */

static void test_stops_at_context_end_without_shifting(void **state) {
    (void)state;
    for (int spec = 0; spec <= 1; spec++) {
        /* shifting off, as before; and on with n_predict < 0, which must end all the same */
        specd_generation_params off = shift_params(spec ? SPECD_SPEC_DRAFT : SPECD_SPEC_NONE, 4, false);
        off.context_shift = false;
        specd_generation_params unlimited = shift_params(spec ? SPECD_SPEC_DRAFT : SPECD_SPEC_NONE, 4, false);
        unlimited.n_predict = -1;
        const specd_generation_params *cases[] = {&off, &unlimited};
        for (int c = 0; c < 2; c++) {
            specd_result r = generate_text(engine, prompt_text, cases[c]);
            assert_int_equal(r.stop_reason, SPECD_STOP_CONTEXT);
            assert_int_equal(r.stats.n_context_shifts, 0);
            assert_true(r.stats.n_prompt + r.n_tokens >= N_CTX && r.stats.n_prompt + r.n_tokens <= N_CTX + 1);
            specd_result_clear(&r);
        }
    }
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target_path, draft_path, sizeof target_path)) return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_target_alone_equals_a_plain_llama_loop_with_shifts),
        cmocka_unit_test(test_draft_model_with_shifts_equals_target_alone),
        cmocka_unit_test(test_model_free_drafters_with_shifts_equal_target_alone),
        cmocka_unit_test(test_sampling_with_shifts_runs_to_the_limit),
        cmocka_unit_test(test_n_keep_sets_what_each_shift_keeps),
        cmocka_unit_test(test_stops_at_context_end_without_shifting),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
