/* grammar_engine.c - GBNF grammars through llama.cpp's grammar sampler (see grammar_engine.h). A
 * state is a llama_sampler from llama_sampler_init_grammar, forked with llama_sampler_clone and
 * advanced with llama_sampler_accept, and only ever by tokens the grammar allows (llama.cpp aborts
 * on an end-of-generation token the grammar does not allow). Grammars constrain the generated text
 * only: prompt tokens are never fed to them, as in llama.cpp. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "grammar_engine.h"

#include "engine_internal.h"
#include "grammar_error.h"
#include "grammar_lazy.h"

#include "../util/nesting.h"
#include "../util/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct specd_grammar_engine {
    int32_t n_vocab;
    llama_token_data *scratch; /* candidates for llama_sampler_apply, n_vocab of them */
    specd_token none_valid;
};

/* A state is llama.cpp's sampler itself: the handle is only ever cast back. */
static struct llama_sampler *sampler_of(specd_grammar_state *s) { return (struct llama_sampler *)s; }

/* ---- what the grammar engine costs this thread (specd_grammar_thread_ms) ----------------------- */

static _Thread_local double thread_grammar_ms;

static double thread_cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1000.0 + (double)t.tv_nsec / 1e6;
}

double specd_grammar_thread_ms(void) { return thread_grammar_ms; }

/* llama.cpp's grammar calls, each timed: their cost is what grows with an ambiguous grammar. */
static void apply_timed(specd_grammar_state *state, llama_token_data_array *cur) {
    double t0 = thread_cpu_ms();
    llama_sampler_apply(sampler_of(state), cur);
    thread_grammar_ms += thread_cpu_ms() - t0;
}

bool specd_grammar_state_accept(specd_grammar_state *state, specd_token token) {
    double t0 = thread_cpu_ms();
    bool ok = specd_grammar_accept_checked(sampler_of(state), token);
    thread_grammar_ms += thread_cpu_ms() - t0;
    return ok;
}

specd_grammar_state *specd_grammar_state_fork(const specd_grammar_state *state) {
    double t0 = thread_cpu_ms();
    struct llama_sampler *copy = llama_sampler_clone((const struct llama_sampler *)state); /* every parse stack */
    thread_grammar_ms += thread_cpu_ms() - t0;
    return (specd_grammar_state *)copy;
}

void specd_grammar_state_free(specd_grammar_state *state) {
    if (state) llama_sampler_free(sampler_of(state));
}

/* ---- a grammar ------------------------------------------------------------------------------- */

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

/* llama.cpp's GBNF parser recurses once per nested ( ) group and overflows the stack at about 20000
 * levels (10000 pass); real grammars nest a few levels, generated ones a few dozen. Its grammar
 * recurses once per rule along a chain of rules met first (r0 ::= r1, r1 ::= r2, ...: 55000 pass,
 * 80000 crash, inside the default 1 MiB body): the rules it makes are bounded, which bounds any
 * chain (a JSON schema's grammar has hundreds; the copies a repetition adds are at most 2000). */
#define GRAMMAR_MAX_NESTING 1000
#define GRAMMAR_MAX_RULES 20000

/* What llama.cpp's parser and matcher can take without crashing; false with *error saying why. */
static bool within_bounds(const char *text, char **error) {
    specd_gbnf_shape shape = specd_gbnf_measure(text);
    if (shape.depth > GRAMMAR_MAX_NESTING) {
        specd_set_error(error, "grammar: its ( ) groups nest %d deep, more than the %d allowed: write the deep "
                        "part as named rules (rule ::= ...) instead of nested groups", (int)shape.depth,
                        GRAMMAR_MAX_NESTING);
        return false;
    }
    if (shape.rules > GRAMMAR_MAX_RULES) {
        specd_set_error(error, "grammar: it makes %lld rules (each rule, ( ) group, * + ? and {m,n}), "
                        "more than the %d allowed: llama.cpp follows chains of rules recursively; write "
                        "alternatives ( | ) rather than rules or groups where you can", (long long)shape.rules,
                        GRAMMAR_MAX_RULES);
        return false;
    }
    return true;
}

/* llama.cpp's parse of `text` (lazy with `triggers`): the root state, or NULL with *error saying why. */
static struct llama_sampler *parse(const struct llama_vocab *vocab, const char *text,
                                   const specd_grammar_triggers *triggers, char **error) {
    if (!within_bounds(text, error)) return NULL;
    if (!defines_root(text)) {
        specd_set_error(error, "grammar: no 'root' rule: the GBNF grammar must define its start symbol, "
                        "e.g. root ::= [a-z]+");
        return NULL;
    }
    struct llama_sampler *root = triggers ? specd_grammar_new_lazy(vocab, text, triggers->patterns,
                                                                   (size_t)triggers->n_patterns, triggers->tokens,
                                                                   (size_t)triggers->n_tokens)
                                          : llama_sampler_init_grammar(vocab, text, "root");
    if (root) return root;
    if (triggers && (root = llama_sampler_init_grammar(vocab, text, "root")) != NULL) {
        llama_sampler_free(root); /* the grammar is fine: a trigger pattern is not */
        specd_set_error(error, "grammar: a trigger pattern of the lazy grammar is not a valid regular expression");
        return NULL;
    }
    char *reason = specd_grammar_refusal(vocab, text);
    specd_set_error(error, "grammar: llama.cpp cannot parse it as GBNF: %s; check the syntax (llama.cpp "
                    "grammars/README.md); left recursion and undefined rules are refused too",
                    reason ? reason : "(its reason could not be read)");
    free(reason);
    return NULL;
}

