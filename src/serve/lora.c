/* lora.c - a list of adapter scales checked against the engine's adapters (lora.h). */
#include "lora.h"

#include <math.h>

bool serve_lora_scales(const serve_lora *list, int32_t n, int32_t n_adapters, const char *where, const char *field,
                       float *scales, serve_fault *fault) {
    for (int32_t i = 0; i < SPECD_MAX_LORA; i++) scales[i] = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        if (list[i].id < 0 || list[i].id >= n_adapters)
            return serve_fail(fault, SERVE_INVALID, field, "%s: %s[%d]: 'id' must be an adapter's index, 0 to %d (the "
                              "server loaded %d; GET /lora-adapters lists them)", where, field, i, n_adapters - 1,
                              n_adapters);
        if (!isfinite(list[i].scale))
            return serve_fail(fault, SERVE_INVALID, field, "%s: %s[%d]: 'scale' must be a finite number", where, field,
                              i);
        scales[list[i].id] = (float)list[i].scale;
    }
    return true;
}
