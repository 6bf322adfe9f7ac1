/* host_status.c - what `status` answers of a host (host.h): its state, its model, its latest
 * init, and its server's slots and queue. */
#define _POSIX_C_SOURCE 200809L /* pthread_rwlock_t */
#include "host_state.h"

static const char *state_name(load_state s) {
    switch (s) {
    case STATE_NONE: return "uninitialized";
    case STATE_LOADING: return "loading";
    case STATE_READY: return "ready";
    case STATE_FAILED: return "failed";
    }
    return "unknown";
}

/* The slots as `status` lists them: {id, state, id_task, n_prompt_tokens, n_cached, n_generated,
 * n_steps, n_drafted, n_accepted, acceptance_rate} (an idle slot shows its latest request's
 * figures, id_task 0 before any). */
static json_t *slots_json(const serve_status *st) {
    json_t *a = json_array();
    for (int32_t i = 0; a && i < st->n_slots; i++) {
        const serve_slot_view *v = &st->slots[i];
        json_array_append_new(
            a, json_pack("{s:i, s:s, s:I, s:i, s:i, s:i, s:i, s:i, s:i, s:f}", "id", i, "state",
                         v->processing ? "processing" : "idle", "id_task", (json_int_t)v->id_task, "n_prompt_tokens",
                         v->n_prompt, "n_cached", v->n_cached, "n_generated", v->n_generated, "n_steps", v->n_steps,
                         "n_drafted", v->n_drafted, "n_accepted", v->n_accepted, "acceptance_rate",
                         v->n_drafted > 0 ? (double)v->n_accepted / v->n_drafted : 0.0));
    }
    return a;
}

/* The serving server's slots and queue into `r` (the engine read lock keeps it). */
static void add_server_status(api_host *h, json_t *r) {
    serve_server *server = NULL;
    api_error err;
    if (!api_host_acquire_server(h, &server, &err)) return;
    serve_status st = serve_server_status(server);
    api_host_release_engine(h);
    if (st.n_running + st.n_queued > 0) json_object_set_new(r, "busy", json_true());
    json_object_set_new(r, "slots", slots_json(&st));
    json_object_set_new(r, "n_queued", json_integer(st.n_queued));
    json_object_set_new(r, "queue_max", json_integer(st.queue_max));
}

json_t *api_host_status(api_host *h) {
    pthread_mutex_lock(&h->lock);
    load_state state = host_state_locked(h);
    /* the old API's field, as the state: a reload (and a failed one) is 1 while the old model serves */
    int init_success = state == STATE_READY ? 1 : state == STATE_FAILED ? -1 : 0;
    json_t *r = json_pack("{s:s, s:i, s:s, s:s, s:s, s:b, s:b, s:i, s:i, s:s, s:i}", "state", state_name(state),
                          "init_success", init_success, "model", h->model ? h->model : "", "model_alias",
                          h->alias ? h->alias : "", "loading_model", h->loading_model ? h->loading_model : "", "busy",
                          h->n_claimed > 0, "has_draft", h->has_draft, "n_ctx", h->n_ctx, "n_vocab", h->n_vocab, "version",
                          specd_version(), "n_parallel", h->n_parallel);
    if (r && h->last_init_error) json_object_set_new(r, "last_init_error", json_string(h->last_init_error));
    /* A copy, not a shared reference: a load on another thread replaces h->placement while this
     * answer is printed, and jansson's reference counts are not something to share across threads
     * (ThreadSanitizer cannot see them either). */
    if (r && h->server && h->placement) json_object_set_new(r, "placement", json_deep_copy(h->placement));
    if (r && h->server && h->placement_note) json_object_set_new(r, "placement_note", json_string(h->placement_note));
    if (r && h->server && h->invariance) json_object_set_new(r, "batch_invariant", json_deep_copy(h->invariance));
    if (r && state == STATE_FAILED) json_object_set_new(r, "error", json_string(h->last_init_error));
    bool loaded = h->server != NULL;
    pthread_mutex_unlock(&h->lock);
    if (r && loaded) add_server_status(h, r); /* never under the host's lock: the engine lock comes first */
    return r;
}
