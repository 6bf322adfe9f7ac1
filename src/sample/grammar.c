/* grammar.c - GBNF grammars through llama.cpp's grammar sampler, as token filters over draft trees
 * (see grammar.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "grammar.h"

#include "grammar_error.h"

#include "../engine/engine_internal.h"
#include "../util/util.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The token to produce when the grammar allows nothing: EOS, else EOT, else any end-of-generation
 * token. Generation then ends (generate.c stops at it even with ignore_eos). */
static specd_token pick_none_valid(const struct llama_vocab *vocab, int32_t n_vocab) {
    specd_token t = llama_vocab_eos(vocab);
    if (t == LLAMA_TOKEN_NULL) t = llama_vocab_eot(vocab);
    for (specd_token i = 0; t == LLAMA_TOKEN_NULL && i < n_vocab; i++)
        if (llama_vocab_is_eog(vocab, i)) t = i;
    return t == LLAMA_TOKEN_NULL ? 0 : t;
}

/* Does a line of `text` start with the rule name "root" followed by "::="? llama.cpp prints its
 * parse errors to stderr only, so this most common mistake gets a message of its own. */
static bool defines_root(const char *text) {
    for (const char *line = text; line; line = strchr(line, '\n')) {
        while (*line == '\n' || *line == '\r' || *line == ' ' || *line == '\t') line++;
        if (strncmp(line, "root", 4) != 0) continue;
        const char *p = line + 4;
        while (*p == ' ' || *p == '\t') p++;
        if (strncmp(p, "::=", 3) == 0) return true;
    }
    return false;
}

