/* grammar_prune.h - a draft tree cut to what a request's grammar allows. */
#ifndef SPECD_GRAMMAR_PRUNE_H
#define SPECD_GRAMMAR_PRUNE_H

#include "../sample/grammar.h"
#include "token_tree.h"

/* Drops the draft nodes whose token the grammar refuses after their path (and everything below
 * them), and keeps the state after each remaining node for specd_grammar_node_filter. A drafter
 * that ignores the grammar (n-gram, suffix) then never makes the target verify a token it could
 * not produce. Returns false when out of memory. */
bool specd_grammar_prune(specd_grammar *g, specd_token_tree *tree);

#endif
