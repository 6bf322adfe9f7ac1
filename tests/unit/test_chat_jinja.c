/* test_chat_jinja.c - the shim over llama.cpp's chat code (src/engine/chat_jinja.cpp) on real
 * model templates from the pinned llama.cpp (the .jinja files of models/templates): prompts rendered, chat
 * template kwargs, tool calls and reasoning parsed back, whole and as streamed deltas, each
 * family's tool-call format parsed back into the same OpenAI call (13 families), and bad input
 * refused with a message naming it.
 *
 *   test_chat_jinja TEMPLATES_DIR */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "engine/chat_jinja.h"

static const char *templates_dir;

static char *read_template(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", templates_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* Begins a turn with template `name` on `request`; fails the test on an error. */
static chat_jinja *begin(const char *name, const char *request) {
    char *src = read_template(name), *error = NULL;
    chat_jinja *chat = chat_jinja_begin(NULL, src, request, &error);
    if (!chat) fail_msg("%s: %s", name, error ? error : "(no message)");
    free(src);
    return chat;
}

static json_t *params_of(const chat_jinja *chat) {
    json_t *p = json_loads(chat_jinja_params(chat), 0, NULL);
    assert_non_null(p);
    return p;
}

static const char *const CHAT =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"You are terse.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]}";

static void qwen3_prompt(void **state) {
    (void)state;
    chat_jinja *chat = begin("Qwen-Qwen3-0.6B.jinja", CHAT);
    json_t *p = params_of(chat);
    assert_string_equal(json_string_value(json_object_get(p, "prompt")),
                        "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                        "<|im_start|>assistant\n");
    json_decref(p);
    chat_jinja_free(chat);
}

/* chat_template_kwargs reach the template: Qwen3 closes an empty thought when thinking is off. */
static void qwen3_kwargs(void **state) {
    (void)state;
    chat_jinja *chat = begin("Qwen-Qwen3-0.6B.jinja",
                             "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
                             "\"chat_template_kwargs\": {\"enable_thinking\": false}}");
    json_t *p = params_of(chat);
    const char *prompt = json_string_value(json_object_get(p, "prompt"));
    const char *tail = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    assert_true(strlen(prompt) >= strlen(tail));
    assert_string_equal(prompt + strlen(prompt) - strlen(tail), tail);
    json_decref(p);
    chat_jinja_free(chat);
}

static const char *const TOOLS =
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather now\", "
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, "
    "\"required\": [\"city\"]}}}]";

static chat_jinja *qwen3_with_tools(const char *extra) {
    char request[2048];
    snprintf(request, sizeof request, "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Paris?\"}], %s%s}",
             TOOLS, extra);
    return begin("Qwen-Qwen3-0.6B.jinja", request);
}

static const char *const QWEN_CALL =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

static void check_paris_call(json_t *call) {
    assert_string_equal(json_string_value(json_object_get(call, "type")), "function");
    assert_string_equal(json_string_value(json_object_get(json_object_get(call, "function"), "name")), "get_weather");
    json_t *args = json_loads(json_string_value(json_object_get(json_object_get(call, "function"), "arguments")), 0, NULL);
    assert_non_null(args);
    assert_string_equal(json_string_value(json_object_get(args, "city")), "Paris");
    json_decref(args);
    assert_int_equal(strncmp(json_string_value(json_object_get(call, "id")), "call_", 5), 0);
}

/* The tools go into the prompt; the model's call comes back in OpenAI's shape. */
static void qwen3_tool_call(void **state) {
    (void)state;
    chat_jinja *chat = qwen3_with_tools("");
    json_t *p = params_of(chat);
    const char *prompt = json_string_value(json_object_get(p, "prompt"));
    assert_non_null(strstr(prompt, "get_weather"));
    assert_non_null(strstr(prompt, "<tools>"));
    /* tool_choice auto: a lazy grammar, triggered by the call's opening */
    assert_true(json_is_true(json_object_get(p, "grammar_lazy")));
    assert_true(json_array_size(json_object_get(p, "grammar_triggers")) > 0);
    json_decref(p);
    char *error = NULL;
    char *deltas = chat_jinja_update(chat, QWEN_CALL, false, &error);
    assert_non_null(deltas);
    free(deltas);
    json_t *m = json_loads(chat_jinja_message(chat), 0, NULL);
    assert_string_equal(json_string_value(json_object_get(m, "role")), "assistant");
    assert_int_equal(json_array_size(json_object_get(m, "tool_calls")), 1);
    check_paris_call(json_array_get(json_object_get(m, "tool_calls"), 0));
    json_decref(m);
    chat_jinja_free(chat);
}

/* Fed a character at a time, the deltas add up to the whole call: its id and name once, the
 * arguments in pieces. */
static void qwen3_streamed_call(void **state) {
    (void)state;
    chat_jinja *chat = qwen3_with_tools(", \"parallel_tool_calls\": true");
    size_t n = strlen(QWEN_CALL);
    char *prefix = malloc(n + 1);
    char name[64] = "", id[64] = "", args[256] = "";
    int names = 0;
    for (size_t i = 1; i <= n; i++) {
        memcpy(prefix, QWEN_CALL, i);
        prefix[i] = '\0';
        char *error = NULL;
        char *text = chat_jinja_update(chat, prefix, i < n, &error);
        if (!text) fail_msg("update at %zu: %s", i, error);
        json_t *deltas = json_loads(text, 0, NULL);
        free(text);
        size_t k;
        json_t *d;
        json_array_foreach(deltas, k, d) {
            assert_null(json_object_get(d, "content")); /* nothing of the call leaks into the text */
            json_t *call = json_array_get(json_object_get(d, "tool_calls"), 0);
            if (!call) continue;
            assert_int_equal(json_integer_value(json_object_get(call, "index")), 0);
            json_t *fn = json_object_get(call, "function");
            if (json_object_get(fn, "name")) {
                names++;
                snprintf(name, sizeof name, "%s", json_string_value(json_object_get(fn, "name")));
                snprintf(id, sizeof id, "%s", json_string_value(json_object_get(call, "id")));
            }
            if (json_object_get(fn, "arguments"))
                strncat(args, json_string_value(json_object_get(fn, "arguments")), sizeof args - strlen(args) - 1);
        }
        json_decref(deltas);
    }
    free(prefix);
    assert_int_equal(names, 1);
    assert_string_equal(name, "get_weather");
    json_t *m = json_loads(chat_jinja_message(chat), 0, NULL);
    json_t *call = json_array_get(json_object_get(m, "tool_calls"), 0);
    assert_string_equal(id, json_string_value(json_object_get(call, "id")));
    assert_string_equal(args, json_string_value(json_object_get(json_object_get(call, "function"), "arguments")));
    json_decref(m);
    chat_jinja_free(chat);
}

/* A thought goes to reasoning_content, the rest to content. */
static void qwen3_reasoning(void **state) {
    (void)state;
    chat_jinja *chat = begin("Qwen-Qwen3-0.6B.jinja", CHAT);
    char *error = NULL;
    char *deltas = chat_jinja_update(chat, "<think>\nShort answer.\n</think>\n\nHello!", false, &error);
    assert_non_null(deltas);
    free(deltas);
    json_t *m = json_loads(chat_jinja_message(chat), 0, NULL);
    /* the thought as llama.cpp parses it: its closing newline kept */
    assert_string_equal(json_string_value(json_object_get(m, "reasoning_content")), "Short answer.\n");
    assert_string_equal(json_string_value(json_object_get(m, "content")), "Hello!");
    json_decref(m);
    chat_jinja_free(chat);
}

/* The history of a tool round trip renders: the call and its result are in the prompt. */
static void tool_result_in_history(void **state) {
    (void)state;
    char request[4096];
    snprintf(request, sizeof request,
             "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Paris?\"}, "
             "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", "
             "\"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}}]}, "
             "{\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": \"18 degrees, sunny\"}], %s}", TOOLS);
    chat_jinja *chat = begin("Qwen-Qwen3-0.6B.jinja", request);
    json_t *p = params_of(chat);
    const char *prompt = json_string_value(json_object_get(p, "prompt"));
    assert_non_null(strstr(prompt, "<tool_response>\n18 degrees, sunny\n</tool_response>"));
    assert_non_null(strstr(prompt, "\"city\": \"Paris\""));
    json_decref(p);
    chat_jinja_free(chat);
}

/* Mistral's format: [TOOL_CALLS] and a JSON list, ids of its own kept. */
static void mistral_tool_call(void **state) {
    (void)state;
    char request[2048];
    snprintf(request, sizeof request, "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Paris?\"}], %s}", TOOLS);
    chat_jinja *chat = begin("mistralai-Mistral-Nemo-Instruct-2407.jinja", request);
    char *error = NULL;
    char *deltas = chat_jinja_update(
        chat, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abcdefghi\"}]",
        false, &error);
    if (!deltas) fail_msg("%s", error);
    free(deltas);
    json_t *m = json_loads(chat_jinja_message(chat), 0, NULL);
    json_t *call = json_array_get(json_object_get(m, "tool_calls"), 0);
    assert_non_null(call);
    assert_string_equal(json_string_value(json_object_get(json_object_get(call, "function"), "name")), "get_weather");
    assert_string_equal(json_string_value(json_object_get(call, "id")), "abcdefghi");
    json_decref(m);
    chat_jinja_free(chat);
}

/* Each family's tool-call text, as its model writes it after the template's generation prompt,
 * parses back into the same OpenAI call (get_weather, city Paris): what llama-server's chat parser
 * gives, as specd runs the same parser. The texts follow each format's own markers. */
static const struct {
    const char *template_name;
    const char *model_text;
} CALL_FORMATS[] = {
    {"Qwen-Qwen2.5-7B-Instruct.jinja", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
    {"Qwen3.5-4B.jinja",
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
     "</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```"
     "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
    {"meta-llama-Llama-3.3-70B-Instruct.jinja", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}"},
    {"meta-llama-Llama-3.2-3B-Instruct.jinja", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}"},
    {"Qwen3-Coder.jinja",
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"},
    {"GLM-4.6.jinja", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"},
    {"Mistral-Small-3.2-24B-Instruct-2506.jinja", "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}"},
    /* the prompt opens <think>: the thinking, here empty, closes before the calls */
    {"deepseek-ai-DeepSeek-V3.1.jinja",
     "</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
    {"openai-gpt-oss-120b.jinja", "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}"},
};

static void calls_of_each_format(void **state) {
    (void)state;
    char request[2048];
    snprintf(request, sizeof request, "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Paris?\"}], %s}", TOOLS);
    int failed = 0;
    for (size_t i = 0; i < sizeof CALL_FORMATS / sizeof *CALL_FORMATS; i++) {
        chat_jinja *chat = begin(CALL_FORMATS[i].template_name, request);
        char *error = NULL;
        char *deltas = chat_jinja_update(chat, CALL_FORMATS[i].model_text, false, &error);
        json_t *m = deltas ? json_loads(chat_jinja_message(chat), 0, NULL) : NULL;
        json_t *call = json_array_get(json_object_get(m, "tool_calls"), 0);
        json_t *args = call ? json_loads(json_string_value(json_object_get(json_object_get(call, "function"), "arguments")),
                                         0, NULL) : NULL;
        const char *name = json_string_value(json_object_get(json_object_get(call, "function"), "name"));
        bool ok = json_array_size(json_object_get(m, "tool_calls")) == 1 && name && !strcmp(name, "get_weather") &&
                  args && json_string_value(json_object_get(args, "city")) &&
                  !strcmp(json_string_value(json_object_get(args, "city")), "Paris");
        if (!ok) {
            char *text = m ? json_dumps(m, JSON_COMPACT) : NULL;
            const char *format = strstr(chat_jinja_params(chat), "\"format\""); /* the parser llama.cpp chose */
            print_message("%s: no get_weather(Paris) call parsed: %s (%.40s)\n", CALL_FORMATS[i].template_name,
                          text ? text : error ? error : "(nothing)", format ? format : "no format");
            free(text);
            failed++;
        }
        json_decref(args);
        json_decref(m);
        free(deltas);
        free(error);
        chat_jinja_free(chat);
    }
    assert_int_equal(failed, 0);
}

static void expect_error(const char *template_src, const char *request, const char *needle) {
    char *error = NULL;
    chat_jinja *chat = chat_jinja_begin(NULL, template_src, request, &error);
    assert_null(chat);
    assert_non_null(error);
    if (!strstr(error, needle)) fail_msg("error '%s' does not say '%s'", error, needle);
    free(error);
}

static void bad_input(void **state) {
    (void)state;
    char *src = read_template("Qwen-Qwen3-0.6B.jinja");
    char request[2048];
    snprintf(request, sizeof request, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], %s, "
             "\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"nope\"}}}", TOOLS);
    expect_error(src, request, "'nope', which is not in 'tools'");
    expect_error(src, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{\"type\": \"function\", "
                 "\"function\": {\"name\": \"f\", \"parameters\": \"not a schema\"}}]}", "tools[0].function.parameters");
    expect_error(src, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{\"type\": \"function\", "
                 "\"function\": {\"description\": \"no name\"}}]}", "tools[0].function.name");
    expect_error(src, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tool_choice\": \"sometimes\"}",
                 "'tool_choice' must be");
    expect_error(src, "{\"messages\": []}", "'messages'");
    expect_error(src, "not json", "parse");
    expect_error("{% for x in %}", CHAT, "");
    free(src);
    /* and nothing is broken: the next turn renders */
    chat_jinja_free(begin("Qwen-Qwen3-0.6B.jinja", CHAT));
}

/* A named function keeps that tool and requires a call: a grammar that holds from the start. */
static void named_tool_choice(void **state) {
    (void)state;
    chat_jinja *chat = qwen3_with_tools(", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}");
    json_t *p = params_of(chat);
    assert_true(strlen(json_string_value(json_object_get(p, "grammar"))) > 0);
    assert_false(json_is_true(json_object_get(p, "grammar_lazy")));
    json_decref(p);
    chat_jinja_free(chat);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_chat_jinja TEMPLATES_DIR\n");
        return 2;
    }
    templates_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(qwen3_prompt),      cmocka_unit_test(qwen3_kwargs),          cmocka_unit_test(qwen3_tool_call),
        cmocka_unit_test(qwen3_streamed_call), cmocka_unit_test(qwen3_reasoning),     cmocka_unit_test(tool_result_in_history),
        cmocka_unit_test(mistral_tool_call), cmocka_unit_test(calls_of_each_format), cmocka_unit_test(named_tool_choice),     cmocka_unit_test(bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
