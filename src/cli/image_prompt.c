/* image_prompt.c - `specd run --image FILE`: the image files read, and the prompt tokenized with
 * them (llama-mtmd-cli's --image: a prompt without the image marker gets the images first). */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file; NULL with a message in err. */
static unsigned char *read_bytes(const char *path, size_t *size, char *err, size_t err_size) {
    FILE *f = fopen(path, "rb");
    unsigned char *data = NULL;
    size_t len = 0, cap = 0;
    while (f) {
        if (len == cap) {
            unsigned char *grown = realloc(data, cap = cap ? cap * 2 : 65536);
            if (!grown) break;
            data = grown;
        }
        size_t got = fread(data + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    bool ok = f && !ferror(f) && data;
    if (!ok) snprintf(err, err_size, "cannot read the image file '%s'%s%s", path, f ? "" : ": ", f ? "" : strerror(errno));
    if (f) fclose(f);
    if (!ok) {
        free(data);
        return NULL;
    }
    *size = len;
    return data;
}

/* The prompt with a marker per image: as written when it has them, else the images first. */
static char *marked_prompt(const char *prompt, int32_t n_images) {
    const char *marker = specd_image_marker();
    bool has_marker = strstr(prompt, marker) != NULL;
    size_t len = strlen(prompt), extra = has_marker ? 0 : (size_t)n_images * strlen(marker);
    char *out = malloc(len + extra + 1);
    if (!out) return NULL;
    out[0] = '\0';
    for (int32_t i = 0; !has_marker && i < n_images; i++) strcat(out, marker);
    strcat(out, prompt);
    return out;
}

specd_status cli_tokenize_with_images(specd_engine *engine, const char *prompt, const char *const *paths,
                                      int32_t n_paths, specd_token **tokens, int32_t *n_tokens, char **error) {
    if (n_paths == 0) return specd_tokenize(engine, prompt, true, tokens, n_tokens, error);
    specd_image images[CLI_MAX_IMAGES] = {{0}};
    char err[512] = "";
    specd_status st = SPECD_OK;
    for (int32_t i = 0; i < n_paths && st == SPECD_OK; i++)
        if (!(images[i].data = read_bytes(paths[i], &images[i].size, err, sizeof err))) st = SPECD_ERR_INVALID_ARGUMENT;
    char *text = st == SPECD_OK ? marked_prompt(prompt, n_paths) : NULL;
    if (st == SPECD_OK && !text) snprintf(err, sizeof err, "out of memory for the prompt");
    /* special-token text stays text, as specd_tokenize does for -p */
    if (text) st = specd_tokenize_images(engine, text, true, false, images, n_paths, tokens, n_tokens, error);
    else if (error) {
        *error = malloc(strlen(err) + 1);
        if (*error) strcpy(*error, err);
        st = st == SPECD_OK ? SPECD_ERR_NO_MEMORY : st;
    }
    free(text);
    for (int32_t i = 0; i < n_paths; i++) free((void *)images[i].data);
    return st;
}
