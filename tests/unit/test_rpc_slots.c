/* test_rpc_slots.c - concurrent completions through the JSON-RPC dispatcher: slots, the queue,
 * the busy error past it, cancel of queued and running requests, and outputs that do not depend on
 * what runs beside them. Built for `make tsan` and `make asan` too (threads poll and call at once).
 *
 *   test_rpc_slots MODELS_DIR   (target.gguf, draft.gguf) */
#define _DEFAULT_SOURCE /* usleep */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "engine_helpers.h"

#include "specd_rpc.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char target[1024], draft[1024];

static json_t *call(const char *method, const char *params) {
    char request[8192];
    snprintf(request, sizeof request, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"%s\",\"params\":%s}", method, params);
    const char *text = specd_rpc(request);
    json_t *r = text ? json_loads(text, 0, NULL) : NULL;
    if (!r) fail_msg("%s: no JSON response: %s", method, text ? text : "(null)");
    specd_free((void *)text);
    return r;
}

static json_t *result_of(const char *method, const char *params) {
    json_t *r = call(method, params);
    json_t *result = json_incref(json_object_get(r, "result"));
    if (!result) {
        char *dump = json_dumps(r, 0);
        fail_msg("%s %s failed: %s", method, params, dump);
    }
    json_decref(r);
    return result;
}

static void init_slots(int n_parallel, const char *extra) {
    char params[4096];
    snprintf(params, sizeof params, "{\"cmd\":\"-m '%s' -md '%s' -c %d -np %d -t 1 -fa off -ctv f32 %s\"}", target,
             draft, 256 * n_parallel, n_parallel, extra);
    json_t *r = result_of("init", params);
    assert_int_equal(json_integer_value(json_object_get(r, "n_parallel")), n_parallel);
    assert_int_equal(json_integer_value(json_object_get(r, "n_ctx")), 256);
    assert_int_equal((int)json_array_size(json_object_get(r, "slots")), n_parallel);
    json_decref(r);
}

static int64_t start(const char *params) {
    json_t *r = result_of("completion.start", params);
    int64_t id = json_integer_value(json_object_get(r, "id"));
    json_decref(r);
    return id;
}

/* Polls completion `id` to its end: the concatenated text, and the final update (new reference). */
typedef struct stream {
    int64_t id;
    char text[8192];
    json_t *final;
} stream;

static void *drain(void *arg) {
    stream *s = arg;
    for (bool done = false; !done;) {
        char params[64];
        snprintf(params, sizeof params, "{\"id\":%lld,\"wait_ms\":200}", (long long)s->id);
        json_t *r = result_of("completion.poll", params);
        size_t i;
        json_t *u;
        json_array_foreach(json_object_get(r, "completion_updates"), i, u) {
            strncat(s->text, json_string_value(json_object_get(u, "content")), sizeof s->text - strlen(s->text) - 1);
            if (json_is_true(json_object_get(u, "stop"))) s->final = json_incref(u);
        }
        done = json_is_true(json_object_get(r, "finished"));
        json_decref(r);
    }
    return NULL;
}

/* Requests that differ in every way a slot keeps its own state: temperature and seed, grammar,
 * n_probs, drafter. Seeded sampling runs without speculation (with it, the draws follow the draft
 * lengths, which follow the costs the engine learns: the same distribution, not the same text). */
static const char *const requests[] = {
    "{\"prompt\":\"the little girl saw a big red ball\",\"n_predict\":32,\"temperature\":0,\"ignore_eos\":true}",
    "{\"prompt\":\"one day the dog ran to the park\",\"n_predict\":28,\"temperature\":0,\"ignore_eos\":true,"
    "\"speculative\":{\"type\":[\"ngram-simple\",\"draft\"]}}",
    "{\"prompt\":\"she was happy\",\"n_predict\":24,\"temperature\":0,\"ignore_eos\":true,\"n_probs\":3,"
    "\"grammar\":\"root ::= [a-z ]+\"}",
    "{\"prompt\":\"he had a cat\",\"n_predict\":30,\"temperature\":1,\"seed\":5,\"ignore_eos\":true,"
    "\"speculative\":{\"type\":[\"none\"]}}",
    "{\"prompt\":\"the sun was hot\",\"n_predict\":20,\"temperature\":0,\"ignore_eos\":true}",
};
#define N_REQUESTS (int)(sizeof requests / sizeof *requests)

