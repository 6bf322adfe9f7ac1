/* spec_types.h - which drafters a request's speculative params name, AUTO resolved: the one rule
 * the drafter chain, the decoding loop and the public specd_generation_drafters share. */
#ifndef SPECD_SPEC_TYPES_H
#define SPECD_SPEC_TYPES_H

#include "specd.h"

/* What AUTO means on this engine: DRAFT with a draft model, the head's type with a drafting head
 * (mtp, eagle3, dflash, dspark), else NONE. */
specd_spec_type specd_spec_auto_type(const specd_engine *engine);
/* The drafters sp names, in order: its list without "none" entries, or its one type with AUTO
 * = auto_type. Returns how many (0..SPECD_SPEC_MAX_TYPES). */
int32_t specd_spec_resolve_types(const specd_spec_params *sp, specd_spec_type auto_type,
                                 specd_spec_type out[SPECD_SPEC_MAX_TYPES]);
/* Whether the type runs a drafting head (the engine's). */
bool specd_spec_type_is_head(specd_spec_type type);

#endif
