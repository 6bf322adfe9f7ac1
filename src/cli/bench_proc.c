/* bench_proc.c - runs one benchmark tool as a child process (stdin from /dev/null, stdout and
 * stderr captured), records its peak RSS, and reads its figures from what it printed. Also feeds
 * a script to a tool's stdin (gnuplot for the plots).
 *
 * SIGPIPE: a child that exits before reading all we write to it (gnuplot missing, or dying on a
 * bad script) would kill specd with SIGPIPE and lose the report. So SIGPIPE is ignored while we
 * write to a child, a failed write is an error we report, and children start with SIGPIPE at its
 * default (an ignored signal stays ignored across exec). */
#define _DEFAULT_SOURCE
#include "bench.h"

#include "../draft/drafter_registry.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_ARGS 64

typedef struct captured {
    char *text;
    size_t len;
    int status;
    double max_rss_mb;
} captured;

/* In the child: stdin from in_fd (/dev/null when < 0), then exec argv (execvp: a bare name is
 * looked up in PATH). Never returns. */
static void child_exec(char **argv, int in_fd, int out_fd, int err_fd) {
    signal(SIGPIPE, SIG_DFL);
    int stdin_fd = in_fd >= 0 ? in_fd : open("/dev/null", O_RDONLY);
    if (stdin_fd >= 0) dup2(stdin_fd, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    execvp(argv[0], argv);
    fprintf(stderr, "cannot run %s\n", argv[0]);
    _exit(127);
}

/* Reads a pipe to its end into a growing buffer. */
static char *read_all(int fd, size_t *len) {
    size_t cap = 1 << 16;
    char *buf = malloc(cap);
    *len = 0;
    for (ssize_t n; buf && (n = read(fd, buf + *len, cap - *len - 1)) > 0;) {
        *len += (size_t)n;
        if (cap - *len - 1 == 0) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    if (buf) buf[*len] = '\0';
    return buf;
}

/* Runs argv; stdout goes to out->text. stderr too unless json_only (then stderr is dropped so the
 * JSON can be parsed as is). */
static bool run_captured(char **argv, bool json_only, captured *out) {
    int p[2];
    if (pipe(p) != 0) return false;
    int err_fd = json_only ? open("/dev/null", O_WRONLY) : p[1];
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        close(p[0]);
        child_exec(argv, -1, p[1], err_fd);
    }
    close(p[1]);
    if (json_only && err_fd >= 0) close(err_fd);
    out->text = read_all(p[0], &out->len);
    close(p[0]);
    struct rusage ru;
    if (wait4(pid, &out->status, 0, &ru) < 0) return false;
    out->max_rss_mb = (double)ru.ru_maxrss / 1024.0; /* Linux reports kilobytes */
    return out->text != NULL;
}

/* ---- feeding a script to a tool ------------------------------------------------------------ */

bool bench_tool_in_path(const char *name) {
    const char *path = getenv("PATH");
    if (!path || !*path) return false;
    for (const char *dir = path;; dir++) {
        const char *end = strchr(dir, ':');
        size_t len = end ? (size_t)(end - dir) : strlen(dir);
        char file[4096];
        /* An empty PATH entry is the current folder. */
        snprintf(file, sizeof file, "%.*s/%s", len ? (int)len : 1, len ? dir : ".", name);
        struct stat st;
        if (stat(file, &st) == 0 && S_ISREG(st.st_mode) && access(file, X_OK) == 0) return true;
        if (!end) return false;
        dir = end;
    }
}

/* write() all of buf; false with errno set on failure (EPIPE: the reader has gone). */
static bool write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

/* Writes to the child with SIGPIPE ignored, so a child that has exited gives EPIPE, not death. */
static bool write_to_child(int fd, const char *input, size_t len, int *write_errno) {
    struct sigaction ignore = {.sa_handler = SIG_IGN}, old;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, &old);
    bool ok = write_all(fd, input, len);
    *write_errno = ok ? 0 : errno;
    sigaction(SIGPIPE, &old, NULL);
    return ok;
}

static void describe_status(char *buf, size_t size, int status) {
    if (WIFEXITED(status)) snprintf(buf, size, "exit status %d%s", WEXITSTATUS(status),
                                    WEXITSTATUS(status) == 127 ? ", not found or not runnable" : "");
    else if (WIFSIGNALED(status)) snprintf(buf, size, "killed by signal %d", WTERMSIG(status));
    else snprintf(buf, size, "status %d", status);
}

