/* request.c - building a request (see request.h); serve_request_prepare is submit.c's. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void serve_request_init(serve_request *r) {
    memset(r, 0, sizeof *r);
    r->gen = specd_generation_default_params();
    r->seed_requested = -1;
    r->slot = -1;
    r->cache_prompt = true;
    r->context_shift = true; /* the JSON API's default; specd serve's is its --context-shift */
}

void serve_request_clear(serve_request *r) {
    for (int32_t i = 0; i < r->n_parts; i++) free(r->parts[i].text);
    for (int32_t i = 0; i < r->n_messages; i++) {
        free(r->messages[i].role);
        free(r->messages[i].content);
    }
    for (int32_t i = 0; i < r->n_stops; i++) free(r->stops[i]);
    for (int32_t i = 0; i < r->n_preserved_texts; i++) free(r->preserved_texts[i]);
    free(r->preserved_texts);
    free(r->preserved);
    free(r->parts);
    free(r->messages);
    free(r->stops);
    free(r->chat_template);
    free(r->grammar);
    free(r->grammar_prefill);
    for (int32_t i = 0; i < r->gen.n_grammar_trigger_patterns; i++) free(r->trigger_patterns[i]);
    free(r->trigger_patterns);
    free(r->trigger_tokens);
    free(r->bias);
    free(r->tokens);
    for (int32_t i = 0; i < r->n_dry_breakers; i++) free(r->dry_breakers[i]);
    free(r->dry_breakers);
    free(r->lora);
    for (int32_t i = 0; i < r->n_images; i++) free((void *)r->images[i].data);
    free(r->images);
    serve_request_init(r);
}

/* Room for one more entry of `size` bytes in *list (n used, *cap allocated). */
static bool reserve_one(void **list, int32_t n, int32_t *cap, size_t size) {
    if (n < *cap) return true;
    int32_t grown_cap = *cap ? *cap * 2 : 4;
    void *grown = realloc(*list, (size_t)grown_cap * size);
    if (!grown) return false;
    *list = grown;
    *cap = grown_cap;
    return true;
}

bool serve_request_add_text(serve_request *r, const char *text) {
    char *copy = strdup(text);
    if (!copy || !reserve_one((void **)&r->parts, r->n_parts, &r->cap_parts, sizeof *r->parts)) {
        free(copy);
        return false;
    }
    r->parts[r->n_parts++] = (serve_prompt_part){.text = copy};
    return true;
}

bool serve_request_add_token(serve_request *r, specd_token token) {
    if (!reserve_one((void **)&r->parts, r->n_parts, &r->cap_parts, sizeof *r->parts)) return false;
    r->parts[r->n_parts++] = (serve_prompt_part){.token = token};
    return true;
}

bool serve_request_take_image(serve_request *r, unsigned char *data, size_t size) {
    if (!reserve_one((void **)&r->images, r->n_images, &r->cap_images, sizeof *r->images)) {
        free(data);
        return false;
    }
    r->images[r->n_images++] = (specd_image){data, size};
    return true;
}

bool serve_request_add_message(serve_request *r, const char *role, const char *content) {
    char *role_copy = strdup(role), *content_copy = strdup(content);
    if (!role_copy || !content_copy ||
        !reserve_one((void **)&r->messages, r->n_messages, &r->cap_messages, sizeof *r->messages)) {
        free(role_copy);
        free(content_copy);
        return false;
    }
    r->messages[r->n_messages++] = (serve_message){role_copy, content_copy};
    return true;
}

/* A copy of `text` appended to a list of n strings; false (the list as it was) when out of memory. */
static bool append_copy(char ***list, int32_t *n, const char *text) {
    char **grown = realloc(*list, ((size_t)*n + 1) * sizeof *grown);
    if (grown) *list = grown;
    char *copy = grown ? strdup(text) : NULL;
    if (!copy) return false;
    (*list)[(*n)++] = copy;
    return true;
}

bool serve_request_add_stop(serve_request *r, const char *stop) { return append_copy(&r->stops, &r->n_stops, stop); }

bool serve_request_add_preserved(serve_request *r, const char *token_text) {
    return append_copy(&r->preserved_texts, &r->n_preserved_texts, token_text);
}

