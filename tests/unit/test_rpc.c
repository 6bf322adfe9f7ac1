/* test_rpc.c - the JSON-RPC dispatcher and the specd_* C ABI on the tiny models: every method,
 * every error (code, message, field), framing (batches, notifications, ids), lossless speculation
 * per request, stop strings, truncation, async poll/cancel from several threads, busy errors.
 *
 *   test_rpc MODELS_DIR   (target.gguf, draft.gguf) */
#define _DEFAULT_SOURCE /* usleep, mkdtemp, mkfifo */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "engine_helpers.h"

#include "rpc/rpc.h"
#include "specd_rpc.h"

#include <ctype.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char target[1024], draft[1024];

/* Sends `request` (printf-style) to specd_rpc; returns the parsed response (NULL: no response). */
static json_t *rpc(const char *fmt, ...) {
    char request[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(request, sizeof request, fmt, ap);
    va_end(ap);
    const char *text = specd_rpc(request);
    if (!text) return NULL;
    json_t *r = json_loads(text, 0, NULL);
    if (!r) fail_msg("response is not JSON: %s", text);
    specd_free((void *)text);
    return r;
}

/* The result of method(params); fails the test on an error. */
static json_t *result_of(const char *method, const char *params) {
    json_t *r = rpc("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"%s\",\"params\":%s}", method, params);
    json_t *result = json_object_get(r, "result");
    if (!result) {
        char *dump = json_dumps(r, 0);
        fail_msg("%s %s failed: %s", method, params, dump);
    }
    json_incref(result);
    json_decref(r);
    return result;
}

static void expect_error_response(json_t *r, int code, const char *field, const char *needle) {
    json_t *err = json_object_get(r, "error");
    char *dump = json_dumps(r, 0);
    if (!err) fail_msg("expected error %d, got %s", code, dump);
    if (json_integer_value(json_object_get(err, "code")) != code) fail_msg("expected code %d: %s", code, dump);
    const char *msg = json_string_value(json_object_get(err, "message"));
    if (!msg || !strstr(msg, needle)) fail_msg("expected '%s' in the message: %s", needle, dump);
    const char *got_field = json_string_value(json_object_get(json_object_get(err, "data"), "field"));
    if (field && (!got_field || strcmp(got_field, field) != 0)) fail_msg("expected field '%s': %s", field, dump);
    free(dump);
}

static void expect_error(const char *method, const char *params, int code, const char *field, const char *needle) {
    json_t *r = rpc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"%s\",\"params\":%s}", method, params);
    expect_error_response(r, code, field, needle);
    json_decref(r);
}

/* A number jansson cannot hold (1e999, 2^64, below -2^63) is a parse error that names the field it
 * was given for, in an array too; a parse error elsewhere names none. */
static void numbers_out_of_range_name_their_field(void **state) {
    (void)state;
    static const struct {
        const char *params, *field, *needle;
    } cases[] = {
        {"{\"prompt\":\"x\",\"n_predict\":1e999}", "n_predict", "real number overflow"},
        {"{\"prompt\":\"x\", \"n_predict\" :\n 18446744073709551616 }", "n_predict", "too big integer"},
        {"{\"seed\":-9223372036854775809,\"prompt\":\"x\"}", "seed", "too big negative integer"},
        {"{\"prompt\":\"x\",\"logit_bias\":[[5, 1.0], [6,1e999]]}", "logit_bias", "real number overflow"},
        {"{\"prompt\":\"x\",\"stop\":[\"a\"],\"speculative\":{\"n_max\":[{\"a\":1}, 9e9999]}}", "n_max", "overflow"},
        {"{\"prompt\":\"x\",\"a\\\"b\":1e999}", "a\\\"b", "overflow"}, /* an escaped quote in the key */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *r = rpc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"completion\",\"params\":%s}", cases[i].params);
        expect_error_response(r, -32700, cases[i].field, cases[i].needle);
        if (!strstr(json_string_value(json_object_get(json_object_get(r, "error"), "message")), "is a number out of range"))
            fail_msg("case %zu: the message does not say what is wrong", i);
        json_decref(r);
    }
    json_t *r = rpc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"completion\",\"params\":{\"prompt\":1e99 9}}");
    expect_error_response(r, -32700, NULL, "parse error");
    assert_null(json_object_get(json_object_get(r, "error"), "data"));
    json_decref(r);
}

static void init_models(bool with_draft) {
    char params[4096];
    snprintf(params, sizeof params, "{\"cmd\":\"-m '%s' %s%s%s -c 256 -t 1 -fa off -ctv f32\"}", target, with_draft ? "-md '" : "",
             with_draft ? draft : "", with_draft ? "'" : "");
    json_t *r = result_of("init", params);
    assert_string_equal(json_string_value(json_object_get(r, "state")), "ready");
    json_decref(r);
}

/* ---- framing --------------------------------------------------------------------------------- */

static void framing_errors(void **state) {
    (void)state;
    json_t *r = rpc("{\"jsonrpc\":\"2.0\",\"id\":1,");
    expect_error_response(r, -32700, NULL, "parse error");
    assert_true(json_is_null(json_object_get(r, "id")));
    json_decref(r);
    r = rpc("[]");
    expect_error_response(r, -32600, NULL, "empty batch");
    json_decref(r);
    r = rpc("{\"jsonrpc\":\"1.0\",\"id\":3,\"method\":\"status\"}");
    expect_error_response(r, -32600, "jsonrpc", "\"jsonrpc\" must be \"2.0\"");
    assert_int_equal(json_integer_value(json_object_get(r, "id")), 3);
    json_decref(r);
    r = rpc("{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":5}");
    expect_error_response(r, -32600, "method", "\"method\" must be a string");
    json_decref(r);
    r = rpc("{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"status\"}");
    expect_error_response(r, -32600, "id", "\"id\" must be");
    json_decref(r);
    r = rpc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"status\",\"extra\":1}");
    expect_error_response(r, -32600, "extra", "unknown member");
    json_decref(r);
    expect_error("nope", "{}", -32601, "method", "method not found: 'nope'");
    expect_error("status", "[1]", -32602, "params", "params must be an object");
    expect_error("status", "{\"verbose\":true}", -32602, "verbose", "unknown field 'verbose'");
    r = rpc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"status\",\"params\":{},\"params\":{}}");
    expect_error_response(r, -32700, NULL, "duplicate");
    json_decref(r);
    const char *nul = specd_rpc(NULL);
    assert_non_null(strstr(nul, "-32600"));
    specd_free((void *)nul);
}

static void ids_batches_notifications(void **state) {
    (void)state;
    json_t *r = rpc("{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"method\":\"status\"}");
    assert_string_equal(json_string_value(json_object_get(r, "id")), "abc");
    assert_non_null(json_object_get(r, "result"));
    json_decref(r);
    assert_null(rpc("{\"jsonrpc\":\"2.0\",\"method\":\"status\"}"));
    assert_null(rpc("{\"jsonrpc\":\"2.0\",\"method\":\"nope\"}")); /* errors of notifications too */
    assert_null(rpc("[{\"jsonrpc\":\"2.0\",\"method\":\"status\"},{\"jsonrpc\":\"2.0\",\"method\":\"status\"}]"));
    r = rpc("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"status\"},{\"jsonrpc\":\"2.0\",\"method\":\"status\"},"
            "5,{\"jsonrpc\":\"2.0\",\"id\":2.5,\"method\":\"nope\"}]");
    assert_true(json_is_array(r));
    assert_int_equal(json_array_size(r), 3);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(r, 0), "id")), 1);
    expect_error_response(json_array_get(r, 1), -32600, NULL, "must be a JSON object");
    expect_error_response(json_array_get(r, 2), -32601, NULL, "not found");
    assert_true(json_real_value(json_object_get(json_array_get(r, 2), "id")) == 2.5);
    json_decref(r);
}

/* ---- before and during init ------------------------------------------------------------------ */

static void calls_before_init(void **state) {
    (void)state;
    json_t *s = result_of("status", "{}");
    assert_string_equal(json_string_value(json_object_get(s, "state")), "uninitialized");
    assert_int_equal(json_integer_value(json_object_get(s, "init_success")), 0);
    json_decref(s);
    expect_error("tokenize", "{\"text\":\"a\"}", -32000, NULL, "call init first");
    expect_error("detokenize", "{\"tokens\":[1]}", -32000, NULL, "call init first");
    expect_error("completion", "{\"prompt\":\"a\"}", -32000, NULL, "call init first");
    expect_error("completion.start", "{\"prompt\":\"a\"}", -32000, NULL, "call init first");
    expect_error("completion.poll", "{}", -32004, "id", "no completion has been started");
    expect_error("completion.cancel", "{\"id\":3}", -32004, "id", "no completion with id 3");
}

