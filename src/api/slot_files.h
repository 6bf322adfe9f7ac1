/* slot_files.h - llama-server's POST /slots/N?action=save|restore|erase, by the JSON API from a
 * host's serving server; `specd serve` only routes them (with --slot-save-path). Thread-safe. */
#ifndef SPECD_API_SLOT_FILES_H
#define SPECD_API_SLOT_FILES_H

#include "host.h"

/* `action` on slot `slot`: "save" writes its caches (specd_engine_slot_save) to body's "filename"
 * under `dir` (a real path: the server's --slot-save-path), "restore" reads them back into the slot
 * (refused by name when saved for another model or context), "erase" drops them. Every file name
 * goes through the one confinement check (confine.h) and a name it refuses gets the same message
 * whatever the reason. The engine's call waits until the slot is idle. llama-server's answers:
 * save {id_slot, filename, n_saved, n_written, timings {save_ms}}, restore {id_slot, filename,
 * n_restored, n_read, timings {restore_ms}}, erase {id_slot, n_erased}. NULL with *err otherwise
 * (API_INVALID_PARAMS naming the field for the client's mistakes). New reference. */
json_t *api_slot_action(api_host *h, int32_t slot, const char *action, json_t *body, const char *dir, api_error *err);

#endif
