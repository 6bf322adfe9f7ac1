/* calibrate.c - the calibration cache file: keying the models and settings, reading it strictly,
 * writing it atomically (see calibrate.h). */
#define _XOPEN_SOURCE 700 /* realpath */
#include "calibrate.h"

#include "../util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Version 4: what each held draft length made (held <k> <tokens> <ms> <steps>: held_lengths.h),
 * where lengths are held; a version 3 file is read as one that has none. Version 3: a step's first
 * draft token apart from the others (first_draft_ms), and the draft model's acceptance (acceptance
 * greedy|sampled: its counts, acceptance.h). Version 2: each size's cost is on an empty cache (the
 * fill is priced apart, costs.h); version 1 files held costs learnt at whatever fill their passes
 * had. Older files are replaced. */
#define FILE_MAGIC "specd-calibration 4"
#define FILE_MAGIC_3 "specd-calibration 3"
#define MAGIC_PREFIX "specd-calibration " /* every version's first line: what makes a file specd's */
#define HEADER_BYTES (64 * 1024) /* hashed per model file: the GGUF header and metadata */
#define MAX_FILE_BYTES (64 * 1024)
#define MAX_MS 1e7 /* a pass or draft token dearer than this is not a measurement */

/* ---- keys ------------------------------------------------------------------------------------ */

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

#define FNV_START 14695981039346656037ULL

static uint64_t hash_string(const char *s) { return fnv1a(FNV_START, s, strlen(s)); }

/* "size:mtime_ns:hash" of a model file; false when it cannot be read. */
static bool describe_model(const char *path, char *out, size_t size) {
    struct stat st;
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return false;
    }
    unsigned char *head = malloc(HEADER_BYTES);
    size_t n = head ? fread(head, 1, HEADER_BYTES, f) : 0;
    bool ok = head && !ferror(f);
    fclose(f);
    uint64_t h = ok ? fnv1a(FNV_START, head, n) : 0;
    free(head);
    if (!ok) return false;
    snprintf(out, size, "%lld:%lld%09ld:%016" PRIx64, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
             (long)st.st_mtim.tv_nsec, h);
    return true;
}

/* llama.cpp's system info names the backend and the CPU features its kernels use. */
static uint64_t backend_hash(void) { return hash_string(specd_engine_backend_info()); }

static const char *flash_attn_name(specd_flash_attn f) {
    return f == SPECD_FLASH_ATTN_ON ? "on" : f == SPECD_FLASH_ATTN_AUTO ? "auto" : "off";
}

bool specd_calibration_key(const specd_calibration_identity *id, char *out, size_t size) {
    char target[128], draft[128] = "none";
    out[0] = '\0';
    if (!describe_model(id->target_path, target, sizeof target)) return false;
    if (id->draft_path && !describe_model(id->draft_path, draft, sizeof draft)) return false;
    int len = snprintf(out, size, "target=%s;draft=%s;threads=%d;batch=%d;fa=%s;v=%s;backend=%016" PRIx64, target,
                       draft, id->n_threads, id->n_batch, flash_attn_name(id->flash_attn),
                       id->cache_type_v == SPECD_CACHE_TYPE_F16 ? "f16" : "f32", backend_hash());
    if (len >= 0 && (size_t)len < size && id->placement && *id->placement)
        len += snprintf(out + len, size - (size_t)len, ";place=%s", id->placement);
    if (len >= 0 && (size_t)len < size && id->n_threads_batch > 0)
        len += snprintf(out + len, size - (size_t)len, ";tb=%d", id->n_threads_batch);
    if (len < 0 || (size_t)len >= size) {
        out[0] = '\0';
        return false;
    }
    return true;
}

/* The engine's identity; `setup` holds its strings. */
static specd_calibration_identity identity_of(const specd_engine_setup *setup) {
    return (specd_calibration_identity){setup->target_path, setup->draft_path, setup->n_threads, setup->n_batch,
                                        setup->flash_attn, setup->cache_type_v, setup->placement,
                                        setup->n_threads_batch};
}

/* ---- where the file is ----------------------------------------------------------------------- */

static bool names_directory(const char *path) {
    struct stat st;
    size_t n = strlen(path);
    return path[n - 1] == '/' || (stat(path, &st) == 0 && S_ISDIR(st.st_mode));
}

