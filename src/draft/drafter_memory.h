/* drafter_memory.h - what the drafters keep across requests, owned by the engine: per-drafter
 * acceptance calibration (so a chain knows from the first step which drafter to trust) and the
 * draft model's recent yield. Created on first use, bounded in size, freed with the engine. */
#ifndef SPECD_DRAFTER_MEMORY_H
#define SPECD_DRAFTER_MEMORY_H

#include "../session/draft_length.h"
#include "specd.h"

#define SPECD_N_SPEC_TYPES (SPECD_SPEC_SUFFIX + 1)

typedef struct specd_drafter_memory {
    /* Acceptance by confidence, per drafter type (only the calibration half of the struct). */
    specd_draft_length calibration[SPECD_N_SPEC_TYPES];
    /* The draft model's moving averages per call: tokens drafted, accepted, and ms spent. */
    double model_drafted, model_accepted, model_ms;
    bool model_seen;
} specd_drafter_memory;

struct specd_engine;

/* The engine's memory, created on first use; NULL (with *error set) when out of memory. */
specd_drafter_memory *specd_drafter_memory_get(struct specd_engine *engine, char **error);
void specd_drafter_memory_free(specd_drafter_memory *memory);

#endif
