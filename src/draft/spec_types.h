/* spec_types.h - which drafters a request's speculative params name, AUTO resolved: the one rule
 * the drafter chain, the decoding loop and the public specd_generation_drafters share. */
#ifndef SPECD_SPEC_TYPES_H
#define SPECD_SPEC_TYPES_H

#include "specd.h"

/* The drafters sp names, in order: its list without "none" entries, or its one type with AUTO
 * = DRAFT when there is a draft model, else none. Returns how many (0..SPECD_SPEC_MAX_TYPES). */
int32_t specd_spec_resolve_types(const specd_spec_params *sp, bool has_draft,
                                 specd_spec_type out[SPECD_SPEC_MAX_TYPES]);

#endif
