/* vocab_pair.c - the target's and the draft's vocabularies side by side, for a draft that
 * tokenizes text its own way (engine.h): the bridge between them (draft/vocab_bridge.c) sees
 * tokens and text only, never llama.cpp's types. */
#include "engine_internal.h"

static const struct llama_vocab *vocab_of(const specd_engine *e, specd_vocab_side side) {
    if (side == SPECD_VOCAB_TARGET) return e->vocab;
    return e->draft.model ? llama_model_get_vocab(e->draft.model) : NULL;
}

bool specd_engine_draft_vocab_differs(const specd_engine *e) { return e && e->draft.ctx && e->draft_vocab_differs; }

int32_t specd_vocab_n_tokens(const specd_engine *e, specd_vocab_side side) {
    const struct llama_vocab *v = vocab_of(e, side);
    return v ? llama_vocab_n_tokens(v) : 0;
}

int32_t specd_vocab_tokenize(const specd_engine *e, specd_vocab_side side, const char *text, int32_t len,
                             specd_token *out, int32_t cap) {
    const struct llama_vocab *v = vocab_of(e, side);
    if (!v || len <= 0) return 0;
    return llama_tokenize(v, text, len, out, cap, false, false);
}

int32_t specd_vocab_piece(const specd_engine *e, specd_vocab_side side, specd_token token, char *buf, int32_t cap) {
    const struct llama_vocab *v = vocab_of(e, side);
    if (!v || token < 0 || token >= llama_vocab_n_tokens(v)) return 0;
    return llama_token_to_piece(v, token, buf, cap, 0, false);
}

bool specd_vocab_is_eog(const specd_engine *e, specd_vocab_side side, specd_token token) {
    const struct llama_vocab *v = vocab_of(e, side);
    return v && llama_vocab_is_eog(v, token);
}

specd_token specd_vocab_added_bos(const specd_engine *e, specd_vocab_side side) {
    const struct llama_vocab *v = vocab_of(e, side);
    return v && llama_vocab_get_add_bos(v) ? llama_vocab_bos(v) : -1;
}

specd_token specd_vocab_eos(const specd_engine *e, specd_vocab_side side) {
    const struct llama_vocab *v = vocab_of(e, side);
    return v ? llama_vocab_eos(v) : -1;
}
