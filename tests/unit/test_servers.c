/* test_servers.c - the server is an object (src/serve/server.h): two servers, each on its own
 * engine, run side by side in one process and each answers as its engine alone would; ending or
 * freeing one leaves the other's requests alone. The same for two JSON API hosts (src/api/host.h),
 * each with its own model pair. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "engine_helpers.h"

#include "rpc/rpc.h"
#include "serve/server.h"
#include "serve/text_stream.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static char target_path[512], draft_path[512], other_path[512];

/* ---- a reply that keeps the tokens ----------------------------------------------------------- */

typedef struct tokens_item {
    int32_t n;
    specd_token tokens[];
} tokens_item;

static void *keep_tokens(void *ctx, const serve_view *v) {
    (void)ctx;
    tokens_item *item = malloc(sizeof *item + (size_t)(v->result->n_tokens + 1) * sizeof(specd_token));
    if (!item) return NULL;
    item->n = v->result->n_tokens;
    /* a request ended before its first token has no token array (NULL): memcpy may not take it */
    if (item->n > 0) memcpy(item->tokens, v->result->tokens, (size_t)item->n * sizeof(specd_token));
    return item;
}

static const serve_reply token_reply = {.final = keep_tokens, .free_item = free};

static const serve_names test_names = {.where = "test"};

/* A greedy request for `text`, submitted to `s` (the job referenced). */
static serve_job *submit(serve_server *s, int64_t id, const char *text, int32_t n_predict) {
    serve_job *job = serve_job_new(id);
    assert_non_null(job);
    assert_true(serve_request_add_text(&job->request, text));
    job->request.gen.n_predict = n_predict;
    job->request.gen.sampling.temperature = 0.0f;
    job->request.gen.ignore_eos = true;
    job->reply = token_reply;
    serve_fault fault;
    if (!serve_server_submit(s, job, &test_names, &fault)) fail_msg("submit: %s", fault.message);
    return job;
}

/* The job's answer; its tokens must be `want`'s. */
static void expect_answer(serve_job *job, const specd_result *want, const char *what) {
    void *answer = NULL;
    serve_fault fault;
    if (!serve_job_wait_final(job, NULL, NULL, 50, &answer, &fault)) fail_msg("%s: %s", what, fault.message);
    tokens_item *got = answer;
    specd_result as_result = {.tokens = got->tokens, .n_tokens = got->n};
    assert_same_tokens(&as_result, want, what);
    free(got);
    serve_job_unref(job);
}

static specd_result greedy(specd_engine *e, const char *text, int32_t n_predict) {
    specd_generation_params g = specd_generation_default_params();
    g.n_predict = n_predict;
    g.sampling.temperature = 0.0f;
    g.ignore_eos = true;
    return generate_text(e, text, &g);
}

static serve_server *server_on(specd_engine *e, const char *name) {
    serve_options o = {.model = name, .n_queue = -1, .limits = {.n_predict_max = -1}};
    serve_fault fault;
    serve_server *s = serve_server_new(e, &o, &fault);
    if (!s) fail_msg("server: %s", fault.message);
    return s;
}

/* ---- two servers ----------------------------------------------------------------------------- */

static const char *const prompts[] = {"once upon a time", "the dog ran", "she said"};

static void two_servers_answer_as_their_engines(void **state) {
    (void)state;
    /* the references: each model alone */
    specd_engine *ref_a = open_engine(target_path, draft_path, 256), *ref_b = open_engine(other_path, NULL, 256);
    specd_result want_a[3], want_b[3];
    for (int i = 0; i < 3; i++) {
        want_a[i] = greedy(ref_a, prompts[i], 24);
        want_b[i] = greedy(ref_b, prompts[i], 24);
    }
    specd_engine_free(ref_a);
    specd_engine_free(ref_b);
    specd_engine_params pa = test_engine_params(target_path, draft_path, 512), pb = test_engine_params(other_path, NULL, 512);
    pa.n_parallel = pb.n_parallel = 2;
    serve_server *a = server_on(open_engine_with(&pa), "a"), *b = server_on(open_engine_with(&pb), "b");
    assert_string_equal(serve_server_model(a), "a");
    serve_job *ja[3], *jb[3];
    for (int i = 0; i < 3; i++) { /* both queues fill at once: the schedulers run side by side */
        ja[i] = submit(a, i + 1, prompts[i], 24);
        jb[i] = submit(b, i + 1, prompts[i], 24);
    }
    for (int i = 0; i < 3; i++) {
        expect_answer(ja[i], &want_a[i], "server a");
        expect_answer(jb[i], &want_b[i], "server b");
    }
    assert_int_equal(serve_server_metrics(a).requests_total, 3);
    assert_int_equal(serve_server_metrics(b).requests_total, 3);
    assert_true(serve_server_metrics(a).drafted_total > 0);  /* a has a draft model */
    assert_int_equal(serve_server_metrics(b).drafted_total, 0);
    serve_server_free(a);
    serve_server_free(b);
    for (int i = 0; i < 3; i++) {
        specd_result_clear(&want_a[i]);
        specd_result_clear(&want_b[i]);
    }
}