bool serve_request_preserves(const serve_request *r, specd_token token) {
    for (int32_t i = 0; i < r->n_preserved; i++)
        if (r->preserved[i] == token) return true;
    return false;
}

void serve_request_take_grammar(serve_request *r, char *gbnf) {
    free(r->grammar);
    r->grammar = gbnf;
    r->gen.grammar = gbnf;
}

bool serve_request_set_grammar(serve_request *r, const char *gbnf) {
    if (!gbnf || !gbnf[0]) {
        serve_request_take_grammar(r, NULL);
        return true;
    }
    char *copy = strdup(gbnf);
    if (copy) serve_request_take_grammar(r, copy);
    return copy != NULL;
}

void serve_request_take_logit_bias(serve_request *r, specd_logit_bias *bias, int32_t n) {
    free(r->bias);
    r->bias = bias;
    r->gen.sampling.logit_bias = bias;
    r->gen.sampling.n_logit_bias = n;
}

bool serve_request_set_dry_breakers(serve_request *r, const char *const *breakers, int32_t n) {
    char **copy = calloc(n > 0 ? (size_t)n : 1, sizeof *copy);
    for (int32_t i = 0; copy && i < n; i++)
        if (!(copy[i] = strdup(breakers[i]))) {
            for (int32_t j = 0; j < i; j++) free(copy[j]);
            free(copy);
            copy = NULL;
        }
    if (!copy) return false;
    for (int32_t i = 0; i < r->n_dry_breakers; i++) free(r->dry_breakers[i]);
    free(r->dry_breakers);
    r->dry_breakers = copy;
    r->n_dry_breakers = n;
    r->gen.sampling.dry_sequence_breakers = (const char *const *)copy;
    r->gen.sampling.n_dry_sequence_breakers = n;
    return true;
}

bool serve_request_set_grammar_prefill(serve_request *r, const char *text) {
    char *copy = text && text[0] ? strdup(text) : NULL;
    if (text && text[0] && !copy) return false;
    free(r->grammar_prefill);
    r->grammar_prefill = copy;
    r->gen.grammar_prefill = copy;
    return true;
}

/* `word` as a regular expression that matches it literally (llama.cpp's regex_escape). */
static char *regex_escape(const char *word) {
    char *out = malloc(2 * strlen(word) + 1), *o = out;
    for (const char *w = word; out && *w; w++) {
        if (strchr(".^$|()*+?[]{}\\", *w)) *o++ = '\\';
        *o++ = *w;
    }
    if (out) *o = '\0';
    return out;
}

/* A pattern the whole output must match: anchored at both ends, as llama.cpp's sampler does. */
static char *anchored(const char *pattern) {
    size_t len = strlen(pattern);
    char *out = malloc(len + 3);
    if (out) snprintf(out, len + 3, "%s%s%s", pattern[0] == '^' ? "" : "^", pattern, len && pattern[len - 1] == '$' ? "" : "$");
    return out;
}

bool serve_request_add_trigger(serve_request *r, serve_trigger type, const char *value, specd_token token) {
    if (type == SERVE_TRIGGER_TOKEN) {
        if (!reserve_one((void **)&r->trigger_tokens, r->gen.n_grammar_trigger_tokens, &r->cap_trigger_tokens,
                         sizeof *r->trigger_tokens))
            return false;
        r->trigger_tokens[r->gen.n_grammar_trigger_tokens++] = token;
        r->gen.grammar_trigger_tokens = r->trigger_tokens;
        return true;
    }
    char *pattern = type == SERVE_TRIGGER_WORD ? regex_escape(value)
                  : type == SERVE_TRIGGER_PATTERN_FULL ? anchored(value) : strdup(value);
    if (!pattern || !reserve_one((void **)&r->trigger_patterns, r->gen.n_grammar_trigger_patterns, &r->cap_patterns,
                                 sizeof *r->trigger_patterns)) {
        free(pattern);
        return false;
    }
    r->trigger_patterns[r->gen.n_grammar_trigger_patterns++] = pattern;
    r->gen.grammar_trigger_patterns = (const char *const *)r->trigger_patterns;
    return true;
}
