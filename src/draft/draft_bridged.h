/* draft_bridged.h - drafting with a draft model of another vocabulary, through text
 * (vocab_bridge.h): chains of the draft's greedy tokens, proposed as the target's tokens of their
 * text with a one-hot q, so verification is unchanged and exact at every temperature. */
#ifndef SPECD_DRAFT_BRIDGED_H
#define SPECD_DRAFT_BRIDGED_H

#include "../engine/engine.h"
#include "drafter.h"

/* The engine's draft model must tokenize text its own way (specd_engine_draft_vocab_differs).
 * Owned by the caller; free with ops->destroy. */
specd_status specd_draft_bridged_new(specd_engine *engine, specd_drafter *out, char **error);

#endif
