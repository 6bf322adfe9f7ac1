/* test_rpc_api.c - the JSON API as objects (specd_rpc_new / specd_rpc_call / specd_rpc_free), through
 * the public header alone: two objects in one process each load their own model and answer their
 * own calls, unaffected by the other and by the process's object (specd_rpc, the old ABI); init
 * given to specd_rpc_new, its failures as error objects; calls after the other object is freed.
 *
 *   test_rpc_api MODELS_DIR   (target.gguf, draft.gguf, other-vocab.gguf) */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "specd_rpc.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char target[1024], draft[1024], other_vocab[1024];

/* api's answer to method(params), parsed; NULL for no answer. */
static json_t *call(specd_rpc_api *api, const char *method, const char *params) {
    char request[4096];
    snprintf(request, sizeof request, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"%s\",\"params\":%s}", method, params);
    char *text = specd_rpc_call(api, request);
    if (!text) return NULL;
    json_t *r = json_loads(text, 0, NULL);
    if (!r) fail_msg("answer is not JSON: %s", text);
    specd_free(text);
    return r;
}

/* The result of method(params) on api (a new reference); fails the test on an error. */
static json_t *result_of(specd_rpc_api *api, const char *method, const char *params) {
    json_t *r = call(api, method, params);
    json_t *result = json_incref(json_object_get(r, "result"));
    if (!result) fail_msg("%s %s: %s", method, params, json_dumps(r, 0));
    json_decref(r);
    return result;
}

static int error_code(specd_rpc_api *api, const char *method, const char *params) {
    json_t *r = call(api, method, params);
    int code = (int)json_integer_value(json_object_get(json_object_get(r, "error"), "code"));
    json_decref(r);
    return code;
}

/* The greedy text of 12 tokens after "Once upon a time" on api's model. */
static char *greedy_text(specd_rpc_api *api) {
    json_t *result = result_of(api, "completion",
                               "{\"prompt\": \"Once upon a time\", \"n_predict\": 12, \"temperature\": 0}");
    char *text = strdup(json_string_value(json_object_get(result, "content")));
    json_decref(result);
    return text;
}

static char *model_of(specd_rpc_api *api) {
    json_t *status = result_of(api, "status", "{}");
    char *model = strdup(json_string_value(json_object_get(status, "model")));
    json_decref(status);
    return model;
}

static specd_rpc_api *new_api(const char *init) {
    char *error = (char *)"unset";
    specd_rpc_api *api = specd_rpc_new(init, &error);
    if (!api) fail_msg("specd_rpc_new(%s): %s", init ? init : "NULL", error);
    assert_null(error);
    return api;
}

/* Two objects, two models: each answers with its own, whatever the other loads, runs or frees. */
static void test_two_objects_are_independent(void **state) {
    (void)state;
    char init_a[2400], init_b[1200];
    snprintf(init_a, sizeof init_a, "-m %s -md %s -c 256 -t 1", target, draft); /* a command line */
    snprintf(init_b, sizeof init_b, "{\"model\": \"%s\", \"n_ctx\": 256, \"n_threads\": 1}", other_vocab); /* JSON */
    specd_rpc_api *a = new_api(init_a), *b = new_api(init_b);
    char *model_a = model_of(a), *model_b = model_of(b);
    assert_non_null(strstr(model_a, "target.gguf"));
    assert_non_null(strstr(model_b, "other-vocab.gguf"));

    /* the same text, two vocabularies: different ids */
    json_t *ta = result_of(a, "tokenize", "{\"text\": \"the little girl\"}");
    json_t *tb = result_of(b, "tokenize", "{\"text\": \"the little girl\"}");
    assert_false(json_equal(json_object_get(ta, "tokens"), json_object_get(tb, "tokens")));
    json_decref(ta);
    json_decref(tb);

    /* each object's completion ids are its own: both start at 1 */
    json_t *sa = result_of(a, "completion.start", "{\"prompt\": \"one day\", \"n_predict\": 4}");
    json_t *sb = result_of(b, "completion.start", "{\"prompt\": \"one day\", \"n_predict\": 4}");
    assert_int_equal(json_integer_value(json_object_get(sa, "id")), json_integer_value(json_object_get(sb, "id")));
    json_decref(sa);
    json_decref(sb);
    json_decref(result_of(a, "completion.poll", "{\"wait_ms\": 20000}"));
    json_decref(result_of(b, "completion.poll", "{\"wait_ms\": 20000}"));

    /* a's greedy text is the target's, b's is another model's; unloading a leaves b serving */
    char *text_a = greedy_text(a), *text_b = greedy_text(b);
    json_decref(result_of(a, "shutdown", "{}"));
    assert_int_equal(error_code(a, "completion", "{\"prompt\": \"x\"}"), SPECD_RPC_NO_MODEL);
    char *again_b = greedy_text(b);
    assert_string_equal(again_b, text_b);

    /* the process's object (specd_rpc, the old ABI) is a third one: nothing loaded there */
    const char *status = specd_rpc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"status\"}");
    json_t *s = json_loads(status, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "result"), "init_success")), 0);
    json_decref(s);
    specd_free((void *)status);

    /* a loads the other model again while b is freed: a answers as b did */
    specd_rpc_free(b);
    char params[1200];
    snprintf(params, sizeof params, "{\"model\": \"%s\", \"n_ctx\": 256, \"n_threads\": 1}", other_vocab);
    json_decref(result_of(a, "init", params));
    char *text_a2 = greedy_text(a);
    assert_string_equal(text_a2, text_b);
    assert_string_not_equal(text_a, text_b); /* (the two models do write different texts) */
    specd_rpc_free(a);
    free(model_a), free(model_b), free(text_a), free(text_b), free(again_b), free(text_a2);
}

