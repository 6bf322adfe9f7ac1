/* request_lora.c - llama-server's lists of LoRA adapter scales read from JSON (request_json.h): a
 * request's `lora` (request_llama.c) and lora_adapters.set's list (methods_lora.c). */
#include "request_json.h"

#include <stdlib.h>
#include <string.h>

bool request_json_lora_list(json_t *list, const char *field, serve_lora **out, int32_t *n, api_error *err) {
    if (!json_is_array(list))
        return api_fail(err, API_INVALID_PARAMS, field, "%s must be an array of {\"id\": N, \"scale\": X}", field);
    size_t i;
    json_t *entry;
    json_array_foreach(list, i, entry) {
        json_t *id = json_object_get(entry, "id"), *scale = json_object_get(entry, "scale");
        const char *key;
        json_t *value;
        json_object_foreach(entry, key, value) /* a typo of scale would set it to 0 silently */
            if (strcmp(key, "id") != 0 && strcmp(key, "scale") != 0)
                return api_fail(err, API_INVALID_PARAMS, field, "%s[%zu]: unknown field '%.40s' (id, scale)", field, i,
                                key);
        if (!json_is_integer(id))
            return api_fail(err, API_INVALID_PARAMS, field, "%s[%zu]: 'id' must be an adapter's index (GET "
                            "/lora-adapters lists them)", field, i);
        if (scale && !json_is_number(scale))
            return api_fail(err, API_INVALID_PARAMS, field, "%s[%zu]: 'scale' must be a finite number", field, i);
        serve_lora *grown = realloc(*out, (size_t)(*n + 1) * sizeof *grown);
        if (!grown) return api_fail(err, API_INTERNAL_ERROR, field, "out of memory");
        *out = grown;
        (*out)[(*n)++] = (serve_lora){json_integer_value(id), scale ? json_number_value(scale) : 0.0};
    }
    return true;
}
