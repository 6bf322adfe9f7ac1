/* props.c - llama-server's GET /props and GET /slots bodies, from a host's serving server: the
 * default generation settings are those a completion request without fields gets (the same echo
 * as generation_settings), so /props cannot drift from what /completion does. */
#include "props.h"

#include "invariance_json.h"
#include "reply_json.h"

#include "../serve/text_stream.h"

#include <stdlib.h>
#include <string.h>

/* generation_settings of a request that sets nothing. */
static json_t *default_settings(api_host *h, specd_engine *e, const char *model) {
    serve_request req;
    serve_request_init(&req);
    api_host_request_defaults(h, &req);
    json_t *settings = reply_json_settings(&req, e, model);
    serve_request_clear(&req);
    return settings;
}

json_t *api_props_json(api_host *h, const char *template_src, api_error *err) {
    json_t *status = api_host_status(h);
    serve_server *server = NULL;
    if (!status || !api_host_acquire_server(h, &server, err)) {
        json_decref(status);
        return NULL;
    }
    specd_engine *e = serve_server_engine(server);
    /* the template the chat routes use: --chat-template-file's, else the model's (as llama-server) */
    const char *template_text = template_src ? template_src : specd_engine_chat_template(e);
    json_t *slot = json_pack("{s:i, s:i, s:i, s:b, s:b, s:o}", "id", 0, "id_task", -1, "n_ctx", specd_engine_n_ctx(e),
                             "speculative", specd_engine_has_draft(e), "is_processing",
                             json_is_true(json_object_get(status, "busy")), "params",
                             default_settings(h, e, serve_server_model(server)));
    json_t *props = json_pack("{s:o, s:i, s:O, s:O, s:s, s:{s:b}, s:s, s:s, s:b, s:b}", "default_generation_settings", slot,
                              "total_slots", (int)json_integer_value(json_object_get(status, "n_parallel")),
                              "model_path", json_object_get(status, "model"), "model_alias",
                              json_object_get(status, "model_alias"), "chat_template",
                              template_text ? template_text : "", "modalities", "vision",
                              specd_engine_has_vision(e), "media_marker", specd_image_marker(), "build_info",
                              specd_version(), "is_sleeping", 0, "has_draft", specd_engine_has_draft(e));
    /* what the model's template can do (tools, a system role, ...), as llama.cpp's chat code sees it */
    char *caps_text = specd_chat_caps(e, template_src, NULL);
    json_t *caps = caps_text ? json_loads(caps_text, 0, NULL) : NULL;
    specd_free(caps_text);
    if (props) json_object_set_new(props, "chat_template_caps", caps ? caps : json_object());
    else json_decref(caps);
    if (props) json_object_set_new(props, "batch_invariant", api_invariance_json(e));
    api_host_release_engine(h);
    json_decref(status);
    if (!props) api_fail(err, API_INTERNAL_ERROR, "", "out of memory for /props");
    return props;
}

/* A slot's latest request's settings, when the view shows that request (else {}). */
static json_t *slot_params(serve_server *server, int32_t i, const serve_slot_view *v) {
    serve_job *job = serve_server_slot_job(server, i);
    json_t *params = job && job->id == v->id_task
                         ? reply_json_settings(&job->request, serve_server_engine(server), serve_server_model(server))
                         : json_object();
    serve_job_unref(job);
    return params;
}

/* One slot as llama-server's /slots shows it. */
static json_t *slot_json(serve_server *server, int32_t i, const serve_slot_view *v, int32_t n_ctx) {
    json_t *slot = json_pack("{s:i, s:I, s:i, s:b, s:s, s:i, s:i, s:i}", "id", i, "id_task",
                             v->id_task > 0 ? (json_int_t)v->id_task : (json_int_t)-1, "n_ctx", n_ctx, "is_processing",
                             v->processing, "state", v->processing ? "processing" : "idle", "n_prompt_tokens",
                             v->n_prompt, "n_cached", v->n_cached, "n_decoded", v->n_generated);
    if (!slot) return NULL;
    json_object_set_new(slot, "params", slot_params(server, i, v));
    json_object_set_new(slot, "speculative",
                        v->n_steps > 0 ? json_pack("{s:i, s:i, s:i, s:f}", "steps", v->n_steps, "drafted", v->n_drafted,
                                                   "accepted", v->n_accepted, "acceptance_rate",
                                                   v->n_drafted > 0 ? (double)v->n_accepted / v->n_drafted : 0.0)
                                       : json_null());
    return slot;
}

json_t *api_slots_json(api_host *h, api_error *err) {
    serve_server *server = NULL;
    if (!api_host_acquire_server(h, &server, err)) return NULL;
    serve_status st = serve_server_status(server);
    int32_t n_ctx = specd_engine_n_ctx(serve_server_engine(server));
    json_t *slots = json_array();
    for (int32_t i = 0; slots && i < st.n_slots; i++) {
        json_t *slot = slot_json(server, i, &st.slots[i], n_ctx);
        if (!slot || json_array_append_new(slots, slot) != 0) {
            json_decref(slots);
            slots = NULL;
        }
    }
    api_host_release_engine(h);
    if (!slots) api_fail(err, API_INTERNAL_ERROR, "", "out of memory for /slots");
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

json_t *api_tokens_with_pieces(api_host *h, json_t *ids, api_error *err) {
    specd_engine *e;
    if (!api_host_acquire_engine(h, &e, err)) return NULL;
    json_t *list = json_array();
    size_t i;
    json_t *id;
    json_array_foreach(ids, i, id) {
        specd_token t = (specd_token)json_integer_value(id);
        json_array_append_new(list, json_pack("{s:i, s:o}", "id", t, "piece", piece_json(e, t)));
    }
    api_host_release_engine(h);
    return list;
}
