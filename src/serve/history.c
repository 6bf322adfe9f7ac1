/* history.c - see history.h. */
#include "history.h"

#include <stdlib.h>
#include <string.h>

void serve_history_init(serve_history *h) {
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->lock, NULL);
}

void serve_history_destroy(serve_history *h) {
    free(h->tokens);
    pthread_mutex_destroy(&h->lock);
}

void serve_history_remember(serve_history *h, const specd_token *prompt, int32_t n_prompt, const specd_token *out,
                            int32_t n_out) {
    specd_token *tokens = malloc(((size_t)n_prompt + (size_t)n_out + 1) * sizeof *tokens);
    if (tokens) {
        memcpy(tokens, prompt, (size_t)n_prompt * sizeof *tokens);
        if (n_out) memcpy(tokens + n_prompt, out, (size_t)n_out * sizeof *tokens);
    }
    pthread_mutex_lock(&h->lock);
    free(h->tokens);
    h->tokens = tokens;
    h->n = tokens ? n_prompt + n_out : 0;
    pthread_mutex_unlock(&h->lock);
}

int32_t serve_history_cached_prefix(serve_history *h, const specd_token *prompt, int32_t n_prompt) {
    pthread_mutex_lock(&h->lock);
    int32_t n = 0;
    /* The engine keeps the prompt's last token out of the cache: it is the first step's root. */
    while (n < n_prompt - 1 && n < h->n && h->tokens[n] == prompt[n]) n++;
    pthread_mutex_unlock(&h->lock);
    return n;
}
