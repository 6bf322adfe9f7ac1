/* nesting.h - how deep a GBNF grammar's groups and a regular expression's groups nest, how many
 * rules a grammar makes and how many states a regular expression grows to, each found by one loop
 * (no recursion). llama.cpp's GBNF parser and std::regex's compiler recurse once per nesting level
 * (std::regex once per character as well, llama.cpp's grammar once per rule of a chain) and
 * overflow a thread's stack on a text a request can carry (20000 nested groups; a chain of 80000
 * rules; a 100000-character trigger), and std::regex copies a group once per repetition count:
 * these measures let a caller refuse such a text before it reaches either. */
#ifndef SPECD_UTIL_NESTING_H
#define SPECD_UTIL_NESTING_H

#include <stddef.h>
#include <stdint.h>

/* A GBNF grammar's shape: the deepest nesting of its ( ) groups, as llama.cpp's parser meets them
 * (what is inside "strings", [character classes], <token> references and # comments does not
 * count, and each character in a string or class is read as llama.cpp reads it: an escape is two
 * bytes, a UTF-8 lead byte takes its continuation bytes whatever they are), and a count of its
 * rules: its own (each "::="), one per ( ) group and one per * + ? {m,n}. llama.cpp expands a chain
 * of rules met at the start of an alternative recursively, when the grammar is made and as it is
 * matched; a chain runs through distinct rules, or through the copies one repetition makes (at most
 * 2000, llama.cpp's cap, and only where what it repeats can be empty): this count bounds it, up to
 * those copies. */
typedef struct specd_gbnf_shape {
    int32_t depth;
    int64_t rules;
} specd_gbnf_shape;
specd_gbnf_shape specd_gbnf_measure(const char *grammar);

/* The deepest nesting of ( ) groups in an ECMAScript regular expression (an escaped character and
 * a [bracket expression] do not count). */
int32_t specd_regex_nesting(const char *pattern);

/* How many atoms the pattern grows to once each {m,n} repetition is written out (std::regex's
 * compiler makes a copy of the repeated atom or group per count; + one more): a bound on its
 * states. Saturates at SIZE_MAX. */
size_t specd_regex_states(const char *pattern);

#endif
