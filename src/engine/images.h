/* images.h - images in prompts (specd_engine_params.mmproj_path), through llama.cpp's multimodal
 * library (mtmd): the target's vision projector, the images tokenized lately, and their embeddings
 * for the target's passes (kv.c). Files of src/engine/ only.
 *
 * An image takes n positions of the history, as llama-server's image chunks do. Here each position
 * is a negative token: image position i is `first - i`, where `first` comes from the hash of the
 * image (mtmd gives each image its SHA-256), so the same image gives the same tokens and every
 * layer that compares token lists (the prompt cache, slot sharing, the drafters) treats an image
 * as text, while no token id of the vocabulary is ever one of them. */
#ifndef SPECD_IMAGES_H
#define SPECD_IMAGES_H

#include "specd.h"

#include <stdbool.h>
#include <stdint.h>

struct specd_engine;
typedef struct specd_images specd_images;

/* Whose embeddings: the target's projector's, or the draft's own (specd_engine_params.mmproj_draft_path). */
enum { SPECD_IMAGE_TARGET = 0, SPECD_IMAGE_DRAFT = 1, SPECD_IMAGE_SIDES = 2 };

/* Loads the projector for the engine's target, and the draft's own where draft_path is not NULL
 * (after the contexts exist); e->images on success. Refuses projectors this engine cannot place
 * (M-RoPE, audio). */
specd_status specd_images_load(struct specd_engine *e, const char *path, const char *draft_path, char **error);
void specd_images_free(specd_images *im);

/* How many positions from `tokens[0]` on belong to one image, in order (at most n): 0 when
 * tokens[0] is text. */
int32_t specd_images_run(const specd_token *tokens, int32_t n);

/* The embeddings of the n image positions starting at token `t` (consecutive positions of one
 * image) for `side` (SPECD_IMAGE_TARGET or _DRAFT) into out (n x that model's width), the image
 * encoded first where it was not yet. *non_causal: the projector's model attends the whole image at
 * once (it must then be one pass). Fails when the engine no longer holds the image. */
specd_status specd_images_embd(specd_images *im, int side, specd_token t, int32_t n, float *out, bool *non_causal,
                               char **error);
/* Whether the engine holds the image of token t; if so it becomes the latest used (images.c). */
bool specd_images_known(specd_images *im, specd_token t);
/* The embedding width of the target or the draft (floats per image position). */
int32_t specd_images_n_embd(const specd_images *im, int side);
/* Whether the draft model has a projector of its own: it then decodes images from it. */
bool specd_images_draft_embeds(const specd_images *im);
/* What the draft model decodes at an image's positions where it has no projector of its own. */
specd_token specd_images_filler(const specd_images *im);

#endif
