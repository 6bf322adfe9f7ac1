/* lora_arg.c - llama.cpp's --lora and --lora-scaled values (lora_arg.h). */
#include "lora_arg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool lora_arg_scale(const char *text, float *out) {
    char *end = NULL;
    float v = strtof(text, &end);
    if (end == text || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* Whether text[0..len) is a scale (lora_arg_scale). */
static bool is_scale(const char *text, size_t len) {
    char copy[64];
    float scale;
    if (len >= sizeof copy) return false;
    memcpy(copy, text, len);
    copy[len] = '\0';
    return lora_arg_scale(copy, &scale);
}

bool lora_arg_is_scaled_list(const char *value) {
    for (const char *item = value;;) {
        size_t len = strcspn(item, ",");
        const char *colon = NULL; /* the item's last ':' */
        for (size_t i = 0; i < len; i++)
            if (item[i] == ':') colon = item + i;
        if (colon && is_scale(colon + 1, len - (size_t)(colon + 1 - item)))
            return true; /* one FILE:SCALE item: a list, whose other items must be so too */
        if (!item[len]) return false;
        item += len + 1;
    }
}

bool lora_arg_split(const char *flag, char *value, bool scaled, specd_lora_adapter *list, int32_t *n, char *why,
                    size_t why_size) {
    for (char *item = value, *next; item; item = next) {
        next = strchr(item, ',');
        if (next) *next++ = '\0';
        float scale = 1.0f;
        char *colon = scaled ? strrchr(item, ':') : NULL;
        if (scaled && (!colon || !lora_arg_scale(colon + 1, &scale))) {
            snprintf(why, why_size, "%s: '%s' is not FILE:SCALE (a number after the last ':')", flag, item);
            return false;
        }
        if (colon) *colon = '\0';
        if (!*item) {
            snprintf(why, why_size, "%s: an empty file name", flag);
            return false;
        }
        if (*n == SPECD_MAX_LORA) {
            snprintf(why, why_size, "%s: at most %d adapters", flag, SPECD_MAX_LORA);
            return false;
        }
        list[(*n)++] = (specd_lora_adapter){item, scale};
    }
    return true;
}
