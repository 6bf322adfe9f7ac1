/* replay_main.c - runs the fuzz harness (fuzz_rpc.c) on files, without libFuzzer: every seed of
 * the corpus and every kept reproducer is a regression test of the normal and ASan builds
 * (ctest fuzz_rpc_replay, fuzz_rpc_model_replay). Usage: REPLAY FILE... (folders: their files). */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Runs one file through the harness; false when it cannot be read. */
static bool replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        return false;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (size_t n; buf && (n = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += n;
        if (len == cap) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    bool ok = buf && !ferror(f);
    fclose(f);
    if (ok) LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
    else fprintf(stderr, "replay: cannot read %s\n", path);
    free(buf);
    return ok;
}


/* A folder's regular files in name order (so runs are repeatable); returns how many failed. */
static int replay_folder(const char *dir, int *n_done) {
    struct dirent **entries = NULL;
    int n = scandir(dir, &entries, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "replay: cannot list %s\n", dir);
        return 1;
    }
    int failed = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, entries[i]->d_name);
        struct stat st;
        if (entries[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            failed += !replay_file(path);
            ++*n_done;
        }
        free(entries[i]);
    }
    free(entries);
    return failed;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_FOLDER...\n", argv[0]);
        return 2;
    }
    LLVMFuzzerInitialize(&argc, &argv);
    int failed = 0, done = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) failed += replay_folder(argv[i], &done);
        else failed += !replay_file(argv[i]), done++;
    }
    printf("replayed %d inputs, %d unreadable\n", done, failed);
    return failed ? 1 : 0;
}
