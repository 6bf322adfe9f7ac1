/* draft_tree.h - draft trees from the draft model (EAGLE-2 style dynamic trees).
 *
 * Depth by depth: every open node (one whose draft logits were just computed) gets its first child
 * (the draft's argmax, or a draw from q), and siblings where the draft is unsure (drawn without
 * replacement: sibling_draws.h, so verification stays exact at every temperature). Then the most
 * promising children, by their estimated chance of being accepted, are opened for the next depth:
 * all of them in one draft llama_decode, one sequence per open branch (the sequences share their
 * prefix cells, as the draft context is unified). After the draft, only sequence 0 (the main branch,
 * first children first) is left in the draft's cache: the next sync reuses it when it is accepted.
 *
 * Exactness: whether a node gets children, and how many siblings are drawn, depends only on what
 * was drawn before (a stopping rule); every drawn token stays in the tree with the q it came from.
 *
 * Shape (specd_spec_params.tree): ON adds a sibling where path probability x the chance of the next
 * draw reaches draft_p_split and opens side branches whose path probability reaches it; AUTO grows
 * the main branch exactly as the chain drafter does (draft_length.h) and adds a sibling or a side
 * branch only when it raises the expected tokens per millisecond of the step: expected accepted
 * tokens (acceptance by draft confidence, as measured) against the measured T(tree size) and the
 * cost of the draft passes (measured per number of open branches). On CPUs where T(n) climbs
 * steeply that is a chain nearly always. */
#ifndef SPECD_DRAFT_TREE_H
#define SPECD_DRAFT_TREE_H

#include "../engine/engine.h"
#include "drafter.h"

typedef struct specd_draft_tree specd_draft_tree;

/* The tree drafter's scratch and measured pass costs; NULL when out of memory. Free with
 * specd_draft_tree_free. One per draft-model drafter (not shared between threads). */
specd_draft_tree *specd_draft_tree_new(int32_t n_vocab);
void specd_draft_tree_free(specd_draft_tree *t);

/* Whether this request drafts trees (req->tree_branches > 1 and no grammar). */
bool specd_draft_tree_wanted(const specd_draft_request *req);

/* Drafts a tree under tree->nodes[0] with the engine's draft model. On return the draft's cache
 * holds the history (and the main branch's decoded drafts) in sequence 0 only. */
specd_status specd_draft_tree_run(specd_draft_tree *t, specd_engine *e, const specd_draft_request *req,
                                  specd_token_tree *tree, char **error);

#endif
