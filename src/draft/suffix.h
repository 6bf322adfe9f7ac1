/* suffix.h - the suffix drafter (SuffixDecoding, Oliaro et al., 2024): match the end of the
 * history against a suffix tree of prompts and earlier outputs (kept by the engine across
 * requests), and draft a small tree of the most frequent continuations of the longest match,
 * best first by estimated probability, at most 2x the match length tokens. */
#ifndef SPECD_SUFFIX_H
#define SPECD_SUFFIX_H

#include "drafter.h"
#include "suffix_tree.h"

/* Branches suffix drafts have by default. The verifier takes trees of up to SPECD_TREE_MAX_BRANCHES, and
 * a target pass over a multi-branch batch costs what a chain of the same size does (benchmark
 * target, 4 tokens in two sequences: 50 ms, as a chain). But on the repeating benchmark set, trees
 * of 4 branches gave no more tokens per second than chains (38.1 vs 38.2 tokens/s, 6 prompts x 2):
 * when a suffix match is long, its best continuation is right far more often than the runners-up.
 * So the default is chains (specd_spec_params.suffix_branches = 1); trees are a request option. */
#define SPECD_SUFFIX_DEFAULT_BRANCHES 1

/* `tree` (the caller's, outliving the drafter) receives this request's prompt and output; drafts
 * have at most max_branches (1..SPECD_TREE_MAX_BRANCHES) leaves. */
specd_status specd_suffix_new(specd_suffix_tree *tree, int32_t max_branches, specd_drafter *out, char **error);

#endif