/* Ending every job of one server, then freeing it, leaves the other's request to finish. */
static void ending_one_server_leaves_the_other(void **state) {
    (void)state;
    specd_engine *ref = open_engine(other_path, NULL, 256);
    specd_result want = greedy(ref, prompts[0], 48);
    specd_engine_free(ref);
    serve_server *a = server_on(open_engine(target_path, draft_path, 512), "a");
    serve_server *b = server_on(open_engine(other_path, NULL, 512), "b");
    serve_job *long_a = submit(a, 1, prompts[1], 400);
    serve_job *jb = submit(b, 1, prompts[0], 48);
    serve_server_end_all(a, SERVE_END_CANCELLED);
    serve_server_free(a); /* waits for its job to end: cancelled, answered */
    assert_true(serve_job_finished(long_a));
    void *answer = NULL;
    serve_fault fault;
    assert_true(serve_job_wait_final(long_a, NULL, NULL, 50, &answer, &fault));
    free(answer);
    serve_job_unref(long_a);
    expect_answer(jb, &want, "server b after a is gone");
    serve_server_free(b);
    specd_result_clear(&want);
}

/* ---- two JSON API hosts ---------------------------------------------------------------------- */

static json_t *call(api_host *h, const char *method, json_t *params) {
    json_t *request = json_pack("{s:s, s:i, s:s, s:o}", "jsonrpc", "2.0", "id", 1, "method", method, "params", params);
    rpc_caller caller = {.admin = true};
    json_t *response = rpc_dispatch_as(h, request, &caller);
    json_decref(request);
    json_t *result = json_incref(json_object_get(response, "result"));
    if (!result) fail_msg("%s: %s", method, json_dumps(response, 0));
    json_decref(response);
    return result;
}

static const char *content_of(json_t *r) { return json_string_value(json_object_get(r, "content")); }

static void two_hosts_serve_two_models(void **state) {
    (void)state;
    api_host *a = api_host_new(), *b = api_host_new();
    json_decref(call(a, "init", json_pack("{s:s, s:s, s:i, s:i}", "model", target_path, "model_draft", draft_path,
                                          "n_ctx", 256, "n_threads", 1)));
    json_decref(call(b, "init", json_pack("{s:s, s:i, s:i}", "model", other_path, "n_ctx", 256, "n_threads", 1)));
    json_t *sa = call(a, "status", json_object()), *sb = call(b, "status", json_object());
    assert_string_equal(json_string_value(json_object_get(sa, "model")), target_path);
    assert_string_equal(json_string_value(json_object_get(sb, "model")), other_path);
    assert_true(json_is_true(json_object_get(sa, "has_draft")));
    assert_true(json_is_false(json_object_get(sb, "has_draft")));
    const char *params = "{s:s, s:i, s:f, s:b}";
    json_t *ra = call(a, "completion", json_pack(params, "prompt", "the dog ran", "n_predict", 16, "temperature", 0.0,
                                                 "ignore_eos", 1));
    json_t *rb = call(b, "completion", json_pack(params, "prompt", "the dog ran", "n_predict", 16, "temperature", 0.0,
                                                 "ignore_eos", 1));
    /* each as its own model alone */
    specd_engine *ea = open_engine(target_path, NULL, 256), *eb = open_engine(other_path, NULL, 256);
    specd_result wa = greedy(ea, "the dog ran", 16), wb = greedy(eb, "the dog ran", 16);
    char *raw_a = specd_detokenize(ea, wa.tokens, wa.n_tokens), *raw_b = specd_detokenize(eb, wb.tokens, wb.n_tokens);
    char *ta = specd_utf8_sanitize(raw_a, strlen(raw_a)), *tb = specd_utf8_sanitize(raw_b, strlen(raw_b));
    assert_string_equal(content_of(ra), ta); /* the answer's text is valid UTF-8 */
    assert_string_equal(content_of(rb), tb);
    assert_string_not_equal(ta, tb);
    /* a completion id of one host is not the other's: b has run one completion, a two */
    json_t *started = call(a, "completion.start", json_pack(params, "prompt", "she", "n_predict", 4, "temperature", 0.0,
                                                            "ignore_eos", 1));
    json_int_t id = json_integer_value(json_object_get(started, "id"));
    assert_int_equal(id, 2);
    json_t *request = json_pack("{s:s, s:i, s:s, s:{s:I}}", "jsonrpc", "2.0", "id", 1, "method", "completion.poll",
                                "params", "id", id);
    rpc_caller caller = {.admin = true};
    json_t *response = rpc_dispatch_as(b, request, &caller);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(response, "error"), "code")), -32004);
    json_decref(response);
    json_decref(request);
    specd_free(raw_a);
    specd_free(raw_b);
    free(ta);
    free(tb);
    specd_result_clear(&wa);
    specd_result_clear(&wb);
    specd_engine_free(ea);
    specd_engine_free(eb);
    json_decref(started);
    json_decref(ra);
    json_decref(rb);
    json_decref(sa);
    json_decref(sb);
    api_host_free(a);
    api_host_free(b);
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target_path, draft_path, sizeof target_path)) return 2;
    snprintf(other_path, sizeof other_path, "%s/other-vocab.gguf", argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_servers_answer_as_their_engines),
        cmocka_unit_test(ending_one_server_leaves_the_other),
        cmocka_unit_test(two_hosts_serve_two_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
