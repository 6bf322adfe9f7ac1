/* token_tree.h - what a drafter proposes and the verifier checks: a tree of draft tokens.
 *
 * Node 0 is the root: the last token already emitted but not yet in the target's KV cache. Every
 * other node is a draft token whose parent comes earlier in the array (so the array is a valid
 * batch order). A chain is the one-branch case. Each draft node keeps q, the exact distribution
 * its token was drawn from (one-hot for greedy or deterministic drafters), because stochastic
 * verification needs it.
 *
 * For the target's batch each node is tagged with the sequences (branches) it belongs to: branch b
 * is the path from the root to the b-th leaf, and a node shared by several branches is written once
 * with all their sequence ids, so a common prefix costs one KV cell. */
#ifndef SPECD_TOKEN_TREE_H
#define SPECD_TOKEN_TREE_H

#include "../sample/dist.h"
#include "specd.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct specd_tree_node {
    specd_token token;
    int32_t parent;       /* -1 for the root */
    int32_t depth;        /* 0 for the root */
    uint32_t branch_mask; /* bit b set: node lies on branch b (filled by specd_tree_assign_branches) */
    specd_dist q;         /* distribution the token was drawn from (unused for the root) */
    float confidence;     /* the drafter's probability for this token (predicts acceptance) */
} specd_tree_node;

typedef struct specd_token_tree {
    int32_t n_nodes;
    int32_t cap;
    specd_tree_node *nodes;
    int32_t n_branches;   /* leaves, after specd_tree_assign_branches */
    int32_t drafter;      /* index of the drafter that proposed it (statistics) */
} specd_token_tree;

void specd_tree_free(specd_token_tree *tree);
/* Empties the tree and makes `root` its root. */
bool specd_tree_reset(specd_token_tree *tree, specd_token root);
/* Adds a draft token under `parent`, drawn from `q` (NULL = deterministic: one-hot on token).
 * Returns the new node's index, or -1 when out of memory. */
int32_t specd_tree_add(specd_token_tree *tree, int32_t parent, specd_token token,
                       const specd_dist *q, float confidence);
/* Number of draft tokens (nodes other than the root). */
int32_t specd_tree_n_drafted(const specd_token_tree *tree);
/* Tags every node with the branches (leaves) below it. Returns false when the tree has more
 * leaves than SPECD_TREE_MAX_BRANCHES. */
bool specd_tree_assign_branches(specd_token_tree *tree);
/* Keeps the nodes with index[i] != 0 (a kept node's parent must be kept, and the root always is),
 * in their order. On return index[i] is node i's new index, or -1 when it was dropped. Returns the
 * new node count; branches must be assigned again. */
int32_t specd_tree_keep(specd_token_tree *tree, int32_t *index);
/* The tokens on the path root..node (inclusive), root first; returns its length. */
int32_t specd_tree_path(const specd_token_tree *tree, int32_t node, specd_token *out);

#endif
