/* chat_jinja.h - the C face of chat_jinja.cpp, a shim over the pinned llama.cpp's common/chat
 * (its Jinja engine, the chat formats of dozens of model families and their tool-call parsers).
 * One place turns an OpenAI-shaped conversation (messages, tools, tool_choice, ...) into prompt
 * text and parses the model's output back into content, reasoning and tool calls; every chat
 * route goes through it (engine/chat.c wraps it as specd.h's specd_chat_*).
 *
 * Everything crosses as JSON text, so this header needs neither C++ nor a JSON library. Errors
 * come back as a malloc'd message in *error (free with free()); nothing here throws. */
#ifndef SPECD_ENGINE_CHAT_JINJA_H
#define SPECD_ENGINE_CHAT_JINJA_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

struct llama_model;

/* One chat turn: the prompt made for it and the parser of the model's answer. */
typedef struct chat_jinja chat_jinja;

/* Renders `request_json` (an object: messages, tools, tool_choice ("auto", "none", "required" or
 * {"type": "function", "function": {"name"}}), parallel_tool_calls, add_generation_prompt,
 * chat_template_kwargs, reasoning_format, json_schema) with `template_src` (Jinja source; NULL or
 * "": the model's tokenizer.chat_template, ChatML when it has none). NULL with *error on bad input
 * or a template that fails. */
chat_jinja *chat_jinja_begin(const struct llama_model *model, const char *template_src, const char *request_json,
                             char **error);

/* What the turn generates with (borrowed JSON, lives as long as `chat`): {prompt, format,
 * grammar, grammar_lazy, grammar_triggers [{type: 0 token, 1 word, 2 pattern, 3 full pattern (llama-server's
 * numbers), value, token}], preserved_tokens, additional_stops, generation_prompt, supports_thinking}. */
const char *chat_jinja_params(const chat_jinja *chat);

/* Parses `text` (all the model generated so far; `is_partial` while it may go on) and returns the
 * OpenAI chat deltas since the last call (malloc'd JSON array of {content} / {reasoning_content} /
 * {tool_calls: [{index, id, type, function: {name, arguments}}]}), NULL with *error when the
 * final text does not parse. */
char *chat_jinja_update(chat_jinja *chat, const char *text, bool is_partial, char **error);

/* The answer parsed so far as an OpenAI assistant message (borrowed JSON, valid until the next
 * update): {role, content, reasoning_content?, tool_calls?}. */
const char *chat_jinja_message(const chat_jinja *chat);

void chat_jinja_free(chat_jinja *chat);

/* The template's capabilities as llama-server's /props gives them (malloc'd JSON object), NULL
 * with *error when the template does not parse. */
char *chat_jinja_caps(const struct llama_model *model, const char *template_src, char **error);

#ifdef __cplusplus
}
#endif

#endif
