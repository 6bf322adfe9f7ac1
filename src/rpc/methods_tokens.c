/* methods_tokens.c - tokenize and detokenize on the serving model (short calls: they hold the
 * engine read lock, never waiting for a completion). */
#include "methods.h"

#include "../serve/text_stream.h"

#include <stdlib.h>
#include <string.h>

static json_t *piece_string(specd_engine *e, specd_token t) {
    char piece[256];
    int32_t n = specd_token_to_piece(e, t, piece, (int32_t)sizeof piece);
    char *clean = specd_utf8_sanitize(piece, n > 0 ? (size_t)n : 0);
    json_t *s = json_string(clean ? clean : "");
    free(clean);
    return s;
}

json_t *rpc_method_tokenize(api_host *h, json_t *params, api_error *err) {
    api_params rp;
    api_params_open(&rp, params, "tokenize params", "", err);
    const char *text = NULL;
    bool add_special = true, with_pieces = false, parse_special = false;
    if (api_get_string(&rp, "text", &text) < 0 || api_get_bool(&rp, "add_special", &add_special) < 0 ||
        api_get_bool(&rp, "parse_special", &parse_special) < 0 ||
        api_get_bool(&rp, "with_pieces", &with_pieces) < 0 || !api_params_finish(&rp))
        return NULL;
    if (!text) {
        api_fail(err, API_INVALID_PARAMS, "text", "tokenize params: 'text' (a string) is required");
        return NULL;
    }
    specd_engine *e;
    if (!api_host_acquire_engine(h, &e, err)) return NULL;
    specd_token *tokens = NULL;
    int32_t n = 0;
    char *message = NULL;
    json_t *r = NULL;
    if (specd_tokenize_special(e, text, add_special, parse_special, &tokens, &n, &message) != SPECD_OK) {
        api_fail(err, API_INVALID_PARAMS, "text", "tokenize: %s", message ? message : "failed");
    } else {
        json_t *ids = json_array(), *pieces = with_pieces ? json_array() : NULL;
        for (int32_t i = 0; i < n; i++) {
            json_array_append_new(ids, json_integer(tokens[i]));
            if (pieces) json_array_append_new(pieces, piece_string(e, tokens[i]));
        }
        r = json_pack("{s:o, s:i}", "tokens", ids, "length", n);
        if (r && pieces) json_object_set_new(r, "pieces", pieces);
    }
    api_host_release_engine(h);
    specd_free(tokens);
    specd_free(message);
    return r;
}

json_t *rpc_method_detokenize(api_host *h, json_t *params, api_error *err) {
    api_params rp;
    api_params_open(&rp, params, "detokenize params", "", err);
    json_t *list = api_get_value(&rp, "tokens");
    if (!api_params_finish(&rp)) return NULL;
    if (!json_is_array(list)) {
        api_fail(err, API_INVALID_PARAMS, "tokens", "detokenize params: 'tokens' (an array of token ids) is required");
        return NULL;
    }
    specd_engine *e;
    if (!api_host_acquire_engine(h, &e, err)) return NULL;
    size_t n = json_array_size(list);
    specd_token *tokens = malloc((n + 1) * sizeof *tokens);
    int32_t n_vocab = specd_engine_n_vocab(e);
    json_t *r = NULL;
    for (size_t i = 0; tokens && i < n; i++) {
        json_t *v = json_array_get(list, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= n_vocab) {
            api_fail(err, API_INVALID_PARAMS, "tokens", "detokenize params: tokens[%zu] must be a token id "
                     "from 0 to %d", i, n_vocab - 1);
            goto done;
        }
        tokens[i] = (specd_token)json_integer_value(v);
    }
    char *text = tokens ? specd_detokenize(e, tokens, (int32_t)n) : NULL;
    char *clean = text ? specd_utf8_sanitize(text, strlen(text)) : NULL;
    if (clean) r = json_pack("{s:s}", "content", clean);
    else api_fail(err, API_INTERNAL_ERROR, "", "detokenize: out of memory");
    specd_free(text);
    free(clean);
done:
    api_host_release_engine(h);
    free(tokens);
    return r;
}
