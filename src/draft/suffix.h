/* suffix.h - the suffix drafter (SuffixDecoding, Oliaro et al., 2024): match the end of the
 * history against a suffix tree of prompts and earlier outputs (kept by the engine across
 * requests), and draft a small tree of the most frequent continuations of the longest match,
 * best first by estimated probability, at most SPEC_FACTOR x the match length tokens. */
#ifndef SPECD_SUFFIX_H
#define SPECD_SUFFIX_H

#include "drafter.h"
#include "suffix_tree.h"

/* `tree` (the caller's, outliving the drafter) receives this request's prompt and output. */
specd_status specd_suffix_new(specd_suffix_tree *tree, specd_drafter *out, char **error);

#endif