static void init_errors(void **state) {
    (void)state;
    char params[4096];
    expect_error("init", "{}", -32602, "model", "no target model");
    expect_error("init", "{\"cmd\":\"-c 64\"}", -32602, "model", "no target model");
    expect_error("init", "{\"cmd\":\"-m x.gguf --bogus\"}", -32602, "--bogus", "unknown option '--bogus'");
    expect_error("init", "{\"cmd\":\"-m x.gguf -c lots\"}", -32602, "-c", "-c expects an integer");
    expect_error("init", "{\"cmd\":\"-m x.gguf -fa sometimes\"}", -32602, "-fa",
                 "-fa expects \"on\", \"off\" or \"auto\", got 'sometimes'");
    expect_error("init", "{\"model\":\"x\",\"flash_attn\":\"sometimes\"}", -32602, "flash_attn", "got 'sometimes'");
    expect_error("init", "{\"model\":\"x\",\"flash_attn\":1}", -32602, "flash_attn", "or a boolean");
    expect_error("init", "{\"cmd\":\"-m x.gguf -ctv q3_0\"}", -32602, "-ctv", "expects \"f32\", \"f16\", \"bf16\"");
    expect_error("init", "{\"cmd\":\"-m x.gguf -ctkd f8\"}", -32602, "-ctkd", "got 'f8'");
    expect_error("init", "{\"cmd\":\"-m x.gguf --batch-invariant yes\"}", -32602, "--batch-invariant",
                 "expects \"on\" or \"off\"");
    expect_error("init", "{\"cmd\":\"-m x.gguf --lora-scaled a.gguf abc\"}", -32602, "--lora-scaled",
                 "expects FILE:SCALE or FILE SCALE, got the scale 'abc'");
    expect_error("init", "{\"cmd\":\"-m x.gguf --lora-scaled a.gguf:1,b.gguf\"}", -32602, "--lora-scaled",
                 "'b.gguf' is not FILE:SCALE");
    expect_error("init", "{\"cmd\":\"-m x.gguf --lora a.gguf,\"}", -32602, "--lora", "--lora: an empty file name");
    expect_error("init", "{\"cmd\":\"-m x.gguf --lora\"}", -32602, "--lora", "--lora needs a value");
    expect_error("init", "{\"model\":\"x\",\"cache_type_k\":\"q9\"}", -32602, "cache_type_k", "got 'q9'");
    expect_error("init", "{\"model\":\"x\",\"batch_invariant\":1}", -32602, "batch_invariant", "");
    expect_error("init", "{\"model\":\"x\",\"cache_type_v\":\"q4\"}", -32602, "cache_type_v", "got 'q4'");
    expect_error("init", "{\"model\":\"x\",\"warmup\":\"no\"}", -32602, "warmup", "");
    expect_error("init", "{\"model\":\"x\",\"load_mode\":\"fast\"}", -32602, "load_mode", "got 'fast'");
    expect_error("init", "{\"cmd\":\"-m x.gguf -lm fast\"}", -32602, "-lm", "llama.cpp's load modes");
    expect_error("init", "{\"model\":\"x\",\"draft_hold\":\"always\"}", -32602, "draft_hold", "got 'always'");
    expect_error("init", "{\"model\":\"x\",\"n_threads_batch\":0}", -32602, "n_threads_batch", "");
    expect_error("init", "{\"cmd\":\"-m x.gguf -ub 0\"}", -32602, "-ub", "");
    expect_error("init", "{\"cmd\":\"-m x.gguf --draft-hold 1\"}", -32602, "--draft-hold", "\"auto\", \"on\" or \"off\"");
    expect_error("init", "{\"cmd\":\"-m /no/such.gguf --no-warmup\"}", -32002, "model", "/no/such.gguf"); /* known */
    expect_error("init", "{\"cmd\":\"-m 'x.gguf\"}", -32602, "cmd", "unclosed ' quote");
    expect_error("init", "{\"cmd\":\"-m\"}", -32602, "-m", "-m needs a value");
    expect_error("init", "{\"model\":5}", -32602, "model", "'model' must be a string");
    expect_error("init", "{\"model\":\"x\",\"n_ctx\":-5}", -32602, "n_ctx", "'n_ctx' must be an integer from 0");
    expect_error("init", "{\"model\":\"x\",\"modle_draft\":\"y\"}", -32602, "modle_draft", "unknown field");
    expect_error("init", "{\"cmd\":\"-m x\",\"args\":[\"-m\",\"x\"]}", -32602, "cmd", "not both");
    expect_error("init", "{\"model\":\"/no/such.gguf\"}", -32002, "model", "/no/such.gguf");
    json_t *s = result_of("status", "{}");
    assert_string_equal(json_string_value(json_object_get(s, "state")), "failed");
    assert_int_equal(json_integer_value(json_object_get(s, "init_success")), -1);
    assert_non_null(strstr(json_string_value(json_object_get(s, "error")), "/no/such.gguf"));
    json_decref(s);
    snprintf(params, sizeof params, "{\"model\":\"%s\",\"model_draft\":\"/no/draft.gguf\"}", target);
    expect_error("init", params, -32002, "model_draft", "/no/draft.gguf");
    s = result_of("status", "{}");
    assert_string_equal(json_string_value(json_object_get(s, "state")), "failed");
    assert_string_equal(json_string_value(json_object_get(s, "model")), ""); /* nothing serves */
    assert_non_null(strstr(json_string_value(json_object_get(s, "last_init_error")), "/no/draft.gguf"));
    json_decref(s);
}

/* A FIFO as a model is refused at once (it used to block the load, and with it shutdown, for
 * good), as target or draft, blocking or async. */
