/* test_request.c - one typed request (src/serve/request.h) from each JSON dialect: JSON-RPC's and
 * llama-server's /completion fill the same C struct (api/request_json.c), a front end that passes
 * some fields through reads only those, and serve_request_prepare checks the request once against
 * the engine, naming fields as the API spells them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "engine_helpers.h"

#include "api/request_json.h"

#include <math.h>
#include <string.h>

static char target_path[512], draft_path[512], chat_path[512];
static specd_engine *engine;

/* `text` read in `dialect` into *req; the reply's choices into *reply (freed by the caller). */
static bool parse(const char *text, request_dialect dialect, serve_request *req, json_reply *reply, api_error *err) {
    json_t *params = json_loads(text, 0, NULL);
    assert_non_null(params);
    serve_request_init(req);
    memset(reply, 0, sizeof *reply);
    bool ok = request_json_parse(params, dialect, req, reply, err);
    json_decref(params);
    return ok;
}

static void clear(serve_request *req, json_reply *reply) {
    serve_request_clear(req);
    json_decref(reply->prompt);
    json_decref(reply->response_fields);
}

static void jsonrpc_fields_fill_the_struct(void **state) {
    (void)state;
    serve_request req;
    json_reply reply;
    api_error err;
    assert_true(parse("{\"prompt\":[\"a\",5],\"temperature\":0.5,\"top_k\":3,\"stop\":[\"x\",\"y\"],\"seed\":7,"
                      "\"logit_bias\":[[5,false],[6,1.5]],\"n_probs\":2,\"return_tokens\":true,"
                      "\"speculative\":{\"n_max\":3,\"type\":[\"ngram-simple\",\"draft\"]},\"max_tokens\":9}",
                      DIALECT_JSONRPC, &req, &reply, &err));
    assert_true(req.gen.sampling.temperature == 0.5f);
    assert_int_equal(req.gen.sampling.top_k, 3);
    assert_int_equal(req.n_stops, 2);
    assert_string_equal(req.stops[1], "y");
    assert_int_equal(req.seed_requested, 7);
    assert_int_equal(req.gen.sampling.seed, 7);
    assert_int_equal(req.gen.sampling.n_logit_bias, 2);
    assert_true(req.gen.sampling.logit_bias[0].bias == -INFINITY);
    assert_int_equal(req.gen.sampling.logit_bias[1].token, 6);
    assert_int_equal(req.gen.n_probs, 2);
    assert_int_equal(req.gen.speculative.draft_max, 3);
    assert_int_equal(req.gen.speculative.n_types, 2);
    assert_int_equal(req.gen.speculative.types[1], SPECD_SPEC_DRAFT);
    assert_int_equal(req.gen.n_predict, 9); /* max_tokens, an alias */
    assert_string_equal(req.n_predict_field, "max_tokens");
    assert_int_equal(req.n_parts, 2);
    assert_string_equal(req.parts[0].text, "a");
    assert_int_equal(req.parts[1].token, 5);
    assert_true(reply.return_tokens);
    assert_false(reply.probs_server_shape);
    assert_false(req.parse_special);
    clear(&req, &reply);
    /* JSON-RPC's dialect takes no shortcut: one stop string and null are wrong types */
    assert_false(parse("{\"prompt\":\"a\",\"stop\":\"x\"}", DIALECT_JSONRPC, &req, &reply, &err));
    assert_string_equal(err.field, "stop");
    clear(&req, &reply);
    assert_false(parse("{\"prompt\":\"a\",\"temperature\":null}", DIALECT_JSONRPC, &req, &reply, &err));
    assert_string_equal(err.field, "temperature");
    clear(&req, &reply);
}

static void llama_dialect_reads_its_shortcuts(void **state) {
    (void)state;
    serve_request req;
    json_reply reply;
    api_error err;
    assert_true(parse("{\"prompt\":\"a\",\"stop\":\"x\",\"logit_bias\":{\"5\":-1},\"temperature\":null,"
                      "\"n_predict\":null,\"unknown_but_null\":null,\"speculative.type\":\"suffix,draft\"}",
                      DIALECT_LLAMA, &req, &reply, &err));
    assert_int_equal(req.n_stops, 1);
    assert_string_equal(req.stops[0], "x");
    assert_int_equal(req.gen.sampling.logit_bias[0].token, 5);
    assert_true(req.gen.sampling.logit_bias[0].bias == -1.0f);
    assert_true(req.gen.sampling.temperature == specd_generation_default_params().sampling.temperature);
    assert_int_equal(req.gen.n_predict, -1);
    assert_int_equal(req.gen.speculative.types[0], SPECD_SPEC_SUFFIX);
    assert_true(reply.probs_server_shape);  /* llama-server's probabilities by default */
    assert_true(req.parse_special);  /* and its way of tokenizing special-token text */
    clear(&req, &reply);
    assert_false(parse("{\"prompt\":[\"a\",\"b\"]}", DIALECT_LLAMA, &req, &reply, &err)); /* two prompts */
    assert_non_null(strstr(err.message, "several prompts"));
    clear(&req, &reply);
}

