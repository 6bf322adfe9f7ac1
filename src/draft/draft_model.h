/* draft_model.h - drafting chains with a small draft model through llama.cpp. */
#ifndef SPECD_DRAFT_MODEL_H
#define SPECD_DRAFT_MODEL_H

#include "../engine/engine.h"
#include "drafter.h"

/* A drafter that runs the engine's draft model: chains, or trees (draft_tree.h); its ops join the
 * draft decodes of several slots (draft_joint) and the loop's length policy plans its lengths
 * (plans_length). Owned by the caller; free with ops->destroy. */
specd_status specd_draft_model_new(specd_engine *engine, specd_drafter *out, char **error);

#endif
