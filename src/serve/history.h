/* history.h - what the engine's caches started the last request with, so that a new request's
 * prompt_stats can say how much of its prompt they will reuse. Thread-safe (its own lock). */
#ifndef SPECD_SERVE_HISTORY_H
#define SPECD_SERVE_HISTORY_H

#include "specd.h"

#include <pthread.h>

typedef struct serve_history {
    pthread_mutex_t lock;
    specd_token *tokens; /* the last completion's prompt + output (owned) */
    int32_t n;
} serve_history;

void serve_history_init(serve_history *h);
void serve_history_destroy(serve_history *h);
/* The last completion: its prompt tokens, then what it generated. */
void serve_history_remember(serve_history *h, const specd_token *prompt, int32_t n_prompt, const specd_token *out,
                            int32_t n_out);
/* How many tokens of `prompt` the cache holds already. */
int32_t serve_history_cached_prefix(serve_history *h, const specd_token *prompt, int32_t n_prompt);

#endif