bool bench_feed_tool(const char *tool, const char *input, size_t len, char *err, size_t err_size) {
    int p[2];
    if (pipe(p) != 0) {
        snprintf(err, err_size, "cannot make a pipe for %s: %s", tool, strerror(errno));
        return false;
    }
    int devnull = open("/dev/null", O_WRONLY);
    pid_t pid = devnull >= 0 ? fork() : -1;
    if (pid == 0) {
        close(p[1]);
        char *argv[] = {(char *)tool, NULL};
        child_exec(argv, p[0], devnull, devnull);
    }
    close(p[0]);
    if (devnull >= 0) close(devnull);
    if (pid < 0) {
        close(p[1]);
        snprintf(err, err_size, "cannot start %s: %s", tool, strerror(errno));
        return false;
    }
    int write_errno = 0, status = 0;
    bool written = write_to_child(p[1], input, len, &write_errno);
    close(p[1]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    char how[96];
    describe_status(how, sizeof how, status);
    if (!written) {
        snprintf(err, err_size, "%s stopped reading its input (%s; %s)", tool, strerror(write_errno), how);
        return false;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err, err_size, "%s failed (%s)", tool, how);
        return false;
    }
    return true;
}

/* ---- argument lists ------------------------------------------------------------------------- */

typedef struct arglist {
    char *argv[MAX_ARGS];
    char owned[MAX_ARGS][64];
    int n;
} arglist;

static void add(arglist *a, const char *s) {
    if (a->n < MAX_ARGS - 1) a->argv[a->n++] = (char *)s;
    a->argv[a->n] = NULL;
}

/* Variadic so that the compiler checks each caller's format against its arguments. */
static void addf(arglist *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(arglist *a, const char *fmt, ...) {
    if (a->n >= MAX_ARGS - 1) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->owned[a->n], sizeof a->owned[a->n], fmt, ap);
    va_end(ap);
    add(a, a->owned[a->n]);
}

static void add_common(arglist *a, const bench_settings *s, const char *target, const char *prompt, double temp) {
    add(a, "-m"), add(a, target), add(a, "-p"), add(a, prompt);
    add(a, "-n"), addf(a, "%d", s->n_predict);
    add(a, "-c"), addf(a, "%d", s->n_ctx);
    add(a, "-t"), addf(a, "%d", s->n_threads);
    add(a, "--temp"), addf(a, "%g", temp);
    add(a, "--seed"), addf(a, "%d", s->seed);
    add(a, "--ignore-eos");
    if (s->n_gpu_layers) add(a, "-ngl"), add(a, s->n_gpu_layers);
    if (s->device) add(a, "--device"), add(a, s->device);
    if (s->rpc) add(a, "--rpc"), add(a, s->rpc);
    if (s->cache_type_k) add(a, "-ctk"), add(a, s->cache_type_k);
    if (s->cache_type_v) add(a, "-ctv"), add(a, s->cache_type_v);
}

/* The draft model's placement and cache flags, after its -md. */
static void add_draft_placement(arglist *a, const bench_settings *s) {
    if (s->n_gpu_layers_draft) add(a, "-ngld"), add(a, s->n_gpu_layers_draft);
    if (s->device_draft) add(a, "--device-draft"), add(a, s->device_draft);
    if (s->cache_type_k_draft) add(a, "-ctkd"), add(a, s->cache_type_k_draft);
    if (s->cache_type_v_draft) add(a, "-ctvd"), add(a, s->cache_type_v_draft);
}

static void tool_path(char *buf, size_t size, const bench_settings *s, const char *name) {
    snprintf(buf, size, "%s/%s", s->llama_bin, name);
}

/* Splits the config's extra specd flags (space-separated) into the list. */
static void add_split(arglist *a, char *copy) {
    for (char *tok = strtok(copy, " "); tok; tok = strtok(NULL, " ")) add(a, tok);
}

/* ---- parsing what the tools print ----------------------------------------------------------- */

/* llama-completion: the line "eval time = ... ( ... ms per token, X tokens per second)" (not the
 * "prompt eval time" line above it). */
static bool parse_completion(const char *text, bench_sample *out) {
    char line[512];
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), p);
        const char *per = strstr(line, "ms per token,");
        if (strstr(line, " eval time =") && !strstr(line, "prompt eval") && per &&
            sscanf(per, "ms per token, %lf", &out->tokens_per_s) == 1)
            return true;
        p += len + (nl ? 1 : 0);
    }
    return false;
}

/* llama-speculative(-simple): "decoded N tokens in S seconds, speed: X t/s", "n_drafted = D",
 * "n_accept  = A". */
