/* llama_log.c - llama.cpp's log (see llama_log.h).
 * One logger for the whole process, installed once before anything else of llama.cpp or ggml
 * runs (backend registration logs too). llama_log_set is not thread-safe (it writes the globals
 * every log call reads), so it is never called again: the latest specd_engine_new's `verbose`
 * goes to an atomic flag the logger reads. Quiet, it keeps only errors, and those of the thread
 * that is loading a model go into the load's error message instead of stderr. */
#include "llama_log.h"

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

