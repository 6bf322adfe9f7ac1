/* slot_call.c - serve_server_slot_call (server.h): a call on one slot's caches, run by the server's
 * thread between rounds once that slot is idle, while its caller waits. llama-server's slot
 * actions go through it: the engine's slot calls must not run beside a pass (server_state.h). */
#include "server_state.h"

bool serve_server_slot_call(serve_server *s, int32_t slot, serve_slot_fn fn, void *arg, serve_fault *fault) {
    if (slot < 0 || slot >= s->n_slots)
        return serve_fail(fault, SERVE_INVALID, "id_slot", "there is no slot %d: the slots are 0 to %d", slot,
                          s->n_slots - 1);
    slot_call call = {.slot = slot, .fn = fn, .arg = arg};
    pthread_mutex_lock(&s->lock);
    while (s->call && !s->quit) pthread_cond_wait(&s->called, &s->lock); /* one at a time */
    if (!s->quit) {
        s->call = &call;
        pthread_cond_broadcast(&s->wake);
        while (!call.done && !(s->quit && !call.taken)) pthread_cond_wait(&s->called, &s->lock);
        if (!call.done) s->call = NULL; /* the thread stopped before it took the call */
    }
    pthread_mutex_unlock(&s->lock);
    return call.done || serve_fail(fault, SERVE_BUSY, "", "the server is stopping: the slot action did not run");
}

bool serve_slot_call_run(serve_server *s) {
    pthread_mutex_lock(&s->lock);
    slot_call *call = s->call && !s->slots[s->call->slot].job ? s->call : NULL;
    if (call) call->taken = true;
    pthread_mutex_unlock(&s->lock);
    if (!call) return false;
    call->fn(s->engine, call->slot, call->arg);
    pthread_mutex_lock(&s->lock);
    call->done = true;
    s->call = NULL;
    pthread_cond_broadcast(&s->called);
    pthread_mutex_unlock(&s->lock);
    return true;
}