/* init's failures come back as JSON-RPC error objects; no object is made. */
static void test_new_fails_with_an_error_object(void **state) {
    (void)state;
    const char *inits[] = {"-m /nonexistent/model.gguf", "{\"model\": 7}", "{\"model\": ", "--no-such-flag"};
    const int codes[] = {SPECD_RPC_MODEL_LOAD, SPECD_RPC_INVALID_PARAMS, SPECD_RPC_PARSE_ERROR, SPECD_RPC_INVALID_PARAMS};
    for (int i = 0; i < 4; i++) {
        char *error = NULL;
        assert_null(specd_rpc_new(inits[i], &error));
        json_t *e = json_loads(error ? error : "", 0, NULL);
        if (!e) fail_msg("%s: error is not JSON: %s", inits[i], error);
        if (json_integer_value(json_object_get(e, "code")) != codes[i])
            fail_msg("%s: want code %d, got %s", inits[i], codes[i], error);
        assert_true(json_is_string(json_object_get(e, "message")));
        json_decref(e);
        specd_free(error);
    }
    assert_null(specd_rpc_new("-m /nonexistent/model.gguf", NULL)); /* error may be NULL */
}

/* No init: an object without models answers, and says so; NULLs are answered, not crashed on. */
static void test_empty_object_and_nulls(void **state) {
    (void)state;
    specd_rpc_api *api = new_api(NULL);
    assert_int_equal(error_code(api, "completion", "{\"prompt\": \"x\"}"), SPECD_RPC_NO_MODEL);
    assert_null(specd_rpc_call(api, "{\"jsonrpc\":\"2.0\",\"method\":\"status\"}")); /* a notification */
    char *text = specd_rpc_call(api, "not json");
    assert_non_null(strstr(text, "-32700"));
    specd_free(text);
    text = specd_rpc_call(NULL, "{}");
    assert_non_null(strstr(text, "-32600"));
    specd_free(text);
    text = specd_rpc_call(api, NULL);
    assert_non_null(strstr(text, "-32600"));
    specd_free(text);
    specd_rpc_free(api);
    specd_rpc_free(NULL);
}

/* init with "async": specd_rpc_new returns while the model loads; the status follows it to ready,
 * and an object freed during its load stops the load and frees cleanly. */
static void test_async_init(void **state) {
    (void)state;
    char init[1200];
    snprintf(init, sizeof init, "{\"model\": \"%s\", \"n_ctx\": 256, \"async\": true}", target);
    specd_rpc_api *api = new_api(init);
    json_int_t ready = 0;
    for (int i = 0; i < 2000 && ready == 0; i++) {
        json_t *status = result_of(api, "status", "{}");
        ready = json_integer_value(json_object_get(status, "init_success"));
        json_decref(status);
        if (ready == 0) nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
    }
    assert_int_equal(ready, 1);
    specd_rpc_free(api);
    specd_rpc_free(new_api(init)); /* freed at once, its load running or not */
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_rpc_api MODELS_DIR\n");
        return 2;
    }
    snprintf(target, sizeof target, "%s/target.gguf", argv[1]);
    snprintf(draft, sizeof draft, "%s/draft.gguf", argv[1]);
    snprintf(other_vocab, sizeof other_vocab, "%s/other-vocab.gguf", argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_fails_with_an_error_object),
        cmocka_unit_test(test_empty_object_and_nulls),
        cmocka_unit_test(test_two_objects_are_independent),
        cmocka_unit_test(test_async_init),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
