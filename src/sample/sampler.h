/* sampler.h - turns raw logits into the distribution a request samples from.
 *
 * The transforms are llama.cpp's, in its order: logit bias, repetition/presence/frequency
 * penalties over the recent history, DRY (dry.h), top-n-sigma, top-k, typical-p, top-p, min-p
 * (each keeping min_keep tokens), XTC, temperature (dynatemp: a temperature from the entropy),
 * softmax. XTC removes the top tokens with probability xtc_probability: the distribution is the
 * mixture of the two outcomes. With mirostat: bias, penalties, DRY, temperature, then mirostat's
 * truncation (mirostat.h) instead of the rest. The same sampler
 * serves the draft model (q) and the target (p), so both see identical transforms, which is what
 * makes verification exact. Greedy (temperature <= 0) yields a one-hot distribution.
 *
 * A token filter (a grammar at some position) restricts the next token the way llama.cpp's
 * common_sampler_sample does by default (grammar_first = false, what llama-server and llama-cli
 * use): draw x from the transformed distribution c; keep x when the grammar allows it; otherwise
 * mask the logits with the grammar and draw again from g, the same transforms over the allowed
 * tokens only. The distribution of the result, which the filtered functions compute exactly, is
 *     P(x) = c(x) [x allowed] + m g(x),   m = the mass c puts on refused tokens.
 * When the grammar allows every token c can produce, P = c and only c's support is checked. Greedy
 * is the argmax over allowed tokens either way. */
#ifndef SPECD_SAMPLER_H
#define SPECD_SAMPLER_H

#include "dist.h"
#include "../engine/dry.h"
#include "mirostat.h"
#include "specd.h"

/* A constraint on the next token: a grammar (ctx) at some position in it (state). */
typedef struct specd_token_filter {
    /* Sets logits[ids[i]] to -INFINITY for every candidate ids[i] that may not come next. */
    void (*mask)(void *ctx, void *state, const specd_token *ids, int32_t n, float *logits);
    void *ctx;
    void *state;
    specd_token none_valid; /* the result when no token may come next: an end-of-generation token */
} specd_token_filter;

typedef struct specd_sampler {
    specd_sampling_params params; /* logit_bias points into bias below */
    int32_t n_vocab;
    specd_logit_bias *bias;       /* request bias plus forbidden end-of-generation tokens */
    int32_t n_bias;
    float *logits;                /* scratch: logits after bias and penalties */
    int32_t *counts;              /* scratch: token counts in the penalty window */
    specd_token *cand;            /* scratch: candidate ids */
    float *typical_scores;        /* scratch for typical_p < 1 (else NULL) */
    int32_t *typical_order;
    specd_mirostat mirostat;      /* version 0: off */
    specd_dist masked;            /* scratch: g, the distribution over allowed tokens (filters) */
    specd_dry *dry;               /* owned (specd_sampler_init_dry); NULL: DRY off */
    float *xtc_probs;             /* scratch: XTC's outcome, when XTC is on */
} specd_sampler;

/* `forbidden` tokens (e.g. end-of-generation with ignore_eos) get a -INFINITY bias. Returns false
 * with *error set when out of memory, a logit_bias token is outside the vocabulary, or the
 * mirostat settings are out of range. */
bool specd_sampler_init(specd_sampler *s, const specd_sampling_params *params, int32_t n_vocab,
                        const specd_token *forbidden, int32_t n_forbidden, char **error);
void specd_sampler_free(specd_sampler *s);
/* DRY needs the vocabulary (its sequence breakers are text): call after init when the params ask
 * for it, with the engine whose target vocabulary and context (how far dry_penalty_last_n -1 looks
 * back) it samples. False with *error when out of memory. */
bool specd_sampler_init_dry(specd_sampler *s, const specd_engine *e, char **error);

/* Mirostat's mu: the distribution at a position uses the mu that position has (a drafted position:
 * after the drafts before it, specd_mirostat_next_mu). */
float specd_sampler_mu(const specd_sampler *s);
void specd_sampler_set_mu(specd_sampler *s, float mu);

bool specd_sampler_is_greedy(const specd_sampler *s);

/* Whether mirostat truncates (mirostat on, sampling): each position then has its own mu. */
bool specd_sampler_uses_mirostat(const specd_sampler *s);

/* The processed distribution for the next token given `logits` and the token history (prompt and
 * generated so far, including draft tokens before this position). */
bool specd_sampler_dist(specd_sampler *s, const float *logits, const specd_token *history,
                        int32_t n_history, specd_dist *out);


/* Greedy choice: argmax after bias and penalties (lowest id on ties). */
specd_token specd_sampler_argmax(specd_sampler *s, const float *logits, const specd_token *history,
                                 int32_t n_history);

/* The same under `filter` (NULL: none, exactly the functions above); see the top of this file. */
bool specd_sampler_dist_filtered(specd_sampler *s, const float *logits, const specd_token *history,
                                 int32_t n_history, const specd_token_filter *filter, specd_dist *out);
specd_token specd_sampler_argmax_filtered(specd_sampler *s, const float *logits, const specd_token *history,
                                          int32_t n_history, const specd_token_filter *filter);

#endif
