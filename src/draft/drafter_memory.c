/* drafter_memory.c - creating and freeing the engine's drafter memory (see .h). */
#include "drafter_memory.h"

#include "../engine/engine_internal.h"
#include "../util/util.h"

#include <stdlib.h>

specd_drafter_memory *specd_drafter_memory_get(struct specd_engine *e, char **error) {
    if (e->drafter_memory) return e->drafter_memory;
    specd_drafter_memory *m = calloc(1, sizeof *m);
    if (!m) {
        specd_set_error(error, "out of memory for the drafters' state");
        return NULL;
    }
    for (int i = 0; i < SPECD_N_SPEC_TYPES; i++) specd_draft_length_init(&m->calibration[i]);
    e->drafter_memory = m;
    return m;
}

void specd_drafter_memory_free(specd_drafter_memory *m) {
    if (!m) return;
    free(m);
}