static void init_refuses_fifos(void **state) {
    (void)state;
    char dir[] = "/tmp/specd_test_rpc_XXXXXX", fifo[64], params[4096];
    assert_non_null(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/model.gguf", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    alarm(60); /* fail rather than hang */
    snprintf(params, sizeof params, "{\"model\":\"%s\"}", fifo);
    expect_error("init", params, -32002, "model", "is a FIFO, not a regular file");
    snprintf(params, sizeof params, "{\"model\":\"%s\",\"model_draft\":\"%s\"}", target, fifo);
    expect_error("init", params, -32002, "model_draft", "is a FIFO, not a regular file");
    snprintf(params, sizeof params, "{\"model\":\"%s\",\"async\":true}", fifo);
    json_decref(result_of("init", params));
    json_t *s = NULL;
    for (int i = 0; i < 1000; i++) {
        json_decref(s);
        s = result_of("status", "{}");
        if (strcmp(json_string_value(json_object_get(s, "state")), "loading") != 0) break;
        usleep(10000);
    }
    assert_string_equal(json_string_value(json_object_get(s, "state")), "failed");
    assert_non_null(strstr(json_string_value(json_object_get(s, "error")), "is a FIFO"));
    json_decref(s);
    json_decref(result_of("shutdown", "{}"));
    alarm(0);
    unlink(fifo);
    rmdir(dir);
}

static void init_async_then_ready(void **state) {
    (void)state;
    char params[4096];
    snprintf(params, sizeof params, "{\"model\":\"%s\",\"model_draft\":\"%s\",\"n_ctx\":256,\"n_threads\":1,"
             "\"model_alias\":\"tiny\",\"hostname\":\"127.0.0.1\",\"port\":8080,\"async\":true}", target, draft);
    json_t *r = result_of("init", params);
    const char *st = json_string_value(json_object_get(r, "state"));
    assert_true(strcmp(st, "loading") == 0 || strcmp(st, "ready") == 0);
    if (!strcmp(st, "loading")) { /* nothing serves yet: no model, the one loading named apart */
        assert_string_equal(json_string_value(json_object_get(r, "model")), "");
        assert_string_equal(json_string_value(json_object_get(r, "loading_model")), target);
    }
    json_decref(r);
    for (int i = 0; i < 600; i++) {
        json_t *s = result_of("status", "{}");
        bool ready = strcmp(json_string_value(json_object_get(s, "state")), "ready") == 0;
        if (ready) {
            assert_string_equal(json_string_value(json_object_get(s, "model_alias")), "tiny");
            assert_true(json_is_true(json_object_get(s, "has_draft")));
            assert_int_equal(json_integer_value(json_object_get(s, "n_ctx")), 256);
        }
        json_decref(s);
        if (ready) return;
        usleep(10000);
    }
    fail_msg("the model never became ready");
}

/* init takes llama.cpp's placement flags, command line and JSON, checks them, and status says
 * where the layers are. On a CPU-only build -ngl runs on the CPU with a note, never silently. */
static void init_placement(void **state) {
    (void)state;
    char params[4096];
    expect_error("init", "{\"cmd\":\"-m x.gguf -ngl many\"}", -32602, "-ngl", "got 'many'");
    expect_error("init", "{\"cmd\":\"-m x.gguf -ngld\"}", -32602, "-ngld", "needs a value");
    expect_error("init", "{\"model\":\"x\",\"n_gpu_layers\":-3}", -32602, "n_gpu_layers", "layer count");
    expect_error("init", "{\"model\":\"x\",\"n_gpu_layers_draft\":\"lots\"}", -32602, "n_gpu_layers_draft",
                 "got 'lots'");
    expect_error("init", "{\"model\":\"x\",\"device\":7}", -32602, "device", "must be a string");
    snprintf(params, sizeof params, "{\"model\":\"%s\",\"device\":\"CUDA9\"}", target);
    expect_error("init", params, -32002, "model", "unknown device 'CUDA9'");
    snprintf(params, sizeof params, "{\"cmd\":\"-m '%s' -md '%s' --device-draft Vulkan9\"}", target, draft);
    expect_error("init", params, -32002, "model_draft", "--device-draft: unknown device 'Vulkan9'");
    snprintf(params, sizeof params, "{\"model\":\"%s\",\"rpc\":\"127.0.0.1:1\"}", target);
    expect_error("init", params, -32002, "model", "127.0.0.1:1"); /* unreachable, or no RPC backend here */

    bool offload = specd_gpu_offload_available();
    snprintf(params, sizeof params, "{\"cmd\":\"-m '%s' -md '%s' -c 256 -t 1 -ngl 99 -ngld all\"}", target, draft);
    json_t *s = result_of("init", params);
    json_t *place = json_object_get(s, "placement");
    json_t *t = json_object_get(place, "target"), *d = json_object_get(place, "draft");
    assert_true(json_integer_value(json_object_get(t, "n_layers")) > 0);
    assert_true(json_is_object(d));
    const char *note = json_string_value(json_object_get(s, "placement_note"));
    if (!offload) {
        assert_string_equal(json_string_value(json_object_get(t, "devices")), "CPU");
        assert_int_equal(json_integer_value(json_object_get(t, "n_layers_offloaded")), 0);
        assert_non_null(note);
        assert_non_null(strstr(note, "CPU"));
    }
    json_decref(s);
    snprintf(params, sizeof params, "{\"model\":\"%s\",\"n_ctx\":256,\"n_threads\":1,\"n_gpu_layers\":0}", target);
    s = result_of("init", params);
    assert_null(json_object_get(s, "placement_note")); /* -ngl 0 asks for the CPU: nothing to say */
    assert_true(json_is_null(json_object_get(json_object_get(s, "placement"), "draft")));
    json_decref(s);
    init_models(true);
    s = result_of("status", "{}");
    assert_null(json_object_get(s, "placement_note")); /* not asked */
    json_decref(s);
    json_decref(result_of("shutdown", "{}")); /* the next test loads from nothing */
}

/* ---- tokens ---------------------------------------------------------------------------------- */

static void tokenize_and_detokenize(void **state) {
    (void)state;
    json_t *t = result_of("tokenize", "{\"text\":\"the little girl\",\"with_pieces\":true}");
    json_t *tokens = json_object_get(t, "tokens");
    assert_int_equal(json_integer_value(json_object_get(t, "length")), json_array_size(tokens));
    assert_true(json_array_size(tokens) >= 3);
    assert_string_equal(json_string_value(json_array_get(json_object_get(t, "pieces"), 1)), " the");
    char *ids = json_dumps(tokens, 0);
    char params[1024];
    snprintf(params, sizeof params, "{\"tokens\":%s}", ids);
    json_t *d = result_of("detokenize", params);
    assert_string_equal(json_string_value(json_object_get(d, "content")), " the little girl");
    free(ids);
    json_decref(d);
    json_decref(t);
    t = result_of("tokenize", "{\"text\":\"the\",\"add_special\":false}");
    assert_int_equal(json_integer_value(json_object_get(t, "length")), 1);
    json_decref(t);
    expect_error("tokenize", "{}", -32602, "text", "'text' (a string) is required");
    expect_error("tokenize", "{\"text\":5}", -32602, "text", "'text' must be a string");
    expect_error("tokenize", "{\"text\":\"a\",\"add_special\":1}", -32602, "add_special", "true or false");
    expect_error("detokenize", "{}", -32602, "tokens", "is required");
    expect_error("detokenize", "{\"tokens\":[1,100000]}", -32602, "tokens", "tokens[1] must be a token id");
}

/* ---- completion ------------------------------------------------------------------------------ */

static json_t *complete(const char *params) { return result_of("completion", params); }

static const char *content_of(json_t *r) { return json_string_value(json_object_get(r, "content")); }

static void completion_fields_and_lossless_speculation(void **state) {
    (void)state;
    const char *base = "\"prompt\":\"one day the dog ran\",\"n_predict\":40,\"temperature\":0,\"ignore_eos\":true";
    char params[1024];
    snprintf(params, sizeof params, "{%s,\"speculative\":{\"type\":[\"none\"]}}", base);
    json_t *plain = complete(params);
    snprintf(params, sizeof params, "{%s,\"speculative\":{\"type\":[\"draft\"],\"n_max\":4,\"n_min\":2}}", base);
    json_t *spec = complete(params);
    assert_string_equal(content_of(plain), content_of(spec));
    assert_int_equal(json_integer_value(json_object_get(spec, "tokens_predicted")), 40);
    assert_true(json_is_true(json_object_get(spec, "stopped_limit")));
    assert_true(json_is_true(json_object_get(spec, "stop")));
    assert_string_equal(json_string_value(json_object_get(spec, "model")), "tiny");
    json_t *sp = json_object_get(spec, "speculative");
    assert_string_equal(json_string_value(json_object_get(sp, "type")), "draft");
    assert_true(json_integer_value(json_object_get(sp, "drafted")) > 0);
    assert_true(json_integer_value(json_object_get(sp, "accepted")) <= json_integer_value(json_object_get(sp, "drafted")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(plain, "speculative"), "type")), "none");
    json_t *timings = json_object_get(spec, "timings");
    assert_int_equal(json_integer_value(json_object_get(timings, "predicted_n")), 40);
    assert_non_null(json_object_get(timings, "prompt_per_second"));
    json_t *settings = json_object_get(spec, "generation_settings");
    assert_true(json_real_value(json_object_get(settings, "top_p")) == 0.95);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(settings, "speculative"), "n_max")), 4);
    assert_string_equal(json_string_value(json_object_get(spec, "prompt")), "one day the dog ran");
    json_t *ps = json_object_get(spec, "prompt_stats");
    assert_true(json_integer_value(json_object_get(ps, "cached")) > 0); /* same prompt as before */
    /* A drafter list per request: still lossless, and reported per drafter. */
    snprintf(params, sizeof params, "{%s,\"speculative\":{\"type\":[\"ngram-simple\",\"draft\"]}}", base);
    json_t *listed = complete(params);
    assert_string_equal(content_of(plain), content_of(listed));
    json_t *lsp = json_object_get(listed, "speculative");
    assert_string_equal(json_string_value(json_object_get(lsp, "type")), "ngram-simple,draft");
    assert_int_equal(json_array_size(json_object_get(lsp, "drafters")), 2);
    json_t *lset = json_object_get(json_object_get(listed, "generation_settings"), "speculative");
    assert_int_equal(json_array_size(json_object_get(lset, "type")), 2);
    json_decref(listed);
    /* Draft-model trees per request: still lossless, echoed, and counted. */
    snprintf(params, sizeof params, "{%s,\"speculative\":{\"type\":[\"draft\"],\"tree\":\"on\",\"branches\":4,"
             "\"p_split\":0,\"n_max\":3,\"n_min\":3}}", base);
    json_t *treed = complete(params);
    assert_string_equal(content_of(plain), content_of(treed));
    json_t *tsp = json_object_get(treed, "speculative");
    assert_true(json_integer_value(json_object_get(tsp, "tree_steps")) > 0);
    assert_true(json_integer_value(json_object_get(tsp, "tree_drafted")) > 3 * json_integer_value(json_object_get(tsp, "tree_steps")));
    json_t *tset = json_object_get(json_object_get(treed, "generation_settings"), "speculative");
    assert_string_equal(json_string_value(json_object_get(tset, "tree")), "on");
    assert_int_equal(json_integer_value(json_object_get(tset, "branches")), 4);
    json_decref(treed);
    json_decref(plain);
    json_decref(spec);
}

/* Is `text` a prefix of (" " [a-e]+)*? */
static bool is_words_a_to_e_prefix(const char *text) {
    for (size_t i = 0; text[i]; i++) {
        bool letter = text[i] >= 'a' && text[i] <= 'e';
        if (text[i] == ' ' ? i > 0 && text[i - 1] == ' ' : !letter || i == 0) return false;
    }
    return true;
}

static void completion_grammar(void **state) {
    (void)state;
    const char *base = "\"prompt\":\"one day the dog ran\",\"n_predict\":30,\"temperature\":0,\"ignore_eos\":true,"
                       "\"grammar\":\"root ::= (\\\" \\\" [a-e]+)*\"";
    char params[1024];
    snprintf(params, sizeof params, "{%s,\"speculative\":{\"type\":[\"none\"]}}", base);
    json_t *plain = complete(params);
    snprintf(params, sizeof params, "{%s,\"speculative\":{\"type\":[\"draft\"],\"n_max\":4,\"n_min\":4}}", base);
    json_t *spec = complete(params);
    const char *text = content_of(spec);
    if (!is_words_a_to_e_prefix(text)) fail_msg("output '%s' does not match the grammar", text);
    assert_string_equal(content_of(plain), text);
    assert_int_equal(json_integer_value(json_object_get(spec, "tokens_predicted")), 30);
    assert_true(json_integer_value(json_object_get(json_object_get(spec, "speculative"), "accepted")) > 0);
    json_t *settings = json_object_get(spec, "generation_settings");
    assert_string_equal(json_string_value(json_object_get(settings, "grammar")), "root ::= (\" \" [a-e]+)*");
    /* A grammar that ends: the generation stops there, reported as eos. */
    json_t *done = complete("{\"prompt\":\"she was happy\",\"n_predict\":30,\"temperature\":0,\"ignore_eos\":true,"
                            "\"grammar\":\"root ::= \\\" a\\\" [b-e]\"}");
    const char *short_text = content_of(done);
    assert_int_equal(strlen(short_text), 3);
    assert_memory_equal(short_text, " a", 2);
    assert_string_equal(json_string_value(json_object_get(done, "stop_type")), "eos");
    json_decref(done);
    json_decref(plain);
    json_decref(spec);
}

static void completion_stop_string(void **state) {
    (void)state;
    const char *base = "\"prompt\":\"she was happy\",\"n_predict\":40,\"temperature\":0,\"ignore_eos\":true";
    char params[1024];
    snprintf(params, sizeof params, "{%s}", base);
    json_t *full = complete(params);
    const char *text = content_of(full);
    assert_true(strlen(text) > 12);
    char stop[8] = {0};
    size_t from = 6; /* three plain ASCII letters inside the text (their first occurrence may be earlier) */
    while (text[from + 3] && !(isalpha((unsigned char)text[from]) && isalpha((unsigned char)text[from + 1]) &&
                               isalpha((unsigned char)text[from + 2])))
        from++;
    if (!text[from + 3]) skip();
    memcpy(stop, text + from, 3);
    json_t *list = json_pack("[s]", stop);
    char *stops = json_dumps(list, 0);
    snprintf(params, sizeof params, "{%s,\"stop\":%s}", base, stops);
    json_t *cut = complete(params);
    size_t at = (size_t)(strstr(text, stop) - text);
    assert_int_equal(strlen(content_of(cut)), at);
    assert_memory_equal(content_of(cut), text, at);
    assert_true(json_is_true(json_object_get(cut, "stopped_word")));
    assert_false(json_is_true(json_object_get(cut, "stopped_limit")));
    assert_string_equal(json_string_value(json_object_get(cut, "stopping_word")), stop);
    free(stops);
    json_decref(list);
    json_decref(full);
    json_decref(cut);
}

