/* methods_model.c - the methods that load and describe a host's models: init (blocking or on a
 * background thread), status, shutdown (host_load.c does the work). */
#include "methods.h"

json_t *rpc_method_init(rpc_host *h, json_t *params, rpc_error *err) {
    rpc_engine_settings s;
    if (!rpc_engine_settings_parse(params, &s, err) || !rpc_host_load(h, &s, err)) return NULL;
    return rpc_host_status(h);
}

json_t *rpc_method_status(rpc_host *h, json_t *params, rpc_error *err) {
    rpc_params rp;
    rpc_params_open(&rp, params, "status params", "", err);
    return rpc_params_finish(&rp) ? rpc_host_status(h) : NULL;
}

json_t *rpc_method_shutdown(rpc_host *h, json_t *params, rpc_error *err) {
    rpc_params rp;
    rpc_params_open(&rp, params, "shutdown params", "", err);
    if (!rpc_params_finish(&rp)) return NULL;
    bool was_loaded = false;
    rpc_host_shutdown(h, &was_loaded);
    return json_pack("{s:b}", "was_loaded", was_loaded);
}
