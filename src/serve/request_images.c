/* request_images.c - serve_request_hold_images (request.h): a request's images held by the engine
 * when its session begins. The engine keeps the latest few images it tokenized (16 + 4 per slot);
 * a request that waited in the queue behind more image requests than that finds its own let go,
 * so the bytes it kept are tokenized again and its prompt's image positions rewritten. */
#include "request.h"

#include <stdio.h>
#include <stdlib.h>

/* Whether every image run of the prompt is one the engine holds. */
static bool all_held(const serve_request *r, specd_engine *e) {
    for (int32_t i = 0; i < r->n_tokens; i++)
        if (specd_token_is_image(r->tokens[i]) && !specd_engine_holds_image(e, r->tokens[i])) return false;
    return true;
}

/* The start of the image run at or after `from`, or r->n_tokens. */
static int32_t next_run(const serve_request *r, int32_t from) {
    while (from < r->n_tokens && !specd_token_is_image(r->tokens[from])) from++;
    return from;
}

static int32_t run_length(const serve_request *r, int32_t at) {
    int32_t k = at + 1;
    while (k < r->n_tokens && r->tokens[k] == r->tokens[k - 1] - 1) k++;
    return k - at;
}

bool serve_request_hold_images(serve_request *r, specd_engine *e, char **message) {
    *message = NULL;
    if (r->n_images == 0 || all_held(r, e)) return true;
    int32_t at = next_run(r, 0);
    for (int32_t k = 0; k < r->n_images && at < r->n_tokens; k++, at = next_run(r, at)) {
        specd_token first = 0;
        int32_t n = 0, len = run_length(r, at);
        if (specd_image_tokens(e, &r->images[k], &first, &n, message) != SPECD_OK) return false;
        if (n != len) {
            char text[160];
            snprintf(text, sizeof text, "image %d takes %d positions now, %d when the request came", k + 1, n, len);
            *message = malloc(sizeof text);
            if (*message) snprintf(*message, sizeof text, "%s", text);
            return false;
        }
        for (int32_t i = 0; i < len; i++) r->tokens[at + i] = first - i;
        at += len;
    }
    return true;
}