static void completion_logit_bias_and_token_prompt(void **state) {
    (void)state;
    json_t *t = result_of("tokenize", "{\"text\":\"she was happy\"}");
    char *ids = json_dumps(json_object_get(t, "tokens"), 0);
    char params[1024];
    snprintf(params, sizeof params, "{\"prompt\":%s,\"n_predict\":3,\"temperature\":0}", ids);
    json_t *a = complete(params);
    json_t *b = complete("{\"prompt\":\"she was happy\",\"n_predict\":3,\"temperature\":0}");
    assert_string_equal(content_of(a), content_of(b)); /* token ids = the same text */
    /* strings and ids mixed: BOS only before the leading string */
    json_t *c = complete("{\"prompt\":[\"she was\",5,\" happy\"],\"n_predict\":3,\"temperature\":0}");
    json_t *t1 = result_of("tokenize", "{\"text\":\"she was\"}");
    json_t *t2 = result_of("tokenize", "{\"text\":\" happy\",\"add_special\":false}");
    assert_int_equal(json_integer_value(json_object_get(c, "tokens_evaluated")),
                     json_integer_value(json_object_get(t1, "length")) + 1 + json_integer_value(json_object_get(t2, "length")));
    json_decref(t1);
    json_decref(t2);
    /* a large bias makes " the" win every time; false forbids it whatever else is added */
    json_t *the = result_of("tokenize", "{\"text\":\"the\",\"add_special\":false}"); /* " the" */
    json_int_t tok = json_integer_value(json_array_get(json_object_get(the, "tokens"), 0));
    snprintf(params, sizeof params, "{\"prompt\":%s,\"n_predict\":3,\"temperature\":0,\"ignore_eos\":true,"
             "\"logit_bias\":[[%lld,100]]}", ids, (long long)tok);
    json_t *biased = complete(params);
    assert_string_equal(content_of(biased), " the the the");
    snprintf(params, sizeof params, "{\"prompt\":%s,\"n_predict\":8,\"temperature\":0,\"ignore_eos\":true,"
             "\"logit_bias\":[[%lld,100],[%lld,false]]}", ids, (long long)tok, (long long)tok);
    json_t *never = complete(params);
    assert_null(strstr(content_of(never), " the"));
    free(ids);
    json_decref(the);
    json_decref(biased);
    json_decref(never);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(t);
}

static void completion_truncates_long_prompts(void **state) {
    (void)state;
    char params[8192] = "{\"prompt\":\"";
    for (int i = 0; i < 300; i++) strcat(params, "the ");
    strcat(params, "\",\"n_keep\":8,\"n_predict\":4,\"temperature\":0}");
    json_t *r = complete(params);
    assert_true(json_is_true(json_object_get(r, "truncated")));
    assert_true(json_integer_value(json_object_get(r, "tokens_evaluated")) < 256);
    assert_true(json_integer_value(json_object_get(json_object_get(r, "prompt_stats"), "total_prompt_tokens")) > 256);
    json_decref(r);
    params[strlen(params) - strlen(",\"n_predict\":4,\"temperature\":0}") - 12] = '\0';
    strcat(params, "\",\"n_keep\":255}");
    expect_error("completion", params, -32602, "n_keep", "leaves nothing to drop");
}

static int64_t int_of(json_t *obj, const char *key) { return json_integer_value(json_object_get(obj, key)); }

/* A 64-token context and 150 tokens to generate: the context shifts (as llama-server's did),
 * speculation stays lossless, truncated says so; n_predict -1 stops at the context end. */
static void completion_shifts_the_context(void **state) {
    (void)state;
    char params[4096];
    snprintf(params, sizeof params, "{\"cmd\":\"-m '%s' -md '%s' -c 64 -t 1\"}", target, draft);
    json_decref(result_of("init", params));
    const char *base = "\"prompt\":\"one day the dog ran\",\"temperature\":0,\"ignore_eos\":true,\"n_keep\":3";
    const char *types[] = {"[\"none\"]", "[\"draft\"]", "[\"ngram-simple\",\"draft\"]"};
    json_t *plain = NULL;
    for (int i = 0; i < 3; i++) {
        snprintf(params, sizeof params, "{%s,\"n_predict\":150,\"speculative\":{\"type\":%s}}", base, types[i]);
        json_t *r = complete(params);
        assert_int_equal(int_of(r, "tokens_predicted"), 150);
        assert_true(int_of(r, "tokens_predicted") > 64);
        assert_true(json_is_true(json_object_get(r, "truncated")));
        assert_false(json_is_true(json_object_get(json_object_get(r, "prompt_stats"), "truncated"))); /* fits */
        assert_string_equal(json_string_value(json_object_get(r, "stop_type")), "limit");
        assert_int_equal(int_of(json_object_get(r, "generation_settings"), "n_keep"), 3);
        if (plain) assert_string_equal(content_of(r), content_of(plain));
        if (i > 0) assert_true(int_of(json_object_get(r, "speculative"), "drafted") > 0);
        if (!plain) plain = r;
        else json_decref(r);
    }
    /* The next request sees only the kept tokens as cached: what followed them moved. */
    snprintf(params, sizeof params, "{%s,\"n_predict\":4}", base);
    json_t *next = complete(params);
    int64_t reused = int_of(next, "tokens_evaluated") - int_of(json_object_get(next, "timings"), "prompt_n");
    assert_int_equal(reused, 4); /* BOS + n_keep */
    assert_int_equal(int_of(json_object_get(next, "prompt_stats"), "cached"), reused);
    assert_false(json_is_true(json_object_get(next, "truncated")));
    json_decref(next);
    snprintf(params, sizeof params, "{%s,\"n_predict\":-1}", base);
    json_t *unlimited = complete(params);
    assert_string_equal(json_string_value(json_object_get(unlimited, "stop_type")), "context");
    assert_true(json_is_true(json_object_get(unlimited, "truncated")));
    assert_true(int_of(unlimited, "tokens_predicted") < 64);
    json_decref(unlimited);
    json_decref(plain);
    init_models(true); /* back to the context the other tests expect */
}

/* A recurrent target (tiny Mamba) over the JSON API: no context shift (its state cannot drop the
 * oldest tokens), so a long request stops at the context's end; speculation is lossless; a
 * repeated prompt is reused from the state saved after it. */
static void completion_on_a_recurrent_target(void **state) {
    (void)state;
    char params[4096], models[1024];
    snprintf(models, sizeof models, "%s", target);
    char *slash = strrchr(models, '/');
    assert_non_null(slash);
    slash[1] = '\0';
    snprintf(params, sizeof params, "{\"cmd\":\"-m '%smamba-target.gguf' -md '%smamba-draft.gguf' -c 64 -t 1\"}",
             models, models);
    json_decref(result_of("init", params));
    const char *base = "\"prompt\":\"one day the dog ran\",\"temperature\":0,\"ignore_eos\":true";
    snprintf(params, sizeof params, "{%s,\"n_predict\":150,\"speculative\":{\"type\":[\"none\"]}}", base);
    json_t *plain = complete(params);
    assert_string_equal(json_string_value(json_object_get(plain, "stop_type")), "context");
    assert_true(json_is_true(json_object_get(plain, "truncated")));
    snprintf(params, sizeof params, "{%s,\"n_predict\":150,\"speculative\":{\"type\":[\"draft\"]}}", base);
    json_t *spec = complete(params);
    assert_string_equal(content_of(spec), content_of(plain));
    assert_true(int_of(json_object_get(spec, "speculative"), "drafted") > 0);
    /* The prompt but its last token (the first step decodes that one) came from the cache. */
    assert_int_equal(int_of(json_object_get(spec, "timings"), "cache_n"), int_of(spec, "tokens_evaluated") - 1);
    json_decref(plain);
    json_decref(spec);
    init_models(true); /* back to the models the other tests expect */
}