/* In a directory, one file per models and settings: a hash of the absolute paths and settings. */
static char *file_in_directory(const char *dir, const specd_calibration_identity *id) {
    char target[PATH_MAX], draft[PATH_MAX] = "";
    if (!realpath(id->target_path, target)) snprintf(target, sizeof target, "%s", id->target_path);
    if (id->draft_path && !realpath(id->draft_path, draft)) snprintf(draft, sizeof draft, "%s", id->draft_path);
    char settings[128];
    snprintf(settings, sizeof settings, "%d;%d;%d;%d", id->n_threads, id->n_batch, (int)id->flash_attn,
             (int)id->cache_type_v);
    uint64_t h = fnv1a(hash_string(target), "\n", 1);
    h = fnv1a(fnv1a(h, draft, strlen(draft)), "\n", 1);
    h = fnv1a(h, settings, strlen(settings)) ^ backend_hash();
    if (id->placement && *id->placement) h = fnv1a(h, id->placement, strlen(id->placement));
    if (id->n_threads_batch > 0) h = fnv1a(h, &id->n_threads_batch, sizeof id->n_threads_batch);
    size_t n = strlen(dir) + 64;
    char *path = malloc(n);
    if (path) snprintf(path, n, "%s%scalibration-%016" PRIx64 ".txt", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", h);
    return path;
}

char *specd_default_calibration_cache(void) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    /* The XDG spec: a relative XDG_CACHE_HOME is invalid and is ignored. */
    bool use_xdg = xdg && xdg[0] == '/';
    if (!use_xdg && (!home || !home[0])) return NULL;
    const char *base = use_xdg ? xdg : home, *tail = use_xdg ? "/specd/calibration/" : "/.cache/specd/calibration/";
    size_t n = strlen(base) + strlen(tail) + 1;
    char *path = malloc(n);
    if (path) snprintf(path, n, "%s%s", base, tail);
    return path;
}

/* ---- notes ----------------------------------------------------------------------------------- */

static void set_note(specd_calibration_state *c, const char *fmt, ...) SPECD_PRINTF(2, 3);
static void set_note(specd_calibration_state *c, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    for (char *p = line; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' '; /* one line, whatever the path holds */
    free(c->note);
    size_t n = strlen(line) + 1;
    c->note = malloc(n);
    if (c->note) memcpy(c->note, line, n);
}

/* ---- reading --------------------------------------------------------------------------------- */

typedef struct parsed_costs {
    double target_ms[SPECD_COSTS_MAX_BATCH + 1]; /* 0: not in the file */
    double draft_ms, first_draft_ms;
    specd_acceptance acceptance; /* the file's counts */
    bool has_acceptance;
    double held[SPECD_HELD_MAX + 1][3]; /* tokens, ms, steps; 0: not in the file */
    char key[1024];
} parsed_costs;

/* What an earlier process's acceptance counts for: half, so that this run's text soon has its say. */
#define FILE_ACCEPTANCE_WEIGHT 0.5
static const char *const MODE_NAMES[SPECD_ACCEPT_MODES] = {"greedy", "sampled"};

/* The whole file, NUL-terminated, or NULL (errno set; EFBIG when it is too large to be ours). */
static char *read_small_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(MAX_FILE_BYTES + 1);
    size_t n = buf ? fread(buf, 1, MAX_FILE_BYTES + 1, f) : 0;
    int failed = !buf ? ENOMEM : ferror(f) ? EIO : n > MAX_FILE_BYTES ? EFBIG : 0;
    fclose(f);
    if (failed) {
        free(buf);
        errno = failed;
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static bool parse_ms(const char *s, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v) || v <= 0.0 || v > MAX_MS) return false;
    *out = v;
    return true;
}

