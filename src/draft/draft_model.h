/* draft_model.h - drafting chains with a small draft model through llama.cpp. */
#ifndef SPECD_DRAFT_MODEL_H
#define SPECD_DRAFT_MODEL_H

#include "../engine/engine.h"
#include "drafter.h"

/* A drafter that runs the engine's draft model. Owned by the caller; free with ops->destroy. */
specd_status specd_draft_model_new(specd_engine *engine, specd_drafter *out, char **error);

/* Whether the drafter is the draft model alone (not a list). */
bool specd_draft_model_is(const specd_drafter *d);

/* Draft chains for n requests in n different slots (drafters[i], all draft-model drafters, without
 * grammars), their draft decodes joined: one llama_decode per depth for every chain still growing,
 * instead of one per chain and depth. Each chain is what its drafter would draft alone. `costs`
 * (may be NULL) learns a draft token's cost from the joint decodes. status[i] and errors[i] (NULL
 * or a message; both arrays of n) say how chain i went. */
void specd_draft_model_draft_joint(specd_engine *e, specd_drafter *const *drafters, const int32_t *slots,
                                   const specd_draft_request *reqs, specd_token_tree *const *trees, int32_t n,
                                   specd_costs *costs, specd_status *status, char **errors);

#endif
