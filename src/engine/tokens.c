/* tokens.c - text <-> tokens with the target's vocabulary. */
#include "engine_internal.h"

#include "../util/util.h"

#include <stdlib.h>
#include <string.h>

specd_status specd_tokenize_special(const specd_engine *e, const char *text, bool add_special, bool parse_special,
                            specd_token **tokens, int32_t *n_tokens, char **error) {
    if (error) *error = NULL;
    *tokens = NULL;
    *n_tokens = 0;
    if (!text) {
        specd_set_error(error, "no text to tokenize");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    int32_t len = (int32_t)strlen(text);
    int32_t cap = len + 2; /* at most one token per byte, plus BOS/EOS */
    specd_token *buf = specd_alloc_array((size_t)cap, sizeof *buf);
    if (!buf) {
        specd_set_error(error, "out of memory tokenizing %d bytes", len);
        return SPECD_ERR_NO_MEMORY;
    }
    int32_t n = llama_tokenize(e->vocab, text, len, buf, cap, add_special, parse_special);
    if (n < 0) { /* more tokens than guessed: llama.cpp says how many */
        specd_token *grown = specd_grow_array(buf, (size_t)-n, sizeof *buf);
        if (grown) {
            buf = grown;
            n = llama_tokenize(e->vocab, text, len, buf, -n, add_special, parse_special);
        }
    }
    if (n < 0) {
        free(buf);
        specd_set_error(error, "tokenizing %d bytes failed", len);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    *tokens = buf;
    *n_tokens = n;
    return SPECD_OK;
}

specd_status specd_tokenize(const specd_engine *e, const char *text, bool add_special, specd_token **tokens,
                            int32_t *n_tokens, char **error) {
    return specd_tokenize_special(e, text, add_special, false, tokens, n_tokens, error);
}

int32_t specd_token_to_piece_special(const specd_engine *e, specd_token token, bool special, char *buf,
                                     int32_t buf_size) {
    if (token < 0 || token >= e->n_vocab) return 0;
    return llama_token_to_piece(e->vocab, token, buf, buf_size, 0, special);
}

int32_t specd_token_to_piece(const specd_engine *e, specd_token token, char *buf, int32_t buf_size) {
    return specd_token_to_piece_special(e, token, false, buf, buf_size);
}

char *specd_detokenize(const specd_engine *e, const specd_token *tokens, int32_t n_tokens) {
    size_t cap = 64, len = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    for (int32_t i = 0; i < n_tokens; i++) {
        int32_t n = specd_token_to_piece(e, tokens[i], out + len, (int32_t)(cap - len - 1));
        if (n < 0) { /* no room: grow to fit this piece and write it again */
            while (len + (size_t)(-n) + 1 > cap) cap *= 2;
            char *grown = realloc(out, cap);
            if (!grown) {
                free(out);
                return NULL;
            }
            out = grown;
            n = specd_token_to_piece(e, tokens[i], out + len, (int32_t)(cap - len - 1));
        }
        if (n > 0) len += (size_t)n;
    }
    out[len] = '\0';
    return out;
}

bool specd_token_is_eog(const specd_engine *e, specd_token token) { return llama_vocab_is_eog(e->vocab, token); }

bool specd_token_is_added_bos(const specd_engine *e, specd_token token) {
    return llama_vocab_get_add_bos(e->vocab) && token == llama_vocab_bos(e->vocab);
}

specd_fim_tokens specd_engine_fim_tokens(const specd_engine *e) {
    specd_fim_tokens t = {-1, -1, -1, -1, -1, -1};
    if (!e) return t;
    t.pre = llama_vocab_fim_pre(e->vocab);
    t.suf = llama_vocab_fim_suf(e->vocab);
    t.mid = llama_vocab_fim_mid(e->vocab);
    t.pad = llama_vocab_fim_pad(e->vocab);
    t.rep = llama_vocab_fim_rep(e->vocab);
    t.sep = llama_vocab_fim_sep(e->vocab); /* LLAMA_TOKEN_NULL is -1 as well */
    return t;
}
