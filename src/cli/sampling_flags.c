/* sampling_flags.c - llama.cpp's sampling flags (--temp, --top-k, ...), read the same way by
 * `specd run` (its request) and `specd serve` (what a request that sets none samples with, as
 * llama-server's). Ranges are the library's (specd_generation_params_validate). */
#include "cli.h"

#include <math.h>
#include <string.h>

int cli_sampling_flag(cli_args *a, const char *f, specd_sampling_params *s) {
    int64_t i = 0;
    double d = 0.0;
    bool ok = true;
    if (!strcmp(f, "--temp")) { ok = cli_float(a, f, -HUGE_VAL, HUGE_VAL, &d); s->temperature = (float)d; }
    else if (!strcmp(f, "--top-k")) { ok = cli_int(a, f, INT32_MIN, INT32_MAX, &i); s->top_k = (int32_t)i; }
    else if (!strcmp(f, "--top-p")) { ok = cli_float(a, f, -HUGE_VAL, HUGE_VAL, &d); s->top_p = (float)d; }
    else if (!strcmp(f, "--min-p")) { ok = cli_float(a, f, -HUGE_VAL, HUGE_VAL, &d); s->min_p = (float)d; }
    else if (!strcmp(f, "--typical")) { ok = cli_float(a, f, -HUGE_VAL, HUGE_VAL, &d); s->typical_p = (float)d; }
    else if (!strcmp(f, "--repeat-penalty")) { ok = cli_float(a, f, -HUGE_VAL, HUGE_VAL, &d); s->repeat_penalty = (float)d; }
    else if (!strcmp(f, "--repeat-last-n")) { ok = cli_int(a, f, INT32_MIN, INT32_MAX, &i); s->repeat_last_n = (int32_t)i; }
    else if (!strcmp(f, "--presence-penalty")) { ok = cli_float(a, f, -HUGE_VAL, HUGE_VAL, &d); s->presence_penalty = (float)d; }
    else if (!strcmp(f, "--frequency-penalty")) { ok = cli_float(a, f, -HUGE_VAL, HUGE_VAL, &d); s->frequency_penalty = (float)d; }
    else if (!strcmp(f, "-s") || !strcmp(f, "--seed")) { /* -1: from the clock (llama.cpp's default) */
        ok = cli_int(a, f, -1, INT64_MAX, &i);
        s->seed = i < 0 ? SPECD_SEED_RANDOM : (uint64_t)i;
    }
    else return 0;
    return ok ? 1 : -1;
}
