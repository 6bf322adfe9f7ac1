/* test_embed.c - embeddings and reranking through the library (src/engine/embed.c) on the tiny
 * embedding and reranker models: specd_embed equals a plain llama.cpp context with embeddings on
 * (pooled, then normalized by the test's own arithmetic; per token with pooling none); the
 * normalizations of llama-server's embd_normalize on known vectors; specd_rerank_tokens' prompt
 * (BOS query doc, or the model's rerank template) and specd_rerank's score equal to llama.cpp's rank
 * pooling; an embedding from another thread while a generation runs leaves the generation's tokens
 * as they are alone; and every refusal (no embedding context, no tokens, a token out of the
 * vocabulary, too many, the wrong pooling).
 *
 *   test_embed MODELS_DIR */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "engine_helpers.h"
#include "llama.h"
#include "specd.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char models[1024], embed_path[1100], rerank_path[1100], template_path[1100], target_path[1100],
    draft_path[1100];
static const char *text = "the little girl saw a big red ball";

static specd_engine *embedding_engine(const char *path, specd_pooling pooling, int32_t n_ubatch) {
    specd_engine_params p = test_engine_params(path, NULL, 256);
    p.embedding = true;
    p.pooling = pooling;
    p.n_ubatch = n_ubatch;
    return open_engine_with(&p);
}

static int32_t tokens_of(specd_engine *e, const char *s, specd_token **out) {
    int32_t n = 0;
    assert_int_equal(specd_tokenize(e, s, true, out, &n, NULL), SPECD_OK);
    return n;
}

/* llama.cpp alone: a context with embeddings on and `pooling`, the tokens in one batch; the pooled
 * row (seq 0), or token `row`'s with pooling none, copied to out (n floats). */
