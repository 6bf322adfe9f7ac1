/* llama_log.c - llama.cpp's log (see llama_log.h), and a failed context's message from what it
 * logged.
 * One logger for the whole process, installed once before anything else of llama.cpp or ggml
 * runs (backend registration logs too). llama_log_set is not thread-safe (it writes the globals
 * every log call reads), so it is never called again: the latest specd_engine_new's `verbose`
 * goes to an atomic flag the logger reads. Quiet, it keeps only errors, and those of the thread
 * that is loading a model go into the load's error message instead of stderr. */
#include "llama_log.h"

#include "../util/util.h"

#include "llama.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static atomic_bool log_verbose;
static _Thread_local specd_log_capture *thread_capture;
static _Thread_local bool continuing_error; /* GGML_LOG_LEVEL_CONT continues the line before */

static void capture_append(specd_log_capture *c, const char *text) {
    size_t n = strlen(text), room = sizeof c->text - 1 - c->len;
    if (n > room) n = room;
    memcpy(c->text + c->len, text, n);
    c->len += n;
    c->text[c->len] = '\0';
}

static void specd_log(enum ggml_log_level level, const char *text, void *user_data) {
    (void)user_data;
    if (atomic_load(&log_verbose)) {
        fputs(text, stderr);
        return;
    }
    if (level != GGML_LOG_LEVEL_CONT) continuing_error = level == GGML_LOG_LEVEL_ERROR;
    if (!continuing_error) return;
    if (thread_capture) capture_append(thread_capture, text);
    else fputs(text, stderr);
}

static pthread_once_t llama_once = PTHREAD_ONCE_INIT;
static void init_llama(void) {
    llama_log_set(specd_log, NULL);
    llama_backend_init();
}

void specd_llama_init(void) { pthread_once(&llama_once, init_llama); }

void specd_llama_log_verbose(bool verbose) { atomic_store(&log_verbose, verbose); }

void specd_log_capture_begin(specd_log_capture *c) {
    c->len = 0;
    c->text[0] = '\0';
    thread_capture = c;
}

const char *specd_log_capture_end(specd_log_capture *c) {
    thread_capture = NULL;
    char *newline = strchr(c->text, '\n');
    if (newline) *newline = '\0';
    return c->text;
}

specd_status specd_context_failed(char **error, const char *what, uint32_t n_ctx, const char *reason) {
    static const char prefix[] = "llama_init_from_model: ";
    if (reason && !strncmp(reason, prefix, sizeof prefix - 1)) reason += sizeof prefix - 1;
    bool memory = !reason || !*reason || strstr(reason, "alloc") || strstr(reason, "memory") || strstr(reason, "buffer");
    const char *hint = strstr(reason ? reason : "", "does not divide")
                           ? ": a quantized K or V cache (-ctk, -ctv) needs a head size its block divides; use f16 or "
                             "f32 for this model"
                           : "";
    if (memory)
        specd_set_error(error, "cannot create the %s (n_ctx=%u): out of memory? try a smaller -c%s%s%s", what, n_ctx,
                        reason && *reason ? " (llama.cpp: " : "", reason ? reason : "", reason && *reason ? ")" : "");
    else
        specd_set_error(error, "cannot create the %s (n_ctx=%u): llama.cpp: %s%s", what, n_ctx, reason, hint);
    return SPECD_ERR_CONTEXT;
}
