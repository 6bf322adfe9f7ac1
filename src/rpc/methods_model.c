/* methods_model.c - the methods that load and describe a host's models: init (blocking or on a
 * background thread), status, shutdown (host_load.c does the work). */
#include "methods.h"

/* The calibration cache init would write: never a file that is not specd's own (a model named by
 * mistake or on purpose would be replaced by a few hundred bytes of text). Under --models-dir the
 * path is already the confined real path (api_init_params_confine), so the refusal tells nothing
 * about what lies outside. */
static bool check_calibration_cache(api_engine_settings *s, api_error *err) {
    char *message = NULL;
    if (!s->calibration_cache || specd_calibration_cache_check(s->calibration_cache, &message) == SPECD_OK) return true;
    api_fail(err, API_INVALID_PARAMS, "calibration_cache", "init: %s, or \"off\"", message ? message : "");
    specd_free(message);
    api_engine_settings_free(s);
    return false;
}

json_t *rpc_method_init(api_host *h, json_t *params, api_error *err) {
    api_engine_settings s;
    if (!api_engine_settings_parse(params, &s, err) || !check_calibration_cache(&s, err) || !api_host_load(h, &s, err))
        return NULL;
    return api_host_status(h);
}

json_t *rpc_method_status(api_host *h, json_t *params, api_error *err) {
    api_params rp;
    api_params_open(&rp, params, "status params", "", err);
    return api_params_finish(&rp) ? api_host_status(h) : NULL;
}

json_t *rpc_method_shutdown(api_host *h, json_t *params, api_error *err) {
    api_params rp;
    api_params_open(&rp, params, "shutdown params", "", err);
    if (!api_params_finish(&rp)) return NULL;
    bool was_loaded = false;
    api_host_shutdown(h, &was_loaded);
    return json_pack("{s:b}", "was_loaded", was_loaded);
}
