/* grammar_error.h - why llama.cpp refused a GBNF grammar (grammar_error.c). */
#ifndef SPECD_GRAMMAR_ERROR_H
#define SPECD_GRAMMAR_ERROR_H

#include "../util/util.h"
#include "llama.h"

/* The reason llama.cpp gives for refusing `text` (start symbol "root") with `vocab`, e.g.
 * "line 2, column 5: expecting ::= (at 'foo bar')" or "invalid grammar: rule 1 references undefined
 * rule 3" (heap, free with free()); NULL when it cannot be had. Parses the grammar again: call it
 * only after llama_sampler_init_grammar refused it. */
char *specd_grammar_refusal(const struct llama_vocab *vocab, const char *text);

#endif