static bool parse_speculative(const char *text, bench_sample *out) {
    const char *d = strstr(text, "decoded ");
    const char *sp = d ? strstr(d, "speed:") : NULL;
    if (!sp || sscanf(sp, "speed: %lf", &out->tokens_per_s) != 1) return false;
    const char *nd = strstr(text, "n_drafted =");
    const char *na = strstr(text, "n_accept  =");
    long drafted = 0, accepted = 0;
    if (nd && na && sscanf(nd, "n_drafted = %ld", &drafted) == 1 && sscanf(na, "n_accept  = %ld", &accepted) == 1 && drafted > 0)
        out->acceptance = (double)accepted / (double)drafted;
    return true;
}

static void read_array(json_t *arr, double *d, long *l, int max) {
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if ((int)i >= max) break;
        if (d) d[i] = json_number_value(v);
        if (l) l[i] = (long)json_integer_value(v);
    }
}

static bool parse_specd(const char *text, bench_sample *out) {
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    if (!root) return false;
    json_t *spec = json_object_get(root, "speculative"), *tim = json_object_get(root, "timings");
    out->tokens_per_s = json_number_value(json_object_get(tim, "decode_tokens_per_s"));
    if (json_integer_value(json_object_get(spec, "n_drafted")) > 0) {
        out->acceptance = json_number_value(json_object_get(spec, "acceptance_rate"));
        out->accepted_per_step = json_number_value(json_object_get(spec, "mean_accepted_per_step"));
    }
    json_t *costs = json_object_get(spec, "costs");
    read_array(json_object_get(costs, "verify_ms"), out->verify_ms, NULL, BENCH_MAX_POS);
    out->draft_token_ms = json_number_value(json_object_get(costs, "draft_token_ms"));
    read_array(json_object_get(spec, "drafted_at"), NULL, out->drafted_at, BENCH_MAX_POS);
    read_array(json_object_get(spec, "accepted_at"), NULL, out->accepted_at, BENCH_MAX_POS);
    json_t *graphs = json_object_get(root, "graphs");
    json_t *tg = json_object_get(graphs, "target"), *dg = json_object_get(graphs, "draft");
    out->target_passes = (long)json_integer_value(json_object_get(tg, "passes"));
    out->target_reused = (long)json_integer_value(json_object_get(tg, "reused"));
    out->draft_passes = (long)json_integer_value(json_object_get(dg, "passes"));
    out->draft_reused = (long)json_integer_value(json_object_get(dg, "reused"));
    json_decref(root);
    return out->tokens_per_s > 0.0;
}

/* ---- one run --------------------------------------------------------------------------------- */

static void build_args(const bench_settings *s, const bench_config *c, const char *target, const char *draft,
                       const char *prompt, double temp, arglist *a, char *path, size_t path_size, char *extra) {
    switch (c->tool) {
    case TOOL_LLAMA_COMPLETION:
        tool_path(path, path_size, s, "llama-completion");
        add(a, path), add_common(a, s, target, prompt, temp), add(a, "-no-cnv");
        break;
    case TOOL_LLAMA_SPEC_SIMPLE:
    case TOOL_LLAMA_SPEC:
        tool_path(path, path_size, s, c->tool == TOOL_LLAMA_SPEC ? "llama-speculative" : "llama-speculative-simple");
        add(a, path), add_common(a, s, target, prompt, temp);
        if (draft[0]) add(a, "-md"), add(a, draft), add_draft_placement(a, s); /* MTP: the target's own layers */
        add(a, "--spec-draft-n-max"), addf(a, "%d", c->draft_max);
        if (c->tool == TOOL_LLAMA_SPEC_SIMPLE)
            add(a, "--spec-type"), add(a, c->spec_type ? c->spec_type : specd_drafter_kind_of(SPECD_SPEC_DRAFT)->llama_name);
        break;
    case TOOL_LLAMA_NGRAM:
        tool_path(path, path_size, s, "llama-speculative-simple");
        add(a, path), add_common(a, s, target, prompt, temp), add(a, "--spec-type"), add(a, c->spec_type);
        break;
    case TOOL_SPECD:
        add(a, s->specd), add(a, "run"), add_common(a, s, target, prompt, temp), add(a, "--json");
        add(a, "--no-reproducible"); /* the seed is for repeatability: measure rejection sampling */
        if (s->batch_invariant) add(a, "--batch-invariant"), add(a, s->batch_invariant);
        if (c->cache) add(a, "--calibration-cache"), add(a, c->cache);
        if (!c->no_draft && draft[0]) add(a, "-md"), add(a, draft), add_draft_placement(a, s);
        if (c->specd_args) {
            snprintf(extra, 256, "%s", c->specd_args);
            add_split(a, extra);
        }
        break;
    }
}