static void sequential_contents(char out[][8192]) {
    for (int i = 0; i < N_REQUESTS; i++) {
        json_t *r = result_of("completion", requests[i]);
        snprintf(out[i], 8192, "%s", json_string_value(json_object_get(r, "content")));
        assert_true(strlen(out[i]) > 0);
        json_decref(r);
    }
}

/* Five mixed requests on three slots (two wait in the queue), all started at once: each text equals
 * the request's text run alone. One stream is left unread until the others end: a client that does
 * not read stalls nobody. */
static void concurrent_completions_equal_their_sequential_runs(void **state) {
    (void)state;
    init_slots(3, "");
    char alone[N_REQUESTS][8192];
    sequential_contents(alone);
    stream s[N_REQUESTS];
    memset(s, 0, sizeof s);
    for (int i = 0; i < N_REQUESTS; i++) s[i].id = start(requests[i]);
    pthread_t threads[N_REQUESTS];
    for (int i = 1; i < N_REQUESTS; i++) pthread_create(&threads[i], NULL, drain, &s[i]);
    for (int i = 1; i < N_REQUESTS; i++) pthread_join(threads[i], NULL);
    drain(&s[0]); /* finished long ago, its text waiting in full */
    for (int i = 0; i < N_REQUESTS; i++) {
        if (strcmp(s[i].text, alone[i]) != 0) fail_msg("request %d under load: '%s', alone: '%s'", i, s[i].text, alone[i]);
        assert_non_null(s[i].final);
        json_decref(s[i].final);
    }
    /* the slots are idle again and show what they ran */
    json_t *st = result_of("status", "{}");
    assert_false(json_is_true(json_object_get(st, "busy")));
    assert_int_equal(json_integer_value(json_object_get(st, "n_queued")), 0);
    size_t i;
    json_t *slot;
    json_array_foreach(json_object_get(st, "slots"), i, slot)
        assert_string_equal(json_string_value(json_object_get(slot, "state")), "idle");
    json_decref(st);
}

/* A long prompt arriving while another request generates goes in by chunks of the batch (-b 40)
 * that join the running slot's passes: both texts equal their runs alone, and the long one's
 * prompt is all there (its prompt_n). */
static void long_prompt_joins_in_chunks(void **state) {
    (void)state;
    init_slots(2, "-b 40");
    char long_request[4096] = "{\"prompt\":\"";
    for (int i = 0; i < 12; i++) strcat(long_request, "the little dog ran to the park and saw a big red ball. ");
    strcat(long_request, "\",\"n_predict\":16,\"temperature\":0,\"ignore_eos\":true}");
    const char *other = "{\"prompt\":\"she was happy\",\"n_predict\":48,\"temperature\":0,\"ignore_eos\":true}";
    json_t *a = result_of("completion", long_request), *b = result_of("completion", other);
    json_t *timings = json_object_get(a, "timings");
    int64_t prompt_n = json_integer_value(json_object_get(timings, "prompt_n"));
    assert_true(prompt_n > 3 * 40); /* several chunks */
    /* the same again on fresh slots: a fresh engine, so nothing of either is cached */
    init_slots(2, "-b 40");
    stream sb = {.id = start(other)};
    stream sa = {.id = start(long_request)};
    drain(&sa);
    drain(&sb);
    assert_string_equal(sa.text, json_string_value(json_object_get(a, "content")));
    assert_string_equal(sb.text, json_string_value(json_object_get(b, "content")));
    json_t *t = json_object_get(sa.final, "timings"); /* a slot may have had the BOS cached */
    assert_int_equal(json_integer_value(json_object_get(t, "prompt_n")) + json_integer_value(json_object_get(t, "cache_n")),
                     prompt_n + json_integer_value(json_object_get(timings, "cache_n")));
    json_decref(sa.final);
    json_decref(sb.final);
    json_decref(a);
    json_decref(b);
}