/* A front end that passes some fields through (OpenAI's) reads those and nothing else. */
static void passed_fields_only(void **state) {
    (void)state;
    json_t *body = json_loads("{\"temperature\":0.25,\"mirostat\":2,\"stop\":\"z\"}", 0, NULL);
    serve_request req;
    serve_request_init(&req);
    api_error err;
    api_params rp;
    api_params_open(&rp, body, "completion params", "", &err);
    json_request jr = {&rp, DIALECT_LLAMA, &req, NULL};
    static const char *const names[] = {"temperature", "stop", NULL};
    assert_true(request_json_fields(&jr, names));
    assert_true(req.gen.sampling.temperature == 0.25f);
    assert_int_equal(req.gen.sampling.mirostat, 0); /* not passed: not read */
    assert_string_equal(req.stops[0], "z");
    serve_request_clear(&req);
    json_decref(body);
}

/* llama.cpp's samplers and the request's LoRA scales land in the typed request; the adapter ids are
 * checked against the engine's adapters when the request meets it (this engine has none). */
static void samplers_and_lora_fill_the_struct(void **state) {
    (void)state;
    serve_request req;
    json_reply reply;
    api_error err;
    assert_true(parse("{\"prompt\":\"a\",\"dry_multiplier\":0.8,\"dry_sequence_breakers\":[\"x\",\"yz\"],"
                      "\"xtc_probability\":0.5,\"top_n_sigma\":1.5,\"dynatemp_range\":0.3,\"min_keep\":2,"
                      "\"lora\":[{\"id\":0,\"scale\":0.5},{\"id\":3}]}",
                      DIALECT_LLAMA, &req, &reply, &err));
    const specd_sampling_params *s = &req.gen.sampling;
    assert_true(s->dry_multiplier == 0.8f && s->xtc_probability == 0.5f && s->top_n_sigma == 1.5f);
    assert_true(s->dynatemp_range == 0.3f);
    assert_int_equal(s->min_keep, 2);
    assert_int_equal(s->n_dry_sequence_breakers, 2);
    assert_string_equal(s->dry_sequence_breakers[1], "yz");
    assert_int_equal(req.n_lora, 2);
    assert_int_equal(req.lora[0].id, 0);
    assert_true(req.lora[0].scale == 0.5 && req.lora[1].scale == 0.0); /* no scale: 0 */
    serve_limits limits = {.n_predict_max = -1};
    serve_fault fault;
    assert_false(serve_request_prepare(&req, engine, &limits, &request_json_names, &fault));
    assert_int_equal(fault.kind, SERVE_INVALID);
    assert_string_equal(fault.field, "lora");
    assert_non_null(strstr(fault.message, "lora[0]: 'id' must be an adapter's index"));
    clear(&req, &reply);
    /* [] is no list of its own: the server's scales; a wrong shape is refused as it is read */
    assert_true(parse("{\"prompt\":\"a\",\"lora\":[]}", DIALECT_LLAMA, &req, &reply, &err));
    assert_int_equal(req.n_lora, 0);
    clear(&req, &reply);
    assert_false(parse("{\"prompt\":\"a\",\"lora\":[{\"id\":\"0\"}]}", DIALECT_LLAMA, &req, &reply, &err));
    assert_string_equal(err.field, "lora");
    clear(&req, &reply);
    assert_false(parse("{\"prompt\":\"a\",\"dry_sequence_breakers\":[\"\"]}", DIALECT_LLAMA, &req, &reply, &err));
    assert_string_equal(err.field, "dry_sequence_breakers");
    clear(&req, &reply);
}

/* ---- checked once, against the engine ------------------------------------------------------ */

static bool prepare(const char *text, serve_request *req, serve_fault *fault) {
    json_reply reply;
    api_error err;
    if (!parse(text, DIALECT_JSONRPC, req, &reply, &err)) fail_msg("parse: %s", err.message);
    json_decref(reply.prompt);
    serve_limits limits = {.n_predict_max = -1};
    return serve_request_prepare(req, engine, &limits, &request_json_names, fault);
}

static void prepare_checks_and_names_fields(void **state) {
    (void)state;
    serve_request req;
    serve_fault fault;
    assert_false(prepare("{\"prompt\":\"a\",\"repeat_penalty\":0}", &req, &fault));
    assert_int_equal(fault.kind, SERVE_INVALID);
    assert_string_equal(fault.field, "repeat_penalty");
    assert_non_null(strstr(fault.message, "completion params: 'repeat_penalty' must be a finite number > 0"));
    serve_request_clear(&req);
    assert_false(prepare("{\"prompt\":\"a\",\"speculative\":{\"n_max\":17}}", &req, &fault));
    assert_string_equal(fault.field, "speculative.n_max"); /* the library's draft_max, as this API spells it */
    assert_non_null(strstr(fault.message, "from 0 to 16"));
    serve_request_clear(&req);
    assert_false(prepare("{\"prompt\":[\"a\",999999]}", &req, &fault));
    assert_non_null(strstr(fault.message, "prompt[1] must be a string or a token id from 0 to"));
    serve_request_clear(&req);
    /* a good one: its prompt tokenized as the engine does it */
    assert_true(prepare("{\"prompt\":\"once upon a time\",\"n_keep\":2}", &req, &fault));
    specd_token *want = NULL;
    int32_t n = 0;
    assert_int_equal(specd_tokenize(engine, "once upon a time", true, &want, &n, NULL), SPECD_OK);
    assert_int_equal(req.n_tokens, n);
    assert_memory_equal(req.tokens, want, (size_t)n * sizeof *want);
    assert_int_equal(req.gen.n_keep, 2);
    assert_int_equal(req.n_ctx, specd_engine_n_ctx(engine));
    specd_free(want);
    serve_request_clear(&req);
}

