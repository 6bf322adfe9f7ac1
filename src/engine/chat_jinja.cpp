// chat_jinja.cpp - chat_jinja.h over the pinned llama.cpp's common/chat: the same calls
// llama-server makes (common_chat_templates_init, common_chat_templates_apply, common_chat_parse,
// common_chat_msg_diff::compute_diffs), so a conversation renders to the prompt llama-server
// builds and tool calls parse back the same way. Only the request's fields and the JSON around
// them are ours. No exception leaves this file: each becomes the *error message.
#include "cpp_text.h"
#include "chat_jinja.h"

#include "chat.h"
#include "common.h"
#include "json.h"
#include "llama.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <set>
#include <string>
#include <vector>

struct chat_jinja {
    common_chat_params params;
    common_chat_parser_params parser;
    std::string params_json;
    common_chat_msg msg;               // the answer parsed so far
    std::string message_json;          // msg in OpenAI's shape
    std::vector<std::string> call_ids; // one per tool call, kept across updates
};

// OpenAI's ids look like call_ + 24 alphanumerics; clients only need them unique per answer.
static std::string new_call_id() {
    static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::string id = "call_";
    for (int i = 0; i < 24; i++) id += chars[rng() % (sizeof chars - 1)];
    return id;
}

static common_chat_templates_ptr load_templates(const llama_model *model, const char *template_src) {
    return common_chat_templates_init(model, template_src ? template_src : "");
}

// A tool's function must have a name, and parameters (when given) must be a JSON Schema object:
// llama.cpp would otherwise fail deep in its grammar builder with a message about neither.
static void check_tools(const common_json &tools) {
    if (tools.is_null()) return;
    if (!tools.is_array()) throw std::invalid_argument("'tools' must be an array of {\"type\": \"function\", \"function\": {...}}");
    for (size_t i = 0; i < tools.size(); i++) {
        const common_json &tool = tools[i];
        std::string where = "tools[" + std::to_string(i) + "]";
        if (!tool.is_object() || !tool.contains("type") || !tool.at("type").is_string() ||
            tool.at("type").get<std::string>() != "function")
            throw std::invalid_argument("'" + where + "' must be {\"type\": \"function\", \"function\": {...}}");
        if (!tool.contains("function") || !tool.at("function").is_object())
            throw std::invalid_argument("'" + where + ".function' must be an object with a 'name'");
        const common_json &fn = tool.at("function");
        if (!fn.contains("name") || !fn.at("name").is_string() || fn.at("name").get<std::string>().empty())
            throw std::invalid_argument("'" + where + ".function.name' must be a non-empty string");
        if (fn.contains("parameters") && !fn.at("parameters").is_null() && !fn.at("parameters").is_object())
            throw std::invalid_argument("'" + where + ".function.parameters' must be a JSON Schema (an object)");
    }
}

