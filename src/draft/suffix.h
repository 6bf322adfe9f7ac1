/* suffix.h - the suffix drafter (SuffixDecoding, Oliaro et al., 2024): match the end of the
 * history against a suffix tree of prompts and earlier outputs (kept by the engine across
 * requests), and draft a small tree of the most frequent continuations of the longest match,
 * best first by estimated probability, at most 2x the match length tokens. */
#ifndef SPECD_SUFFIX_H
#define SPECD_SUFFIX_H

#include "drafter.h"
#include "suffix_tree.h"

/* Branches the engine drafts with. The verifier takes trees of up to SPECD_TREE_MAX_BRANCHES, but
 * on the benchmark pair (CPU, this llama.cpp) a target pass over a batch whose tokens belong to
 * several sequences costs about 10x a chain's of the same size (1.2 s instead of 0.1 s per pass),
 * which no acceptance gain repays: chains until multi-sequence passes are cheap. */
#define SPECD_SUFFIX_ENGINE_BRANCHES 1

/* `tree` (the caller's, outliving the drafter) receives this request's prompt and output; drafts
 * have at most max_branches (1..SPECD_TREE_MAX_BRANCHES) leaves. */
specd_status specd_suffix_new(specd_suffix_tree *tree, int32_t max_branches, specd_drafter *out, char **error);

#endif
