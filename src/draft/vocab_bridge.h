/* vocab_bridge.h - the bookkeeping between two vocabularies, for a draft model that tokenizes text
 * its own way (universal assisted generation): the target's history becomes text and the draft's
 * own tokens of that text; the draft's tokens become text and the target's tokens of it.
 *
 * The draft's history is the target's text re-tokenized: each step only its changed tail, from the
 * last word start before the change (a tokenizer may merge a word's pieces differently once the
 * word grows), so the draft's KV cache keeps everything before. A draft is converted with the
 * target's last tokens from a word start before it (the window): the window's text plus the
 * draft's text is tokenized again, and only what follows the window's own tokens, unchanged, is a
 * proposal. Boundaries: an incomplete UTF-8 sequence at the end of the target's text is held back
 * from the draft (its draft must begin by completing it), and one at the end of a draft is cut;
 * the caller keeps the last target token back until more draft text follows it (the draft's text
 * may only partly cover it: " hap" before "py").
 *
 * Nothing here decides the output: the target verifies every proposal, so a poor conversion
 * costs acceptance, never exactness. */
#ifndef SPECD_VOCAB_BRIDGE_H
#define SPECD_VOCAB_BRIDGE_H

#include "../engine/engine.h"

typedef struct specd_vocab_bridge specd_vocab_bridge;

/* For the engine's two vocabularies (specd_engine_draft_vocab_differs); NULL when out of memory. */
specd_vocab_bridge *specd_vocab_bridge_new(const specd_engine *e);
void specd_vocab_bridge_free(specd_vocab_bridge *b);

/* Follows the target's history[0..n) (the root last): *draft, *n_draft are the draft's own tokens
 * for its text (the bridge's; valid until the next call). */
specd_status specd_vocab_bridge_follow(specd_vocab_bridge *b, const specd_token *history, int32_t n,
                                       const specd_token **draft, int32_t *n_draft, char **error);

/* Starts converting a draft that continues the history last followed; false when none can be (no
 * word start among the target's last tokens where its tokenizer needs one). */
bool specd_vocab_bridge_begin(specd_vocab_bridge *b);

/* Adds one draft token (not an end-of-generation one) to the draft being converted: *targets,
 * *n_targets are then the target's tokens for all its text so far after the history (the bridge's;
 * the last may still change as text follows). *lined_up false: the text no longer lines up with
 * the history's tokens, and nothing more can be proposed this step (*n_targets 0). An error only
 * when out of memory. */
specd_status specd_vocab_bridge_add(specd_vocab_bridge *b, specd_token draft_token, const specd_token **targets,
                                    int32_t *n_targets, bool *lined_up, char **error);

/* The number of bytes of text[0..len) that end on a whole UTF-8 character: an incomplete sequence
 * at its end is left out (bytes that can never start or complete one are whole: they stay). */
int32_t specd_utf8_whole(const char *text, int32_t len);

/* Time spent converting (tokenizing, detokenizing), ms, since the bridge was made. */
double specd_vocab_bridge_ms(const specd_vocab_bridge *b);

#endif
