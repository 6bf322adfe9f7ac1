/* images.c - see images.h: the projector (mtmd), the images tokenized lately and their embeddings. */
#include "images.h"

#include "engine_internal.h"
#include "llama_log.h"
#include "mtmd-helper.h"
#include "mtmd.h"

#include "../util/util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The most positions one image takes, and the range its first token is drawn from: every image
 * token lies in [-(IMAGE_KEYS + IMAGE_SPAN), -1], inside int32_t. */
#define IMAGE_SPAN (1 << 20)
#define IMAGE_KEYS (INT32_MAX - IMAGE_SPAN - 1)
/* Images kept: the latest IMAGES_BASE + IMAGES_PER_SLOT per slot, so that every slot's prompt can
 * be decoded again (a context shift, another slot's session in between) while newer requests come. */
#define IMAGES_BASE 16
#define IMAGES_PER_SLOT 4

/* One model's side of an image (SPECD_IMAGE_TARGET, or SPECD_IMAGE_DRAFT with the draft's own
 * projector): its projector's preprocessed image until encoded, then the embeddings. */
typedef struct image_side {
    mtmd_input_chunk *chunk; /* mtmd's copy of the preprocessed image, until encoded (then NULL) */
    float *embd;             /* n x that model's width once encoded, else NULL */
    bool non_causal;         /* its positions attend each other (one pass), as mtmd said when encoding */
} image_side;

typedef struct image_entry {
    specd_token first; /* the token of position 0; position i is first - i */
    int32_t n;         /* positions */
    image_side side[SPECD_IMAGE_SIDES];
    uint64_t used;     /* the store's clock at its latest use (least recent goes first) */
} image_entry;

struct specd_images {
    mtmd_context *mtmd[SPECD_IMAGE_SIDES]; /* the target's projector; the draft's own, or NULL */
    int32_t n_embd[SPECD_IMAGE_SIDES];
    pthread_mutex_t lock; /* tokenizing (any thread) beside decoding (the generation's) */
    image_entry *entries;
    int32_t n, cap;
    uint64_t clock;
    specd_token filler;
};

/* ---- the store (lock held) --------------------------------------------------------------------- */

static image_entry *find_locked(specd_images *im, specd_token t) {
    for (int32_t i = 0; i < im->n; i++) {
        image_entry *x = &im->entries[i];
        if (t <= x->first && t > x->first - x->n) return x;
    }
    return NULL;
}

static bool overlaps_locked(const specd_images *im, specd_token first, int32_t n) {
    for (int32_t i = 0; i < im->n; i++) {
        const image_entry *x = &im->entries[i];
        if (first > x->first - x->n && first - n < x->first) return true;
    }
    return false;
}

static void free_entry(image_entry *x) {
    for (int k = 0; k < SPECD_IMAGE_SIDES; k++) {
        if (x->side[k].chunk) mtmd_input_chunk_free(x->side[k].chunk);
        free(x->side[k].embd);
    }
}

/* Room for one more entry: the least recently used goes when the store is full. */
static image_entry *slot_for_new_locked(specd_images *im) {
    if (im->n < im->cap) return &im->entries[im->n++];
    int32_t oldest = 0;
    for (int32_t i = 1; i < im->n; i++)
        if (im->entries[i].used < im->entries[oldest].used) oldest = i;
    free_entry(&im->entries[oldest]);
    return &im->entries[oldest];
}