static void completion_param_errors(void **state) {
    (void)state;
    struct { const char *params, *field, *needle; } cases[] = {
        {"{}", "prompt", "'prompt' (a string, or an array"},
        {"{\"prompt\":[\"a\",-1]}", "prompt", "prompt[1] must be a string or a token id"},
        {"{\"prompt\":{}}", "prompt", "a 'prompt' object is {\"prompt_string\""},
        {"{\"prompt\":\"a\",\"temperature\":\"hot\"}", "temperature", "'temperature' must be a number"},
        {"{\"prompt\":\"a\",\"top_k\":1.5}", "top_k", "an integer"},
        {"{\"prompt\":\"a\",\"top_p\":-1}", "top_p", "'top_p' must be a number from 0 to 1"},
        {"{\"prompt\":\"a\",\"top_p\":2}", "top_p", "'top_p' must be a number from 0 to 1"},
        {"{\"prompt\":\"a\",\"min_p\":1.5}", "min_p", "'min_p' must be a number from 0 to 1"},
        {"{\"prompt\":\"a\",\"top_k\":-5}", "top_k", "'top_k' must be an integer from -1"},
        {"{\"prompt\":\"a\",\"n_keep\":1000000000}", "n_keep", "'n_keep' must be from -1 (the whole prompt) to"},
        {"{\"prompt\":\"a\",\"n_keep\":-2}", "n_keep", "'n_keep' must be from -1 (the whole prompt) to"},
        {"{\"prompt\":\"a\",\"repeat_penalty\":0}", "repeat_penalty", "'repeat_penalty' must be a finite number > 0"},
        {"{\"prompt\":\"a\",\"n_predict\":-2}", "n_predict", "from -1"},
        {"{\"prompt\":\"a\",\"seed\":\"1\"}", "seed", "an integer"},
        {"{\"prompt\":\"a\",\"ignore_eos\":1}", "ignore_eos", "true or false"},
        {"{\"prompt\":\"a\",\"stop\":\"x\"}", "stop", "an array of strings"},
        {"{\"prompt\":\"a\",\"stop\":[\"\"]}", "stop", "stop[0] must be a non-empty string"},
        {"{\"prompt\":\"a\",\"logit_bias\":[[1]]}", "logit_bias", "logit_bias[0] must be"},
        {"{\"prompt\":\"a\",\"logit_bias\":[[99999,1]]}", "logit_bias", "logit_bias[0] must be"},
        {"{\"prompt\":\"a\",\"logit_bias\":{\"1\":2}}", "logit_bias", "array of [token id, bias]"},
        {"{\"prompt\":\"a\",\"speculative\":[]}", "speculative", "must be an object"},
        {"{\"prompt\":\"a\",\"speculative\":{\"type\":[\"magic\"]}}", "speculative.type", "type 0 is 'magic', not one of none"},
        {"{\"prompt\":\"a\",\"speculative\":{\"type\":\"draft\"}}", "speculative.type", "must be a list of 1 to 8"},
        {"{\"prompt\":\"a\",\"speculative\":{\"type\":[\"none\",\"suffix\"]}}", "speculative.type", "cannot be part of"},
        {"{\"prompt\":\"a\",\"speculative\":{\"n_max\":1000}}", "speculative.n_max", "from 0 to 16"},
        {"{\"prompt\":\"a\",\"speculative\":{\"n_min\":5,\"n_max\":2}}", "speculative.n_min", "'speculative.n_min' must not exceed the draft maximum (got 5 > 2)"},
        {"{\"prompt\":\"a\",\"speculative\":{\"suffix_branches\":9}}", "speculative.suffix_branches",
         "'speculative.suffix_branches' must be from 1 to 8 (got 9)"},
        {"{\"prompt\":\"a\",\"speculative\":{\"tree\":\"maybe\"}}", "speculative.tree",
         "'speculative.tree' must be \"on\", \"off\" or \"auto\""},
        {"{\"prompt\":\"a\",\"speculative\":{\"branches\":0}}", "speculative.branches",
         "'speculative.branches' must be from 1 to 8 (got 0)"},
        {"{\"prompt\":\"a\",\"speculative\":{\"p_split\":2}}", "speculative.p_split", "(got 2)"},
        {"{\"prompt\":\"a\",\"speculative\":{\"nmax\":2}}", "speculative.nmax", "unknown field 'speculative.nmax'"},
        {"{\"prompt\":\"a\",\"mirostat\":3}", "mirostat", "'mirostat' must be 0 (off), 1 or 2 (got 3)"},
        {"{\"prompt\":\"a\",\"mirostat\":1.5}", "mirostat", "'mirostat' must be an integer"},
        {"{\"prompt\":\"a\",\"mirostat\":2,\"mirostat_tau\":-1}", "mirostat_tau", "'mirostat_tau' must be a finite number >= 0 (got -1)"},
        {"{\"prompt\":\"a\",\"mirostat\":1,\"mirostat_eta\":\"fast\"}", "mirostat_eta", "'mirostat_eta' must be a number"},
        {"{\"prompt\":\"a\",\"n_probs\":101}", "n_probs", "an integer from 0 to 100"},
        {"{\"prompt\":\"a\",\"n_probs\":-1}", "n_probs", "an integer from 0 to 100"},
        {"{\"prompt\":\"a\",\"post_sampling_probs\":1}", "post_sampling_probs", "true or false"},
        {"{\"prompt\":\"a\",\"grammar\":\"word ::= [a-z]+\"}", "grammar", "grammar: no 'root' rule"},
        {"{\"prompt\":\"a\",\"grammar\":\"root ::= (\\\"a\\\"\"}", "grammar",
         "llama.cpp cannot parse it as GBNF: line 1, column 14: expecting ')' (at the end of the grammar)"},
        /* llama.cpp prints its reason on stderr only: grammar_error.c reads it back for the message */
        {"{\"prompt\":\"a\",\"grammar\":\"root ::= x\\nfoo bar\"}", "grammar", "line 2, column 5: expecting ::= (at 'bar')"},
        {"{\"prompt\":\"a\",\"grammar\":\"root ::= x\"}", "grammar", "Undefined rule identifier 'x'"},
        {"{\"prompt\":\"a\",\"grammar\":\"root ::= [a-z]\\nx ::= x \\\"a\\\"\"}", "grammar", "left recursion detected"},
        {"{\"prompt\":\"a\",\"grammar\":[\"root\"]}", "grammar", "a string"},
        {"{\"prompt\":\"a\",\"typical_p\":-0.5}", "typical_p", "'typical_p' must be a number from 0 to 1"},
        {"{\"prompt\":\"a\",\"tfs_z\":0.5}", "tfs_z", "not supported yet"},
        {"{\"prompt\":\"a\",\"repeat_penalty\":1.1,\"penalize_nl\":true}", "penalize_nl", "not supported yet"},
        {"{\"prompt\":\"a\",\"temprature\":0}", "temprature", "unknown field 'temprature'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_error("completion", cases[i].params, -32602, cases[i].field, cases[i].needle);
    /* A refused request was given an id: a poll of the latest completion finds it ended with the
     * error, not pending forever (the fuzzer found poll and cancel waiting on it). */
    json_t *polled = result_of("completion.poll", "{\"wait_ms\":10}");
    assert_true(json_is_true(json_object_get(polled, "finished")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(polled, "error"), "code")), -32602);
    json_decref(polled);
    /* the harmless "off" values of unsupported samplers are fine */
    json_t *r = complete("{\"prompt\":\"a\",\"n_predict\":2,\"mirostat\":0,\"typical_p\":1,\"tfs_z\":1,"
                         "\"grammar\":\"\",\"n_probs\":0,\"penalize_nl\":false,\"stream\":false,\"__debug\":false}");
    json_decref(r);
    /* typical_p is a transform like top-p: taken, echoed, and sampled with speculation on */
    r = complete("{\"prompt\":\"one day\",\"n_predict\":8,\"temperature\":1,\"typical_p\":0.5,\"seed\":3,"
                 "\"ignore_eos\":true,\"speculative\":{\"type\":[\"draft\"],\"n_max\":3}}");
    json_t *settings = json_object_get(r, "generation_settings");
    assert_true(fabs(json_real_value(json_object_get(settings, "typical_p")) - 0.5) < 1e-9);
    assert_int_equal(int_of(r, "tokens_predicted"), 8);
    json_decref(r);
}

/* ---- mirostat -------------------------------------------------------------------------------- */

static void completion_mirostat_speculates(void **state) {
    (void)state;
    const char *params = "{\"prompt\":\"one day the dog ran\",\"n_predict\":24,\"temperature\":0.8,\"seed\":5,"
                         "\"ignore_eos\":true,\"mirostat\":2,\"mirostat_tau\":3,\"mirostat_eta\":0.2,"
                         "\"speculative\":{\"type\":[\"draft\"],\"n_max\":4,\"n_min\":4}}";
    json_t *a = complete(params);
    json_t *b = complete(params);
    assert_int_equal(json_integer_value(json_object_get(a, "tokens_predicted")), 24);
    assert_string_equal(content_of(a), content_of(b)); /* same seed, same output */
    json_t *sp = json_object_get(a, "speculative"); /* verified per drafted position (test_llama_samplers) */
    assert_true(json_is_true(json_object_get(sp, "enabled")));
    assert_null(json_object_get(sp, "reason"));
    assert_true(json_integer_value(json_object_get(sp, "drafted")) > 0);
    assert_string_equal(json_string_value(json_object_get(sp, "type")), "draft");
    json_t *settings = json_object_get(a, "generation_settings");
    assert_int_equal(json_integer_value(json_object_get(settings, "mirostat")), 2);
    assert_true(json_real_value(json_object_get(settings, "mirostat_tau")) == 3.0);
    assert_true(json_real_value(json_object_get(settings, "mirostat_eta")) == 0.2);
    /* mirostat 1 as well; and a plain request speculates, saying so */
    json_t *v1 = complete("{\"prompt\":\"she\",\"n_predict\":8,\"mirostat\":1,\"speculative\":{\"n_max\":4}}");
    assert_true(json_is_true(json_object_get(json_object_get(v1, "speculative"), "enabled")));
    json_t *plain = complete("{\"prompt\":\"she\",\"n_predict\":8,\"speculative\":{\"n_max\":4,\"n_min\":4}}");
    json_t *psp = json_object_get(plain, "speculative");
    assert_true(json_is_true(json_object_get(psp, "enabled")));
    assert_null(json_object_get(psp, "reason"));
    assert_true(json_integer_value(json_object_get(psp, "drafted")) > 0);
    json_t *off = complete("{\"prompt\":\"she\",\"n_predict\":2,\"speculative\":{\"type\":[\"none\"]}}");
    assert_string_equal(json_string_value(json_object_get(json_object_get(off, "speculative"), "reason")),
                        "speculative.type is none");
    json_decref(off);
    json_decref(plain);
    json_decref(v1);
    json_decref(a);
    json_decref(b);
}

/* ---- n_probs --------------------------------------------------------------------------------- */

/* The entries' pieces joined (at most `size` bytes). */
static void join_pieces(json_t *entries, char *out, size_t size) {
    size_t i;
    json_t *e;
    out[0] = '\0';
    json_array_foreach(entries, i, e) {
        const char *piece = content_of(e);
        assert_non_null(piece);
        if (strlen(out) + strlen(piece) < size) strcat(out, piece);
    }
}

/* Each entry: n lists of {tok_str, prob}, sorted by probability, summing to at most 1. */
static void assert_prob_lists(json_t *entries, size_t n) {
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        json_t *probs = json_object_get(e, "probs");
        assert_int_equal(json_array_size(probs), n);
        double sum = 0.0, last = 1.0;
        for (size_t k = 0; k < n; k++) {
            json_t *p = json_array_get(probs, k);
            double prob = json_real_value(json_object_get(p, "prob"));
            assert_true(json_is_string(json_object_get(p, "tok_str")));
            assert_true(prob > 0.0 && prob <= last);
            last = prob;
            sum += prob;
        }
        assert_true(sum <= 1.0 + 1e-5);
    }
}

