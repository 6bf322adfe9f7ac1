/* fuzz_rpc.c - libFuzzer harness for specd_rpc, the JSON-RPC dispatcher (include/specd_rpc.h).
 *
 * Built twice (tests/fuzz/CMakeLists.txt, `make fuzz`):
 *   fuzz_rpc        no model loaded: framing, batches, parameter checking, init's settings parser
 *                   (loads of files that do not exist), every method's "no model" path.
 *   fuzz_rpc_model  the tiny test models loaded once (LLVMFuzzerInitialize): tokenize, detokenize,
 *                   completions blocking and async, poll, cancel, sampling/grammar/stop parameters.
 *                   Models folder: $SPECD_FUZZ_MODELS, else the build's tests/models.
 *
 * Each input is one request text, passed as is, except that completions are kept short: a
 * completion or completion.start whose params object has no integer n_predict in 0..8 gets
 * n_predict 8, and one without a seed gets seed 1 (then the rewritten JSON is passed). Malformed
 * JSON and wrongly typed values go through untouched, so the dispatcher's checks still see them.
 *
 * Between inputs the harness puts the global state back where it was, so an input behaves the
 * same whenever it runs: a completion still running is cancelled and waited for; in no-model
 * mode anything init left (a failed load, a load in progress) is shut down; in model mode an
 * input that ran a completion, or left the engine anything but ready, gets a fresh engine
 * (shutdown + init: the prompt cache and the drafters' memory start empty again). Every answer
 * is freed with specd_free, so a leak the fuzzer reports is the library's.
 * SPECD_FUZZ_VERBOSE=1 prints each request as dispatched and its answer (to read a reproducer). */
#include "specd_rpc.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SPECD_FUZZ_WITH_MODEL
#define SPECD_FUZZ_WITH_MODEL 0
#endif
#ifndef SPECD_FUZZ_MODELS_DIR
#define SPECD_FUZZ_MODELS_DIR "tests/models"
#endif

enum {
    N_PREDICT_CAP = 8,  /* tokens per completion: each input stays quick */
    FUZZ_N_CTX = 128,   /* a small context: long prompts get truncated, shifts happen early */
};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char init_request[4096]; /* model mode: the init that loads the tiny pair */

static bool verbose;             /* SPECD_FUZZ_VERBOSE=1: print each request and its answer */

static const char *or_empty(const char *s) { return s ? s : ""; }

/* ---- calling the dispatcher ------------------------------------------------------------------ */

/* The "result" of a request we make ourselves (new reference), or NULL when it is an error. */
static json_t *call_result(const char *request) {
    const char *text = specd_rpc(request);
    json_t *response = text ? json_loads(text, 0, NULL) : NULL;
    specd_free((void *)text);
    json_t *result = json_incref(json_object_get(response, "result"));
    json_decref(response);
    return result;
}

static void call(const char *request) { json_decref(call_result(request)); }

/* The status's "state" ("ready", "loading", ...) and "busy". */
static void engine_state(char *state, size_t size, bool *busy) {
    json_t *st = call_result("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"status\"}");
    snprintf(state, size, "%s", or_empty(json_string_value(json_object_get(st, "state"))));
    *busy = json_is_true(json_object_get(st, "busy"));
    json_decref(st);
}

/* ---- keeping completions short ------------------------------------------------------------- */

typedef struct input_summary {
    bool rewritten;       /* the harness changed the request: pass its dump */
    bool has_completion;  /* a completion or completion.start was asked for */
} input_summary;

static bool is_completion(const char *method) {
    return method && (!strcmp(method, "completion") || !strcmp(method, "completion.start"));
}

