/* confine.h - the one check every file path a client names goes through when the server confines
 * it to a directory (specd serve --models-dir): the models init loads, the calibration cache it
 * writes, and any path a later method takes. */
#ifndef SPECD_API_CONFINE_H
#define SPECD_API_CONFINE_H

typedef enum api_path_kind {
    API_PATH_FILE,    /* an existing regular file, to read (a model) */
    API_PATH_WRITABLE /* a regular file or a folder to write into, existing or to be made in an existing
                       * folder (the calibration cache: a folder gets one file per models and settings) */
} api_path_kind;

/* The real path of `path` (a relative one taken in `dir`) when it is of `kind` under `dir` (a
 * real path: absolute, no symlinks, no trailing slash), symlinks and ".." resolved; a new
 * WRITABLE path keeps its last name (and its trailing '/', which names a folder) under its real
 * parent. NULL otherwise, whatever the reason (missing, unreadable, outside, of another type), so
 * that a caller's message never tells whether something exists outside `dir`. Free with free(). */
char *api_confine_path(const char *path, const char *dir, api_path_kind kind);

#endif