/* Chat messages go through the model's template when the request meets the engine. */
static void prepare_applies_the_chat_template(void **state) {
    (void)state;
    specd_engine *chat = open_engine(chat_path, NULL, 256);
    serve_request req;
    serve_request_init(&req);
    assert_true(serve_request_add_message(&req, "user", "hi"));
    serve_limits limits = {.n_predict_max = -1};
    serve_fault fault;
    assert_true(serve_request_prepare(&req, chat, &limits, &request_json_names, &fault));
    specd_chat_message m = {"user", "hi"};
    char *text = NULL;
    assert_int_equal(specd_chat_apply_template(chat, &m, 1, NULL, true, &text, NULL), SPECD_OK);
    specd_token *want = NULL;
    int32_t n = 0;
    assert_int_equal(specd_tokenize(chat, text, true, &want, &n, NULL), SPECD_OK);
    assert_int_equal(req.n_tokens, n);
    assert_memory_equal(req.tokens, want, (size_t)n * sizeof *want);
    specd_free(want);
    specd_free(text);
    serve_request_clear(&req);
    /* a model without a template: the message says what to do */
    serve_request_init(&req);
    assert_true(serve_request_add_message(&req, "user", "hi"));
    assert_false(serve_request_prepare(&req, engine, &limits, &request_json_names, &fault));
    assert_string_equal(fault.field, "messages");
    assert_non_null(strstr(fault.message, "--chat-template"));
    serve_request_clear(&req);
    specd_engine_free(chat);
}

/* A prompt longer than a slot's context: the old API's prompt is cut (n_keep, whole blocks), a
 * conversation (whole_prompt, the chat routes') is refused naming "messages": cut, it lost its start
 * (a chat template's system prompt and tool descriptions) and the model answered another prompt. */
static void prepare_refuses_a_conversation_that_does_not_fit(void **state) {
    (void)state;
    char text[2048] = "";
    for (int i = 0; i < 300; i++) strcat(text, "the ");
    serve_limits limits = {.n_predict_max = -1};
    serve_fault fault;
    serve_request req;
    serve_request_init(&req);
    assert_true(serve_request_add_text(&req, text));
    assert_true(serve_request_prepare(&req, engine, &limits, &request_json_names, &fault));
    assert_true(req.truncated);
    assert_true(req.n_tokens < req.n_ctx && req.n_prompt_tokens >= req.n_ctx);
    int32_t n_prompt = req.n_prompt_tokens;
    serve_request_clear(&req);

    serve_request_init(&req);
    req.whole_prompt = true;
    assert_true(serve_request_add_text(&req, text));
    assert_false(serve_request_prepare(&req, engine, &limits, &request_json_names, &fault));
    assert_int_equal(fault.kind, SERVE_INVALID);
    assert_string_equal(fault.field, "messages");
    char want[96];
    snprintf(want, sizeof want, "is %d tokens", n_prompt);
    assert_non_null(strstr(fault.message, want));
    snprintf(want, sizeof want, "context holds %d", specd_engine_n_ctx(engine));
    assert_non_null(strstr(fault.message, want));
    assert_non_null(strstr(fault.message, "-c"));
    serve_request_clear(&req);

    /* one that fits is not touched */
    serve_request_init(&req);
    req.whole_prompt = true;
    assert_true(serve_request_add_text(&req, "the the the"));
    assert_true(serve_request_prepare(&req, engine, &limits, &request_json_names, &fault));
    assert_false(req.truncated);
    assert_int_equal(req.n_tokens, req.n_prompt_tokens);
    serve_request_clear(&req);
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target_path, draft_path, sizeof target_path)) return 2;
    snprintf(chat_path, sizeof chat_path, "%s/chat-chatml.gguf", argv[1]);
    engine = open_engine(target_path, draft_path, 256);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(jsonrpc_fields_fill_the_struct),
        cmocka_unit_test(llama_dialect_reads_its_shortcuts),
        cmocka_unit_test(passed_fields_only),
        cmocka_unit_test(samplers_and_lora_fill_the_struct),
        cmocka_unit_test(prepare_checks_and_names_fields),
        cmocka_unit_test(prepare_applies_the_chat_template),
        cmocka_unit_test(prepare_refuses_a_conversation_that_does_not_fit),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    specd_engine_free(engine);
    return rc;
}