specd_status specd_grammar_engine_new(const specd_engine *engine, const char *text, specd_grammar_engine **out,
                                      specd_grammar_state **root, char **error) {
    return specd_grammar_engine_new_lazy(engine, text, NULL, out, root, error);
}

specd_status specd_grammar_engine_new_lazy(const specd_engine *engine, const char *text,
                                           const specd_grammar_triggers *triggers, specd_grammar_engine **out,
                                           specd_grammar_state **root, char **error) {
    *out = NULL;
    *root = NULL;
    struct llama_sampler *state = parse(engine->vocab, text, triggers, error);
    if (!state) return SPECD_ERR_INVALID_ARGUMENT;
    specd_grammar_engine *g = calloc(1, sizeof *g);
    if (g) {
        g->n_vocab = llama_vocab_n_tokens(engine->vocab);
        g->none_valid = pick_none_valid(engine->vocab, g->n_vocab);
        g->scratch = specd_alloc_array((size_t)g->n_vocab, sizeof *g->scratch);
    }
    if (!g || !g->scratch) {
        if (g) specd_set_error(error, "out of memory for the grammar's candidates (%d tokens)", g->n_vocab);
        else specd_set_error(error, "out of memory for the grammar");
        specd_grammar_engine_free(g);
        llama_sampler_free(state);
        return SPECD_ERR_NO_MEMORY;
    }
    *out = g;
    *root = (specd_grammar_state *)state;
    return SPECD_OK;
}

void specd_grammar_engine_free(specd_grammar_engine *g) {
    if (!g) return;
    free(g->scratch);
    free(g);
}

int32_t specd_grammar_engine_n_vocab(const specd_grammar_engine *g) { return g->n_vocab; }

specd_token specd_grammar_engine_none_valid(const specd_grammar_engine *g) { return g->none_valid; }

/* llama.cpp's grammar sampler sets refused candidates to -INFINITY. */
void specd_grammar_engine_mask(specd_grammar_engine *g, specd_grammar_state *state, const specd_token *ids, int32_t n,
                               float *logits) {
    if (n <= 0) return;
    for (int32_t i = 0; i < n; i++) g->scratch[i] = (llama_token_data){ids[i], logits[ids[i]], 0.0f};
    llama_token_data_array cur = {g->scratch, (size_t)n, -1, false};
    apply_timed(state, &cur);
    for (size_t i = 0; i < cur.size; i++)
        if (cur.data[i].logit == -INFINITY) logits[cur.data[i].id] = -INFINITY;
}

bool specd_grammar_engine_allows(specd_grammar_engine *g, specd_grammar_state *state, specd_token token) {
    if (token < 0 || token >= g->n_vocab) return false;
    g->scratch[0] = (llama_token_data){token, 0.0f, 0.0f};
    llama_token_data_array cur = {g->scratch, 1, -1, false};
    apply_timed(state, &cur);
    return cur.data[0].logit != -INFINITY;
}

specd_status specd_grammar_check(const specd_engine *engine, const char *grammar, char **error) {
    double cost_ms;
    return specd_grammar_price(engine, grammar, -1.0, &cost_ms, error);
}

#define PRICE_CHUNK 256 /* candidates masked at a time: the budget is looked at between chunks */

/* Masks the whole vocabulary once from `state`, chunk by chunk, until done or the thread's CPU
 * time since `t0` passes budget_ms (> 0). */
static void mask_whole_vocab(struct llama_sampler *state, int32_t n_vocab, double t0, double budget_ms) {
    llama_token_data chunk[PRICE_CHUNK];
    for (int32_t first = 0; first < n_vocab; first += PRICE_CHUNK) {
        if (budget_ms > 0.0 && thread_cpu_ms() - t0 > budget_ms) return;
        int32_t n = n_vocab - first < PRICE_CHUNK ? n_vocab - first : PRICE_CHUNK;
        for (int32_t i = 0; i < n; i++) chunk[i] = (llama_token_data){first + i, 0.0f, 0.0f};
        llama_token_data_array cur = {chunk, (size_t)n, -1, false};
        llama_sampler_apply(state, &cur);
    }
}

specd_status specd_grammar_price(const specd_engine *engine, const char *grammar, double budget_ms,
                                 double *cost_ms, char **error) {
    if (error) *error = NULL;
    if (cost_ms) *cost_ms = 0.0;
    if (!engine || !grammar || !cost_ms) {
        specd_set_error(error, "specd_grammar_price needs an engine, a grammar and where to put its cost");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (!grammar[0]) return SPECD_OK; /* no grammar */
    double t0 = thread_cpu_ms();
    struct llama_sampler *state = parse(engine->vocab, grammar, NULL, error);
    if (!state) return SPECD_ERR_INVALID_ARGUMENT;
    if (budget_ms >= 0.0) mask_whole_vocab(state, llama_vocab_n_tokens(engine->vocab), t0, budget_ms);
    *cost_ms = thread_cpu_ms() - t0;
    llama_sampler_free(state);
    return SPECD_OK;
}
