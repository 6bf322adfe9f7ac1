/* warmup.c - one pass of each model before any session, as llama.cpp's tools make at start-up
 * (common_init_from_params): the weights are read into memory (a memory-mapped model is paged
 * in by its first pass) and a GPU backend loads the kernels of a pass, so the first request does
 * not pay for either. Nothing of the pass stays: each context's memory is cleared after it. */
#include "engine_internal.h"

#include "../util/util.h"

/* Two tokens of the model's own vocabulary, BOS and EOS where it has them (llama.cpp's choice). */
static int32_t warm_up_tokens(const struct llama_model *model, llama_token tokens[2]) {
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int32_t n = 0;
    llama_token bos = llama_vocab_bos(vocab), eos = llama_vocab_eos(vocab);
    if (bos != LLAMA_TOKEN_NULL) tokens[n++] = bos;
    if (eos != LLAMA_TOKEN_NULL) tokens[n++] = eos;
    if (n == 0) tokens[n++] = 0;
    return n;
}

static specd_status warm_up_context(struct llama_context *ctx, const struct llama_model *model, const char *role,
                                    char **error) {
    llama_token tokens[2];
    int32_t n = warm_up_tokens(model, tokens);
    int32_t rc = llama_decode(ctx, llama_batch_get_one(tokens, n));
    llama_synchronize(ctx);
    llama_memory_clear(llama_get_memory(ctx), true);
    if (rc != 0) {
        specd_set_error(error, "the warm-up pass of the %s failed (llama_decode %d): start without it "
                        "(--no-warmup) to see whether the first request fails too", role, (int)rc);
        return SPECD_ERR_DECODE;
    }
    return SPECD_OK;
}

specd_status specd_engine_warm_up(specd_engine *e, char **error) {
    if (error) *error = NULL;
    if (!e) {
        specd_set_error(error, "specd_engine_warm_up: no engine");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    specd_status st = warm_up_context(e->target.ctx, e->target.model, "target", error);
    if (st == SPECD_OK && e->draft.ctx) st = warm_up_context(e->draft.ctx, e->draft.model, "draft", error);
    return st;
}