/* One line after the key: a size's cost or the draft token's. */
static bool parse_cost_line(char *line, parsed_costs *pc, int32_t *last_n, const char **why) {
    if (!strncmp(line, "draft_ms ", 9)) {
        if (pc->draft_ms > 0.0 || !parse_ms(line + 9, &pc->draft_ms)) return (*why = "bad draft_ms line"), false;
        return true;
    }
    if (!strncmp(line, "acceptance ", 11)) {
        for (int m = 0; m < SPECD_ACCEPT_MODES; m++) {
            size_t n = strlen(MODE_NAMES[m]);
            if (strncmp(line + 11, MODE_NAMES[m], n) != 0 || line[11 + n] != ' ') continue;
            if (!specd_acceptance_parse(&pc->acceptance, (specd_accept_mode)m, line + 12 + n, FILE_ACCEPTANCE_WEIGHT))
                return (*why = "bad acceptance line"), false;
            pc->has_acceptance = true;
            return true;
        }
        return (*why = "bad acceptance line"), false;
    }
    if (!strncmp(line, "held ", 5)) {
        int k = -1;
        double t[3];
        bool ok = sscanf(line + 5, "%d %lf %lf %lf", &k, &t[0], &t[1], &t[2]) == 4 &&
                  specd_held_timing_valid(k, t[0], t[1], t[2]) && t[1] <= MAX_MS * t[2] && pc->held[k][2] <= 0.0;
        if (!ok) return (*why = "bad held line"), false;
        memcpy(pc->held[k], t, sizeof t);
        return true;
    }
    if (!strncmp(line, "first_draft_ms ", 15)) {
        if (pc->first_draft_ms > 0.0 || !parse_ms(line + 15, &pc->first_draft_ms))
            return (*why = "bad first_draft_ms line"), false;
        return true;
    }
    if (strncmp(line, "target_ms ", 10) != 0) return (*why = "unknown line"), false;
    char *end = NULL;
    long n = strtol(line + 10, &end, 10);
    if (end == line + 10 || *end != ' ' || n <= *last_n || n > SPECD_COSTS_MAX_BATCH)
        return (*why = "bad target_ms size"), false;
    if (!parse_ms(end + 1, &pc->target_ms[n])) return (*why = "bad target_ms time"), false;
    *last_n = (int32_t)n;
    return true;
}

/* Checks and splits the text; false with *why when it is not a whole file of ours. */
static bool parse_file(char *text, size_t len, parsed_costs *pc, const char **why) {
    memset(pc, 0, sizeof *pc);
    char *check = len > 0 && text[len - 1] == '\n' ? strstr(text, "\ncheck ") : NULL;
    if (!check) return (*why = "no check line at its end"), false;
    size_t body = (size_t)(check - text) + 1;
    char expected[32];
    snprintf(expected, sizeof expected, "check %016" PRIx64 "\n", fnv1a(FNV_START, text, body));
    if (strcmp(check + 1, expected) != 0) return (*why = "its check sum does not match"), false;
    text[body] = '\0';
    int32_t line_no = 0, last_n = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        line_no++;
        if (line_no == 1) {
            if (strcmp(line, FILE_MAGIC) != 0 && strcmp(line, FILE_MAGIC_3) != 0)
                return (*why = "not a specd calibration file of this version"), false;
        } else if (line_no == 2) {
            if (strncmp(line, "key ", 4) != 0 || strlen(line + 4) >= sizeof pc->key) return (*why = "bad key line"), false;
            strcpy(pc->key, line + 4);
        } else if (!parse_cost_line(line, pc, &last_n, why)) {
            return false;
        }
    }
    if (last_n == 0) return (*why = "no target_ms line"), false;
    return true;
}

/* The file's costs are where a run starts (costs.h): its first passes set the level they are
 * scaled by, then the sizes it passes are re-learnt, and its first draft decode replaces the draft
 * costs. A busy moment already had little say when the file was written: each size is the
 * cheapest of its first passes, within the bounds below. */
static void apply_costs(const specd_calibrated *k, const parsed_costs *pc) {
    for (int32_t n = 1; n <= SPECD_COSTS_MAX_BATCH; n++)
        if (pc->target_ms[n] > 0.0) specd_costs_record_calibration(k->costs, n, pc->target_ms[n]);
    specd_costs_bound(k->costs); /* a file written on a busy machine */
    if ((pc->draft_ms > 0.0 || pc->first_draft_ms > 0.0) && k->has_draft)
        specd_costs_record_calibration_draft(k->costs, pc->first_draft_ms, pc->draft_ms);
    /* the draft model's acceptance: the plan starts from it instead of a prior (acceptance.h) */
    if (pc->has_acceptance && k->has_draft) *k->acceptance = pc->acceptance;
    /* where lengths are held: the best of an earlier process's drives first (held_lengths.h) */
    bool restored = false;
    for (int32_t i = 0; k->held && k->has_draft && i <= SPECD_HELD_MAX; i++)
        if (pc->held[i][2] > 0.0) restored |= specd_held_lengths_restore(k->held, i, pc->held[i][0], pc->held[i][1], pc->held[i][2]);
    if (restored) specd_held_lengths_start_at_best(k->held, k->held_max);
}

