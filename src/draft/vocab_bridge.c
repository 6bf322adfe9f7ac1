/* vocab_bridge.c - see vocab_bridge.h. Text is kept with its length, never NUL-terminated: a byte
 * token may be 0x00. */
#include "vocab_bridge.h"

#include "../util/util.h"

#include <stdlib.h>
#include <string.h>

/* How far back the window looks for a word start among the target's tokens: a word longer than
 * this many tokens is rare, and a step without a window only drafts nothing. */
#define WINDOW_MAX 16

/* Tokens with where each one's text ends in a text (offsets grow with the tokens). */
typedef struct token_run {
    specd_token *tok;
    int32_t *end;
    int32_t n, cap;
} token_run;

typedef struct byte_run {
    char *bytes;
    int32_t n, cap;
} byte_run;

struct specd_vocab_bridge {
    const specd_engine *e;
    bool target_prefixes, draft_prefixes; /* the tokenizer puts a space before a text (SentencePiece) */
    token_run target;   /* the target's history followed, its text ending at each token */
    byte_run text;      /* the target's history as text */
    token_run draft;    /* the draft's tokens of text[0..ready), its BOS (if any) first */
    int32_t ready;      /* the text the draft holds: up to an incomplete UTF-8 sequence */
    int32_t n_bos;      /* 1 when the draft's tokens start with its BOS */
    int32_t window;     /* the conversion's window: target tokens [window, target.n) */
    byte_run work;      /* the window's text, then the draft's text being converted */
    int32_t window_len; /* the window's text in work */
    byte_run drafted;   /* the draft's text of this step: first the held-back bytes, when it lines up */
    token_run scratch;  /* tokenizer output */
    double ms;
};

static bool reserve_tokens(token_run *r, int32_t need) {
    if (need <= r->cap) return true;
    int32_t cap = r->cap ? r->cap : 64;
    while (cap < need) cap *= 2;
    specd_token *tok = specd_grow_array(r->tok, (size_t)cap, sizeof *tok);
    if (tok) r->tok = tok;
    int32_t *end = tok ? specd_grow_array(r->end, (size_t)cap, sizeof *end) : NULL;
    if (end) r->end = end;
    if (!tok || !end) return false;
    r->cap = cap;
    return true;
}

static bool reserve_bytes(byte_run *r, int32_t need) {
    if (need <= r->cap) return true;
    int32_t cap = r->cap ? r->cap : 256;
    while (cap < need) cap *= 2;
    char *grown = specd_grow_array(r->bytes, (size_t)cap, 1);
    if (!grown) return false;
    r->bytes = grown, r->cap = cap;
    return true;
}

static bool append_bytes(byte_run *r, const char *bytes, int32_t n) {
    if (!reserve_bytes(r, r->n + n)) return false;
    if (n > 0) memcpy(r->bytes + r->n, bytes, (size_t)n);
    r->n += n;
    return true;
}

/* Appends the text of `token` in `side`'s vocabulary. */
static bool append_piece(const specd_engine *e, specd_vocab_side side, specd_token token, byte_run *r) {
    char small[64];
    int32_t n = specd_vocab_piece(e, side, token, small, (int32_t)sizeof small);
    if (n >= 0) return append_bytes(r, small, n);
    int32_t need = -n;
    if (!reserve_bytes(r, r->n + need)) return false; /* room first, then the piece in place */
    n = specd_vocab_piece(e, side, token, r->bytes + r->n, need);
    r->n += n > 0 ? n : 0;
    return true;
}

