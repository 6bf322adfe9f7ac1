/* slot_files.c - llama-server's slot actions (slot_files.h): a slot's caches saved to a file under
 * the server's --slot-save-path, restored from one, or erased. Every file name goes through the one
 * confinement check (confine.h); the engine's calls run on the server's thread while the slot is
 * idle (serve_server_slot_call), the file is read and written here. */
#define _POSIX_C_SOURCE 200809L
#include "slot_files.h"

#include "confine.h"

#include "../serve/clock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What one action hands the server's thread and gets back. */
typedef struct slot_work {
    const char *action;
    void *data;     /* save: the bytes made (specd_free); restore: the bytes read (free) */
    size_t size;
    int32_t n_tokens;
    specd_status status;
    char *message;  /* specd_free */
} slot_work;

static void run_on_slot(specd_engine *e, int32_t slot, void *arg) {
    slot_work *w = arg;
    w->status = SPECD_OK;
    if (!strcmp(w->action, "save")) {
        w->n_tokens = specd_engine_slot_tokens(e, slot);
        w->status = specd_engine_slot_save(e, slot, &w->data, &w->size, &w->message);
    } else if (!strcmp(w->action, "restore")) {
        w->status = specd_engine_slot_restore(e, slot, w->data, w->size, &w->n_tokens, &w->message);
    } else {
        w->n_tokens = specd_engine_slot_tokens(e, slot);
        specd_engine_slot_forget(e, slot);
    }
}

/* The body's "filename" confined to `dir` (a new file for save, an existing one for restore); NULL
 * with *err, the same message whatever made it fail (confine.h). */
static char *confined_file(json_t *body, const char *dir, bool existing, api_error *err) {
    const char *name = json_string_value(json_object_get(body, "filename"));
    size_t n = name ? strlen(name) : 0;
    char *path = n > 0 && name[n - 1] != '/' ? api_confine_path(name, dir, existing ? API_PATH_FILE : API_PATH_WRITABLE)
                                             : NULL;
    if (!path)
        api_fail(err, API_INVALID_PARAMS, "filename", "slot action: 'filename' must name a%s file under the slot save "
                 "folder (--slot-save-path), got '%.200s'", existing ? "n existing" : "", name ? name : "(none)");
    return path;
}

static bool write_file(const char *path, const void *data, size_t size, const char *name, api_error *err) {
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(data, 1, size, f) == size;
    if (f && fclose(f) != 0) ok = false;
    if (!ok) api_fail(err, API_INTERNAL_ERROR, "filename", "slot action: cannot write '%s': %s", name, strerror(errno));
    return ok;
}

static void *read_file(const char *path, size_t *size, const char *name, api_error *err) {
    FILE *f = fopen(path, "rb");
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    uint8_t *data = n >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc(n > 0 ? (size_t)n : 1) : NULL;
    bool ok = data && fread(data, 1, (size_t)n, f) == (size_t)n;
    if (f) fclose(f);
    if (!ok) {
        free(data);
        api_fail(err, API_INVALID_PARAMS, "filename", "slot action: cannot read '%s'", name);
        return NULL;
    }
    *size = (size_t)n;
    return data;
}

/* The engine's call on the slot, on the server's thread; false with *err. */
static bool call_slot(api_host *h, int32_t slot, slot_work *w, api_error *err) {
    serve_server *server = NULL;
    if (!api_host_acquire_server(h, &server, err)) return false;
    serve_fault fault;
    bool ran = serve_server_slot_call(server, slot, run_on_slot, w, &fault);
    api_host_release_engine(h);
    if (!ran) {
        api_error_from_fault(&fault, err);
        return false;
    }
    if (w->status == SPECD_OK) return true;
    return api_fail(err, w->status == SPECD_ERR_INVALID_ARGUMENT ? API_INVALID_PARAMS : API_INTERNAL_ERROR,
                    "filename", "slot action %s on slot %d: %s", w->action, slot, w->message ? w->message : "failed");
}

/* save or restore: the file confined to `dir`, the engine's call on the slot and the file's I/O in
 * the order the action needs (save: the bytes made, then written; restore: read, then put back),
 * answered with llama-server's fields. */
static json_t *file_action(api_host *h, int32_t slot, bool restoring, json_t *body, const char *dir, api_error *err) {
    char *path = confined_file(body, dir, restoring, err);
    if (!path) return NULL;
    const char *name = json_string_value(json_object_get(body, "filename"));
    slot_work w = {.action = restoring ? "restore" : "save"};
    double t0 = serve_now_ms();
    bool ok = restoring ? (w.data = read_file(path, &w.size, name, err)) != NULL && call_slot(h, slot, &w, err)
                        : call_slot(h, slot, &w, err) && write_file(path, w.data, w.size, name, err);
    json_t *answer = ok ? json_pack("{s:i, s:s, s:i, s:I, s:{s:f}}", "id_slot", slot, "filename", name,
                                    restoring ? "n_restored" : "n_saved", w.n_tokens,
                                    restoring ? "n_read" : "n_written", (json_int_t)w.size, "timings",
                                    restoring ? "restore_ms" : "save_ms", serve_now_ms() - t0)
                        : NULL;
    if (restoring) free(w.data); /* read_file's */
    else specd_free(w.data);     /* specd_engine_slot_save's */
    specd_free(w.message);
    free(path);
    return answer;
}

json_t *api_slot_action(api_host *h, int32_t slot, const char *action, json_t *body, const char *dir, api_error *err) {
    if (!action || (strcmp(action, "save") && strcmp(action, "restore") && strcmp(action, "erase"))) {
        api_fail(err, API_INVALID_PARAMS, "action", "slot action: 'action' must be save, restore or erase, got "
                 "'%.40s'", action ? action : "");
        return NULL;
    }
    if (!strcmp(action, "save") || !strcmp(action, "restore"))
        return file_action(h, slot, !strcmp(action, "restore"), body, dir, err);
    slot_work w = {.action = "erase"};
    return call_slot(h, slot, &w, err) ? json_pack("{s:i, s:i}", "id_slot", slot, "n_erased", w.n_tokens) : NULL;
}
