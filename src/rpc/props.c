/* props.c - llama-server's GET /props and GET /slots bodies, from the JSON API's state: the
 * default generation settings are those a completion request without fields gets (the same echo
 * as generation_settings), so /props cannot drift from what /completion does. */
#include "props.h"

#include "completion.h"
#include "metrics.h"
#include "text_stream.h"

#include <stdlib.h>
#include <string.h>

/* generation_settings of a request that sets nothing. */
static json_t *default_settings(specd_engine *e) {
    completion_request req = {0};
    req.gen = specd_generation_default_params();
    req.n_ctx = specd_engine_n_ctx(e);
    req.seed_requested = -1;
    req.cache_prompt = true;
    return completion_settings_json(&req, e);
}


json_t *rpc_props_json(rpc_error *err) {
    json_t *status = rpc_method_status(NULL, err);
    if (!status) return NULL;
    specd_engine *e;
    if (!rpc_state_acquire_engine(&e, err)) {
        json_decref(status);
        return NULL;
    }
    const char *template_text = specd_engine_chat_template(e);
    json_t *slot = json_pack("{s:i, s:i, s:i, s:b, s:b, s:o}", "id", 0, "id_task", -1, "n_ctx", specd_engine_n_ctx(e),
                             "speculative", specd_engine_has_draft(e), "is_processing",
                             json_is_true(json_object_get(status, "busy")), "params", default_settings(e));
    json_t *props = json_pack("{s:o, s:i, s:O, s:O, s:s, s:{s:b}, s:s, s:b, s:b}", "default_generation_settings", slot,
                              "total_slots", (int)json_integer_value(json_object_get(status, "n_parallel")), "model_path", json_object_get(status, "model"), "model_alias",
                              json_object_get(status, "model_alias"), "chat_template",
                              template_text ? template_text : "", "modalities", "vision", 0, "build_info",
                              specd_version(), "is_sleeping", 0, "has_draft", specd_engine_has_draft(e));
    if (props) json_object_set_new(props, "chat_template_caps", json_object());
    rpc_state_release_engine();
    json_decref(status);
    if (!props) rpc_fail(err, RPC_INTERNAL_ERROR, "", "out of memory for /props");
    return props;
}

/* One slot as llama-server's /slots shows it, from the scheduler's view of it (status.slots); the
 * latest request's generation settings when this slot ran it (metrics.c keeps the latest). */
static json_t *slot_json(json_t *v, int32_t n_ctx, json_t *latest) {
    bool processing = !strcmp(json_string_value(json_object_get(v, "state")), "processing");
    json_int_t task = json_integer_value(json_object_get(v, "id_task")); /* ids start at 1: 0 = none yet */
    json_t *slot = json_pack("{s:O, s:I, s:i, s:b, s:O, s:O, s:O, s:O}", "id", json_object_get(v, "id"), "id_task",
                             task > 0 ? task : (json_int_t)-1, "n_ctx", n_ctx, "is_processing", processing, "state",
                             json_object_get(v, "state"), "n_prompt_tokens", json_object_get(v, "n_prompt_tokens"),
                             "n_cached", json_object_get(v, "n_cached"), "n_decoded", json_object_get(v, "n_generated"));
    if (!slot) return NULL;
    bool same_task = json_integer_value(json_object_get(latest, "id_task")) == json_integer_value(json_object_get(v, "id_task"));
    json_t *params = same_task ? json_object_get(latest, "params") : NULL;
    json_object_set_new(slot, "params", params ? json_deep_copy(params) : json_object());
    json_object_set_new(slot, "speculative",
                        json_integer_value(json_object_get(v, "n_steps")) > 0
                            ? json_pack("{s:O, s:O, s:O, s:O}", "steps", json_object_get(v, "n_steps"), "drafted",
                                        json_object_get(v, "n_drafted"), "accepted", json_object_get(v, "n_accepted"),
                                        "acceptance_rate", json_object_get(v, "acceptance_rate"))
                            : json_null());
    return slot;
}

json_t *rpc_slots_json(rpc_error *err) {
    json_t *status = rpc_method_status(NULL, err);
    if (!status) return NULL;
    int32_t n_ctx = (int32_t)json_integer_value(json_object_get(status, "n_ctx"));
    json_t *latest = rpc_metrics_slot_json(false, n_ctx), *views = json_object_get(status, "slots");
    json_t *slots = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(views, i, v) {
        json_t *slot = slot_json(v, n_ctx, latest);
        if (!slot || json_array_append_new(slots, slot) != 0) {
            json_decref(slots);
            slots = NULL;
            break;
        }
    }
    json_decref(latest);
    json_decref(status);
    if (!slots) rpc_fail(err, RPC_INTERNAL_ERROR, "", "out of memory for /slots");
    return slots;
}

/* A piece as llama-server gives it: the text when it is valid UTF-8, else its bytes. */
static json_t *piece_json(specd_engine *e, specd_token t) {
    char piece[256];
    int32_t n = specd_token_to_piece(e, t, piece, (int32_t)sizeof piece);
    if (n < 0) n = 0;
    char *clean = specd_utf8_sanitize(piece, (size_t)n);
    bool valid = clean && strlen(clean) == (size_t)n && memcmp(clean, piece, (size_t)n) == 0;
    json_t *out = valid ? json_stringn(clean, (size_t)n) : json_array();
    for (int32_t i = 0; !valid && out && i < n; i++) json_array_append_new(out, json_integer((unsigned char)piece[i]));
    free(clean);
    return out;
}

json_t *rpc_tokens_with_pieces(json_t *ids, rpc_error *err) {
    specd_engine *e;
    if (!rpc_state_acquire_engine(&e, err)) return NULL;
    json_t *list = json_array();
    size_t i;
    json_t *id;
    json_array_foreach(ids, i, id) {
        specd_token t = (specd_token)json_integer_value(id);
        json_array_append_new(list, json_pack("{s:i, s:o}", "id", t, "piece", piece_json(e, t)));
    }
    rpc_state_release_engine();
    return list;
}