/* The same lists (pieces equal, probabilities within the noise of differently shaped passes). */
static void assert_same_prob_lists(json_t *a, json_t *b) {
    assert_int_equal(json_array_size(a), json_array_size(b));
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *pa = json_object_get(json_array_get(a, i), "probs"), *pb = json_object_get(json_array_get(b, i), "probs");
        assert_int_equal(json_array_size(pa), json_array_size(pb));
        for (size_t k = 0; k < json_array_size(pa); k++) {
            json_t *x = json_array_get(pa, k), *y = json_array_get(pb, k);
            assert_string_equal(json_string_value(json_object_get(x, "tok_str")),
                                json_string_value(json_object_get(y, "tok_str")));
            double dx = json_real_value(json_object_get(x, "prob")), dy = json_real_value(json_object_get(y, "prob"));
            if (dx - dy > 1e-4 || dy - dx > 1e-4) fail_msg("token %zu entry %zu: %.7f vs %.7f", i, k, dx, dy);
        }
    }
}

static void completion_probabilities_per_token(void **state) {
    (void)state;
    const char *base = "\"prompt\":\"one day the dog ran\",\"n_predict\":30,\"temperature\":0,\"ignore_eos\":true,"
                       "\"n_probs\":3";
    char params[1024];
    snprintf(params, sizeof params, "{%s,\"speculative\":{\"type\":[\"draft\"],\"n_max\":4,\"n_min\":4}}", base);
    json_t *spec = complete(params);
    snprintf(params, sizeof params, "{%s,\"speculative\":{\"type\":[\"none\"]}}", base);
    json_t *plain = complete(params);
    json_t *entries = json_object_get(spec, "completion_probabilities");
    assert_int_equal(json_array_size(entries), json_integer_value(json_object_get(spec, "tokens_predicted")));
    assert_prob_lists(entries, 3);
    char joined[4096];
    join_pieces(entries, joined, sizeof joined);
    assert_string_equal(joined, content_of(spec));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(spec, "generation_settings"), "n_probs")), 3);
    /* Drafted tokens get the target's own probabilities: the same as without speculation, not 1. */
    assert_true(json_integer_value(json_object_get(json_object_get(spec, "speculative"), "accepted")) > 0);
    assert_same_prob_lists(entries, json_object_get(plain, "completion_probabilities"));
    size_t i, certain = 0;
    json_t *e;
    json_array_foreach(entries, i, e) {
        json_t *top = json_array_get(json_object_get(e, "probs"), 0);
        assert_string_equal(json_string_value(json_object_get(top, "tok_str")), content_of(e)); /* greedy */
        certain += json_real_value(json_object_get(top, "prob")) > 0.9999;
    }
    assert_true(certain < json_array_size(entries));
    /* Without n_probs there is no list. */
    json_t *none = complete("{\"prompt\":\"she\",\"n_predict\":2}");
    assert_null(json_object_get(none, "completion_probabilities"));
    json_decref(none);
    json_decref(plain);
    json_decref(spec);
}

static void completion_probabilities_stream_and_stop(void **state) {
    (void)state;
    const char *params = "{\"prompt\":\"one day the dog ran\",\"n_predict\":40,\"temperature\":0,"
                         "\"ignore_eos\":true,\"n_probs\":2,\"speculative\":{\"n_max\":4,\"n_min\":4}}";
    json_t *blocking = complete(params);
    json_t *start = result_of("completion.start", params);
    char poll[64], text[4096] = "";
    snprintf(poll, sizeof poll, "{\"id\":%lld,\"wait_ms\":200}", (long long)json_integer_value(json_object_get(start, "id")));
    json_t *streamed = json_array();
    int chunks_with_probs = 0;
    for (bool done = false; !done;) {
        json_t *r = result_of("completion.poll", poll);
        size_t i;
        json_t *u;
        json_array_foreach(json_object_get(r, "completion_updates"), i, u) {
            json_t *probs = json_object_get(u, "completion_probabilities");
            assert_non_null(probs); /* every chunk carries its tokens' probabilities */
            chunks_with_probs += json_array_size(probs) > 0;
            json_array_extend(streamed, probs);
            if (strlen(text) + strlen(content_of(u)) < sizeof text) strcat(text, content_of(u));
        }
        done = json_is_true(json_object_get(r, "finished"));
        json_decref(r);
    }
    assert_string_equal(text, content_of(blocking));
    assert_true(chunks_with_probs > 1);
    assert_same_prob_lists(streamed, json_object_get(blocking, "completion_probabilities"));
    /* A stop string (three ASCII letters of the text): no entries for tokens wholly inside the cut
     * text; the pieces begin with the content. */
    const char *content = content_of(blocking);
    char stop[8] = {0}, with_stop[1024];
    size_t from = 6;
    while (content[from + 3] && !(isalpha((unsigned char)content[from]) && isalpha((unsigned char)content[from + 1]) &&
                                  isalpha((unsigned char)content[from + 2])))
        from++;
    if (!content[from + 3]) skip();
    memcpy(stop, content + from, 3);
    snprintf(with_stop, sizeof with_stop, "%.*s,\"stop\":[\"%s\"]}", (int)strlen(params) - 1, params, stop);
    json_t *cut = complete(with_stop);
    assert_true(json_is_true(json_object_get(cut, "stopped_word")));
    json_t *entries = json_object_get(cut, "completion_probabilities");
    char joined[4096];
    join_pieces(entries, joined, sizeof joined);
    assert_memory_equal(joined, content_of(cut), strlen(content_of(cut)));
    assert_true(strlen(joined) < strlen(content_of(cut)) + 3 + 16);
    assert_true(json_array_size(entries) < json_array_size(json_object_get(blocking, "completion_probabilities")));
    json_decref(cut);
    json_decref(streamed);
    json_decref(start);
    json_decref(blocking);
}

/* ---- async ----------------------------------------------------------------------------------- */

typedef struct poller {
    int64_t id;
    size_t bytes;
    int chunks;
    int finished_seen;
    char text[4096];
} poller;

static void *poll_until_finished(void *arg) {
    poller *p = arg;
    for (;;) {
        char params[64];
        snprintf(params, sizeof params, "{\"id\":%lld,\"wait_ms\":200}", (long long)p->id);
        json_t *r = result_of("completion.poll", params);
        size_t i;
        json_t *u;
        json_array_foreach(json_object_get(r, "completion_updates"), i, u) {
            const char *c = content_of(u);
            if (p->bytes + strlen(c) < sizeof p->text) strcat(p->text, c);
            p->bytes += strlen(c);
            p->chunks++;
        }
        bool done = json_is_true(json_object_get(r, "finished"));
        json_decref(r);
        if (done) {
            p->finished_seen++;
            return NULL;
        }
    }
}

static void expect_idle(void) {
    json_t *s = result_of("status", "{}");
    assert_false(json_is_true(json_object_get(s, "busy")));
    json_decref(s);
}

static void async_chunks_equal_blocking(void **state) {
    (void)state;
    expect_idle();
    const char *params = "{\"prompt\":\"the little girl saw\",\"n_predict\":60,\"temperature\":0,\"ignore_eos\":true}";
    json_t *blocking = complete(params);
    expect_idle();
    json_t *start = result_of("completion.start", params);
    poller one = {.id = json_integer_value(json_object_get(start, "id"))};
    assert_non_null(json_object_get(json_object_get(start, "prompt_stats"), "total_prompt_tokens"));
    poll_until_finished(&one);
    assert_string_equal(one.text, content_of(blocking));
    assert_true(one.chunks > 1);
    /* several threads polling the same completion: every chunk delivered exactly once */
    json_t *again = result_of("completion.start", params);
    poller p[3];
    pthread_t threads[3];
    for (int i = 0; i < 3; i++) {
        memset(&p[i], 0, sizeof p[i]);
        p[i].id = json_integer_value(json_object_get(again, "id"));
        pthread_create(&threads[i], NULL, poll_until_finished, &p[i]);
    }
    size_t bytes = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(threads[i], NULL);
        bytes += p[i].bytes;
        assert_int_equal(p[i].finished_seen, 1);
    }
    assert_int_equal(bytes, strlen(content_of(blocking)));
    json_decref(again);
    json_decref(start);
    json_decref(blocking);
}

static void *cancel_soon(void *arg) {
    usleep(20000);
    char params[64];
    snprintf(params, sizeof params, "{\"id\":%lld}", (long long)*(int64_t *)arg);
    json_decref(result_of("completion.cancel", params));
    return NULL;
}

