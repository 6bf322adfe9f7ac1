// grammar_lazy.cpp - grammar_lazy.h: the two llama.cpp grammar calls that may throw, each in
// try/catch so that no exception reaches specd's C code.
#include "grammar_lazy.h"

#include "llama.h"

#include <cstring>
#include <regex>
#include <vector>

extern "C" struct llama_sampler *specd_grammar_new_lazy(const struct llama_vocab *vocab, const char *text,
                                                        const char *const *patterns, size_t n_patterns,
                                                        const int32_t *tokens, size_t n_tokens) {
    try {
        std::vector<const char *> p(patterns, patterns + n_patterns);
        std::vector<llama_token> t(tokens, tokens + n_tokens);
        return llama_sampler_init_grammar_lazy_patterns(vocab, text, "root", p.data(), p.size(), t.data(), t.size());
    } catch (...) {
        return nullptr;
    }
}

extern "C" bool specd_grammar_accept_checked(struct llama_sampler *state, int32_t token) {
    try {
        llama_sampler_accept(state, token);
        return true;
    } catch (...) {
        return false;
    }
}

extern "C" bool specd_regex_check(const char *pattern, char **why) {
    *why = nullptr;
    try {
        std::regex compiled(pattern); // as llama.cpp compiles a trigger pattern: ECMAScript
        return true;
    } catch (const std::exception &e) {
        *why = strdup(e.what());
    } catch (...) {
        *why = strdup("it could not be compiled");
    }
    return false;
}
