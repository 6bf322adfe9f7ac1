/* begin.h - the server's way into a session (serve/scheduler.c): a request the server has already
 * validated (serve/prepare.c called specd_generation_params_validate to answer 400 before a stream
 * began) is not validated again, so a request's parameters are checked once from route to sampler.
 * What needs the engine (the prompt, the drafters, the context shift, the adapters) is still checked
 * here: it is the engine's state at the moment the session begins. */
#ifndef SPECD_SESSION_BEGIN_H
#define SPECD_SESSION_BEGIN_H

#include "specd.h"

/* specd_session_begin_in_slot for parameters that specd_generation_params_validate accepted
 * (the caller's promise); everything else as there. */
specd_status session_begin_validated(specd_engine *engine, int32_t slot, const specd_token *prompt, int32_t n_prompt,
                                     const specd_generation_params *params, specd_session **out, char **error);

#endif
