/* token_tree.c - building draft token trees and tagging their branches. */
#include "token_tree.h"

#include "../util/util.h"

#include <stdlib.h>
#include <string.h>

void specd_tree_free(specd_token_tree *tree) {
    for (int32_t i = 0; i < tree->cap; i++) specd_dist_free(&tree->nodes[i].q);
    free(tree->nodes);
    memset(tree, 0, sizeof *tree);
}

static bool tree_reserve(specd_token_tree *tree, int32_t cap) {
    if (tree->cap >= cap) return true;
    int32_t new_cap = tree->cap ? tree->cap * 2 : 16;
    if (new_cap < cap) new_cap = cap;
    specd_tree_node *nodes = specd_grow_array(tree->nodes, (size_t)new_cap, sizeof *nodes);
    if (!nodes) return false;
    memset(nodes + tree->cap, 0, (size_t)(new_cap - tree->cap) * sizeof *nodes);
    tree->nodes = nodes;
    tree->cap = new_cap;
    return true;
}

bool specd_tree_reset(specd_token_tree *tree, specd_token root) {
    if (!tree_reserve(tree, 1)) return false;
    tree->n_nodes = 1;
    tree->n_branches = 0;
    tree->drafter = -1;
    specd_tree_node *r = &tree->nodes[0];
    r->token = root;
    r->parent = -1;
    r->depth = 0;
    r->branch_mask = 0;
    r->q.n = 0;
    return true;
}

int32_t specd_tree_add(specd_token_tree *tree, int32_t parent, specd_token token,
                       const specd_dist *q, float confidence) {
    if (parent < 0 || parent >= tree->n_nodes || !tree_reserve(tree, tree->n_nodes + 1)) return -1;
    int32_t idx = tree->n_nodes;
    specd_tree_node *node = &tree->nodes[idx];
    node->token = token;
    node->parent = parent;
    node->depth = tree->nodes[parent].depth + 1;
    node->branch_mask = 0;
    node->confidence = confidence;
    bool ok = q ? specd_dist_copy(&node->q, q) : specd_dist_set_one_hot(&node->q, token);
    if (!ok) return -1;
    tree->n_nodes++;
    return idx;
}

int32_t specd_tree_n_drafted(const specd_token_tree *tree) { return tree->n_nodes - 1; }

bool specd_tree_assign_branches(specd_token_tree *tree) {
    int32_t n = tree->n_nodes;
    for (int32_t i = 0; i < n; i++) tree->nodes[i].branch_mask = 0;
    /* A node is a leaf when no later node names it as parent (parents always come first). */
    int32_t n_branches = 0;
    for (int32_t i = n - 1; i >= 0; i--) {
        bool is_leaf = true;
        for (int32_t j = i + 1; j < n && is_leaf; j++)
            if (tree->nodes[j].parent == i) is_leaf = false;
        if (!is_leaf) continue;
        if (n_branches == SPECD_TREE_MAX_BRANCHES) return false;
        uint32_t bit = 1u << n_branches++;
        for (int32_t k = i; k >= 0; k = tree->nodes[k].parent) tree->nodes[k].branch_mask |= bit;
    }
    tree->n_branches = n_branches;
    return true;
}

int32_t specd_tree_keep(specd_token_tree *tree, int32_t *index) {
    int32_t n = 0;
    for (int32_t i = 0; i < tree->n_nodes; i++) {
        if (!index[i]) {
            index[i] = -1;
            continue;
        }
        index[i] = n;
        if (n != i) { /* swap, not copy: each slot keeps owning exactly one q buffer */
            specd_tree_node moved = tree->nodes[i];
            tree->nodes[i] = tree->nodes[n];
            tree->nodes[n] = moved;
        }
        specd_tree_node *node = &tree->nodes[n];
        if (node->parent >= 0) node->parent = index[node->parent]; /* parents come first: mapped */
        n++;
    }
    tree->n_nodes = n;
    tree->n_branches = 0;
    return n;
}

int32_t specd_tree_path(const specd_token_tree *tree, int32_t node, specd_token *out) {
    int32_t len = tree->nodes[node].depth + 1;
    for (int32_t k = node, i = len - 1; k >= 0; k = tree->nodes[k].parent, i--) out[i] = tree->nodes[k].token;
    return len;
}