/* Reads the file into the costs when it is whole and made for these models and settings. */
static void load_file(const specd_calibrated *k) {
    specd_calibration_state *c = k->state;
    size_t len = 0;
    char *text = read_small_file(c->path, &len);
    if (!text) {
        if (errno != ENOENT)
            set_note(c, "cannot read the calibration cache '%s' (%s): costs are learnt from this run's passes",
                     c->path, errno == EFBIG ? "too large to be one" : strerror(errno));
        return;
    }
    parsed_costs pc;
    const char *why = NULL;
    if (!parse_file(text, len, &pc, &why))
        set_note(c, "calibration cache '%s' is corrupt (%s): ignored; costs are learnt again and the file replaced",
                 c->path, why);
    else if (strcmp(pc.key, c->key) != 0)
        set_note(c, "calibration cache '%s' is stale (made for other model files or settings): ignored; costs are "
                 "learnt again and the file replaced", c->path);
    else {
        apply_costs(k, &pc);
        c->source = SPECD_CALIBRATION_LOADED;
    }
    free(text);
}

static char *copy_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

void specd_calibration_open(const specd_engine *e, const specd_calibrated *k) {
    specd_calibration_state *c = k->state;
    specd_engine_setup setup;
    specd_engine_setup_of(e, &setup);
    const char *asked = setup.calibration_cache;
    if (!asked || !asked[0]) return;
    double t0 = specd_now_ms();
    specd_calibration_identity id = identity_of(&setup);
    char key[1024];
    c->source = SPECD_CALIBRATION_LEARNT;
    c->path = names_directory(asked) ? file_in_directory(asked, &id) : copy_string(asked);
    if (!specd_calibration_key(&id, key, sizeof key)) {
        set_note(c, "cannot key the calibration cache on the model files: costs are learnt from this run's passes");
    } else if (c->path && (c->key = copy_string(key)) != NULL) {
        load_file(k);
    }
    if (!c->path || !c->key) { /* nothing to read or write */
        free(c->path);
        c->path = NULL;
        c->source = SPECD_CALIBRATION_OFF;
    }
    c->saved_learnt = k->costs->n_learnt;
    c->saved_verdicts = k->acceptance->n_verdicts;
    c->ms += specd_now_ms() - t0;
}

/* ---- writing --------------------------------------------------------------------------------- */

/* mkdir -p of the directories above `path`. */
static bool make_parents(const char *path) {
    char *dir = copy_string(path);
    if (!dir) return false;
    bool ok = true;
    for (char *p = dir + 1; ok && (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) ok = false;
        *p = '/';
    }
    free(dir);
    return ok;
}

/* The file's text for the costs; NULL when out of memory. */
static char *format_file(const specd_calibrated *k) {
    const specd_costs *costs = k->costs;
    size_t cap = 16384 + strlen(k->state->key), len = 0;
    char *text = malloc(cap);
    if (!text) return NULL;
    len += (size_t)snprintf(text + len, cap - len, "%s\nkey %s\n", FILE_MAGIC, k->state->key);
    for (int32_t n = 1; n <= SPECD_COSTS_MAX_BATCH; n++)
        if (costs->base_ms[n] > 0.0) len += (size_t)snprintf(text + len, cap - len, "target_ms %d %.6g\n", n, costs->base_ms[n]);
    if (k->has_draft && costs->draft_ms > 0.0)
        len += (size_t)snprintf(text + len, cap - len, "draft_ms %.6g\n", costs->draft_ms);
    if (k->has_draft && costs->first_draft_ms > 0.0)
        len += (size_t)snprintf(text + len, cap - len, "first_draft_ms %.6g\n", costs->first_draft_ms);
    for (int m = 0; k->has_draft && m < SPECD_ACCEPT_MODES && k->acceptance->n_verdicts > 0; m++) {
        char numbers[2048];
        specd_acceptance_format(k->acceptance, (specd_accept_mode)m, numbers, sizeof numbers);
        len += (size_t)snprintf(text + len, cap - len, "acceptance %s %s\n", MODE_NAMES[m], numbers);
    }
    for (int32_t i = 0; k->held && k->has_draft && i <= SPECD_HELD_MAX; i++)
        if (k->held->steps[i] > 0.0 && k->held->ms[i] > 0.0)
            len += (size_t)snprintf(text + len, cap - len, "held %d %.6g %.6g %.6g\n", i, k->held->tokens[i],
                                    k->held->ms[i], k->held->steps[i]);
    snprintf(text + len, cap - len, "check %016" PRIx64 "\n", fnv1a(FNV_START, text, len));
    return text;
}