static void async_cancel_and_busy(void **state) {
    (void)state;
    /* long enough to still run when the other calls arrive: until the context is full */
    json_t *start = result_of("completion.start", "{\"prompt\":\"she\",\"n_predict\":-1,\"temperature\":1,"
                                                  "\"seed\":3,\"ignore_eos\":true}");
    int64_t id = json_integer_value(json_object_get(start, "id"));
    /* one slot: the next waits in the queue; cancelled there, it ends at once, without running */
    json_t *queued = result_of("completion.start", "{\"prompt\":\"a\"}");
    json_t *status = NULL, *slot0 = NULL;
    for (int tries = 0; tries < 5000; tries++) { /* until the scheduler has taken the first into the slot */
        json_decref(status);
        status = result_of("status", "{}");
        slot0 = json_array_get(json_object_get(status, "slots"), 0);
        if (json_integer_value(json_object_get(slot0, "id_task")) == id) break;
        usleep(1000);
    }
    assert_string_equal(json_string_value(json_object_get(slot0, "state")), "processing");
    assert_int_equal(json_integer_value(json_object_get(slot0, "id_task")), id);
    assert_int_equal(json_integer_value(json_object_get(status, "n_queued")), 1);
    json_decref(status);
    char queued_params[64];
    snprintf(queued_params, sizeof queued_params, "{\"id\":%lld}", (long long)json_integer_value(json_object_get(queued, "id")));
    json_t *c = result_of("completion.cancel", queued_params);
    assert_true(json_is_true(json_object_get(c, "cancelled")));
    json_decref(c);
    poller q = {.id = json_integer_value(json_object_get(queued, "id"))};
    poll_until_finished(&q);
    json_t *qr = result_of("completion.poll", queued_params);
    json_decref(qr);
    assert_int_equal(q.bytes, 0);
    json_decref(queued);
    /* init loads beside the running completion; one that fails leaves it running on its model */
    expect_error("init", "{\"model\":\"x.gguf\"}", -32002, "model", "x.gguf");
    expect_error("completion.poll", "{\"id\":999}", -32004, "id", "no completion with id 999");
    expect_error("completion.poll", "{\"id\":\"1\"}", -32602, "id", "an integer");
    expect_error("completion.poll", "{\"wait_ms\":-1}", -32602, "wait_ms", "an integer from 0");
    json_t *t = result_of("tokenize", "{\"text\":\"tokenizing while it runs\"}");
    json_decref(t);
    pthread_t canceller;
    pthread_create(&canceller, NULL, cancel_soon, &id);
    poller p = {.id = id};
    poll_until_finished(&p);
    pthread_join(canceller, NULL);
    /* the final response says why it stopped */
    json_t *r = result_of("completion.cancel", "{}");
    assert_false(json_is_true(json_object_get(r, "cancelled"))); /* already finished */
    json_decref(r);
    json_decref(start);
    start = result_of("completion.start", "{\"prompt\":\"she\",\"n_predict\":-1,\"ignore_eos\":true}");
    json_decref(result_of("completion.cancel", "{}"));
    char params[64];
    snprintf(params, sizeof params, "{\"id\":%lld}", (long long)json_integer_value(json_object_get(start, "id")));
    json_t *last = NULL;
    for (;;) {
        json_t *poll = result_of("completion.poll", params);
        json_t *updates = json_object_get(poll, "completion_updates");
        if (json_array_size(updates)) {
            json_decref(last);
            last = json_incref(json_array_get(updates, json_array_size(updates) - 1));
        }
        bool done = json_is_true(json_object_get(poll, "finished"));
        json_decref(poll);
        if (done) break;
        usleep(2000);
    }
    assert_string_equal(json_string_value(json_object_get(last, "stop_type")), "cancelled");
    assert_true(json_integer_value(json_object_get(last, "tokens_predicted")) < 200);
    json_decref(last);
    json_decref(start);
}

/* ---- the specd_* C ABI ----------------------------------------------------------------------- */

static json_t *abi(const char *text) {
    json_t *r = json_loads(text, 0, NULL);
    specd_free((void *)text);
    assert_non_null(r);
    return r;
}

static void old_abi_wrappers(void **state) {
    (void)state;
    specd_deinit();
    json_t *s = abi(specd_poll_system_status());
    assert_int_equal(json_integer_value(json_object_get(s, "init_success")), 0);
    json_decref(s);
    assert_int_equal(specd_init("-m x.gguf --nope"), -32602);
    s = abi(specd_poll_system_status());
    assert_int_equal(json_integer_value(json_object_get(s, "init_success")), -1);
    assert_non_null(strstr(json_string_value(json_object_get(s, "error")), "--nope"));
    json_decref(s);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "-m \"%s\" -md \"%s\" -c 256 -t 1", target, draft);
    assert_int_equal(specd_init(cmd), 0);
    json_t *t = abi(specd_tokenize_json("{\"text\":\"the little girl\"}"));
    assert_true(json_is_true(json_object_get(t, "success")));
    assert_string_equal(json_string_value(json_array_get(json_object_get(t, "tokens"), 2)), " little");
    json_decref(t);
    t = abi(specd_tokenize_json("{\"text\":"));
    assert_false(json_is_true(json_object_get(t, "success")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(t, "error"), "code")), -32700);
    json_decref(t);
    json_t *c = abi(specd_get_completion("{\"prompt\":\"she was\",\"n_predict\":8,\"temperature\":0}"));
    assert_true(json_is_true(json_object_get(c, "stop")));
    json_t *a = abi(specd_async_completion_init("{\"prompt\":\"she was\",\"n_predict\":8,\"temperature\":0}"));
    assert_true(json_is_true(json_object_get(a, "success")));
    assert_non_null(json_object_get(a, "prompt_stats"));
    char text[1024] = "";
    for (bool finished = false; !finished;) {
        json_t *p = abi(specd_async_completion_poll(NULL));
        assert_true(json_is_true(json_object_get(p, "success")));
        size_t i;
        json_t *u;
        json_array_foreach(json_object_get(p, "completion_updates"), i, u) strcat(text, content_of(u));
        finished = json_is_true(json_object_get(p, "finished"));
        json_decref(p);
        usleep(1000);
    }
    assert_string_equal(text, content_of(c));
    json_t *x = abi(specd_async_completion_cancel(NULL));
    assert_true(json_is_true(json_object_get(x, "success")));
    json_decref(x);
    json_decref(a);
    json_decref(c);
    specd_deinit();
    c = abi(specd_get_completion("{\"prompt\":\"a\"}"));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(c, "error"), "code")), -32000);
    json_decref(c);
    assert_int_equal(specd_init("{\"model\":"), -32700);
}

/* ---- loading beside the serving model, aborting loads ------------------------------------------ */

static const char *string_of(json_t *o, const char *key) { return json_string_value(json_object_get(o, key)); }

/* Polls status until `key` is `want` (about 60 s at most); returns that status. */
static json_t *wait_for_status(const char *key, const char *want) {
    for (int i = 0; i < 6000; i++) {
        json_t *s = result_of("status", "{}");
        if (!strcmp(string_of(s, key), want)) return s;
        json_decref(s);
        usleep(10000);
    }
    fail_msg("status never had %s = '%s'", key, want);
    return NULL;
}

static void expect_status(json_t *s, const char *state, int init_success, const char *model, const char *loading) {
    char *dump = json_dumps(s, 0);
    if (strcmp(string_of(s, "state"), state) || json_integer_value(json_object_get(s, "init_success")) != init_success ||
        strcmp(string_of(s, "model"), model) || strcmp(string_of(s, "loading_model"), loading))
        fail_msg("expected state %s, init_success %d, model '%s', loading_model '%s': %s", state, init_success, model,
                 loading, dump);
    free(dump);
}

static const char *short_request = "{\"prompt\":\"the little girl\",\"n_predict\":12,\"temperature\":0,\"ignore_eos\":true}";

static void failed_reload_keeps_the_model_serving(void **state) {
    (void)state;
    init_models(false);
    json_t *before = complete(short_request);
    assert_string_equal(string_of(before, "model"), target);
    expect_error("init", "{\"model\":\"/no/such.gguf\"}", -32002, "model", "/no/such.gguf");
    json_t *s = result_of("status", "{}");
    expect_status(s, "ready", 1, target, "");
    assert_non_null(strstr(string_of(s, "last_init_error"), "/no/such.gguf"));
    assert_null(json_object_get(s, "error")); /* "error" is for a failed state: nothing serves */
    json_decref(s);
    json_t *after = complete(short_request);
    assert_string_equal(content_of(after), content_of(before));
    char params[4096];
    snprintf(params, sizeof params, "{\"model\":\"%s\",\"model_draft\":\"/no/draft.gguf\"}", target);
    expect_error("init", params, -32002, "model_draft", "/no/draft.gguf");
    s = result_of("status", "{}");
    expect_status(s, "ready", 1, target, "");
    json_decref(s);
    init_models(false);
    s = result_of("status", "{}");
    expect_status(s, "ready", 1, target, "");
    assert_null(json_object_get(s, "last_init_error"));
    json_decref(s);
    json_decref(after);
    json_decref(before);
}

/* Makes loads slow, as a slow disk would, and counts llama.cpp's progress calls. */
typedef struct slow_load {
    int sleep_ms;
    atomic_int calls;
    atomic_int calls_after_stop; /* calls that began after stop_asked */
    atomic_bool stop_asked;
    atomic_bool read_all;        /* a call with progress 1: the weights are read */
} slow_load;

static void slow_hook(float progress, void *user_data) {
    slow_load *s = user_data;
    if (atomic_load(&s->stop_asked)) atomic_fetch_add(&s->calls_after_stop, 1);
    atomic_fetch_add(&s->calls, 1);
    if (progress >= 1.0f) atomic_store(&s->read_all, true);
    usleep((useconds_t)s->sleep_ms * 1000);
}

static void wait_for_calls(slow_load *s, int n) {
    for (int i = 0; i < 6000 && atomic_load(&s->calls) < n; i++) usleep(10000);
    assert_true(atomic_load(&s->calls) >= n);
}

