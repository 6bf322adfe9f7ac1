/* suffix_tree.h - the suffix tree of SuffixDecoding (Oliaro et al., 2024), depth-limited: a trie
 * of every substring of at most max_depth tokens of the texts inserted (prompts and outputs of
 * all requests), each node counting how often its substring occurred. A node's children are what
 * followed that substring, their counts how often: the candidates and their frequencies.
 *
 * Text is appended a token at a time through a cursor (one per text): appending t extends each
 * of the cursor's active suffixes by t, O(max_depth) hash lookups.
 *
 * Memory is bounded: when the tree reaches max_nodes, every count is halved and nodes at zero are
 * removed (a child never counts more than its parent, so whole subtrees go): rare substrings make
 * room, frequent ones stay. Cursors notice (by epoch) and find their suffixes again. */
#ifndef SPECD_SUFFIX_TREE_H
#define SPECD_SUFFIX_TREE_H

#include "u64_map.h"

#include <stdbool.h>
#include <stdint.h>

#define SPECD_SUFFIX_MAX_DEPTH 32

typedef struct specd_suffix_node {
    int32_t token;
    int32_t count;        /* occurrences of the substring root..this node */
    int32_t parent;       /* -1 for the root */
    int32_t first_child;  /* -1 when none */
    int32_t next_sibling; /* -1 when last */
    int32_t depth;
} specd_suffix_node;

typedef struct specd_suffix_tree {
    specd_suffix_node *nodes; /* nodes[0] is the root */
    int32_t n_nodes, cap_nodes;
    int32_t max_nodes;
    int32_t max_depth;
    specd_u64_map edges;      /* (parent, token) -> child */
    uint32_t epoch;           /* changes when nodes are renumbered (pruning) */
} specd_suffix_tree;

/* The active suffixes of one text being appended: node ids by depth, deepest last. */
typedef struct specd_suffix_cursor {
    int32_t active[SPECD_SUFFIX_MAX_DEPTH];
    int32_t n_active;
    uint32_t epoch;
} specd_suffix_cursor;

/* max_depth is capped at SPECD_SUFFIX_MAX_DEPTH; max_nodes at least 256. */
bool specd_suffix_tree_init(specd_suffix_tree *t, int32_t max_nodes, int32_t max_depth);
void specd_suffix_tree_free(specd_suffix_tree *t);
/* The child of `node` for `token`, or -1. */
int32_t specd_suffix_child(const specd_suffix_tree *t, int32_t node, int32_t token);

/* Starts a new text. */
void specd_suffix_cursor_reset(specd_suffix_cursor *c);
/* Appends `token` to the cursor's text; `recent` holds the text's last n_recent tokens before it
 * (needed only to find the suffixes again after pruning). Returns false when out of memory. */
bool specd_suffix_append(specd_suffix_tree *t, specd_suffix_cursor *c, const int32_t *recent, int32_t n_recent,
                         int32_t token);

#endif
