/* ngram_cache_file.c - reading and writing the static n-gram cache (layout in the header). */
#include "ngram_cache_file.h"

#include "../util/util.h"

#include <stdio.h>
#include <string.h>

#define MAGIC "SPECDNGC"
#define VERSION 1u

typedef struct file_pair {
    uint64_t key;
    int32_t token;
    int32_t count;
} file_pair;

specd_status specd_ngram_cache_save(const specd_ngram_counts *c, int32_t n_vocab, int32_t max_n,
                                    const char *path, char **error) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        specd_set_error(error, "cannot write the n-gram cache '%s': check the directory and permissions", path);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    uint32_t header[4] = {VERSION, (uint32_t)n_vocab, (uint32_t)max_n, (uint32_t)c->n_pairs};
    bool ok = fwrite(MAGIC, 1, 8, f) == 8 && fwrite(header, sizeof header, 1, f) == 1;
    for (int32_t i = 0; ok && i < c->n_pairs; i++) {
        file_pair p = {c->pairs[i].key, c->pairs[i].token, c->pairs[i].count};
        ok = fwrite(&p, sizeof p, 1, f) == 1;
    }
    ok = fclose(f) == 0 && ok;
    if (!ok) {
        specd_set_error(error, "writing the n-gram cache '%s' failed (disk full?)", path);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    return SPECD_OK;
}

static specd_status load_fail(FILE *f, char **error, const char *path, const char *why) {
    fclose(f);
    specd_set_error(error, "the n-gram cache '%s' %s: rebuild it with build_ngram_cache for this model", path, why);
    return SPECD_ERR_INVALID_ARGUMENT;
}

specd_status specd_ngram_cache_load(specd_ngram_counts *c, int32_t n_vocab, const char *path, char **error) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        specd_set_error(error, "cannot open the n-gram cache '%s': no such file or not readable", path);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    char magic[8];
    uint32_t header[4];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, MAGIC, 8) != 0 || fread(header, sizeof header, 1, f) != 1)
        return load_fail(f, error, path, "is not an n-gram cache");
    if (header[0] != VERSION) return load_fail(f, error, path, "has an unknown version");
    if ((int32_t)header[1] != n_vocab) return load_fail(f, error, path, "was built for another vocabulary");
    for (uint32_t i = 0; i < header[3]; i++) {
        file_pair p;
        if (fread(&p, sizeof p, 1, f) != 1) return load_fail(f, error, path, "is truncated");
        if (p.token < 0 || p.token >= n_vocab || p.count <= 0) return load_fail(f, error, path, "is corrupt");
        if (!specd_ngram_counts_add(c, p.key, p.token, p.count)) {
            fclose(f);
            specd_set_error(error, "out of memory loading the n-gram cache '%s'", path);
            return SPECD_ERR_NO_MEMORY;
        }
    }
    fclose(f);
    return SPECD_OK;
}