/* Context shifts in slots of 64 tokens: two requests that each run past their slot's context,
 * started together, give what each gives alone (each slot shifts its own sequence only). */
static void context_shifts_in_slots(void **state) {
    (void)state;
    char params[4096];
    snprintf(params, sizeof params, "{\"cmd\":\"-m '%s' -md '%s' -c 128 -np 2 -t 1 -fa off -ctv f32\"}", target, draft);
    json_decref(result_of("init", params));
    const char *req[2] = {
        "{\"prompt\":\"one day the dog ran\",\"temperature\":0,\"ignore_eos\":true,\"n_keep\":3,\"n_predict\":150}",
        "{\"prompt\":\"she was happy\",\"temperature\":0,\"ignore_eos\":true,\"n_predict\":120,"
        "\"speculative\":{\"type\":[\"ngram-simple\",\"draft\"]}}",
    };
    char alone[2][8192];
    for (int i = 0; i < 2; i++) {
        json_t *r = result_of("completion", req[i]);
        assert_true(json_is_true(json_object_get(r, "truncated"))); /* it shifted */
        snprintf(alone[i], sizeof alone[i], "%s", json_string_value(json_object_get(r, "content")));
        json_decref(r);
    }
    stream s[2] = {{.id = start(req[0])}, {.id = start(req[1])}};
    for (int i = 0; i < 2; i++) {
        drain(&s[i]);
        assert_string_equal(s[i].text, alone[i]);
        json_decref(s[i].final);
    }
}

/* Blocking completions from several threads at once (the old API's get_completion, one per app
 * thread): each gets its own text. */
typedef struct blocking_call {
    int index;
    char text[8192];
} blocking_call;

static void *call_blocking(void *arg) {
    blocking_call *b = arg;
    json_t *r = result_of("completion", requests[b->index]);
    snprintf(b->text, sizeof b->text, "%s", json_string_value(json_object_get(r, "content")));
    json_decref(r);
    return NULL;
}

static void blocking_completions_from_threads(void **state) {
    (void)state;
    init_slots(2, "");
    char alone[N_REQUESTS][8192];
    sequential_contents(alone);
    blocking_call b[N_REQUESTS];
    pthread_t threads[N_REQUESTS];
    for (int i = 0; i < N_REQUESTS; i++) {
        b[i].index = i;
        pthread_create(&threads[i], NULL, call_blocking, &b[i]);
    }
    for (int i = 0; i < N_REQUESTS; i++) {
        pthread_join(threads[i], NULL);
        assert_string_equal(b[i].text, alone[i]);
    }
}

static const char *const long_request = "{\"prompt\":\"she\",\"n_predict\":-1,\"temperature\":1,\"seed\":3,"
                                        "\"ignore_eos\":true}";

/* One slot, a queue of one: the third request is the busy error, which says why; cancelling the
 * running one ends it within a step ("cancelled"), and the queued one then runs. */
/* Waits until the scheduler has taken every request it can into a slot (status: none queued). A
 * request just started may still sit in the queue for a moment, more so on a loaded machine. */
static void wait_until_none_queued(void) {
    for (int i = 0; i < 1000; i++) {
        json_t *st = result_of("status", "{}");
        bool queued = json_integer_value(json_object_get(st, "n_queued")) > 0;
        json_decref(st);
        if (!queued) return;
        usleep(2000);
    }
    fail_msg("a request stayed queued for 2 s with a slot free");
}

