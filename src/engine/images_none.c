/* images_none.c - images.h for a build without llama.cpp's mtmd sources (cmake/mtmd.cmake): no
 * projector loads, so no prompt holds an image, and --mmproj says why. */
#include "images.h"

#include "engine_internal.h"

#include "../util/util.h"

specd_status specd_images_load(specd_engine *e, const char *path, const char *draft_path, char **error) {
    (void)e, (void)draft_path;
    specd_set_error(error, "cannot load the vision projector %s: this specd was built without llama.cpp's mtmd "
                    "(its tools/mtmd sources were not found: cmake -DSPECD_MTMD_SOURCE_DIR=<llama.cpp source>)", path);
    return SPECD_ERR_MODEL_LOAD;
}

void specd_images_free(specd_images *im) { (void)im; }

int32_t specd_images_run(const specd_token *tokens, int32_t n) { return n > 0 && tokens[0] < 0 ? 1 : 0; }

specd_status specd_images_embd(specd_images *im, int side, specd_token t, int32_t n, float *out, bool *non_causal,
                               char **error) {
    (void)im, (void)side, (void)t, (void)n, (void)out, (void)non_causal;
    specd_set_error(error, "this specd was built without images");
    return SPECD_ERR_INVALID_ARGUMENT;
}

bool specd_images_known(specd_images *im, specd_token t) { return (void)im, (void)t, false; }

int32_t specd_images_n_embd(const specd_images *im, int side) { return (void)im, (void)side, 0; }

bool specd_images_draft_embeds(const specd_images *im) { return (void)im, false; }

specd_token specd_images_filler(const specd_images *im) { return (void)im, 0; }

bool specd_engine_has_vision(const specd_engine *e) { return (void)e, false; }

const char *specd_image_marker(void) { return "<__media__>"; }

bool specd_token_is_image(specd_token token) { return token < 0; }

specd_status specd_tokenize_images(specd_engine *e, const char *text, bool add_special, bool parse_special,
                                   const specd_image *images, int32_t n_images, specd_token **tokens,
                                   int32_t *n_tokens, char **error) {
    (void)e, (void)text, (void)add_special, (void)parse_special, (void)images, (void)n_images;
    if (tokens) *tokens = NULL;
    if (n_tokens) *n_tokens = 0;
    specd_set_error(error, "this model takes no images: this specd was built without llama.cpp's mtmd");
    return SPECD_ERR_INVALID_ARGUMENT;
}

bool specd_engine_holds_image(const specd_engine *e, specd_token token) { return (void)e, (void)token, false; }

specd_status specd_image_tokens(specd_engine *e, const specd_image *image, specd_token *first, int32_t *n_positions,
                                char **error) {
    (void)e, (void)image, (void)first, (void)n_positions;
    specd_set_error(error, "this specd was built without images");
    return SPECD_ERR_INVALID_ARGUMENT;
}
