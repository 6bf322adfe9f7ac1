/* calibrate.h - measuring what speculation costs with these models on this machine. */
#ifndef SPECD_CALIBRATE_H
#define SPECD_CALIBRATE_H

#include "../engine/engine_internal.h"

/* Times one target pass for every batch size 1..max_tokens not measured yet, and one draft
 * token, into engine->costs. Clears both KV caches (the prompt cache starts over). Runs before
 * the first speculative generation of an engine and when a request drafts longer than any before;
 * on the benchmark pair it takes about half a second (nine sizes). */
specd_status specd_calibrate_costs(specd_engine *engine, int32_t max_tokens, char **error);

#endif