static void async_init(const char *model, const char *model_draft) {
    char params[4096];
    snprintf(params, sizeof params, "{\"model\":\"%s\"%s%s%s,\"n_ctx\":256,\"n_threads\":1,\"async\":true}", model,
             model_draft ? ",\"model_draft\":\"" : "", model_draft ? model_draft : "", model_draft ? "\"" : "");
    json_decref(result_of("init", params));
}

static void reload_serves_the_old_model_until_the_new_one_is_in(void **state) {
    (void)state;
    init_models(false);
    json_t *before = complete(short_request);
    slow_load slow = {.sleep_ms = 20};
    api_host_set_load_hook(rpc_host_default(), slow_hook, &slow);
    async_init(draft, NULL); /* the draft model, alone, as the new target */
    json_t *s = result_of("status", "{}");
    expect_status(s, "ready", 1, target, draft); /* the path of each, never the wrong one */
    json_decref(s);
    expect_error("init", "{\"model\":\"x.gguf\"}", -32001, NULL, "already loading");
    json_t *during = complete(short_request);
    assert_string_equal(string_of(during, "model"), target);
    assert_string_equal(content_of(during), content_of(before));
    s = wait_for_status("loading_model", "");
    expect_status(s, "ready", 1, draft, "");
    json_decref(s);
    api_host_set_load_hook(rpc_host_default(), NULL, NULL);
    json_t *after = complete(short_request);
    assert_string_equal(string_of(after, "model"), draft);
    print_message("%d progress calls for one model\n", atomic_load(&slow.calls));
    json_decref(after);
    json_decref(during);
    json_decref(before);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void the_swap_waits_for_the_running_completion(void **state) {
    (void)state;
    init_models(false);
    /* runs until cancelled: the context shifts when it fills up */
    json_t *start = result_of("completion.start", "{\"prompt\":\"she\",\"n_predict\":100000,\"temperature\":1,"
                                                  "\"seed\":3,\"ignore_eos\":true}");
    slow_load slow = {.sleep_ms = 0};
    api_host_set_load_hook(rpc_host_default(), slow_hook, &slow);
    async_init(draft, NULL);
    for (int i = 0; i < 6000 && !atomic_load(&slow.read_all); i++) usleep(10000);
    assert_true(atomic_load(&slow.read_all));
    usleep(300000); /* the context is made in a moment: the new engine now waits to swap in */
    json_t *s = result_of("status", "{}");
    expect_status(s, "ready", 1, target, draft);
    assert_true(json_is_true(json_object_get(s, "busy")));
    json_decref(s);
    /* short calls still run (a swap that did not wait would block them until the completion ends) */
    json_decref(result_of("tokenize", "{\"text\":\"short calls still run\"}"));
    /* a new completion is refused at once (busy: its client retries), not held without a word
     * until the running one ends (it waited 13 s behind one long stream) */
    double asked = now_s();
    expect_error("completion", "{\"prompt\":\"she\",\"n_predict\":4}", -32001, NULL, "being swapped in");
    expect_error("completion.start", "{\"prompt\":\"she\",\"n_predict\":4}", -32001, NULL, "retry in a moment");
    assert_true(now_s() - asked < 2.0);
    char params[64];
    snprintf(params, sizeof params, "{\"id\":%lld}", (long long)json_integer_value(json_object_get(start, "id")));
    json_decref(result_of("completion.cancel", params));
    json_t *last = NULL;
    for (bool finished = false; !finished;) {
        snprintf(params, sizeof params, "{\"id\":%lld,\"wait_ms\":200}",
                 (long long)json_integer_value(json_object_get(start, "id")));
        json_t *poll = result_of("completion.poll", params);
        json_t *updates = json_object_get(poll, "completion_updates");
        if (json_array_size(updates)) {
            json_decref(last);
            last = json_incref(json_array_get(updates, json_array_size(updates) - 1));
        }
        finished = json_is_true(json_object_get(poll, "finished"));
        json_decref(poll);
    }
    /* it ran on the old model until our cancel */
    assert_string_equal(string_of(last, "stop_type"), "cancelled");
    assert_string_equal(string_of(last, "model"), target);
    json_decref(last);
    s = wait_for_status("model", draft);
    expect_status(s, "ready", 1, draft, "");
    json_decref(s);
    api_host_set_load_hook(rpc_host_default(), NULL, NULL);
    json_decref(start);
}

static void expect_clean_after_shutdown(void) {
    json_t *s = result_of("status", "{}");
    expect_status(s, "uninitialized", 0, "", "");
    assert_null(json_object_get(s, "last_init_error"));
    json_decref(s);
}

/* Stops the load that `slow` slows down: returns how long the stop took. */
static double time_stop(slow_load *slow, void (*stop)(void)) {
    wait_for_calls(slow, 1);
    atomic_store(&slow->stop_asked, true);
    double t0 = now_s();
    stop();
    return now_s() - t0;
}

static void shutdown_method(void) { json_decref(result_of("shutdown", "{}")); }

static void *blocking_init(void *arg) {
    (void)arg;
    char params[4096];
    snprintf(params, sizeof params, "{\"model\":\"%s\",\"model_draft\":\"%s\",\"n_threads\":1}", target, draft);
    return rpc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"init\",\"params\":%s}", params);
}

/* shutdown and specd_deinit during a load return at the load's next progress call. Each call here
 * takes 150 ms and a pair has about 44 of them, so a load they waited for would take over 6 s. */
static void shutdown_aborts_a_load(void **state) {
    (void)state;
    json_decref(result_of("shutdown", "{}"));
    slow_load slow = {.sleep_ms = 150};
    api_host_set_load_hook(rpc_host_default(), slow_hook, &slow);
    async_init(target, draft);
    double took = time_stop(&slow, shutdown_method);
    print_message("shutdown during an async load: %.3f s, after %d progress calls\n", took, atomic_load(&slow.calls));
    assert_true(took < 3.0);
    assert_true(atomic_load(&slow.calls_after_stop) <= 1);
    expect_clean_after_shutdown();

    slow_load again = {.sleep_ms = 150};
    api_host_set_load_hook(rpc_host_default(), slow_hook, &again);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "-m \"%s\" -md \"%s\" -t 1", target, draft);
    specd_init_async(cmd);
    took = time_stop(&again, specd_deinit);
    print_message("specd_deinit during an async load: %.3f s\n", took);
    assert_true(took < 3.0);
    expect_clean_after_shutdown();

    slow_load blocking = {.sleep_ms = 150};
    api_host_set_load_hook(rpc_host_default(), slow_hook, &blocking);
    pthread_t loader;
    pthread_create(&loader, NULL, blocking_init, NULL);
    took = time_stop(&blocking, shutdown_method);
    json_t *answer = NULL;
    pthread_join(loader, (void **)&answer);
    print_message("shutdown during a blocking init: %.3f s\n", took);
    assert_true(took < 3.0);
    expect_error_response(answer, -32002, "model", "cancelled by shutdown");
    json_decref(answer);
    expect_clean_after_shutdown();

    api_host_set_load_hook(rpc_host_default(), NULL, NULL);
    init_models(true); /* and all is as before */
    json_decref(complete(short_request));
}

static void shutdown_frees_everything(void **state) {
    (void)state;
    init_models(false);
    json_t *r = complete("{\"prompt\":\"a\",\"n_predict\":2,\"speculative\":{\"type\":[\"none\"]}}");
    json_decref(r);
    expect_error("completion", "{\"prompt\":\"a\",\"speculative\":{\"type\":[\"draft\"]}}", -32602, "speculative.type",
                 "needs a draft model");
    r = result_of("shutdown", "{}");
    assert_true(json_is_true(json_object_get(r, "was_loaded")));
    json_decref(r);
    expect_error("tokenize", "{\"text\":\"a\"}", -32000, NULL, "call init first");
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target, draft, sizeof target)) return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(framing_errors),
        cmocka_unit_test(numbers_out_of_range_name_their_field),
        cmocka_unit_test(ids_batches_notifications),
        cmocka_unit_test(calls_before_init),
        cmocka_unit_test(init_errors),
        cmocka_unit_test(init_placement),
        cmocka_unit_test(init_async_then_ready),
        cmocka_unit_test(tokenize_and_detokenize),
        cmocka_unit_test(completion_fields_and_lossless_speculation),
        cmocka_unit_test(completion_grammar),
        cmocka_unit_test(completion_stop_string),
        cmocka_unit_test(completion_logit_bias_and_token_prompt),
        cmocka_unit_test(completion_truncates_long_prompts),
        cmocka_unit_test(completion_shifts_the_context),
        cmocka_unit_test(completion_on_a_recurrent_target),
        cmocka_unit_test(completion_param_errors),
        cmocka_unit_test(completion_mirostat_speculates),
        cmocka_unit_test(completion_probabilities_per_token),
        cmocka_unit_test(completion_probabilities_stream_and_stop),
        cmocka_unit_test(async_chunks_equal_blocking),
        cmocka_unit_test(async_cancel_and_busy),
        cmocka_unit_test(old_abi_wrappers),
        cmocka_unit_test(init_refuses_fifos),
        cmocka_unit_test(failed_reload_keeps_the_model_serving),
        cmocka_unit_test(reload_serves_the_old_model_until_the_new_one_is_in),
        cmocka_unit_test(the_swap_waits_for_the_running_completion),
        cmocka_unit_test(shutdown_aborts_a_load),
        cmocka_unit_test(shutdown_frees_everything),
    };
    /* -t 1 everywhere: the tiny models gain nothing from threads, and spinning threads on a
     * loaded 2-core machine make every decode slow */
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    specd_deinit();
    return failed;
}
