/* flag_names.h - llama.cpp's command-line spellings of engine settings (-fa, -ctk/-ctv, -lm,
 * --draft-hold, -ngl, --pooling) read into specd.h's enums. Front ends read them (specd run, specd serve's and
 * JSON-RPC init's command line); the library takes the enums, so these are not part of its API.
 * Pure string functions: no engine, any thread. Each returns false, *out untouched, for anything
 * it does not know (NULL included). */
#ifndef SPECD_FLAG_NAMES_H
#define SPECD_FLAG_NAMES_H

#include "specd.h"

#include <stdbool.h>
#include <stdint.h>

/* llama.cpp's --load-mode values: "auto", "none", "mmap", "mlock", "mmap+mlock", "dio". */
bool specd_load_mode_parse(const char *name, specd_load_mode *out);
/* "auto", "on" or "off" (specd_draft_hold). */
bool specd_draft_hold_parse(const char *name, specd_draft_hold *out);
/* "on", "off" or "auto" (llama.cpp's --flash-attn values). */
bool specd_flash_attn_parse(const char *name, specd_flash_attn *out);
/* llama.cpp's --cache-type-k / -v names: "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl",
 * "q5_0", "q5_1" (specd_cache_type_name gives them back; test_flag_names checks both agree). */
bool specd_cache_type_parse(const char *name, specd_cache_type *out);
/* llama.cpp's -ngl values: an integer from -1, or "all" / "auto" (both -1: specd does not fit
 * layers to free memory as llama.cpp's "auto" does; a model too big for the devices fails to load,
 * naming llama.cpp's reason, and a smaller N fits). */
bool specd_gpu_layers_parse(const char *value, int32_t *out);
/* llama-server's --pooling values: "none", "mean", "cls", "last", "rank" (specd_pooling_name's). */
bool specd_pooling_parse(const char *name, specd_pooling *out);

#endif
