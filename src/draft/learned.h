/* learned.h - what an engine learns across requests: the cost model (costs.h) with the file that
 * keeps it between processes (calibrate.h), the draft model's acceptance (acceptance.h), the rate a
 * ms is worth and the check of the planned lengths against fixed ones (length_policy.h), when a
 * draft is forced to test them (exploration.h), whether rounds of several slots draft at all
 * (round_gate.h), and the drafters' memory (drafter_memory.h).
 *
 * The engine owns it but does not know what is in it: it holds an opaque pointer and the function
 * that frees it, both set here on first use. So the engine layer stays below the drafters, and a
 * new kind of learned state never touches the engine. */
#ifndef SPECD_LEARNED_H
#define SPECD_LEARNED_H

#include "../engine/engine.h"
#include "acceptance.h"
#include "calibrate.h"
#include "costs.h"
#include "exploration.h"
#include "length_policy.h"
#include "round_gate.h"

#include "drafter_memory.h"

typedef struct specd_learned {
    specd_costs costs;                           /* pass and draft costs, all requests */
    specd_calibration_state calibration;         /* the file that keeps `costs` */
    specd_acceptance acceptance;                 /* the draft model's, all requests */
    specd_length_policy policy;                  /* the rate, and fixed lengths against the planner */
    specd_exploration exploration;               /* when a draft is forced, all requests */
    specd_round_gate gate;                       /* whether rounds of several slots draft */
    specd_drafter_memory *drafter_memory;        /* NULL until a model-free drafter runs */
} specd_learned;

/* The engine's learned state, created on the first call (which also reads the calibration cache
 * file named by the engine's params); NULL, with *error set, when out of memory. */
specd_learned *specd_learned_get(specd_engine *engine, char **error);
/* The drafters' memory, created on first use; NULL (with *error set) when out of memory. */
specd_drafter_memory *specd_learned_drafter_memory(specd_engine *engine, char **error);
/* After a generation: the calibration cache file is written when the costs learnt something
 * (calibrate.h); nothing before the engine has learnt anything. */
void specd_learned_save(specd_engine *engine);

#endif
