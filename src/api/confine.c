/* confine.c - see confine.h. The path is resolved with realpath (symlinks and ".." gone), then
 * checked against the directory; what is loaded or written is that resolved path. Whoever can
 * write into the directory can still swap a name for a symlink between this check and the use. */
#define _XOPEN_SOURCE 700 /* realpath, strdup */
#include "confine.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* `path` taken in `dir` when relative (heap). */
static char *in_dir(const char *path, const char *dir) {
    size_t size = strlen(dir) + strlen(path) + 2;
    char *joined = malloc(size);
    if (joined) snprintf(joined, size, "%s%s%s", path[0] == '/' ? "" : dir, path[0] == '/' ? "" : "/", path);
    return joined;
}

/* Whether real path `real` is `dir` itself (allowed only when `self_ok`) or below it. */
static bool is_under(const char *real, const char *dir, bool self_ok) {
    size_t n = strlen(dir);
    if (strcmp(dir, "/") == 0) return self_ok || real[1] != '\0';
    return strncmp(real, dir, n) == 0 && (real[n] == '/' || (self_ok && real[n] == '\0'));
}

/* An existing path: its real path when it is of `kind` under dir. */
static char *confine_existing(const char *joined, const char *dir, api_path_kind kind) {
    char *real = realpath(joined, NULL);
    struct stat st;
    bool ok = real && stat(real, &st) == 0;
    bool regular = ok && S_ISREG(st.st_mode), folder = ok && S_ISDIR(st.st_mode);
    ok = ok && (kind == API_PATH_FILE ? regular && is_under(real, dir, false)
                                      : (regular && is_under(real, dir, false)) || (folder && is_under(real, dir, true)));
    if (ok) return real;
    free(real);
    return NULL;
}

/* A path that does not exist yet (WRITABLE only): its real parent folder under dir (or dir
 * itself) and its last name, a plain one. */
static char *confine_new(const char *joined, const char *dir) {
    char *copy = strdup(joined);
    if (!copy) return NULL;
    size_t n = strlen(copy);
    bool folder = n > 1 && copy[n - 1] == '/';
    while (n > 1 && copy[n - 1] == '/') copy[--n] = '\0';
    char *slash = strrchr(copy, '/');
    const char *name = slash ? slash + 1 : "";
    char *result = NULL;
    if (slash && *name && strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
        *slash = '\0';
        char *parent = realpath(slash == copy ? "/" : copy, NULL);
        struct stat st;
        if (parent && stat(parent, &st) == 0 && S_ISDIR(st.st_mode) && is_under(parent, dir, true)) {
            size_t size = strlen(parent) + strlen(name) + 3;
            if ((result = malloc(size)) != NULL)
                snprintf(result, size, "%s/%s%s", strcmp(parent, "/") == 0 ? "" : parent, name, folder ? "/" : "");
        }
        free(parent);
    }
    free(copy);
    return result;
}

char *api_confine_path(const char *path, const char *dir, api_path_kind kind) {
    if (!path || !*path) return NULL;
    char *joined = in_dir(path, dir);
    if (!joined) return NULL;
    struct stat st;
    bool exists = lstat(joined, &st) == 0; /* a dangling symlink exists: realpath then refuses it */
    char *real = exists || kind == API_PATH_FILE ? confine_existing(joined, dir, kind) : confine_new(joined, dir);
    free(joined);
    return real;
}
