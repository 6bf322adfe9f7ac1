/* lora.h - llama-server's lists of LoRA adapter scales, [{id, scale}] (a request's `lora`, POST
 * /lora-adapters): adapters a list leaves out get scale 0, as in llama-server. */
#ifndef SPECD_SERVE_LORA_H
#define SPECD_SERVE_LORA_H

#include "fault.h"
#include "specd.h"

/* One entry of a list: adapter `id` at `scale`. */
typedef struct serve_lora {
    int64_t id;
    double scale;
} serve_lora;

/* list[0..n) into scales[0..n_adapters) (the rest 0). False with *fault set (SERVE_INVALID naming
 * `field`; messages begin with `where`) when an id is no adapter's or a scale is not finite. */
bool serve_lora_scales(const serve_lora *list, int32_t n, int32_t n_adapters, const char *where, const char *field,
                       float *scales, serve_fault *fault);

#endif
