/* ngram_mod.c - llama.cpp's ngram-mod: a table of 2^22 slots, each holding the token that last
 * followed an n-gram hashing there. The n-grams are long (24 tokens, llama.cpp's n_match), so a
 * slot that answers is most likely the same text, and no key is stored. A draft reads the table from
 * the last n tokens on, token by token, as far as it answers.
 *
 * The table belongs to the engine (drafter_memory.h), as llama.cpp shares it between its slots: what
 * one request wrote, the next reads. It is cleared when a quarter of it is in use (collisions would
 * mislead it), and after five of its drafts in a row of which less than a quarter was accepted. */
#include "ngram_mod.h"

#include "u64_map.h"

#include "../util/util.h"

#include <stdlib.h>
#include <string.h>

#define MOD_N 24
#define MOD_SLOTS (1u << 22)
#define MOD_EMPTY (-1)
#define MOD_MAX_USED (MOD_SLOTS / 4)
#define LOW_ACCEPTANCE 0.25
#define LOW_STREAK 5
#define CONFIDENCE 0.5f /* one value for every token: the chain calibrates it by its verdicts */

typedef struct ngram_mod {
    specd_ngram_mod_table *table;
    int32_t n_indexed; /* n-grams ending before this history position are in the table */
} ngram_mod;

static void clear_table(specd_ngram_mod_table *t) {
    for (uint32_t i = 0; i < MOD_SLOTS; i++) t->slots[i] = MOD_EMPTY;
    t->used = 0;
    t->low_streak = 0;
}

static uint32_t slot_of(const specd_token *ngram) { return (uint32_t)(specd_hash_tokens(ngram, MOD_N) & (MOD_SLOTS - 1)); }

/* The n-grams h[i..i+n) -> h[i+n] for every i + n < n_history not yet in. */
static void index_history(ngram_mod *nm, const specd_token *h, int32_t n_history) {
    specd_ngram_mod_table *t = nm->table;
    if (n_history < nm->n_indexed) nm->n_indexed = 0; /* another history: index it from the start */
    for (int32_t i = nm->n_indexed; i + MOD_N < n_history; i++) {
        int32_t *slot = &t->slots[slot_of(h + i)];
        if (*slot == MOD_EMPTY) t->used++;
        *slot = h[i + MOD_N];
    }
    if (n_history - MOD_N > nm->n_indexed) nm->n_indexed = n_history - MOD_N;
}

static specd_status nmod_prepare(void *self, const specd_token *tokens, int32_t n, char **error) {
    (void)error;
    ngram_mod *nm = self;
    if (nm->table->used > MOD_MAX_USED) clear_table(nm->table);
    nm->n_indexed = 0;
    index_history(nm, tokens, n);
    return SPECD_OK;
}

static specd_status nmod_draft(void *self, const specd_draft_request *req, specd_token_tree *tree, char **error) {
    ngram_mod *nm = self;
    specd_token *h = req->history;
    int32_t n = req->n_history;
    if (n < MOD_N) return SPECD_OK;
    index_history(nm, h, n);
    for (int32_t i = 0, parent = 0; i < req->max_len; i++) {
        specd_token t = nm->table->slots[slot_of(h + n + i - MOD_N)];
        if (t == MOD_EMPTY) break;
        h[n + i] = t; /* scratch past the history: the next n-gram ends with it */
        parent = specd_tree_add(tree, parent, t, NULL, CONFIDENCE);
        if (parent < 0) {
            specd_set_error(error, "out of memory in the ngram-mod drafter");
            return SPECD_ERR_NO_MEMORY;
        }
    }
    return SPECD_OK;
}

/* Drafts that keep failing mean the table describes another text: it starts over. */
static void nmod_observe(void *self, const specd_token_tree *tree, const specd_verify_result *vr) {
    ngram_mod *nm = self;
    int32_t drafted = specd_tree_n_drafted(tree);
    if (drafted == 0) return;
    specd_ngram_mod_table *t = nm->table;
    t->low_streak = (double)vr->n_accepted / drafted < LOW_ACCEPTANCE ? t->low_streak + 1 : 0;
    if (t->low_streak >= LOW_STREAK) {
        clear_table(t);
        nm->n_indexed = 0;
    }
}

static void nmod_destroy(void *self) { free(self); }

static const specd_drafter_ops ngram_mod_ops = {
    .name = "ngram-mod",
    .prepare = nmod_prepare,
    .draft = nmod_draft,
    .destroy = nmod_destroy,
    .observe = nmod_observe,
};

bool specd_ngram_mod_table_init(specd_ngram_mod_table *t) {
    t->slots = malloc(MOD_SLOTS * sizeof *t->slots);
    if (t->slots) clear_table(t);
    return t->slots != NULL;
}

void specd_ngram_mod_table_free(specd_ngram_mod_table *t) {
    free(t->slots);
    memset(t, 0, sizeof *t);
}

specd_status specd_ngram_mod_new(specd_ngram_mod_table *table, specd_drafter *out, char **error) {
    ngram_mod *nm = calloc(1, sizeof *nm);
    if (!nm || (!table->slots && !specd_ngram_mod_table_init(table))) {
        free(nm);
        specd_set_error(error, "out of memory for the ngram-mod drafter's table (%zu MB)",
                        (size_t)MOD_SLOTS * sizeof *table->slots >> 20);
        return SPECD_ERR_NO_MEMORY;
    }
    nm->table = table;
    out->ops = &ngram_mod_ops;
    out->self = nm;
    return SPECD_OK;
}
