/* params.c - strict readers for JSON-RPC params: right type, in range, no unknown fields, and an
 * error that names the field and says what it expects. */
#include "api.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

void api_params_open(api_params *p, json_t *obj, const char *where, const char *prefix, api_error *err) {
    memset(p, 0, sizeof *p);
    p->obj = obj;
    p->where = where;
    p->prefix = prefix ? prefix : "";
    p->err = err;
}

const char *api_field_name(const api_params *p, const char *name, char *buf, size_t size) {
    snprintf(buf, size, "%s%s", p->prefix, name);
    return buf;
}

json_t *api_get_value(api_params *p, const char *name) {
    if (p->n_seen < API_MAX_FIELDS) p->seen[p->n_seen++] = name;
    json_t *v = p->obj ? json_object_get(p->obj, name) : NULL;
    return p->null_is_absent && json_is_null(v) ? NULL : v;
}

static int type_error(api_params *p, const char *name, const char *expected) {
    char field[160];
    api_field_name(p, name, field, sizeof field);
    api_fail(p->err, API_INVALID_PARAMS, field, "%s: '%s' must be %s", p->where, field, expected);
    return -1;
}

int api_get_int(api_params *p, const char *name, int64_t min, int64_t max, int64_t *out) {
    json_t *v = api_get_value(p, name);
    if (!v) return 0;
    char expected[128];
    snprintf(expected, sizeof expected, "an integer from %lld to %lld", (long long)min, (long long)max);
    if (!json_is_integer(v)) return type_error(p, name, expected);
    json_int_t i = json_integer_value(v);
    if (i < min || i > max) return type_error(p, name, expected);
    *out = (int64_t)i;
    return 1;
}

int api_get_number(api_params *p, const char *name, double min, double max, double *out) {
    json_t *v = api_get_value(p, name);
    if (!v) return 0;
    char expected[128];
    snprintf(expected, sizeof expected, "a number from %g to %g", min, max);
    if (!json_is_number(v)) return type_error(p, name, expected);
    double d = json_number_value(v);
    if (isnan(d) || d < min || d > max) return type_error(p, name, expected);
    *out = d;
    return 1;
}

bool api_read_int32(api_params *p, const char *name, int64_t min, int64_t max, int32_t *slot) {
    int64_t v = 0;
    int got = api_get_int(p, name, min, max, &v);
    if (got > 0) *slot = (int32_t)v;
    return got >= 0;
}

bool api_read_any_int32(api_params *p, const char *name, int32_t *slot) {
    json_t *v = api_get_value(p, name);
    if (!v) return true;
    if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN || json_integer_value(v) > INT32_MAX)
        return type_error(p, name, "an integer") == 0;
    *slot = (int32_t)json_integer_value(v);
    return true;
}

bool api_read_any_float(api_params *p, const char *name, float *slot) {
    json_t *v = api_get_value(p, name);
    if (!v) return true;
    double d = json_number_value(v);
    if (!json_is_number(v) || !(fabs(d) <= FLT_MAX)) return type_error(p, name, "a number") == 0;
    *slot = (float)d;
    return true;
}

bool api_read_float(api_params *p, const char *name, double min, double max, float *slot) {
    double v = 0;
    int got = api_get_number(p, name, min, max, &v);
    if (got > 0) *slot = (float)v;
    return got >= 0;
}

int api_get_bool(api_params *p, const char *name, bool *out) {
    json_t *v = api_get_value(p, name);
    if (!v) return 0;
    if (!json_is_boolean(v)) return type_error(p, name, "true or false");
    *out = json_is_true(v);
    return 1;
}

int api_get_string(api_params *p, const char *name, const char **out) {
    json_t *v = api_get_value(p, name);
    if (!v) return 0;
    if (!json_is_string(v)) return type_error(p, name, "a string");
    *out = json_string_value(v);
    return 1;
}

static bool was_seen(const api_params *p, const char *key) {
    for (int i = 0; i < p->n_seen; i++)
        if (strcmp(p->seen[i], key) == 0) return true;
    return false;
}

bool api_params_finish(api_params *p) {
    if (!p->obj) return true;
    const char *key;
    json_t *value;
    json_object_foreach(p->obj, key, value) {
        if (was_seen(p, key) || (p->null_is_absent && json_is_null(value))) continue;
        char field[160];
        api_field_name(p, key, field, sizeof field);
        return api_fail(p->err, API_INVALID_PARAMS, field, "%s: unknown field '%s' (check its spelling)",
                        p->where, field);
    }
    return true;
}