specd_status specd_grammar_init(specd_grammar *g, const struct llama_vocab *vocab, const char *text,
                                char **error) {
    memset(g, 0, sizeof *g);
    if (!defines_root(text)) {
        specd_set_error(error, "grammar: no 'root' rule: the GBNF grammar must define its start symbol, "
                        "e.g. root ::= [a-z]+");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    g->state = llama_sampler_init_grammar(vocab, text, "root");
    if (!g->state) {
        char *reason = specd_grammar_refusal(vocab, text);
        specd_set_error(error, "grammar: llama.cpp cannot parse it as GBNF: %s; check the syntax (llama.cpp "
                        "grammars/README.md); left recursion and undefined rules are refused too",
                        reason ? reason : "(its reason could not be read)");
        free(reason);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    g->vocab = vocab;
    g->n_vocab = llama_vocab_n_tokens(vocab);
    g->none_valid = pick_none_valid(vocab, g->n_vocab);
    g->scratch = specd_alloc_array((size_t)g->n_vocab, sizeof *g->scratch);
    if (!g->scratch) {
        specd_grammar_free(g);
        specd_set_error(error, "out of memory for the grammar's candidates (%d tokens)", g->n_vocab);
        return SPECD_ERR_NO_MEMORY;
    }
    return SPECD_OK;
}

static void free_node_states(specd_grammar *g) {
    for (int32_t i = 1; i < g->n_node; i++)
        if (g->node[i]) llama_sampler_free(g->node[i]);
    g->n_node = 0;
}

void specd_grammar_free(specd_grammar *g) {
    free_node_states(g);
    if (g->state) llama_sampler_free(g->state);
    free(g->node);
    free(g->index);
    free(g->scratch);
    memset(g, 0, sizeof *g);
}

/* ---- what the grammar engine costs this thread (specd_grammar_thread_ms) ----------------------- */

static _Thread_local double thread_grammar_ms;

static double thread_cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1000.0 + (double)t.tv_nsec / 1e6;
}

double specd_grammar_thread_ms(void) { return thread_grammar_ms; }

/* llama.cpp's grammar calls, each timed: their cost is what grows with an ambiguous grammar. */
static void apply_timed(struct llama_sampler *state, llama_token_data_array *cur) {
    double t0 = thread_cpu_ms();
    llama_sampler_apply(state, cur);
    thread_grammar_ms += thread_cpu_ms() - t0;
}

static void accept_timed(struct llama_sampler *state, specd_token token) {
    double t0 = thread_cpu_ms();
    llama_sampler_accept(state, token);
    thread_grammar_ms += thread_cpu_ms() - t0;
}

/* specd_token_filter.mask: llama.cpp's grammar sampler sets refused candidates to -INFINITY. */
static void grammar_mask(void *ctx, void *state, const specd_token *ids, int32_t n, float *logits) {
    specd_grammar *g = ctx;
    if (n <= 0) return;
    for (int32_t i = 0; i < n; i++) g->scratch[i] = (llama_token_data){ids[i], logits[ids[i]], 0.0f};
    llama_token_data_array cur = {g->scratch, (size_t)n, -1, false};
    apply_timed(state, &cur);
    for (size_t i = 0; i < cur.size; i++)
        if (cur.data[i].logit == -INFINITY) logits[cur.data[i].id] = -INFINITY;
}

specd_token_filter specd_grammar_filter(specd_grammar *g, struct llama_sampler *state) {
    return (specd_token_filter){grammar_mask, g, state, g->none_valid};
}

specd_token_filter specd_grammar_node_filter(specd_grammar *g, int32_t node) {
    return specd_grammar_filter(g, node == 0 ? g->state : g->node[node]);
}

bool specd_grammar_allows(specd_grammar *g, struct llama_sampler *state, specd_token token) {
    if (token < 0 || token >= g->n_vocab) return false;
    g->scratch[0] = (llama_token_data){token, 0.0f, 0.0f};
    llama_token_data_array cur = {g->scratch, 1, -1, false};
    apply_timed(state, &cur);
    return cur.data[0].logit != -INFINITY;
}

bool specd_grammar_advance(specd_grammar *g, struct llama_sampler *state, specd_token token) {
    if (!specd_grammar_allows(g, state, token)) return false;
    accept_timed(state, token);
    return true;
}

struct llama_sampler *specd_grammar_fork(const struct llama_sampler *state) {
    double t0 = thread_cpu_ms();
    struct llama_sampler *copy = llama_sampler_clone(state); /* copies every parse stack */
    thread_grammar_ms += thread_cpu_ms() - t0;
    return copy;
}

static bool reserve_nodes(specd_grammar *g, int32_t n) {
    if (g->cap_node >= n) return true;
    struct llama_sampler **node = specd_grow_array(g->node, (size_t)n, sizeof *node);
    if (!node) return false;
    g->node = node;
    int32_t *index = specd_grow_array(g->index, (size_t)n, sizeof *index);
    if (!index) return false;
    g->index = index;
    g->cap_node = n;
    return true;
}

/* The state after node i, when its parent's state allows its token; NULL otherwise (index[i] = 0)
 * or when out of memory (*oom). */
static struct llama_sampler *node_state(specd_grammar *g, const specd_token_tree *tree, int32_t i, bool *oom) {
    int32_t parent = tree->nodes[i].parent;
    if (!g->index[parent]) return NULL; /* below a refused node */
    struct llama_sampler *from = parent == 0 ? g->state : g->node[parent];
    if (!specd_grammar_allows(g, from, tree->nodes[i].token)) return NULL;
    struct llama_sampler *s = specd_grammar_fork(from);
    if (!s) {
        *oom = true;
        return NULL;
    }
    accept_timed(s, tree->nodes[i].token);
    return s;
}

bool specd_grammar_prune(specd_grammar *g, specd_token_tree *tree) {
    free_node_states(g);
    int32_t n = tree->n_nodes;
    if (!reserve_nodes(g, n)) return false;
    bool oom = false;
    g->node[0] = NULL;
    g->index[0] = 1;
    for (int32_t i = 1; i < n; i++) {
        g->node[i] = oom ? NULL : node_state(g, tree, i, &oom);
        g->index[i] = g->node[i] != NULL;
    }
    g->n_node = n;
    if (oom) {
        free_node_states(g);
        return false;
    }
    specd_tree_keep(tree, g->index);
    /* Same compaction for the states: kept ones move down to their new index. */
    for (int32_t i = 1; i < n; i++)
        if (g->index[i] > 0) g->node[g->index[i]] = g->node[i];
    g->n_node = tree->n_nodes;
    return true;
}

specd_status specd_grammar_check(const specd_engine *engine, const char *grammar, char **error) {
    if (error) *error = NULL;
    if (!engine || !grammar) {
        specd_set_error(error, "specd_grammar_check needs an engine and a grammar");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (!grammar[0]) return SPECD_OK; /* no grammar */
    specd_grammar g;
    specd_status st = specd_grammar_init(&g, engine->vocab, grammar, error);
    specd_grammar_free(&g);
    return st;
}