static void queue_full_is_busy_and_cancel_frees_the_slot(void **state) {
    (void)state;
    init_slots(1, "--queue 1");
    stream running = {.id = start(long_request)};
    wait_until_none_queued(); /* running holds the slot; the queue is empty */
    stream queued = {.id = start(requests[4])};
    json_t *busy = call("completion.start", requests[0]);
    json_t *err = json_object_get(busy, "error");
    assert_int_equal(json_integer_value(json_object_get(err, "code")), SPECD_RPC_BUSY);
    assert_non_null(strstr(json_string_value(json_object_get(err, "message")),
                           "all 1 slots are busy and 1 requests are queued"));
    json_decref(busy);
    busy = call("completion", requests[0]); /* blocking calls queue in the same queue */
    assert_int_equal(json_integer_value(json_object_get(json_object_get(busy, "error"), "code")), SPECD_RPC_BUSY);
    json_decref(busy);
    char params[64];
    snprintf(params, sizeof params, "{\"id\":%lld}", (long long)running.id);
    json_decref(result_of("completion.cancel", params));
    drain(&running);
    assert_string_equal(json_string_value(json_object_get(running.final, "stop_type")), "cancelled");
    assert_true(json_integer_value(json_object_get(running.final, "tokens_predicted")) < 250);
    drain(&queued);
    assert_string_equal(json_string_value(json_object_get(queued.final, "stop_type")), "limit");
    assert_int_equal(json_integer_value(json_object_get(queued.final, "tokens_predicted")), 20);
    json_decref(running.final);
    json_decref(queued.final);
}

/* A request cancelled while it waits never runs: it ends at once with no text, and the running
 * one is untouched. */
static void cancel_of_a_queued_request(void **state) {
    (void)state;
    init_slots(1, "");
    char alone[N_REQUESTS][8192];
    sequential_contents(alone);
    stream running = {.id = start(requests[0])};
    stream queued = {.id = start(long_request)};
    char params[64];
    snprintf(params, sizeof params, "{\"id\":%lld}", (long long)queued.id);
    json_t *c = result_of("completion.cancel", params);
    assert_true(json_is_true(json_object_get(c, "cancelled")));
    json_decref(c);
    drain(&queued);
    assert_string_equal(json_string_value(json_object_get(queued.final, "stop_type")), "cancelled");
    assert_int_equal(json_integer_value(json_object_get(queued.final, "tokens_predicted")), 0);
    drain(&running);
    assert_string_equal(running.text, alone[0]);
    json_decref(running.final);
    json_decref(queued.final);
}

/* 200 short requests from 8 threads, blocking and async: nothing leaks (ASan) and nothing races (TSan). */
static int n_failed_requests;

static void *many_requests(void *arg) {
    int base = *(int *)arg;
    for (int k = 0; k < 25; k++) { /* 8 clients x 25: the 200 requests */
        char params[256];
        snprintf(params, sizeof params, "{\"prompt\":\"story %d\",\"n_predict\":4,\"temperature\":0}", base + k);
        json_t *r = call(k % 2 ? "completion" : "completion.start", params);
        json_t *res = json_object_get(r, "result");
        if (!res) __atomic_add_fetch(&n_failed_requests, 1, __ATOMIC_RELAXED); /* asserted on the main thread */
        int64_t id = json_integer_value(json_object_get(res, "id"));
        if (res && k % 2 == 0) {
            stream s = {.id = id};
            drain(&s);
            json_decref(s.final);
        }
        json_decref(r);
    }
    return NULL;
}

static void many_clients(void **state) {
    (void)state;
    init_slots(4, "--queue 64");
    pthread_t threads[8];
    int bases[8];
    for (int i = 0; i < 8; i++) {
        bases[i] = i * 10;
        pthread_create(&threads[i], NULL, many_requests, &bases[i]);
    }
    for (int i = 0; i < 8; i++) pthread_join(threads[i], NULL);
    assert_int_equal(__atomic_load_n(&n_failed_requests, __ATOMIC_RELAXED), 0);
    json_t *st = result_of("status", "{}");
    assert_false(json_is_true(json_object_get(st, "busy")));
    json_decref(st);
    json_decref(result_of("shutdown", "{}"));
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target, draft, sizeof target)) return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(concurrent_completions_equal_their_sequential_runs),
        cmocka_unit_test(long_prompt_joins_in_chunks),
        cmocka_unit_test(context_shifts_in_slots),
        cmocka_unit_test(blocking_completions_from_threads),
        cmocka_unit_test(queue_full_is_busy_and_cancel_frees_the_slot),
        cmocka_unit_test(cancel_of_a_queued_request),
        cmocka_unit_test(many_clients),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    specd_deinit();
    return failed;
}