static void llama_reference(const char *path, enum llama_pooling_type pooling, const specd_token *tokens, int32_t n,
                            int32_t row, float *out, int32_t n_out) {
    struct llama_model *m = llama_model_load_from_file(path, llama_model_default_params());
    assert_non_null(m);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 256;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.embeddings = true;
    cp.pooling_type = pooling;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    assert_non_null(ctx);
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int32_t i = 0; i < n; i++) {
        b.token[i] = tokens[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    assert_int_equal(llama_decode(ctx, b), 0);
    const float *v = pooling == LLAMA_POOLING_TYPE_NONE ? llama_get_embeddings_ith(ctx, row)
                                                        : llama_get_embeddings_seq(ctx, 0);
    assert_non_null(v);
    memcpy(out, v, (size_t)n_out * sizeof *out);
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(m);
}

static void assert_close(const float *a, const float *b, int32_t n, float tol, const char *what) {
    for (int32_t i = 0; i < n; i++)
        if (fabsf(a[i] - b[i]) > tol) fail_msg("%s: value %d is %.9g, llama.cpp's %.9g", what, i, a[i], b[i]);
}

static void test_mean_pooling_equals_llama_cpp(void **state) {
    (void)state;
    specd_engine *e = embedding_engine(embed_path, SPECD_POOLING_DEFAULT, 0);
    assert_int_equal(specd_engine_pooling(e), SPECD_POOLING_MEAN); /* the model's own (make_tiny_model --pooling mean) */
    assert_int_equal(specd_engine_embed_n_max(e), 256);             /* 512 within a slot of 256 */
    specd_token *t = NULL;
    int32_t n = tokens_of(e, text, &t);
    specd_embedding raw, l2;
    assert_int_equal(specd_embed(e, t, n, -1, &raw, NULL), SPECD_OK);
    assert_int_equal(specd_embed(e, t, n, 2, &l2, NULL), SPECD_OK);
    assert_int_equal(raw.n_rows, 1);
    assert_int_equal(raw.n_dims, 32);
    assert_int_equal(raw.n_tokens, n);
    float want[32];
    llama_reference(embed_path, LLAMA_POOLING_TYPE_MEAN, t, n, 0, want, 32);
    assert_close(raw.values, want, 32, 1e-6f, "mean pooling, not normalized");
    double norm = 0;
    for (int i = 0; i < 32; i++) norm += (double)want[i] * want[i];
    for (int i = 0; i < 32; i++) want[i] = (float)(want[i] / sqrt(norm));
    assert_close(l2.values, want, 32, 1e-6f, "mean pooling, euclidean");
    specd_embedding_clear(&raw);
    specd_embedding_clear(&l2);
    assert_null(raw.values);
    specd_free(t);
    specd_engine_free(e);
}

static void test_pooling_none_gives_every_token(void **state) {
    (void)state;
    specd_engine *e = embedding_engine(embed_path, SPECD_POOLING_NONE, 0);
    specd_token *t = NULL;
    int32_t n = tokens_of(e, text, &t);
    specd_embedding rows;
    assert_int_equal(specd_embed(e, t, n, 2, &rows, NULL), SPECD_OK); /* rows are never normalized */
    assert_int_equal(rows.n_rows, n);
    float want[32];
    for (int32_t r = 0; r < n; r += n - 1) {
        llama_reference(embed_path, LLAMA_POOLING_TYPE_NONE, t, n, r, want, 32);
        assert_close(rows.values + (size_t)r * 32, want, 32, 1e-6f, "pooling none");
    }
    specd_embedding_clear(&rows);
    specd_free(t);
    specd_engine_free(e);
}

static void test_normalizations(void **state) {
    (void)state;
    const float v[3] = {3.0f, -4.0f, 0.0f};
    float out[3];
    specd_embed_normalize(v, out, 3, 2);
    assert_close(out, (float[]){0.6f, -0.8f, 0.0f}, 3, 1e-7f, "euclidean");
    specd_embed_normalize(v, out, 3, 1);
    assert_close(out, (float[]){3.0f / 7, -4.0f / 7, 0.0f}, 3, 1e-7f, "taxicab");
    specd_embed_normalize(v, out, 3, 0);
    assert_close(out, (float[]){24570.0f, -32760.0f, 0.0f}, 3, 1e-2f, "max absolute as int16");
    specd_embed_normalize(v, out, 3, -1);
    assert_close(out, v, 3, 0.0f, "none");
    float p3 = cbrtf(27.0f + 64.0f);
    specd_embed_normalize(v, out, 3, 3);
    assert_close(out, (float[]){3.0f / p3, -4.0f / p3, 0.0f}, 3, 1e-6f, "3-norm");
    const float zero[2] = {0.0f, 0.0f};
    specd_embed_normalize(zero, out, 2, 2);
    assert_close(out, zero, 2, 0.0f, "a zero vector stays zero");
}

static void test_rerank_equals_llama_cpp(void **state) {
    (void)state;
    specd_engine *e = embedding_engine(rerank_path, SPECD_POOLING_RANK, 0);
    assert_int_equal(specd_engine_pooling(e), SPECD_POOLING_RANK);
    specd_token *t = NULL, *q = NULL, *d = NULL;
    int32_t n = 0, nq = 0, nd = 0;
    assert_int_equal(specd_rerank_tokens(e, "the cat", "a cat sat", &t, &n, NULL), SPECD_OK);
    assert_int_equal(specd_tokenize(e, "the cat", false, &q, &nq, NULL), SPECD_OK);
    assert_int_equal(specd_tokenize(e, "a cat sat", false, &d, &nd, NULL), SPECD_OK);
    assert_int_equal(n, 1 + nq + nd); /* BOS query doc: the tiny vocabulary adds BOS, no EOS, no SEP */
    assert_int_equal(t[0], 1);
    assert_memory_equal(t + 1, q, (size_t)nq * sizeof *q);
    assert_memory_equal(t + 1 + nq, d, (size_t)nd * sizeof *d);
    float score = 0, want[2];
    int32_t used = 0;
    assert_int_equal(specd_rerank(e, "the cat", "a cat sat", &score, &used, NULL), SPECD_OK);
    assert_int_equal(used, n);
    llama_reference(rerank_path, LLAMA_POOLING_TYPE_RANK, t, n, 0, want, 2);
    assert_close(&score, want, 1, 1e-6f, "rank pooling's first output");
    assert_true(score > 0.0f && score < 1.0f); /* a softmax of two labels */
    float other = 0;
    assert_int_equal(specd_rerank(e, "the cat", "hello world", &other, NULL, NULL), SPECD_OK);
    assert_true(fabsf(other - score) > 1e-3f); /* documents are told apart */
    specd_free(t);
    specd_free(q);
    specd_free(d);
    specd_engine_free(e);
}

static void test_rerank_template(void **state) {
    (void)state;
    specd_engine *e = embedding_engine(template_path, SPECD_POOLING_RANK, 0);
    specd_token *t = NULL, *want = NULL;
    int32_t n = 0, n_want = 0;
    assert_int_equal(specd_rerank_tokens(e, "cat", "dog", &t, &n, NULL), SPECD_OK);
    assert_int_equal(specd_tokenize_special(e, "<s>query: cat</s>document: dog", false, true, &want, &n_want, NULL),
                     SPECD_OK);
    assert_int_equal(n, n_want);
    assert_memory_equal(t, want, (size_t)n * sizeof *t);
    assert_int_equal(t[0], 1); /* "<s>" parsed as BOS */
    specd_free(t);
    specd_free(want);
    specd_engine_free(e);
}

/* The call's status and message (read after the call: `message` is where it wrote it). */
static void assert_refused(specd_status st, specd_status want, char **message, const char *needle) {
    assert_int_equal(st, want);
    assert_non_null(*message);
    if (!strstr(*message, needle)) fail_msg("'%s' does not say '%s'", *message, needle);
    specd_free(*message);
    *message = NULL;
}

static void test_refusals(void **state) {
    (void)state;
    specd_engine *plain = open_engine(embed_path, NULL, 256);
    specd_token one = 1, bad[2] = {1, 100000}, many[65];
    for (int i = 0; i < 65; i++) many[i] = 5;
    specd_embedding out;
    char *message = NULL;
    float score;
    assert_int_equal(specd_engine_pooling(plain), SPECD_POOLING_DEFAULT);
    assert_int_equal(specd_engine_embed_n_max(plain), 0);
    assert_refused(specd_embed(plain, &one, 1, 2, &out, &message), SPECD_ERR_INVALID_ARGUMENT, &message, "--embedding");
    assert_refused(specd_rerank(plain, "a", "b", &score, NULL, &message), SPECD_ERR_INVALID_ARGUMENT, &message,
                   "--embedding");
    specd_engine_free(plain);
    specd_engine *e = embedding_engine(embed_path, SPECD_POOLING_CLS, 64);
    assert_int_equal(specd_engine_embed_n_max(e), 64);
    assert_refused(specd_embed(e, &one, 0, 2, &out, &message), SPECD_ERR_INVALID_ARGUMENT, &message, "no tokens");
    assert_refused(specd_embed(e, bad, 2, 2, &out, &message), SPECD_ERR_INVALID_ARGUMENT, &message, "vocabulary");
    assert_refused(specd_embed(e, many, 65, 2, &out, &message), SPECD_ERR_CONTEXT, &message, "too large");
    assert_refused(specd_rerank(e, "a", "b", &score, NULL, &message), SPECD_ERR_INVALID_ARGUMENT, &message, "rank");
    assert_int_equal(specd_embed(e, many, 64, 2, &out, NULL), SPECD_OK); /* exactly the most */
    specd_embedding_clear(&out);
    specd_engine_free(e);
    specd_engine *ranker = embedding_engine(rerank_path, SPECD_POOLING_RANK, 0);
    assert_refused(specd_embed(ranker, &one, 1, 2, &out, &message), SPECD_ERR_INVALID_ARGUMENT, &message, "rerank");
    specd_engine_free(ranker);
    specd_engine_params p = test_engine_params(embed_path, NULL, 256);
    p.embedding = true;
    p.pooling = (specd_pooling)9;
    specd_engine *none = NULL;
    assert_refused(specd_engine_new(&p, &none, &message), SPECD_ERR_INVALID_ARGUMENT, &message, "specd_pooling");
    assert_null(none);
    assert_string_equal(specd_pooling_name(SPECD_POOLING_RANK), "rank");
}

/* ---- an embedding beside a generation -------------------------------------------------------- */

typedef struct embedder_thread {
    specd_engine *e;
    const specd_token *tokens;
    int32_t n;
    int rounds;
    bool ok;
} embedder_thread;

static void *embed_rounds(void *arg) {
    embedder_thread *t = arg;
    t->ok = true;
    for (int i = 0; i < t->rounds; i++) {
        specd_embedding out;
        t->ok &= specd_embed(t->e, t->tokens, t->n, 2, &out, NULL) == SPECD_OK;
        specd_embedding_clear(&out);
    }
    return NULL;
}

static void test_generation_beside_embeddings(void **state) {
    (void)state;
    specd_engine_params p = test_engine_params(embed_path, draft_path, 256);
    p.embedding = true;
    specd_engine *e = open_engine_with(&p);
    specd_generation_params g = specd_generation_default_params();
    g.n_predict = 32;
    g.ignore_eos = true;
    g.sampling.temperature = 0.0f;
    specd_result alone = generate_text(e, text, &g);
    specd_token *t = NULL;
    embedder_thread th = {e, NULL, 0, 40, false};
    th.n = tokens_of(e, text, &t);
    th.tokens = t;
    pthread_t id;
    assert_int_equal(pthread_create(&id, NULL, embed_rounds, &th), 0);
    specd_result beside = generate_text(e, text, &g);
    pthread_join(id, NULL);
    assert_true(th.ok);
    assert_same_tokens(&alone, &beside, "a generation while embeddings run on another thread");
    specd_result_clear(&alone);
    specd_result_clear(&beside);
    specd_free(t);
    specd_engine_free(e);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODELS_DIR\n", argv[0]);
        return 2;
    }
    snprintf(models, sizeof models, "%s", argv[1]);
    snprintf(embed_path, sizeof embed_path, "%s/embed.gguf", models);
    snprintf(rerank_path, sizeof rerank_path, "%s/rerank.gguf", models);
    snprintf(template_path, sizeof template_path, "%s/rerank-template.gguf", models);
    snprintf(target_path, sizeof target_path, "%s/target.gguf", models);
    snprintf(draft_path, sizeof draft_path, "%s/draft.gguf", models);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mean_pooling_equals_llama_cpp), cmocka_unit_test(test_pooling_none_gives_every_token),
        cmocka_unit_test(test_normalizations),                cmocka_unit_test(test_rerank_equals_llama_cpp),
        cmocka_unit_test(test_rerank_template),               cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_generation_beside_embeddings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
