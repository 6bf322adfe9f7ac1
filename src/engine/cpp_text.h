/* cpp_text.h - the C++ shims' one way to hand text to C callers (chat_jinja.cpp,
 * json_schema_grammar.cpp): a malloc'd copy the caller frees with specd_free, so a std::string
 * never crosses into C and an error message reaches C as the other errors of the library do. */
#ifndef SPECD_CPP_TEXT_H
#define SPECD_CPP_TEXT_H

#include <cstdlib>
#include <cstring>
#include <string>

/* A heap copy of s (NULL when out of memory). */
static inline char *specd_copy_text(const std::string &s) {
    char *out = static_cast<char *>(std::malloc(s.size() + 1));
    if (out) std::memcpy(out, s.c_str(), s.size() + 1);
    return out;
}

/* *error = a heap copy of message, where error is not NULL. */
static inline void specd_set_text_error(char **error, const std::string &message) {
    if (error) *error = specd_copy_text(message);
}

#endif
