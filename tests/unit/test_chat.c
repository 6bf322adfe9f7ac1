/* test_chat.c - chat templates (src/engine/chat.c) on tiny models: the model's own ChatML Jinja
 * template gives exactly ChatML's text; a model without a template is a clear error unless a
 * built-in template is named; unknown names and templates llama.cpp does not recognize are errors
 * that list the built-in names; bad messages are refused.
 *
 *   test_chat MODELS_DIR   (target.gguf: no template; chat-chatml.gguf, chat-unknown.gguf: with one) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "engine_helpers.h"
#include "specd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char target_path[1024], draft_path[1024], chatml_path[1024], unknown_path[1024];

/* As tests/CMakeLists.txt writes it into chat-chatml.gguf: ChatML's Jinja text, as models carry it. */
static const char CHATML_JINJA[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

static const specd_chat_message CONVERSATION[] = {
    {"system", "You are a helpful assistant."},
    {"user", "Hello! Who are you?"},
};

static const char CHATML_EXPECTED[] = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                                      "<|im_start|>user\nHello! Who are you?<|im_end|>\n"
                                      "<|im_start|>assistant\n";

static specd_engine *open_model(const char *path) { return open_engine(path, NULL, 64); }

/* The formatted conversation (heap), failing the test on an error. */
static char *apply(specd_engine *e, const specd_chat_message *msgs, size_t n, const char *name, bool add_assistant) {
    char *out = NULL, *error = NULL;
    if (specd_chat_apply_template(e, msgs, n, name, add_assistant, &out, &error) != SPECD_OK)
        fail_msg("chat template %s: %s", name ? name : "(model's)", error);
    assert_null(error);
    return out;
}

/* The error message of a call that must fail (heap). */
static char *refusal(specd_engine *e, const specd_chat_message *msgs, size_t n, const char *name) {
    char *out = (char *)"untouched", *error = NULL;
    assert_int_equal(specd_chat_apply_template(e, msgs, n, name, true, &out, &error), SPECD_ERR_INVALID_ARGUMENT);
    assert_null(out);
    assert_non_null(error);
    return error;
}

static void assert_contains(const char *text, const char *part) {
    if (!strstr(text, part)) fail_msg("\"%s\" lacks \"%s\"", text, part);
}

static void test_model_chatml_template_gives_exact_text(void **state) {
    (void)state;
    specd_engine *e = open_model(chatml_path);
    assert_string_equal(specd_engine_chat_template(e), CHATML_JINJA);
    char *text = apply(e, CONVERSATION, 2, NULL, true);
    assert_string_equal(text, CHATML_EXPECTED);
    specd_free(text);
    /* Without the assistant's opening; "" means the model's template as NULL does. */
    text = apply(e, CONVERSATION, 2, "", false);
    assert_string_equal(text, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                              "<|im_start|>user\nHello! Who are you?<|im_end|>\n");
    specd_free(text);
    /* A named built-in wins over the model's own. */
    text = apply(e, CONVERSATION, 2, "llama3", true);
    assert_string_equal(text, "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
                              "<|start_header_id|>user<|end_header_id|>\n\nHello! Who are you?<|eot_id|>"
                              "<|start_header_id|>assistant<|end_header_id|>\n\n");
    specd_free(text);
    specd_engine_free(e);
}

static void test_model_without_template_is_a_clear_error(void **state) {
    (void)state;
    specd_engine *e = open_model(target_path);
    assert_null(specd_engine_chat_template(e));
    char *error = refusal(e, CONVERSATION, 2, NULL);
    assert_contains(error, "the model has no chat template (no tokenizer.chat_template in its GGUF)");
    assert_contains(error, "name one of llama.cpp's built-in chat templates: ");
    assert_contains(error, "chatml");
    assert_contains(error, "llama3");
    specd_free(error);
    specd_engine_free(e);
}

static void test_builtin_name_works_without_model_template(void **state) {
    (void)state;
    specd_engine *e = open_model(target_path);
    char *text = apply(e, CONVERSATION, 2, "chatml", true);
    assert_string_equal(text, CHATML_EXPECTED);
    specd_free(text);
    specd_engine_free(e);
}

static void test_unknown_names_and_templates_list_the_builtins(void **state) {
    (void)state;
    specd_engine *e = open_model(chatml_path);
    char *error = refusal(e, CONVERSATION, 2, "chatml-typo");
    assert_contains(error, "unknown chat template 'chatml-typo': name one of llama.cpp's built-in chat templates: ");
    assert_contains(error, "chatml, ");
    assert_contains(error, "mistral-v7");
    specd_free(error);
    specd_engine_free(e);

    e = open_model(unknown_path);
    assert_string_equal(specd_engine_chat_template(e), "{{ messages | tojson }}");
    error = refusal(e, CONVERSATION, 2, NULL);
    assert_contains(error, "llama.cpp does not recognize the model's chat template");
    assert_contains(error, "chatml");
    specd_free(error);
    char *text = apply(e, CONVERSATION, 2, "chatml", true); /* a name still works there */
    assert_string_equal(text, CHATML_EXPECTED);
    specd_free(text);
    specd_engine_free(e);
}

static void test_bad_messages_are_refused(void **state) {
    (void)state;
    specd_engine *e = open_model(chatml_path);
    static const specd_chat_message no_role[] = {{"user", "hi"}, {NULL, "x"}};
    static const specd_chat_message no_content[] = {{"user", NULL}};
    char *error = refusal(e, no_role, 2, NULL);
    assert_string_equal(error, "chat message 1 has no role");
    specd_free(error);
    error = refusal(e, no_content, 1, NULL);
    assert_string_equal(error, "chat message 0 has no content");
    specd_free(error);
    error = refusal(e, NULL, 3, NULL);
    assert_contains(error, "3 messages given but the array is NULL");
    specd_free(error);
    char *out = NULL;
    assert_int_equal(specd_chat_apply_template(NULL, CONVERSATION, 2, NULL, true, &out, NULL), SPECD_ERR_INVALID_ARGUMENT);
    specd_engine_free(e);
}

/* Many short messages: the text outgrows the first buffer guess, which is sized from the contents. */
static void test_long_conversations_are_complete(void **state) {
    (void)state;
    specd_engine *e = open_model(chatml_path);
    enum { N = 200 };
    specd_chat_message msgs[N];
    char expected[N * 64 + 64];
    size_t len = 0;
    for (int i = 0; i < N; i++) {
        msgs[i] = (specd_chat_message){i % 2 ? "assistant" : "user", i % 3 ? "" : "ok"};
        len += (size_t)snprintf(expected + len, sizeof expected - len, "<|im_start|>%s\n%s<|im_end|>\n", msgs[i].role,
                                msgs[i].content);
    }
    char *text = apply(e, msgs, N, NULL, false);
    assert_string_equal(text, expected);
    specd_free(text);
    /* No messages at all: just the assistant's opening. */
    text = apply(e, NULL, 0, NULL, true);
    assert_string_equal(text, "<|im_start|>assistant\n");
    specd_free(text);
    specd_engine_free(e);
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target_path, draft_path, sizeof target_path)) return 2;
    snprintf(chatml_path, sizeof chatml_path, "%s/chat-chatml.gguf", argv[1]);
    snprintf(unknown_path, sizeof unknown_path, "%s/chat-unknown.gguf", argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_chatml_template_gives_exact_text),
        cmocka_unit_test(test_model_without_template_is_a_clear_error),
        cmocka_unit_test(test_builtin_name_works_without_model_template),
        cmocka_unit_test(test_unknown_names_and_templates_list_the_builtins),
        cmocka_unit_test(test_bad_messages_are_refused),
        cmocka_unit_test(test_long_conversations_are_complete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
