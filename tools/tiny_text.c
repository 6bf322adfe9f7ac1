/* tiny_text.c - make_tiny_model --text: a llama model that, greedily, writes one given text.
 *
 * The text is cut at its spaces into SentencePiece words ("▁word"); a word already used earlier
 * in the text is joined to the words after it ("▁the▁cat") until the piece is new, so every piece
 * appears once and the chain of pieces says what follows each: piece k -> piece k + 1, the last
 * -> end of text. The weights say just that: piece k's embedding is the unit vector of dimension
 * k (so n_embd must exceed the number of pieces), and the output row of piece k + 1 reads
 * dimension k. The layers in between are the usual random ones scaled by --layer-scale: small,
 * they add cost (width, depth) and a little noise that does not move the argmax.
 *
 * A draft for it is the same with --text-miss N: at every Nth piece it points one piece too far
 * (piece k -> piece k + 2), so it agrees with the target at the other links; the first piece gets
 * all its SentencePiece prefixes ("▁S", "▁Sp", ...) so that a prompt of the first word tokenizes
 * to it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiny_model.h"

#define SPM_SPACE "\xE2\x96\x81"

/* The words of `text` from `*pos`: one "▁word" (the text up to the next space, or its end)
 * appended to piece (of `size` bytes); *pos moves past it and its space. False at the end. */
static bool append_word(const char *text, size_t *pos, char *piece, size_t size) {
    if (text[*pos] == '\0') return false;
    size_t end = *pos;
    while (text[end] != '\0' && text[end] != ' ') end++;
    size_t used = strlen(piece), n = end - *pos;
    if (used + strlen(SPM_SPACE) + n >= size) fail("--text: a piece grows past %zu bytes (fewer repeats?)", size - 1);
    memcpy(piece + used, SPM_SPACE, strlen(SPM_SPACE));
    memcpy(piece + used + strlen(SPM_SPACE), text + *pos, n);
    piece[used + strlen(SPM_SPACE) + n] = '\0';
    *pos = text[end] == ' ' ? end + 1 : end;
    return true;
}

static bool in_chain(const tiny_text_chain *chain, int32_t id) {
    for (int i = 0; i < chain->n; i++)
        if (chain->ids[i] == id) return true;
    return false;
}

/* SPM merges two pieces only into a piece of the vocabulary: "▁Spec" is reached through "▁S",
 * "▁Sp", "▁Spe". */
static void add_prefixes(tiny_vocab *vocab, const char *piece) {
    char prefix[TINY_MAX_PIECE_BYTES];
    for (size_t n = strlen(SPM_SPACE) + 1; n < strlen(piece); n++) {
        if ((piece[n] & 0xC0) == 0x80) continue; /* not inside a UTF-8 character */
        memcpy(prefix, piece, n);
        prefix[n] = '\0';
        tiny_vocab_add(vocab, prefix);
    }
}

void tiny_text_build(const char *text, tiny_vocab *vocab, tiny_text_chain *chain) {
    chain->n = 0;
    char piece[TINY_MAX_PIECE_BYTES];
    size_t pos = 0;
    while (text[pos] == ' ') pos++;
    for (;;) {
        piece[0] = '\0';
        if (!append_word(text, &pos, piece, sizeof piece)) break;
        while (in_chain(chain, tiny_vocab_find(vocab, piece)) && append_word(text, &pos, piece, sizeof piece)) {
        }
        int32_t id = tiny_vocab_add(vocab, piece);
        if (in_chain(chain, id)) fail("--text: its end repeats an earlier piece ('%s'); end it with a new word", piece);
        if (chain->n == TINY_TEXT_MAX_PIECES) fail("--text: more than %d pieces", TINY_TEXT_MAX_PIECES);
        if (chain->n == 0) add_prefixes(vocab, piece);
        chain->ids[chain->n++] = id;
    }
    if (chain->n < 2) fail("--text needs at least two words");
}

void tiny_text_add_embeddings(struct gguf_context *gguf, struct ggml_context *ctx, const model_options *opts,
                              const tiny_text_chain *chain, int n_vocab) {
    if (chain->n >= opts->n_embd) fail("--text has %d pieces: --n-embd must be above that", chain->n);
    float *e = new_values(gguf, ctx, "token_embd.weight", opts->n_embd, n_vocab, 1);
    memset(e, 0, sizeof *e * (size_t)opts->n_embd * (size_t)n_vocab);
    for (int k = 0; k < chain->n; k++) e[(size_t)chain->ids[k] * (size_t)opts->n_embd + (size_t)k] = 1.0f;
}

/* What follows piece k: the next piece, past the last the end of text; with --text-miss N every
 * Nth link (k = N-1, 2N-1, ...) skips a piece where there is one to skip. */
static int32_t next_of(const model_options *opts, const tiny_text_chain *chain, int k, int32_t eos) {
    int step = opts->text_miss > 0 && (k + 1) % opts->text_miss == 0 && k + 2 < chain->n ? 2 : 1;
    return k + step < chain->n ? chain->ids[k + step] : eos;
}

void tiny_text_add_output(struct gguf_context *gguf, struct ggml_context *ctx, const model_options *opts,
                          const tiny_text_chain *chain, int n_vocab, int32_t eos) {
    float *w = new_values(gguf, ctx, "output.weight", opts->n_embd, n_vocab, 1);
    memset(w, 0, sizeof *w * (size_t)opts->n_embd * (size_t)n_vocab);
    /* the final norm makes a unit vector sqrt(n_embd) long: the right token's logit is logit_scale */
    float v = (float)(opts->logit_scale / sqrt((double)opts->n_embd));
    for (int k = 0; k < chain->n; k++) w[(size_t)next_of(opts, chain, k, eos) * (size_t)opts->n_embd + (size_t)k] = v;
}
