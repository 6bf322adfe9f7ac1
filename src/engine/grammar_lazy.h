/* grammar_lazy.h - llama.cpp's grammar sampler calls that can throw, behind C functions that
 * cannot (grammar_lazy.cpp): a lazy grammar's patterns are compiled as std::regex when it is made,
 * and the text that triggers it is fed to the grammar when the triggering token is accepted; an
 * exception must not cross into C. Used by grammar_engine.c, and by the session's validation
 * (specd_regex_check, to refuse a bad trigger pattern before a session starts). */
#ifndef SPECD_ENGINE_GRAMMAR_LAZY_H
#define SPECD_ENGINE_GRAMMAR_LAZY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct llama_sampler;
struct llama_vocab;

/* llama_sampler_init_grammar_lazy_patterns: free until a pattern matches the output (from its
 * start; the grammar reads from the match's first group) or a trigger token comes. NULL when the
 * grammar or a pattern does not parse. */
struct llama_sampler *specd_grammar_new_lazy(const struct llama_vocab *vocab, const char *text,
                                             const char *const *patterns, size_t n_patterns,
                                             const int32_t *tokens, size_t n_tokens);

/* llama_sampler_accept; false when llama.cpp refused the token with an exception (a lazy grammar
 * whose trigger text does not parse): the state is then not to be used further. */
bool specd_grammar_accept_checked(struct llama_sampler *state, int32_t token);

/* Whether `pattern` compiles as llama.cpp compiles a lazy grammar's trigger (std::regex,
 * ECMAScript); false with *why (heap, may be NULL) saying what std::regex found. Only for a pattern
 * within the session's bounds (validate.c): std::regex's compiler recurses per character. */
bool specd_regex_check(const char *pattern, char **why);

#ifdef __cplusplus
}
#endif

#endif
