/* methods_lora.c - lora_adapters and lora_adapters.set (methods.h): llama-server's LoRA adapter
 * scales, held by the serving server (serve_server_set_lora) and given to the requests that send
 * no `lora` of their own. */
#include "methods.h"

#include <stdlib.h>

json_t *rpc_method_lora_adapters(api_host *h, json_t *params, api_error *err) {
    (void)params;
    serve_server *server = NULL;
    if (!api_host_acquire_server(h, &server, err)) return NULL;
    specd_engine *e = serve_server_engine(server);
    float scales[SPECD_MAX_LORA];
    int32_t n = serve_server_lora(server, scales);
    json_t *list = json_array();
    for (int32_t i = 0; list && i < n; i++) {
        const char *path = NULL;
        specd_engine_lora(e, i, &path, NULL);
        json_array_append_new(list, json_pack("{s:i, s:s, s:f, s:s, s:s}", "id", i, "path", path, "scale",
                                              (double)scales[i], "task_name", "", "prompt_prefix", ""));
    }
    api_host_release_engine(h);
    if (!list) api_fail(err, API_INTERNAL_ERROR, "", "out of memory");
    return list;
}

json_t *rpc_method_lora_adapters_set(api_host *h, json_t *params, api_error *err) {
    api_params rp;
    api_params_open(&rp, params, "lora_adapters.set params", "", err);
    json_t *list = api_get_value(&rp, "adapters");
    if (!api_params_finish(&rp)) return NULL;
    serve_lora *scales = NULL;
    int32_t n = 0;
    bool ok = !list || request_json_lora_list(list, "adapters", &scales, &n, err); /* none listed: all at 0 */
    serve_server *server = NULL;
    ok = ok && api_host_acquire_server(h, &server, err);
    if (ok) {
        serve_fault fault;
        ok = serve_server_set_lora(server, scales, n, "lora_adapters.set params", "adapters", &fault);
        if (!ok) api_error_from_fault(&fault, err);
        api_host_release_engine(h);
    }
    free(scales);
    return ok ? json_pack("{s:b}", "success", 1) : NULL;
}