static void bound_completion(json_t *req, input_summary *sum) {
    if (!json_is_object(req) || !is_completion(json_string_value(json_object_get(req, "method")))) return;
    sum->has_completion = true;
    json_t *params = json_object_get(req, "params");
    if (!json_is_object(params)) return;
    json_t *n = json_object_get(params, "n_predict");
    if (!n || (json_is_integer(n) && (json_integer_value(n) < 0 || json_integer_value(n) > N_PREDICT_CAP))) {
        json_object_set_new(params, "n_predict", json_integer(N_PREDICT_CAP));
        sum->rewritten = true;
    }
    if (!json_object_get(params, "seed")) {
        json_object_set_new(params, "seed", json_integer(1));
        sum->rewritten = true;
    }
}

/* The text to dispatch: `raw`, or the bounded request's dump (caller frees what differs from raw). */
static char *prepare(char *raw, input_summary *sum) {
    json_t *root = json_loads(raw, JSON_REJECT_DUPLICATES, NULL); /* as the dispatcher parses it */
    if (!root) return raw;
    if (json_is_array(root)) {
        size_t i;
        json_t *req;
        json_array_foreach(root, i, req) bound_completion(req, sum);
    } else {
        bound_completion(root, sum);
    }
    char *dumped = sum->rewritten ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return dumped ? dumped : raw;
}

/* ---- putting the state back ------------------------------------------------------------------ */

/* A completion started by the input and still running: cancel it and wait until it has ended. */
static void finish_running_completion(void) {
    char state[32];
    bool busy;
    engine_state(state, sizeof state, &busy);
    if (!busy) return;
    call("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"completion.cancel\"}");
    for (int i = 0; i < 600; i++) { /* at most a minute: then the fuzzer's timeout speaks */
        json_t *r = call_result("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"completion.poll\",\"params\":{\"wait_ms\":100}}");
        bool finished = !r || json_is_true(json_object_get(r, "finished"));
        json_decref(r);
        engine_state(state, sizeof state, &busy);
        if (finished && !busy) return;
    }
}

static void load_tiny_models(void) {
    json_t *st = call_result(init_request);
    bool ready = st && !strcmp(or_empty(json_string_value(json_object_get(st, "state"))), "ready");
    json_decref(st);
    if (!ready) {
        fprintf(stderr, "fuzz_rpc_model: init failed for %s\n(make the models with `ctest -R make_tiny_models` "
                        "or set SPECD_FUZZ_MODELS)\n", init_request);
        abort();
    }
}

static void reset_state(const input_summary *sum) {
    finish_running_completion();
    char state[32];
    bool busy;
    engine_state(state, sizeof state, &busy);
    if (!SPECD_FUZZ_WITH_MODEL) {
        if (strcmp(state, "uninitialized") != 0) call("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"shutdown\"}");
        return;
    }
    if (sum->has_completion || strcmp(state, "ready") != 0) {
        call("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"shutdown\"}");
        load_tiny_models();
    }
}

/* ---- libFuzzer ------------------------------------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    verbose = getenv("SPECD_FUZZ_VERBOSE") && !strcmp(getenv("SPECD_FUZZ_VERBOSE"), "1");
    if (!SPECD_FUZZ_WITH_MODEL) return 0;
    const char *dir = getenv("SPECD_FUZZ_MODELS");
    if (!dir || !*dir) dir = SPECD_FUZZ_MODELS_DIR;
    snprintf(init_request, sizeof init_request,
             "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"init\",\"params\":{\"model\":\"%s/target.gguf\","
             "\"model_draft\":\"%s/draft.gguf\",\"n_ctx\":%d,\"n_threads\":1}}",
             dir, dir, FUZZ_N_CTX);
    load_tiny_models();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *raw = malloc(size + 1);
    if (!raw) return 0;
    memcpy(raw, data, size);
    raw[size] = '\0'; /* the API takes a C string: it ends at the first NUL */
    input_summary sum = {0};
    char *request = prepare(raw, &sum);
    const char *response = specd_rpc(request);
    if (verbose) printf(">> %s\n<< %s\n", request, response ? response : "(no answer)");
    specd_free((void *)response);
    if (request != raw) free(request);
    free(raw);
    reset_state(&sum);
    return 0;
}