bool specd_calibration_replaceable(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return errno == ENOENT;
    if (S_ISDIR(st.st_mode)) return true; /* a folder: its own calibration-*.txt files */
    if (!S_ISREG(st.st_mode)) return false;
    if (st.st_size == 0) return true; /* nothing to lose */
    char head[sizeof MAGIC_PREFIX] = "";
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(head, 1, sizeof head - 1, f) : 0;
    if (f) fclose(f);
    return n == sizeof head - 1 && memcmp(head, MAGIC_PREFIX, n) == 0;
}

specd_status specd_calibration_cache_check(const char *path, char **error) {
    if (error) *error = NULL;
    if (!path || !path[0]) {
        specd_set_error(error, "specd_calibration_cache_check needs a path");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (specd_calibration_replaceable(path)) return SPECD_OK;
    specd_set_error(error, "calibration cache '%s' is an existing file that is not a specd calibration file (its "
                    "first line is not '" MAGIC_PREFIX "N'), and specd overwrites only its own: name a new file, a "
                    "calibration file or a folder", path);
    return SPECD_ERR_INVALID_ARGUMENT;
}

/* Writes beside the file and renames, so a reader never sees half a file. The temporary file is
 * made new (O_EXCL): a file that happens to have its name is never truncated. */
static int write_atomically(const char *path, const char *text) {
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp) return ENOMEM;
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) {
        int err = errno;
        free(tmp);
        return err; /* not ours (it may be another file of that name): nothing to remove */
    }
    FILE *f = fdopen(fd, "wb");
    int err = f ? 0 : errno;
    if (!f) close(fd);
    if (f && fputs(text, f) < 0) err = errno ? errno : EIO;
    if (f && fclose(f) != 0 && !err) err = errno ? errno : EIO;
    if (!err && rename(tmp, path) != 0) err = errno;
    if (err) unlink(tmp);
    free(tmp);
    return err;
}

static bool knows_a_size(const specd_costs *costs) {
    for (int32_t n = 1; n <= SPECD_COSTS_MAX_BATCH; n++)
        if (costs->base_ms[n] > 0.0) return true;
    return false;
}

void specd_calibration_save(const specd_calibrated *k) {
    specd_calibration_state *c = k->state;
    bool moved = k->costs->n_learnt != c->saved_learnt || k->acceptance->n_verdicts != c->saved_verdicts;
    if (!c->path || !moved || !knows_a_size(k->costs)) return;
    if (!specd_calibration_replaceable(c->path)) { /* e.g. a model: never clobbered */
        set_note(c, "the calibration cache '%s' is a file that is not a specd calibration file (its first line is "
                 "not '" MAGIC_PREFIX "N'): not overwritten, the costs learnt are not kept; name a new file or a "
                 "folder", c->path);
        c->saved_learnt = k->costs->n_learnt;
        c->saved_verdicts = k->acceptance->n_verdicts;
        return;
    }
    double t0 = specd_now_ms();
    char *text = format_file(k);
    int err = !text ? ENOMEM : !make_parents(c->path) ? errno : write_atomically(c->path, text);
    free(text);
    if (err)
        set_note(c, "cannot write the calibration cache '%s' (%s): the costs learnt are not kept", c->path,
                 strerror(err));
    c->saved_learnt = k->costs->n_learnt; /* also after a failure: one note, not one per request */
    c->saved_verdicts = k->acceptance->n_verdicts;
    c->ms += specd_now_ms() - t0;
}

void specd_calibration_close(specd_calibration_state *c) {
    free(c->path);
    free(c->key);
    free(c->note);
    memset(c, 0, sizeof *c);
}

specd_calibration_info specd_calibration_describe(const specd_calibration_state *c, const specd_costs *costs) {
    specd_calibration_info info = {.source = c->source, .path = c->path, .note = c->note, .ms = c->ms};
    for (int32_t n = 1; n <= SPECD_COSTS_MAX_BATCH; n++) info.n_sizes_known += costs->base_ms[n] > 0.0;
    return info;
}