// tool_choice: "auto" | "none" | "required" | {"type": "function", "function": {"name"}}. A named
// function keeps that tool only and requires a call to it (llama.cpp knows the three strings).
static common_chat_tool_choice tool_choice_of(const common_json &req, std::vector<common_chat_tool> &tools) {
    if (!req.contains("tool_choice") || req.at("tool_choice").is_null()) return COMMON_CHAT_TOOL_CHOICE_AUTO;
    const common_json &choice = req.at("tool_choice");
    if (choice.is_string()) {
        std::string s = choice.get<std::string>();
        if (s != "auto" && s != "none" && s != "required")
            throw std::invalid_argument("'tool_choice' must be \"auto\", \"none\", \"required\" or "
                                        "{\"type\": \"function\", \"function\": {\"name\": ...}}, not \"" + s + "\"");
        return common_chat_tool_choice_parse_oaicompat(s);
    }
    if (!choice.is_object() || !choice.contains("function") || !choice.at("function").is_object() ||
        !choice.at("function").contains("name") || !choice.at("function").at("name").is_string())
        throw std::invalid_argument("'tool_choice' must be \"auto\", \"none\", \"required\" or "
                                    "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    std::string name = choice.at("function").at("name").get<std::string>();
    std::vector<common_chat_tool> kept;
    for (const auto &t : tools)
        if (t.name == name) kept.push_back(t);
    if (kept.empty()) throw std::invalid_argument("'tool_choice' names the function '" + name + "', which is not in 'tools'");
    tools = kept;
    return COMMON_CHAT_TOOL_CHOICE_REQUIRED;
}

static std::string params_to_json(const common_chat_params &p) {
    common_json triggers = common_json::array();
    for (const auto &t : p.grammar_triggers)
        triggers.push_back({{"type", (int64_t)t.type}, {"value", t.value}, {"token", (int64_t)t.token}});
    common_json preserved = common_json::array(), stops = common_json::array();
    for (const auto &s : p.preserved_tokens) preserved.push_back(s);
    for (const auto &s : p.additional_stops) stops.push_back(s);
    common_json out = common_json::object();
    out["prompt"] = p.prompt;
    out["format"] = common_chat_format_name(p.format);
    out["grammar"] = p.grammar;
    out["grammar_lazy"] = p.grammar_lazy;
    out["grammar_triggers"] = triggers;
    out["preserved_tokens"] = preserved;
    out["additional_stops"] = stops;
    out["generation_prompt"] = p.generation_prompt;
    out["supports_thinking"] = p.supports_thinking;
    return out.dump();
}

// The request's fields -> llama.cpp's inputs, as llama-server's oaicompat_chat_params_parse.
static common_chat_templates_inputs inputs_of(const common_json &req, const common_chat_templates *tmpls,
                                              bool &parse_tools, common_reasoning_format &reasoning) {
    if (!req.is_object()) throw std::invalid_argument("the chat request must be a JSON object");
    if (!req.contains("messages") || !req.at("messages").is_array() || req.at("messages").size() == 0)
        throw std::invalid_argument("'messages' (a non-empty array of {role, content}) is required");
    common_json tools = req.value("tools", common_json());
    check_tools(tools);

    common_chat_templates_inputs in;
    in.messages = common_chat_msgs_parse_oaicompat(req.at("messages"));
    in.tools = common_chat_tools_parse_oaicompat(tools);
    in.tool_choice = tool_choice_of(req, in.tools);
    if (req.contains("json_schema") && !req.at("json_schema").is_null()) in.json_schema = req.at("json_schema").dump();
    auto caps = common_chat_templates_get_caps(tmpls);
    in.parallel_tool_calls = req.value("parallel_tool_calls", (bool)caps["supports_parallel_tool_calls"]);
    in.add_generation_prompt = req.value("add_generation_prompt", true);
    reasoning = COMMON_REASONING_FORMAT_DEEPSEEK; // llama-server's default
    if (req.contains("reasoning_format")) reasoning = common_reasoning_format_from_name(req.at("reasoning_format").get<std::string>());
    in.reasoning_format = reasoning;
    if (req.contains("chat_template_kwargs")) {
        const common_json &kw = req.at("chat_template_kwargs");
        if (!kw.is_object()) throw std::invalid_argument("'chat_template_kwargs' must be an object");
        for (const auto &[key, value] : kw.items()) in.chat_template_kwargs[key] = value.dump();
    }
    // enable_thinking among the kwargs also switches llama.cpp's own handling of thinking
    auto it = in.chat_template_kwargs.find("enable_thinking");
    if (it != in.chat_template_kwargs.end()) {
        if (it->second == "true") in.enable_thinking = true;
        else if (it->second == "false") in.enable_thinking = false;
        else throw std::invalid_argument("'chat_template_kwargs.enable_thinking' must be true or false");
    }
    parse_tools = !in.tools.empty() && in.tool_choice != COMMON_CHAT_TOOL_CHOICE_NONE;
    return in;
}

extern "C" chat_jinja *chat_jinja_begin(const llama_model *model, const char *template_src, const char *request_json,
                                        char **error) {
    if (error) *error = nullptr;
    try {
        common_json req = common_json::parse(request_json ? request_json : "");
        auto tmpls = load_templates(model, template_src);
        bool parse_tools = false;
        common_reasoning_format reasoning = COMMON_REASONING_FORMAT_DEEPSEEK;
        common_chat_templates_inputs in = inputs_of(req, tmpls.get(), parse_tools, reasoning);
        auto *chat = new chat_jinja();
        try {
            chat->params = common_chat_templates_apply(tmpls.get(), in);
            chat->parser = common_chat_parser_params(chat->params);
            chat->parser.reasoning_format = reasoning;
            chat->parser.parse_tool_calls = parse_tools;
            if (!chat->params.parser.empty()) chat->parser.parser.load(chat->params.parser);
            chat->params_json = params_to_json(chat->params);
            chat->msg.role = "assistant";
            chat->message_json = chat->msg.to_json_oaicompat().dump();
        } catch (...) {
            delete chat;
            throw;
        }
        return chat;
    } catch (const std::exception &e) {
        specd_set_text_error(error, e.what());
    } catch (...) {
        specd_set_text_error(error, "the chat template failed (unknown error)");
    }
    return nullptr;
}

extern "C" const char *chat_jinja_params(const chat_jinja *chat) { return chat ? chat->params_json.c_str() : "{}"; }

extern "C" const char *chat_jinja_message(const chat_jinja *chat) { return chat ? chat->message_json.c_str() : "{}"; }

static common_json delta_json(const common_chat_msg_diff &d) {
    common_json delta = common_json::object();
    if (!d.reasoning_content_delta.empty()) delta["reasoning_content"] = d.reasoning_content_delta;
    if (!d.content_delta.empty()) delta["content"] = d.content_delta;
    if (d.tool_call_index != std::string::npos) {
        common_json call = common_json::object();
        call["index"] = (int64_t)d.tool_call_index;
        if (!d.tool_call_delta.id.empty()) {
            call["id"] = d.tool_call_delta.id;
            call["type"] = "function";
        }
        if (!d.tool_call_delta.name.empty() || !d.tool_call_delta.arguments.empty()) {
            common_json fn = common_json::object();
            if (!d.tool_call_delta.name.empty()) fn["name"] = d.tool_call_delta.name;
            if (!d.tool_call_delta.arguments.empty()) fn["arguments"] = d.tool_call_delta.arguments;
            call["function"] = fn;
        }
        common_json calls = common_json::array();
        calls.push_back(call);
        delta["tool_calls"] = calls;
    }
    return delta;
}

extern "C" char *chat_jinja_update(chat_jinja *chat, const char *text, bool is_partial, char **error) {
    if (error) *error = nullptr;
    if (!chat) {
        specd_set_text_error(error, "chat_jinja_update: no chat");
        return nullptr;
    }
    try {
        common_json deltas = common_json::array();
        common_chat_msg parsed;
        try {
            parsed = common_chat_parse(text ? text : "", is_partial, chat->parser);
        } catch (const std::exception &) {
            if (!is_partial) throw;
            return specd_copy_text(deltas.dump()); // a partial text the parser cannot place yet: wait for more
        }
        if (!parsed.empty()) {
            parsed.set_tool_call_ids(chat->call_ids, new_call_id);
            for (const auto &d : common_chat_msg_diff::compute_diffs(chat->msg, parsed)) deltas.push_back(delta_json(d));
            chat->msg = parsed;
            chat->message_json = chat->msg.to_json_oaicompat().dump();
        }
        return specd_copy_text(deltas.dump());
    } catch (const std::exception &e) {
        specd_set_text_error(error, e.what());
    } catch (...) {
        specd_set_text_error(error, "the model's output could not be parsed (unknown error)");
    }
    return nullptr;
}

extern "C" void chat_jinja_free(chat_jinja *chat) { delete chat; }

extern "C" char *chat_jinja_caps(const llama_model *model, const char *template_src, char **error) {
    if (error) *error = nullptr;
    try {
        auto tmpls = load_templates(model, template_src);
        common_json caps = common_json::object();
        for (const auto &[name, on] : common_chat_templates_get_caps(tmpls.get())) caps[name] = on;
        return specd_copy_text(caps.dump());
    } catch (const std::exception &e) {
        specd_set_text_error(error, e.what());
    } catch (...) {
        specd_set_text_error(error, "the chat template failed (unknown error)");
    }
    return nullptr;
}
