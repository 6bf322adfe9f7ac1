/* learned.c - creating and freeing an engine's learned state (see learned.h). */
#include "learned.h"

#include "../util/util.h"
#include "drafter_memory.h"

#include <stdlib.h>

static void free_learned(struct specd_learned *l) {
    if (!l) return;
    specd_drafter_memory_free(l->drafter_memory);
    specd_calibration_close(&l->calibration);
    free(l);
}

specd_learned *specd_learned_get(specd_engine *e, char **error) {
    if (e->learned) return e->learned;
    specd_learned *l = calloc(1, sizeof *l);
    if (!l) {
        specd_set_error(error, "out of memory for the engine's learned state");
        return NULL;
    }
    specd_draft_length_init(&l->costs);
    e->learned = l;
    e->free_learned = free_learned;
    specd_calibration_open(e); /* the costs an earlier process measured, when the file fits */
    return l;
}