/* tools/pass_costs sits beside the specd program in a build (build/bin). */
void bench_pass_costs(const bench_settings *s, const char *target, char *line, size_t size) {
    char path[1200];
    const char *slash = strrchr(s->specd, '/');
    snprintf(path, sizeof path, "%.*spass_costs", slash ? (int)(slash - s->specd + 1) : 0, s->specd);
    if (access(path, X_OK) != 0) {
        snprintf(line, size, "not measured (no %s: build the pass_costs target)", path);
        return;
    }
    arglist a = {.n = 0};
    add(&a, path), add(&a, target), addf(&a, "%d", s->n_threads), add(&a, "5"), add(&a, "off"), add(&a, "--short");
    if (s->n_gpu_layers) add(&a, "-ngl"), add(&a, s->n_gpu_layers);
    captured cap = {0};
    bool ran = run_captured(a.argv, true, &cap);
    const char *found = ran ? strstr(cap.text, "T(1..16)") : NULL;
    if (found && WIFEXITED(cap.status) && WEXITSTATUS(cap.status) == 0)
        snprintf(line, size, "%.*s", (int)strcspn(found, "\n"), found);
    else
        snprintf(line, size, "not measured (%s failed on %s)", path, target);
    free(cap.text);
}

/* cp from to; false when it cannot. */
static bool copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    bool ok = in && out;
    char buf[65536];
    for (size_t n; ok && (n = fread(buf, 1, sizeof buf, in)) > 0;) ok = fwrite(buf, 1, n, out) == n;
    ok = ok && !ferror(in);
    if (out && fclose(out) != 0) ok = false;
    if (in) fclose(in);
    return ok;
}

bool bench_learn_under_load(const bench_settings *s, const char *target, const char *draft, const char *prompt,
                            double temp, const char *path) {
    long n_hogs = sysconf(_SC_NPROCESSORS_ONLN);
    pid_t hogs[256];
    int started = 0;
    for (long i = 0; i < n_hogs && i < 256; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (volatile unsigned long x = 0;; x++) {} /* a busy core until killed */
        }
        if (pid > 0) hogs[started++] = pid;
    }
    bench_config c = {.name = "specd, learning under load", .tool = TOOL_SPECD, .cache = path};
    bench_sample sample;
    bool ok = bench_run_config(s, &c, target, draft, prompt, temp, &sample);
    for (int i = 0; i < started; i++) kill(hogs[i], SIGKILL);
    for (int i = 0; i < started; i++) waitpid(hogs[i], NULL, 0);
    return ok && access(path, R_OK) == 0;
}

bool bench_run_config(const bench_settings *s, const bench_config *c, const char *target, const char *draft,
                      const char *prompt, double temp, bench_sample *out) {
    memset(out, 0, sizeof *out);
    if (c->cache_from && !copy_file(c->cache_from, c->cache)) {
        snprintf(out->error, sizeof out->error, "cannot copy the calibration cache %s to %s", c->cache_from, c->cache);
        out->acceptance = out->accepted_per_step = -1.0;
        return false;
    }
    out->acceptance = out->accepted_per_step = -1.0;
    arglist a = {.n = 0};
    char path[1024], extra[256];
    build_args(s, c, target, draft, prompt, temp, &a, path, sizeof path, extra);
    captured cap = {0};
    if (!run_captured(a.argv, c->tool == TOOL_SPECD, &cap)) {
        snprintf(out->error, sizeof out->error, "could not start %s", a.argv[0]);
        return false;
    }
    bool parsed = c->tool == TOOL_SPECD ? parse_specd(cap.text, out)
                  : c->tool == TOOL_LLAMA_COMPLETION ? parse_completion(cap.text, out)
                                                     : parse_speculative(cap.text, out);
    /* llama.cpp prints "accept = -nan%" when an n-gram type drafted nothing: no acceptance. */
    out->max_rss_mb = cap.max_rss_mb;
    out->ok = parsed && WIFEXITED(cap.status) && WEXITSTATUS(cap.status) == 0;
    if (!out->ok) {
        const char *tail = cap.len > 200 ? cap.text + cap.len - 200 : cap.text;
        snprintf(out->error, sizeof out->error, "%s failed (status %d): ...%s", a.argv[0], cap.status, tail);
    }
    free(cap.text);
    return out->ok;
}