/* FNV-1a of the image's id (mtmd's SHA-256 of its bytes). */
static uint64_t hash_id(const char *id) {
    uint64_t h = 1469598103934665603ULL;
    for (const char *c = id ? id : ""; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ULL;
    return h;
}

/* The image chunk's first token: the one it had where the store holds it already, else one whose
 * range meets no other image's (another hash of it where they would). Keeps a copy of the chunk,
 * and takes `draft_chunk` (the draft's projector's, or NULL). */
static specd_status register_locked(specd_images *im, const mtmd_input_chunk *chunk, mtmd_input_chunk *draft_chunk,
                                    specd_token *first, char **error) {
    int32_t n = (int32_t)mtmd_input_chunk_get_n_tokens(chunk);
    if (n < 1 || n >= IMAGE_SPAN) {
        specd_set_error(error, "an image of %d positions: at most %d", n, IMAGE_SPAN - 1);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    uint64_t h = hash_id(mtmd_input_chunk_get_id(chunk));
    for (;; h = h * 6364136223846793005ULL + 1442695040888963407ULL) {
        specd_token f = (specd_token)(-1 - (int64_t)(h % (uint64_t)IMAGE_KEYS));
        image_entry *same = find_locked(im, f);
        if (same && same->first == f && same->n == n) { /* this image, tokenized before */
            same->used = ++im->clock;
            *first = f;
            if (draft_chunk) mtmd_input_chunk_free(draft_chunk);
            return SPECD_OK;
        }
        if (overlaps_locked(im, f, n)) continue;
        mtmd_input_chunk *copy = mtmd_input_chunk_copy(chunk);
        if (!copy) {
            if (draft_chunk) mtmd_input_chunk_free(draft_chunk);
            specd_set_error(error, "out of memory for an image");
            return SPECD_ERR_NO_MEMORY;
        }
        image_entry *x = slot_for_new_locked(im);
        *x = (image_entry){.first = f, .n = n, .used = ++im->clock};
        x->side[SPECD_IMAGE_TARGET].chunk = copy;
        x->side[SPECD_IMAGE_DRAFT].chunk = draft_chunk;
        *first = f;
        return SPECD_OK;
    }
}

/* The image's embeddings for one model, encoded by its projector on first use. */
static specd_status encode_locked(specd_images *im, image_entry *x, int side, char **error) {
    image_side *d = &x->side[side];
    if (d->embd) return SPECD_OK;
    if (!d->chunk) {
        specd_set_error(error, "no projector of the %s holds this image", side ? "draft" : "target");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    size_t floats = (size_t)x->n * (size_t)im->n_embd[side];
    float *embd = malloc(floats * sizeof *embd);
    if (!embd) {
        specd_set_error(error, "out of memory for an image's embeddings (%d positions)", x->n);
        return SPECD_ERR_NO_MEMORY;
    }
    if (mtmd_encode_chunk(im->mtmd[side], d->chunk) != 0) {
        free(embd);
        specd_set_error(error, "the %s's vision projector failed to encode an image (see the log: --verbose)",
                        side ? "draft" : "target");
        return SPECD_ERR_DECODE;
    }
    memcpy(embd, mtmd_get_output_embd(im->mtmd[side]), floats * sizeof *embd);
    d->embd = embd;
    /* the embeddings are all a later pass needs: the preprocessed pixels (often more) go */
    d->non_causal = mtmd_decode_use_non_causal(im->mtmd[side], d->chunk);
    mtmd_input_chunk_free(d->chunk);
    d->chunk = NULL;
    return SPECD_OK;
}

/* ---- what kv.c and engine.c use ---------------------------------------------------------------- */

int32_t specd_images_run(const specd_token *tokens, int32_t n) {
    if (n < 1 || tokens[0] >= 0) return 0;
    int32_t k = 1;
    while (k < n && tokens[k] == tokens[k - 1] - 1) k++;
    return k;
}

specd_status specd_images_embd(specd_images *im, int side, specd_token t, int32_t n, float *out, bool *non_causal,
                               char **error) {
    pthread_mutex_lock(&im->lock);
    image_entry *x = find_locked(im, t);
    specd_status st = SPECD_OK;
    if (!x || x->first - t + n > x->n) {
        specd_set_error(error, "an image of this prompt is no longer held (the engine keeps the latest %d): "
                        "send the request with its image again", im->cap);
        st = SPECD_ERR_INVALID_ARGUMENT;
    }
    if (st == SPECD_OK) st = encode_locked(im, x, side, error);
    if (st == SPECD_OK) {
        size_t width = (size_t)im->n_embd[side];
        x->used = ++im->clock;
        memcpy(out, x->side[side].embd + (size_t)(x->first - t) * width, (size_t)n * width * sizeof *out);
        *non_causal = x->side[side].non_causal;
    }
    pthread_mutex_unlock(&im->lock);
    return st;
}

/* A known image becomes the latest used: a prompt checked for its images is about to use them, and
 * one left the least recent would be the first let go while other requests' images come in (28
 * image requests queued at one slot lost one so between the check and the prompt's decode). */
bool specd_images_known(specd_images *im, specd_token t) {
    if (!im) return false;
    pthread_mutex_lock(&im->lock);
    image_entry *x = find_locked(im, t);
    if (x) x->used = ++im->clock;
    pthread_mutex_unlock(&im->lock);
    return x != NULL;
}

int32_t specd_images_n_embd(const specd_images *im, int side) { return im->n_embd[side]; }

bool specd_images_draft_embeds(const specd_images *im) { return im && im->mtmd[SPECD_IMAGE_DRAFT]; }

specd_token specd_images_filler(const specd_images *im) { return im->filler; }

/* What the draft decodes in an image's place: the padding token, or else a space, or token 0. */
static specd_token filler_of(const struct llama_vocab *vocab) {
    specd_token pad = llama_vocab_pad(vocab);
    if (pad >= 0) return pad;
    specd_token space = 0;
    return llama_tokenize(vocab, " ", 1, &space, 1, false, false) == 1 ? space : 0;
}

static specd_status refuse_projector(const char *path, const char *why, char **error) {
    specd_set_error(error, "the vision projector %s %s", path, why);
    return SPECD_ERR_MODEL_LOAD;
}

/* One model's projector (`slot`: where its layers are), refused where specd cannot place its
 * positions; NULL with *error. */
static mtmd_context *load_projector(const specd_engine *e, const specd_model_slot *slot, const char *path,
                                    char **error) {
    ggml_log_callback logger = NULL; /* specd's (llama_log.c): mtmd's lines go where llama.cpp's go */
    void *logger_data = NULL;
    llama_log_get(&logger, &logger_data);
    mtmd_helper_log_set(logger, logger_data);
    struct mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu = slot->placement.n_layers_offloaded > 0;
    mp.n_threads = e->params.n_threads > 0 ? e->params.n_threads : mp.n_threads;
    mp.print_timings = false;
    mp.warmup = false;
    specd_log_capture capture;
    specd_log_capture_begin(&capture);
    mtmd_context *mtmd = mtmd_init_from_file(path, slot->model, mp);
    const char *reason = specd_log_capture_end(&capture);
    if (!mtmd) {
        specd_set_error(error, "cannot load the vision projector %s%s%s", path, *reason ? "; llama.cpp: " : "",
                        reason);
        return NULL;
    }
    const char *why = !mtmd_support_vision(mtmd) ? "has no vision encoder (audio projectors are not supported)"
                      : mtmd_decode_use_mrope(mtmd) ? "places image positions with M-RoPE (Qwen2-VL style), which "
                                                      "specd does not support yet"
                                                    : NULL;
    if (!why) return mtmd;
    mtmd_free(mtmd);
    refuse_projector(path, why, error);
    return NULL;
}

specd_status specd_images_load(specd_engine *e, const char *path, const char *draft_path, char **error) {
    mtmd_context *target = load_projector(e, &e->target, path, error);
    mtmd_context *draft = target && draft_path ? load_projector(e, &e->draft, draft_path, error) : NULL;
    if (!target || (draft_path && !draft)) {
        if (target) mtmd_free(target);
        return SPECD_ERR_MODEL_LOAD;
    }
    specd_images *im = calloc(1, sizeof *im);
    int32_t cap = IMAGES_BASE + IMAGES_PER_SLOT * e->n_parallel;
    if (im) im->entries = calloc((size_t)cap, sizeof *im->entries);
    if (!im || !im->entries) {
        mtmd_free(target);
        if (draft) mtmd_free(draft);
        free(im);
        specd_set_error(error, "out of memory for the vision projector's images");
        return SPECD_ERR_NO_MEMORY;
    }
    im->mtmd[SPECD_IMAGE_TARGET] = target;
    im->mtmd[SPECD_IMAGE_DRAFT] = draft;
    im->cap = cap;
    im->n_embd[SPECD_IMAGE_TARGET] = llama_model_n_embd_inp(e->target.model);
    im->n_embd[SPECD_IMAGE_DRAFT] = draft ? llama_model_n_embd_inp(e->draft.model) : 0;
    im->filler = filler_of(e->vocab);
    pthread_mutex_init(&im->lock, NULL);
    e->images = im;
    return SPECD_OK;
}

void specd_images_free(specd_images *im) {
    if (!im) return;
    for (int32_t i = 0; i < im->n; i++) free_entry(&im->entries[i]);
    free(im->entries);
    for (int k = 0; k < SPECD_IMAGE_SIDES; k++)
        if (im->mtmd[k]) mtmd_free(im->mtmd[k]);
    pthread_mutex_destroy(&im->lock);
    free(im);
}

/* ---- the public calls -------------------------------------------------------------------------- */

bool specd_engine_has_vision(const specd_engine *e) { return e && e->images; }

const char *specd_image_marker(void) { return mtmd_default_marker(); }

bool specd_token_is_image(specd_token token) { return token < 0; }

/* The images as mtmd bitmaps (their ids: the SHA-256 of their bytes); the first that is no image
 * is refused by its number. */
static specd_status make_bitmaps(const specd_images *im, const specd_image *images, int32_t n, mtmd_bitmap **out,
                                 char **error) {
    for (int32_t i = 0; i < n; i++) {
        out[i] = NULL;
        if (images[i].data && images[i].size > 0)
            out[i] = mtmd_helper_bitmap_init_from_buf(im->mtmd[SPECD_IMAGE_TARGET], images[i].data, images[i].size, false,
                                                      mtmd_helper_init_opt_default()).bitmap;
        if (!out[i] || mtmd_bitmap_is_audio(out[i])) {
            specd_set_error(error, "image %d (%zu bytes) is not an image stb_image reads (PNG, JPEG, BMP, GIF, "
                            "TGA, PNM)", i + 1, images[i].size);
            return SPECD_ERR_INVALID_ARGUMENT;
        }
    }
    return SPECD_OK;
}

/* The draft's own projector's chunk of image `index` (its own preprocessing), which must take as
 * many positions as the target's (n): the two models' positions stay one history. */
static mtmd_input_chunk *draft_chunk_of(specd_images *im, const mtmd_bitmap *bitmap, int32_t n, int32_t index,
                                        char **error) {
    mtmd_input_chunks *chunks = mtmd_input_chunks_init();
    const char *marker = specd_image_marker();
    mtmd_input_text in = {.text = marker, .text_len = strlen(marker), .add_special = false, .parse_special = false};
    mtmd_input_chunk *found = NULL;
    if (chunks && mtmd_tokenize(im->mtmd[SPECD_IMAGE_DRAFT], chunks, &in, &bitmap, 1) == 0)
        for (size_t c = 0; c < mtmd_input_chunks_size(chunks) && !found; c++)
            if (mtmd_input_chunk_get_type(mtmd_input_chunks_get(chunks, c)) == MTMD_INPUT_CHUNK_TYPE_IMAGE)
                found = mtmd_input_chunk_copy(mtmd_input_chunks_get(chunks, c));
    int32_t got = found ? (int32_t)mtmd_input_chunk_get_n_tokens(found) : 0;
    if (!found) {
        specd_set_error(error, "the draft's vision projector could not prepare image %d", index + 1);
    } else if (got != n) {
        specd_set_error(error, "image %d: the draft's projector makes %d positions of it where the target's makes %d: "
                        "the draft's projector (--mmproj-draft) must agree with the target's, or be left out (the "
                        "draft model then drafts from the text around images)", index + 1, got, n);
        mtmd_input_chunk_free(found);
        found = NULL;
    }
    if (chunks) mtmd_input_chunks_free(chunks);
    return found;
}

/* The chunks' tokens, each image's positions as its tokens (the image kept in the store, with the
 * draft projector's chunk of its bitmap where the draft has one). */
static specd_status chunks_to_tokens(specd_images *im, const mtmd_input_chunks *chunks, mtmd_bitmap **bitmaps,
                                     specd_token *out, char **error) {
    int32_t k = 0, image = 0;
    specd_status st = SPECD_OK;
    pthread_mutex_lock(&im->lock);
    for (size_t c = 0; c < mtmd_input_chunks_size(chunks) && st == SPECD_OK; c++) {
        const mtmd_input_chunk *chunk = mtmd_input_chunks_get(chunks, c);
        if (mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            size_t n = 0;
            const llama_token *text = mtmd_input_chunk_get_tokens_text(chunk, &n);
            memcpy(out + k, text, n * sizeof *text);
            k += (int32_t)n;
            continue;
        }
        specd_token first = 0;
        int32_t n = (int32_t)mtmd_input_chunk_get_n_tokens(chunk);
        mtmd_input_chunk *draft = NULL;
        if (im->mtmd[SPECD_IMAGE_DRAFT] && !(draft = draft_chunk_of(im, bitmaps[image], n, image, error)))
            st = SPECD_ERR_INVALID_ARGUMENT;
        image++;
        if (st == SPECD_OK) st = register_locked(im, chunk, draft, &first, error);
        for (int32_t i = 0; st == SPECD_OK && i < n; i++) out[k++] = first - i;
    }
    pthread_mutex_unlock(&im->lock);
    return st;
}

static specd_status tokenize_chunks(specd_images *im, const mtmd_input_chunks *chunks, mtmd_bitmap **bitmaps,
                                    specd_token **tokens, int32_t *n_tokens, char **error) {
    size_t n = mtmd_helper_get_n_tokens(chunks);
    if (n >= (size_t)INT32_MAX) {
        specd_set_error(error, "the prompt has too many tokens (%zu)", n);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    specd_token *out = malloc((n ? n : 1) * sizeof *out);
    if (!out) {
        specd_set_error(error, "out of memory for %zu prompt tokens", n);
        return SPECD_ERR_NO_MEMORY;
    }
    specd_status st = chunks_to_tokens(im, chunks, bitmaps, out, error);
    if (st != SPECD_OK) {
        free(out);
        return st;
    }
    *tokens = out;
    *n_tokens = (int32_t)n;
    return SPECD_OK;
}

static int32_t count_markers(const char *text) {
    const char *marker = specd_image_marker();
    int32_t n = 0;
    for (const char *at = strstr(text, marker); at; at = strstr(at + strlen(marker), marker)) n++;
    return n;
}

specd_status specd_tokenize_images(specd_engine *e, const char *text, bool add_special, bool parse_special,
                                   const specd_image *images, int32_t n_images, specd_token **tokens,
                                   int32_t *n_tokens, char **error) {
    if (error) *error = NULL;
    if (!e || !text || !tokens || !n_tokens || n_images < 0 || (n_images > 0 && !images)) {
        specd_set_error(error, "specd_tokenize_images needs an engine, a text, the images and places for the tokens");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (!e->images) {
        specd_set_error(error, "this model takes no images: start it with a vision projector (--mmproj)");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (count_markers(text) != n_images) {
        specd_set_error(error, "the text has %d image markers (%s) for %d images: one marker per image, in order",
                        count_markers(text), specd_image_marker(), n_images);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    specd_images *im = e->images;
    mtmd_bitmap **bitmaps = calloc((size_t)(n_images ? n_images : 1), sizeof *bitmaps);
    mtmd_input_chunks *chunks = mtmd_input_chunks_init();
    /* mtmd's own error lines go into the message (or nowhere: ours says more), not onto stderr */
    specd_log_capture capture;
    specd_log_capture_begin(&capture);
    specd_status st = bitmaps && chunks ? make_bitmaps(im, images, n_images, bitmaps, error) : SPECD_ERR_NO_MEMORY;
    if (st == SPECD_ERR_NO_MEMORY) specd_set_error(error, "out of memory for %d images", n_images);
    int32_t rc = 0;
    if (st == SPECD_OK) {
        mtmd_input_text in = {.text = text, .text_len = strlen(text), .add_special = add_special,
                              .parse_special = parse_special};
        rc = mtmd_tokenize(im->mtmd[SPECD_IMAGE_TARGET], chunks, &in, (const mtmd_bitmap **)bitmaps, (size_t)n_images);
    }
    const char *reason = specd_log_capture_end(&capture);
    if (rc != 0) {
        specd_set_error(error, "an image could not be prepared for the projector (mtmd: %d)%s%s", rc,
                        *reason ? ": " : "", reason);
        st = SPECD_ERR_INVALID_ARGUMENT;
    }
    if (st == SPECD_OK) st = tokenize_chunks(im, chunks, bitmaps, tokens, n_tokens, error);
    for (int32_t i = 0; bitmaps && i < n_images; i++) mtmd_bitmap_free(bitmaps[i]);
    free(bitmaps);
    if (chunks) mtmd_input_chunks_free(chunks);
    return st;
}

bool specd_engine_holds_image(const specd_engine *e, specd_token token) {
    return e && specd_token_is_image(token) && specd_images_known(e->images, token);
}

specd_status specd_image_tokens(specd_engine *e, const specd_image *image, specd_token *first, int32_t *n_positions,
                                char **error) {
    if (error) *error = NULL;
    if (!image || !first || !n_positions) {
        specd_set_error(error, "specd_image_tokens needs an image and places for its tokens");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    specd_token *tokens = NULL;
    int32_t n = 0;
    /* the marker alone: its one image chunk, no text around it */
    specd_status st = specd_tokenize_images(e, specd_image_marker(), false, false, image, 1, &tokens, &n, error);
    int32_t at = 0;
    while (st == SPECD_OK && at < n && !specd_token_is_image(tokens[at])) at++;
    if (st == SPECD_OK && at == n) {
        specd_set_error(error, "the projector made no positions of the image");
        st = SPECD_ERR_INVALID_ARGUMENT;
    }
    if (st == SPECD_OK) {
        *first = tokens[at];
        *n_positions = specd_images_run(tokens + at, n - at);
    }
    free(tokens);
    return st;
}
