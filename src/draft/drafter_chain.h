/* drafter_chain.h - several drafters behind the one drafter interface. Each step every model-free
 * drafter proposes (they cost microseconds), each proposal is valued by its expected tokens per
 * millisecond (calibrated acceptance of that drafter at each token's confidence, against the
 * measured cost of verifying it), and the best one is verified: or the draft model when its recent
 * yield promises more, or nothing when no draft is expected to pay for its verification. */
#ifndef SPECD_DRAFTER_CHAIN_H
#define SPECD_DRAFTER_CHAIN_H

#include "../engine/engine.h"
#include "drafter.h"

/* Does this request need the chain (a list, or a model-free type) rather than the plain loop? */
bool specd_drafter_chain_wanted(const specd_spec_params *sp);
/* Checks the listed types: known, not repeated, a draft model present when DRAFT is listed. */
specd_status specd_drafter_chain_validate(const specd_engine *engine, const specd_spec_params *sp,
                                          char **error);
/* Builds the chain for one generation; per-drafter statistics go to stats->drafters. Owned by the
 * caller (ops->destroy). */
specd_status specd_drafter_chain_new(specd_engine *engine, const specd_spec_params *sp, specd_stats *stats,
                                     specd_drafter *out, char **error);

#endif
