/* watch.c - whether whoever waits for this thread's blocking calls still wants the answer
 * (api_watch_thread, api.h): `specd serve` sets it on its call workers, a blocking
 * completion asks while it waits; and which client this thread's calls are for (api_client_thread),
 * which its completions count against. */
#include "api.h"

static _Thread_local api_still_wanted_fn watch_fn;
static _Thread_local void *watch_data;

void api_watch_thread(api_still_wanted_fn fn, void *user_data) {
    watch_fn = fn;
    watch_data = user_data;
}

bool api_thread_still_wanted(void) { return !watch_fn || watch_fn(watch_data); }

static _Thread_local uint64_t thread_client;

void api_client_thread(uint64_t client) { thread_client = client; }

uint64_t api_thread_client(void) { return thread_client; }
