/* compat.c - may this draft model draft for this target? The rules are llama.cpp's
 * (common_speculative_are_compatible), so a pair llama.cpp accepts, we accept. */
#include "engine_internal.h"

#include "../util/util.h"

#include <stdlib.h>
#include <string.h>

#define VOCAB_MAX_SIZE_DIFFERENCE 128
#define VOCAB_CHECK_START_ID 5

static specd_status compare_special_tokens(const struct llama_vocab *t, const struct llama_vocab *d,
                                           char **error) {
    if (llama_vocab_type(t) != llama_vocab_type(d)) {
        specd_set_error(error, "draft model vocabulary type (%d) differs from the target's (%d): "
                        "use a draft trained with the target's tokenizer",
                        (int)llama_vocab_type(d), (int)llama_vocab_type(t));
        return SPECD_ERR_INCOMPATIBLE;
    }
    if (llama_vocab_get_add_bos(t) != llama_vocab_get_add_bos(d) ||
        llama_vocab_get_add_eos(t) != llama_vocab_get_add_eos(d) ||
        llama_vocab_bos(t) != llama_vocab_bos(d) || llama_vocab_eos(t) != llama_vocab_eos(d)) {
        specd_set_error(error, "draft model special tokens differ from the target's (target: add_bos=%d "
                        "add_eos=%d bos=%d eos=%d; draft: add_bos=%d add_eos=%d bos=%d eos=%d)",
                        llama_vocab_get_add_bos(t), llama_vocab_get_add_eos(t), llama_vocab_bos(t),
                        llama_vocab_eos(t), llama_vocab_get_add_bos(d), llama_vocab_get_add_eos(d),
                        llama_vocab_bos(d), llama_vocab_eos(d));
        return SPECD_ERR_INCOMPATIBLE;
    }
    return SPECD_OK;
}

specd_status specd_check_vocab_compatible(const struct llama_model *target,
                                          const struct llama_model *draft, char **error) {
    const struct llama_vocab *t = llama_model_get_vocab(target);
    const struct llama_vocab *d = llama_model_get_vocab(draft);
    specd_status st = compare_special_tokens(t, d, error);
    if (st != SPECD_OK) return st;
    int32_t n_t = llama_vocab_n_tokens(t), n_d = llama_vocab_n_tokens(d);
    if (abs(n_t - n_d) > VOCAB_MAX_SIZE_DIFFERENCE) {
        specd_set_error(error, "draft vocabulary has %d tokens, the target's %d: they may differ by at "
                        "most %d", n_d, n_t, VOCAB_MAX_SIZE_DIFFERENCE);
        return SPECD_ERR_INCOMPATIBLE;
    }
    int32_t n = n_t < n_d ? n_t : n_d;
    for (int32_t i = VOCAB_CHECK_START_ID; i < n; i++) {
        const char *tt = llama_vocab_get_text(t, i), *dt = llama_vocab_get_text(d, i);
        if (strcmp(tt, dt) != 0) {
            specd_set_error(error, "draft vocabulary differs from the target's at token %d: target '%s', "
                            "draft '%s'; the models need the same tokenizer", i, tt, dt);
            return SPECD_ERR_INCOMPATIBLE;
        }
    }
    return SPECD_OK;
}
