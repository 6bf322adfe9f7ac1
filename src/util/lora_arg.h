/* lora_arg.h - the values of llama.cpp's adapter flags, shared by `specd run` and init's
 * arguments (so `specd serve`): --lora FILE[,FILE...] and --lora-scaled FILE:SCALE[,FILE:SCALE...]
 * as llama.cpp takes them now, and --lora-scaled FILE SCALE, its older two-argument form. Compiled
 * into libspecd-rpc, which the specd program links. */
#ifndef SPECD_UTIL_LORA_ARG_H
#define SPECD_UTIL_LORA_ARG_H

#include "specd.h"

#include <stdbool.h>
#include <stddef.h>

/* Whether a --lora-scaled value is llama.cpp's FILE:SCALE list (an item of it, up to a comma, ends
 * in ':' and a number); false: the two-argument form, the scale is the next argument. */
bool lora_arg_is_scaled_list(const char *value);

/* Splits `value` in place (commas and the ':' before each scale become NUL) and appends its
 * adapters to list[*n], at most SPECD_MAX_LORA in all; scaled: each item is FILE:SCALE, else a
 * FILE at scale 1. The paths point into value. False with `why` set (naming `flag`) for an empty
 * file, a bad scale or too many adapters. */
bool lora_arg_split(const char *flag, char *value, bool scaled, specd_lora_adapter *list, int32_t *n, char *why,
                    size_t why_size);

/* A scale's text: a finite number and nothing else. */
bool lora_arg_scale(const char *text, float *out);

#endif
