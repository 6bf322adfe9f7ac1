/* flag_names.c - llama.cpp's spellings of engine settings (flag_names.h). The tables are in the
 * enums' order where the enum counts from 0, so a name's index is its value. */
#include "flag_names.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The index of `name` in `names` (n of them), or -1. */
static int index_of(const char *name, const char *const *names, size_t n) {
    for (size_t i = 0; name && i < n; i++)
        if (!strcmp(name, names[i])) return (int)i;
    return -1;
}

#define LOOKUP(name, names) index_of(name, names, sizeof names / sizeof *names)

bool specd_load_mode_parse(const char *name, specd_load_mode *out) {
    static const char *const names[] = {"auto", "none", "mmap", "mlock", "mmap+mlock", "dio"};
    int i = LOOKUP(name, names);
    if (i >= 0) *out = (specd_load_mode)i;
    return i >= 0;
}

bool specd_draft_hold_parse(const char *name, specd_draft_hold *out) {
    static const char *const names[] = {"auto", "on", "off"};
    int i = LOOKUP(name, names);
    if (i >= 0) *out = (specd_draft_hold)i;
    return i >= 0;
}

bool specd_flash_attn_parse(const char *name, specd_flash_attn *out) {
    static const char *const names[] = {"off", "on", "auto"}; /* DEFAULT has no flag spelling */
    int i = LOOKUP(name, names);
    if (i >= 0) *out = (specd_flash_attn)i;
    return i >= 0;
}

bool specd_cache_type_parse(const char *name, specd_cache_type *out) {
    /* from SPECD_CACHE_TYPE_F16 (1) on; DEFAULT (0) has no flag spelling */
    static const char *const names[] = {"f16", "f32", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"};
    int i = LOOKUP(name, names);
    if (i >= 0) *out = (specd_cache_type)(i + 1);
    return i >= 0;
}

bool specd_gpu_layers_parse(const char *value, int32_t *out) {
    if (!value || !*value) return false;
    if (!strcmp(value, "all") || !strcmp(value, "auto")) {
        *out = -1;
        return true;
    }
    char *end = NULL;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (errno || *end || v < -1 || v > 100000) return false;
    *out = (int32_t)v;
    return true;
}

/* Its own table as the others here: util/ is below the engine, whose specd_pooling_name it may
 * not call (test_flag_names checks that every name reads back into the value that name gives). */
bool specd_pooling_parse(const char *name, specd_pooling *out) {
    static const char *const names[] = {"none", "mean", "cls", "last", "rank"}; /* specd_pooling's order */
    int i = LOOKUP(name, names);
    if (i >= 0) *out = (specd_pooling)i;
    return i >= 0;
}
