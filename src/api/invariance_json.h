/* invariance_json.h - whether an engine's verification is batch-invariant, as status, /props and
 * specd run --json show it. */
#ifndef SPECD_API_INVARIANCE_JSON_H
#define SPECD_API_INVARIANCE_JSON_H

#include "api.h"

/* {invariant, requested, setting, note} (specd_engine_invariance). New reference. */
json_t *api_invariance_json(const specd_engine *engine);

#endif