int32_t specd_utf8_whole(const char *text, int32_t len) {
    /* the last lead byte among the last three: its sequence is whole when all its bytes are there */
    for (int32_t i = len - 1; i >= 0 && i >= len - 3; i--) {
        unsigned char c = (unsigned char)text[i];
        if ((c & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
        int32_t need = c >= 0xF0 && c <= 0xF7 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (c >= 0xF8) need = 1; /* never a lead byte */
        return len - i >= need ? len : i;
    }
    return len;
}

/* Whether the side's tokenizer puts a space before a text: "a" comes back as " a". */
static bool prefixes_space(const specd_engine *e, specd_vocab_side side) {
    specd_token tok[8];
    int32_t n = specd_vocab_tokenize(e, side, "a", 1, tok, 8);
    char piece[16];
    int32_t len = n > 0 ? specd_vocab_piece(e, side, tok[0], piece, (int32_t)sizeof piece) : 0;
    return len > 0 && piece[0] == ' ';
}

specd_vocab_bridge *specd_vocab_bridge_new(const specd_engine *e) {
    specd_vocab_bridge *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->e = e;
    b->target_prefixes = prefixes_space(e, SPECD_VOCAB_TARGET);
    b->draft_prefixes = prefixes_space(e, SPECD_VOCAB_DRAFT);
    specd_token bos = specd_vocab_added_bos(e, SPECD_VOCAB_DRAFT);
    if (!reserve_tokens(&b->draft, 1)) {
        specd_vocab_bridge_free(b);
        return NULL;
    }
    if (bos >= 0) b->draft.tok[0] = bos, b->draft.end[0] = 0, b->n_bos = b->draft.n = 1;
    return b;
}

static void free_run(token_run *r) {
    free(r->tok);
    free(r->end);
}

void specd_vocab_bridge_free(specd_vocab_bridge *b) {
    if (!b) return;
    free_run(&b->target);
    free_run(&b->draft);
    free_run(&b->scratch);
    free(b->text.bytes);
    free(b->work.bytes);
    free(b->drafted.bytes);
    free(b);
}

double specd_vocab_bridge_ms(const specd_vocab_bridge *b) { return b ? b->ms : 0.0; }

/* text[0..len) in `side`'s vocabulary into b->scratch, each token's end an offset into the text. A
 * tokenizer that puts a space before a text gets the text without its leading space, so that the
 * tokens' text is the text itself; a text without one gets it anyway, and the offsets are shifted
 * back by it. */
static bool tokenize(specd_vocab_bridge *b, specd_vocab_side side, const char *text, int32_t len) {
    bool prefixes = side == SPECD_VOCAB_TARGET ? b->target_prefixes : b->draft_prefixes;
    int32_t skip = prefixes && len > 0 && text[0] == ' ' ? 1 : 0;
    int32_t shift = prefixes && !skip ? 1 : 0;
    b->scratch.n = 0;
    if (len - skip <= 0) return true;
    if (!reserve_tokens(&b->scratch, len + 2)) return false;
    int32_t n = specd_vocab_tokenize(b->e, side, text + skip, len - skip, b->scratch.tok, b->scratch.cap);
    if (n < 0 && reserve_tokens(&b->scratch, -n))
        n = specd_vocab_tokenize(b->e, side, text + skip, len - skip, b->scratch.tok, b->scratch.cap);
    if (n < 0) return false;
    int32_t at = 0;
    for (int32_t i = 0; i < n; i++) { /* offsets from the pieces' lengths, within the text */
        char piece[64];
        int32_t k = specd_vocab_piece(b->e, side, b->scratch.tok[i], piece, (int32_t)sizeof piece);
        at += k < 0 ? -k : k;
        int32_t end = at - shift;
        b->scratch.end[i] = end < 0 ? 0 : end > len ? len : end;
    }
    b->scratch.n = n;
    return true;
}

/* The target's history followed: what stays of it, then the text of its new tokens. Returns the
 * length of the text that did not change. */
static int32_t follow_target(specd_vocab_bridge *b, const specd_token *history, int32_t n, bool *ok) {
    token_run *t = &b->target;
    int32_t same = 0;
    while (same < t->n && same < n && t->tok[same] == history[same]) same++;
    t->n = same;
    b->text.n = same ? t->end[same - 1] : 0;
    int32_t unchanged = b->text.n;
    *ok = reserve_tokens(t, n);
    for (int32_t i = same; *ok && i < n; i++) {
        *ok = append_piece(b->e, SPECD_VOCAB_TARGET, history[i], &b->text);
        t->tok[i] = history[i], t->end[i] = b->text.n;
    }
    t->n = *ok ? n : same;
    return unchanged;
}

/* How many of the draft's tokens stay: those before the last word start that comes before both the
 * change and the held-back bytes (a word touching the change may tokenize otherwise now). */
static int32_t draft_kept(const specd_vocab_bridge *b, int32_t limit) {
    const token_run *d = &b->draft;
    for (int32_t k = d->n; k > b->n_bos; k--) {
        int32_t start = d->end[k - 1];
        if (start < limit && start < b->text.n && b->text.bytes[start] == ' ') return k;
    }
    return b->n_bos;
}

specd_status specd_vocab_bridge_follow(specd_vocab_bridge *b, const specd_token *history, int32_t n,
                                       const specd_token **draft, int32_t *n_draft, char **error) {
    double t0 = specd_now_ms();
    bool ok = true;
    int32_t unchanged = follow_target(b, history, n, &ok);
    int32_t ready = ok ? specd_utf8_whole(b->text.bytes, b->text.n) : 0;
    int32_t limit = unchanged < b->ready ? unchanged : b->ready;
    if (ready < limit) limit = ready;
    int32_t keep = draft_kept(b, limit);
    int32_t from = keep > b->n_bos ? b->draft.end[keep - 1] : 0;
    ok = ok && tokenize(b, SPECD_VOCAB_DRAFT, b->text.bytes + from, ready - from) &&
         reserve_tokens(&b->draft, keep + b->scratch.n);
    if (!ok) {
        specd_set_error(error, "out of memory converting %d tokens of the target into the draft's vocabulary", n);
        return SPECD_ERR_NO_MEMORY;
    }
    for (int32_t i = 0; i < b->scratch.n; i++) {
        b->draft.tok[keep + i] = b->scratch.tok[i];
        b->draft.end[keep + i] = from + b->scratch.end[i];
    }
    b->draft.n = keep + b->scratch.n;
    b->ready = ready;
    *draft = b->draft.tok;
    *n_draft = b->draft.n;
    b->ms += specd_now_ms() - t0;
    return SPECD_OK;
}

/* The target token where the window starts: the last word start among the last WINDOW_MAX tokens;
 * without one, the root alone where the target's tokenizer puts no space before a text (its
 * tokens need not start words), else -1. */
static int32_t window_start(const specd_vocab_bridge *b) {
    const token_run *t = &b->target;
    for (int32_t i = t->n - 1; i >= 0 && i >= t->n - WINDOW_MAX; i--) {
        int32_t start = i ? t->end[i - 1] : 0;
        if (t->end[i] > start && b->text.bytes[start] == ' ') return i;
    }
    return !b->target_prefixes && t->n > 0 ? t->n - 1 : -1;
}

bool specd_vocab_bridge_begin(specd_vocab_bridge *b) {
    b->window = window_start(b);
    b->work.n = b->drafted.n = 0;
    if (b->window < 0) return false;
    int32_t start = b->window ? b->target.end[b->window - 1] : 0;
    b->window_len = b->text.n - start;
    return true;
}

/* The window's text and the draft's (less the held-back bytes, cut to whole characters) in the
 * target's vocabulary: *lined_up when the window's own tokens come first, unchanged. False: out
 * of memory. */
static bool convert(specd_vocab_bridge *b, const specd_token **targets, int32_t *n_targets, bool *lined_up) {
    int32_t held = b->text.n - b->ready;
    int32_t len = specd_utf8_whole(b->drafted.bytes + held, b->drafted.n - held);
    int32_t start = b->text.n - b->window_len;
    b->work.n = 0;
    if (!append_bytes(&b->work, b->text.bytes + start, b->window_len) ||
        !append_bytes(&b->work, b->drafted.bytes + held, len) ||
        !tokenize(b, SPECD_VOCAB_TARGET, b->work.bytes, b->work.n))
        return false;
    int32_t m = b->target.n - b->window;
    *lined_up = b->scratch.n >= m &&
                memcmp(b->scratch.tok, b->target.tok + b->window, (size_t)m * sizeof *b->scratch.tok) == 0;
    if (*lined_up) *targets = b->scratch.tok + m, *n_targets = b->scratch.n - m;
    return true;
}

specd_status specd_vocab_bridge_add(specd_vocab_bridge *b, specd_token draft_token, const specd_token **targets,
                                    int32_t *n_targets, bool *lined_up, char **error) {
    double t0 = specd_now_ms();
    *n_targets = 0;
    *targets = NULL;
    bool ok = append_piece(b->e, SPECD_VOCAB_DRAFT, draft_token, &b->drafted);
    /* The draft's text begins where its history ends, before the bytes held back from it: it must
     * begin with them (completing the character), or it goes elsewhere than the target did. */
    int32_t held = b->text.n - b->ready, n = b->drafted.n < held ? b->drafted.n : held;
    *lined_up = ok && (n == 0 || memcmp(b->drafted.bytes, b->text.bytes + b->ready, (size_t)n) == 0);
    if (*lined_up && b->drafted.n > held) ok = convert(b, targets, n_targets, lined_up);
    b->ms += specd_now_ms() - t0;
    if (ok) return SPECD_OK;
    *lined_up = false;
    *n_targets = 0;
    specd_set_error(error, "out of memory converting a draft into the target's vocabulary");
    return SPECD_ERR_NO_MEMORY;
}
