/* test_calibration_cache.c - the calibration cache file (draft/calibrate.h) on the tiny models:
 * written after a generation that learnt the costs, read back by the next engine, never trusted
 * when stale or corrupt (a one-line note says so), keyed by the model files and the settings; and
 * no timed pass clears a cache a request relies on.
 *
 *   test_calibration_cache MODELS_DIR
 * Every file goes to a fresh temporary directory: the user's own cache is never touched. */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "engine/engine_internal.h"
#include "engine_helpers.h"
#include "draft/calibrate.h"
#include "draft/learned.h"
#include "specd.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char target_path[1024], draft_path[1024];
static char tmp_dir[256]; /* this test's directory, removed at the end */

static void tmp_file(char *out, size_t size, const char *name) { snprintf(out, size, "%s/%s", tmp_dir, name); }

static specd_engine *open_cached(const char *cache, int32_t n_threads) {
    specd_engine_params p = test_engine_params(target_path, draft_path, 256);
    p.n_threads = n_threads;
    p.calibration_cache = cache;
    return open_engine_with(&p);
}

static specd_generation_params speculative_params(void) {
    specd_generation_params g = specd_generation_default_params();
    g.n_predict = 24;
    g.ignore_eos = true;
    g.sampling.temperature = 0.0f;
    g.speculative.type = SPECD_SPEC_DRAFT;
    g.speculative.draft_max = 4;
    return g;
}

/* Generates `text` once on e (speculative_params, n_predict tokens), which learns the costs and
 * writes the file; the result is dropped. */
static void speculate_once(specd_engine *e, const char *text, int32_t n_predict) {
    specd_generation_params g = speculative_params();
    g.n_predict = n_predict;
    specd_result r = generate_text(e, text, &g);
    specd_result_clear(&r);
}

/* Opens an engine on `cache`, generates once (which learns the costs and writes the file). */
static void learn_into(const char *cache) {
    specd_engine *e = open_cached(cache, 1);
    speculate_once(e, "the little girl saw a big red ball", 24);
    specd_engine_free(e);
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void assert_one_line_note(specd_engine *e, const char *needle) {
    const char *note = specd_engine_calibration(e).note;
    if (!note) fail_msg("no note; expected one saying '%s'", needle);
    if (!strstr(note, needle)) fail_msg("note '%s' does not say '%s'", note, needle);
    assert_null(strchr(note, '\n'));
}

/* ---- written, then read back ----------------------------------------------------------------- */

static void test_costs_learnt_are_written_and_read_back(void **state) {
    (void)state;
    char path[512];
    tmp_file(path, sizeof path, "roundtrip.txt");
    specd_engine *e = open_cached(path, 1);
    assert_int_equal(specd_engine_calibration(e).source, SPECD_CALIBRATION_LEARNT);
    assert_int_equal(specd_engine_calibration(e).n_sizes_known, 0);
    assert_null(specd_engine_calibration(e).note); /* no file yet: nothing to say */
    speculate_once(e, "one day the dog ran to the park with his mom", 24);
    assert_non_null(read_text(path));
    int32_t learnt = specd_engine_calibration(e).n_sizes_known;
    assert_true(learnt > 0);
    double t_ms[SPECD_COSTS_MAX_BATCH + 1], draft_ms = e->learned->costs.draft_ms;
    memcpy(t_ms, e->learned->costs.base_ms, sizeof t_ms);
    specd_engine_free(e);

    specd_engine *again = open_cached(path, 1);
    specd_calibration_info info = specd_engine_calibration(again);
    assert_int_equal(info.source, SPECD_CALIBRATION_LOADED);
    assert_null(info.note);
    assert_int_equal(info.n_sizes_known, learnt);
    for (int32_t n = 1; n <= SPECD_COSTS_MAX_BATCH; n++) assert_float_equal(again->learned->costs.base_ms[n], t_ms[n], 1e-5 * t_ms[n]);
    assert_float_equal(again->learned->costs.draft_ms, draft_ms, 1e-5 * draft_ms);
    specd_engine_free(again);
}

/* A directory holds one file per models and settings. */
static void test_a_directory_holds_a_file_per_setting(void **state) {
    (void)state;
    char dir[512];
    tmp_file(dir, sizeof dir, "by-setting/nested/"); /* created on the first write */
    learn_into(dir);
    specd_engine *one = open_cached(dir, 1), *two = open_cached(dir, 2);
    assert_int_equal(specd_engine_calibration(one).source, SPECD_CALIBRATION_LOADED);
    assert_int_equal(specd_engine_calibration(two).source, SPECD_CALIBRATION_LEARNT); /* other threads */
    assert_null(specd_engine_calibration(two).note); /* not stale: another file */
    assert_string_not_equal(specd_engine_calibration(one).path, specd_engine_calibration(two).path);
    assert_true(strncmp(specd_engine_calibration(one).path, dir, strlen(dir)) == 0);
    specd_engine_free(one);
    specd_engine_free(two);
}

/* ---- never trusted when stale or corrupt ----------------------------------------------------- */

/* Opens an engine on a file holding `text`: its costs must be untouched, with a note saying `why`;
 * after a generation the file is replaced by one the next engine loads. */
static void assert_ignored_then_replaced(const char *name, const char *text, const char *why) {
    char path[512];
    tmp_file(path, sizeof path, name);
    write_text(path, text);
    specd_engine *e = open_cached(path, 1);
    assert_int_equal(specd_engine_calibration(e).source, SPECD_CALIBRATION_LEARNT);
    assert_int_equal(specd_engine_calibration(e).n_sizes_known, 0);
    assert_float_equal(e->learned->costs.draft_ms, 0.0, 0.0);
    assert_one_line_note(e, why);
    speculate_once(e, "she was happy", 24);
    specd_engine_free(e);
    specd_engine *again = open_cached(path, 1);
    assert_int_equal(specd_engine_calibration(again).source, SPECD_CALIBRATION_LOADED);
    assert_null(specd_engine_calibration(again).note);
    specd_engine_free(again);
}

/* A whole, well-formed file of these models and settings. */
static void valid_file(char *out, size_t size) {
    char path[512];
    tmp_file(path, sizeof path, "valid.txt");
    learn_into(path);
    const char *text = read_text(path);
    assert_non_null(text);
    assert_true(strlen(text) < size);
    memcpy(out, text, strlen(text) + 1);
}

static void test_a_corrupt_file_is_ignored(void **state) {
    (void)state;
    char good[8192], bad[8192];
    valid_file(good, sizeof good);
    assert_ignored_then_replaced("empty.txt", "", "corrupt");
    /* cut in the middle, as by a full disk */
    snprintf(bad, sizeof bad, "%.*s", (int)(strlen(good) / 2), good);
    assert_ignored_then_replaced("truncated.txt", bad, "corrupt");
    /* one cost changed by hand: the check line no longer matches */
    snprintf(bad, sizeof bad, "%s", good);
    char *digit = strstr(bad, "target_ms ");
    assert_non_null(digit);
    digit = strchr(digit + 10, ' ') + 1;
    *digit = *digit == '9' ? '1' : '9';
    assert_ignored_then_replaced("edited.txt", bad, "check sum");
}

/* The cost model prices the cache fill for an attention model on the CPU (costs.h:
 * specd_attention_cost): with flash attention off, each token reads every used cell (and the pass
 * once more), at a rate
 * capped by the operations per cell. */
static void test_the_fill_is_priced_for_an_attention_model(void **state) {
    (void)state;
    specd_engine *e = open_cached(NULL, 1);
    specd_engine_calibration(e); /* creates the learned state */
    const specd_attention_cost *a = &e->learned->costs.attention;
    assert_true(a->per_t1 > 0.0);
    assert_float_equal(a->own_weight, 0.0, 0.0);
    assert_float_equal(a->all_weight, 1.0, 0.0);
    assert_float_equal(a->pass_weight, 1.0, 0.0);
    /* 4 n_layer n_embd operations per cell at 0.021 ms per million on 2 threads, twice that on 1 */
    double ops = 4.0 * llama_model_n_layer(e->target.model) * llama_model_n_embd(e->target.model);
    assert_float_equal(a->max_ms, 0.021 * ops / 1e6 * 2.0, 1e-12);
    specd_engine_free(e);
}

/* The file's own check line: FNV-1a 64 of every byte before it (calibrate.h). */
static void reseal(char *text) {
    char *check = strstr(text, "\ncheck ");
    assert_non_null(check);
    unsigned long long h = 14695981039346656037ULL;
    for (const char *p = text; p <= check; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    sprintf(check + 1, "check %016llx\n", h);
}

/* Whole files of older versions are replaced, not read: version 1 held costs learnt at whatever
 * cache fill their passes had (a server's could price T(8) at 1.4x T(1) where it is 3.7x), version
 * 2 one draft cost for a step's first draft token and the next ones. */
static void test_a_file_of_an_older_version_is_replaced(void **state) {
    (void)state;
    for (char version = '1'; version <= '2'; version++) {
        char text[8192], name[32];
        valid_file(text, sizeof text);
        char *magic = strstr(text, "specd-calibration 4\n");
        assert_ptr_equal(magic, text);
        magic[strlen("specd-calibration ")] = version;
        reseal(text);
        snprintf(name, sizeof name, "version-%c.txt", version);
        assert_ignored_then_replaced(name, text, "not a specd calibration file of this version");
    }
}

/* Version 3 (no held lengths' timings) is read as it is: only what version 4 added is missing. */
static void test_a_version_3_file_is_read(void **state) {
    (void)state;
    char text[8192], path[512];
    valid_file(text, sizeof text);
    char *magic = strstr(text, "specd-calibration 4\n");
    assert_ptr_equal(magic, text);
    magic[strlen("specd-calibration ")] = '3';
    reseal(text);
    tmp_file(path, sizeof path, "version-3.txt");
    write_text(path, text);
    specd_engine *e = open_cached(path, 1);
    assert_int_equal(specd_engine_calibration(e).source, SPECD_CALIBRATION_LOADED);
    assert_null(specd_engine_calibration(e).note);
    specd_engine_free(e);
}

/* An engine's params with its calibration file at `path` and draft lengths held (draft_hold on). */
static specd_engine_params held_params(const char *path) {
    specd_engine_params p = test_engine_params(target_path, draft_path, 256);
    p.n_threads = 1;
    p.calibration_cache = path;
    p.draft_hold = SPECD_DRAFT_HOLD_ON;
    return p;
}

/* The file `text` with its held lines (they come last, before the check) replaced by `lines`,
 * sealed again and written to `path`. */
static void write_with_held_lines(const char *path, const char *text, const char *lines) {
    static char edited[65536];
    snprintf(edited, sizeof edited, "%s", text);
    char *held_lines = strstr(edited, "\nheld ");
    assert_non_null(held_lines);
    sprintf(held_lines, "%scheck 0\n", lines);
    reseal(edited);
    write_text(path, edited);
}

/* Where draft lengths are held (here forced: draft_hold on), what each length made is kept, and the
 * next engine starts at the best of them instead of at 3 (held_lengths.h); a bad held line makes
 * the file corrupt, as any bad line does. */
static void test_held_lengths_timings_are_written_and_read_back(void **state) {
    (void)state;
    char path[512];
    tmp_file(path, sizeof path, "held.txt");
    specd_engine_params p = held_params(path);
    specd_engine *e = open_engine_with(&p);
    speculate_once(e, "one day the dog ran to the park with his mom", 96);
    const specd_held_lengths *held = &e->learned->policy.held;
    int32_t best = -1, timed = 0;
    for (int32_t k = 0; k <= SPECD_HELD_MAX; k++) {
        if (held->ms[k] <= 0.0) continue;
        timed++;
        if (best < 0 || held->tokens[k] / held->ms[k] > held->tokens[best] / held->ms[best]) best = k;
    }
    assert_true(timed >= 2); /* 3, and no drafts from the plain steps, at least */
    specd_held_lengths before = *held;
    specd_engine_free(e);
    const char *text = read_text(path);
    assert_non_null(strstr(text, "\nheld 3 "));

    specd_engine *again = open_engine_with(&p);
    assert_int_equal(specd_engine_calibration(again).source, SPECD_CALIBRATION_LOADED);
    const specd_held_lengths *read = &again->learned->policy.held;
    for (int32_t k = 0; k <= SPECD_HELD_MAX; k++) {
        assert_float_equal(read->tokens[k], before.tokens[k], 1e-5 * before.tokens[k]);
        assert_float_equal(read->ms[k], before.ms[k], 1e-5 * before.ms[k]);
    }
    assert_int_equal(read->length, best);
    assert_int_equal(specd_length_policy_fixed(&again->learned->policy), best);
    specd_engine_free(again);

    /* the file's held lines, replaced by three whose best is 2 (not 3, where a process starts) */
    write_with_held_lines(path, text, "\nheld 0 10 10 10\nheld 2 30 10 10\nheld 3 20 10 10\n");
    again = open_engine_with(&p);
    assert_int_equal(specd_engine_calibration(again).source, SPECD_CALIBRATION_LOADED);
    assert_int_equal(specd_length_policy_fixed(&again->learned->policy), 2);
    specd_engine_free(again);

    static char bad[65536];
    snprintf(bad, sizeof bad, "%s", text);
    char *line = strstr(bad, "\nheld 3 ");
    line[6] = '9', line[7] = '9'; /* "held 99": no such length */
    reseal(bad);
    assert_ignored_then_replaced("held-bad.txt", bad, "bad held line");
}

/* A file whose best held length is none: the first step re-measures the file's draft costs with
 * the two drafts that takes (generate.c), not with a chain to the whole budget (it had no plan to
 * stop it: draft_max drafts). */
static void test_a_held_none_remeasures_with_two_drafts(void **state) {
    (void)state;
    char path[512];
    tmp_file(path, sizeof path, "held-none.txt");
    specd_engine_params p = held_params(path);
    specd_engine *e = open_engine_with(&p);
    speculate_once(e, "one day the dog ran to the park with his mom", 24);
    specd_engine_free(e);
    const char *text = read_text(path);
    assert_non_null(text);
    assert_non_null(strstr(text, "\ndraft_ms "));
    write_with_held_lines(path, text, "\nheld 0 10 2 10\nheld 3 20 10 10\n");

    e = open_engine_with(&p);
    assert_int_equal(specd_engine_calibration(e).source, SPECD_CALIBRATION_LOADED);
    assert_int_equal(specd_length_policy_fixed(&e->learned->policy), 0);
    specd_generation_params g = speculative_params();
    specd_result r = generate_text(e, "the little girl saw a big red ball", &g);
    assert_int_equal(r.stats.draft_len_hist[2], 1);
    for (int32_t k = 3; k <= g.speculative.draft_max; k++) assert_int_equal(r.stats.draft_len_hist[k], 0);
    specd_result_clear(&r);
    specd_engine_free(e);
}

static void test_a_file_for_other_settings_is_stale(void **state) {
    (void)state;
    char path[512];
    tmp_file(path, sizeof path, "other-threads.txt");
    learn_into(path); /* with one thread */
    specd_engine *e = open_cached(path, 2);
    assert_int_equal(specd_engine_calibration(e).n_sizes_known, 0);
    assert_one_line_note(e, "stale");
    specd_engine_free(e);
}

/* ---- the key --------------------------------------------------------------------------------- */

static void copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    for (size_t n; (n = fread(buf, 1, sizeof buf, in)) > 0;) assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
}

static void key_with(const char *target, int32_t n_threads, int32_t n_threads_batch, const char *placement, char *out,
                     size_t size) {
    specd_calibration_identity id = {target, draft_path, n_threads, 512, SPECD_FLASH_ATTN_OFF, SPECD_CACHE_TYPE_F32,
                                     placement, n_threads_batch};
    assert_true(specd_calibration_key(&id, out, size));
}

static void key_placed(const char *target, int32_t n_threads, const char *placement, char *out, size_t size) {
    key_with(target, n_threads, 0, placement, out, size);
}

static void key_of(const char *target, int32_t n_threads, char *out, size_t size) {
    key_placed(target, n_threads, NULL, out, size);
}

/* Costs measured with the layers on a GPU are not those of the CPU, nor of another split. */
static void test_the_key_follows_the_placement(void **state) {
    (void)state;
    char cpu[1024], empty[1024], gpu[1024], gpu_part[1024], draft_gpu[1024];
    key_placed(target_path, 2, NULL, cpu, sizeof cpu);
    key_placed(target_path, 2, "", empty, sizeof empty);
    assert_string_equal(cpu, empty);
    assert_null(strstr(cpu, "place=")); /* files from before placements stay valid on the CPU */
    key_placed(target_path, 2, "target=CUDA0:9/9;draft=CPU:0/9", gpu, sizeof gpu);
    key_placed(target_path, 2, "target=CUDA0:4/9;draft=CPU:0/9", gpu_part, sizeof gpu_part);
    key_placed(target_path, 2, "target=CUDA0:9/9;draft=CUDA0:9/9", draft_gpu, sizeof draft_gpu);
    assert_string_not_equal(cpu, gpu);
    assert_string_not_equal(gpu, gpu_part);
    assert_string_not_equal(gpu, draft_gpu);
    assert_non_null(strstr(gpu, ";place=target=CUDA0:9/9;draft=CPU:0/9"));
}

static void test_the_key_follows_the_model_file_and_threads(void **state) {
    (void)state;
    char model[512], k0[1024], k1[1024];
    tmp_file(model, sizeof model, "model-copy.gguf");
    copy_file(target_path, model);
    key_of(model, 2, k0, sizeof k0);
    key_of(model, 2, k1, sizeof k1);
    assert_string_equal(k0, k1); /* the same file and settings: the same key */
    key_of(model, 4, k1, sizeof k1);
    assert_string_not_equal(k0, k1);
    /* the same bytes, touched (a newer file under the same name) */
    struct timespec times[2] = {{.tv_sec = 1000000000, .tv_nsec = 0}, {.tv_sec = 1000000000, .tv_nsec = 0}};
    assert_int_equal(utimensat(AT_FDCWD, model, times, 0), 0);
    key_of(model, 2, k1, sizeof k1);
    assert_string_not_equal(k0, k1);
    /* other contents, same size and time: the header's hash */
    char before[1024];
    key_of(model, 2, before, sizeof before);
    FILE *f = fopen(model, "r+b");
    assert_non_null(f);
    fseek(f, 100, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 100, SEEK_SET);
    fputc(c ^ 0xff, f);
    fclose(f);
    assert_int_equal(utimensat(AT_FDCWD, model, times, 0), 0);
    key_of(model, 2, k1, sizeof k1);
    assert_string_not_equal(before, k1);
    /* threads for batches (-tb) other than -t: their own costs; the same as -t (0): the old key */
    char tb[1024];
    key_with(model, 2, 1, NULL, tb, sizeof tb);
    assert_string_not_equal(tb, k1);
    assert_non_null(strstr(tb, ";tb=1"));
    /* a file that cannot be read gives no key */
    specd_calibration_identity missing = {"/nonexistent/model.gguf", NULL, 2, 512, SPECD_FLASH_ATTN_OFF,
                                          SPECD_CACHE_TYPE_F32, NULL, 0};
    assert_false(specd_calibration_key(&missing, k1, sizeof k1));
}

/* A model file changed under the same path: its old costs are not trusted. */
static void test_a_changed_model_makes_the_file_stale(void **state) {
    (void)state;
    char path[512];
    tmp_file(path, sizeof path, "changed-model.txt");
    learn_into(path);
    struct timespec times[2] = {{.tv_sec = 1000000000, .tv_nsec = 0}, {.tv_sec = 1000000000, .tv_nsec = 0}};
    char saved_draft[1024];
    snprintf(saved_draft, sizeof saved_draft, "%s", draft_path);
    tmp_file(draft_path, sizeof draft_path, "draft-copy.gguf");
    copy_file(saved_draft, draft_path);
    learn_into(path); /* keyed on the copy */
    assert_int_equal(utimensat(AT_FDCWD, draft_path, times, 0), 0);
    specd_engine *e = open_cached(path, 1);
    assert_one_line_note(e, "stale");
    assert_int_equal(specd_engine_calibration(e).n_sizes_known, 0);
    specd_engine_free(e);
    snprintf(draft_path, sizeof draft_path, "%s", saved_draft);
}

/* The bytes of `path` (heap) and their count. */
static unsigned char *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    unsigned char *bytes = malloc((size_t)size + 1);
    assert_non_null(bytes);
    *n = fread(bytes, 1, (size_t)size, f);
    fclose(f);
    return bytes;
}

/* A generation goes on whatever became of the cache file (its 24 tokens), and the engine's one-line
 * note says what did. */
static void expect_run_with_note(specd_engine *e, const char *note) {
    specd_generation_params g = speculative_params();
    specd_result r = generate_text(e, "she was happy", &g);
    assert_int_equal(r.n_tokens, 24);
    specd_result_clear(&r);
    assert_one_line_note(e, note);
}

/* A cache path naming a file that is not specd's (a model, any other text) is never overwritten: an
 * admin's calibration_cache replaced a 222912-byte GGUF with 555 bytes of text. The run goes on
 * and says why nothing was kept. */
static void expect_kept(const char *path, const char *open_note) {
    size_t n_before = 0, n_after = 0;
    unsigned char *before = read_bytes(path, &n_before);
    specd_engine *e = open_cached(path, 1);
    assert_int_equal(specd_engine_calibration(e).source, SPECD_CALIBRATION_LEARNT);
    assert_one_line_note(e, open_note);
    expect_run_with_note(e, "is a file that is not a specd calibration file");
    specd_engine_free(e);
    unsigned char *after = read_bytes(path, &n_after);
    assert_int_equal(n_after, n_before);
    assert_memory_equal(after, before, n_before);
    free(before);
    free(after);
}

static void test_a_file_that_is_not_a_calibration_file_is_never_overwritten(void **state) {
    (void)state;
    char model[512], garbage[512];
    tmp_file(model, sizeof model, "model.gguf");
    copy_file(draft_path, model);
    expect_kept(model, "too large to be one");
    tmp_file(garbage, sizeof garbage, "garbage.txt");
    write_text(garbage, "\x01\x02 not a calibration file\n");
    expect_kept(garbage, "corrupt");
    /* and the check that refuses such a path up front (the server's init) */
    char *err = NULL;
    assert_int_equal(specd_calibration_cache_check(model, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "is an existing file that is not a specd calibration file"));
    assert_non_null(strstr(err, model));
    specd_free(err);
    char fresh[512], valid[512];
    tmp_file(fresh, sizeof fresh, "new-cache.txt");
    tmp_file(valid, sizeof valid, "checked.txt");
    learn_into(valid);
    const char *ok_paths[] = {fresh, tmp_dir, valid};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(specd_calibration_cache_check(ok_paths[i], &err), SPECD_OK);
        assert_null(err);
    }
}

static void test_an_unwritable_cache_leaves_a_note_and_the_run_goes_on(void **state) {
    (void)state;
    specd_engine *e = open_cached("/proc/specd-cannot-write-here/calibration.txt", 1);
    expect_run_with_note(e, "cannot write");
    specd_engine_free(e);
}

static void test_off_means_no_file(void **state) {
    (void)state;
    specd_engine *e = open_cached(NULL, 1);
    specd_calibration_info info = specd_engine_calibration(e);
    assert_int_equal(info.source, SPECD_CALIBRATION_OFF);
    assert_null(info.path);
    specd_engine_free(e);
}

/* ---- nothing clears a cache a request relies on ---------------------------------------------- */

/* The first speculative request of an engine used to time passes of every size first, which
 * cleared both KV caches: a request without speculation before it lost its prompt cache. */
static void test_the_first_speculative_request_keeps_the_prompt_cache(void **state) {
    (void)state;
    specd_engine *e = open_cached(NULL, 1);
    specd_generation_params plain = speculative_params();
    plain.speculative.type = SPECD_SPEC_NONE;
    specd_result first = generate_text(e, "one day the dog ran to the park with his mom", &plain);
    specd_generation_params g = speculative_params();
    specd_result second = generate_text(e, "one day the dog ran to the park with his mom", &g);
    assert_int_equal(second.stats.n_prompt_cached, second.stats.n_prompt - 1);
    assert_true(second.stats.n_drafted > 0 || second.stats.n_steps > 0);
    specd_result_clear(&first);
    specd_result_clear(&second);
    specd_engine_free(e);
}

/* ---- the default location -------------------------------------------------------------------- */

/* The engine keeps its own copy of the path: the file is opened at the first request, and a
 * caller may free its string right after specd_engine_new (JSON-RPC init does: specd serve wrote
 * its files under names made of freed memory in the working directory). */
static void test_the_path_may_be_freed_after_the_load(void **state) {
    (void)state;
    char *dir = malloc(300);
    assert_non_null(dir);
    snprintf(dir, 300, "%s/freed-after-load/", tmp_dir);
    specd_engine *e = open_cached(dir, 1);
    memset(dir, 'x', strlen(dir)); /* what a reuse of the memory would leave */
    free(dir);
    speculate_once(e, "the little girl saw a big red ball", 24);
    specd_calibration_info info = specd_engine_calibration(e);
    char want[300];
    snprintf(want, sizeof want, "%s/freed-after-load/calibration-", tmp_dir);
    assert_non_null(info.path);
    assert_true(strncmp(info.path, want, strlen(want)) == 0);
    assert_int_equal(access(info.path, R_OK), 0);
    specd_engine_free(e);
}

static void test_the_default_is_under_the_xdg_cache(void **state) {
    (void)state;
    char *old_xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("XDG_CACHE_HOME", "/somewhere/cache", 1);
    char *p = specd_default_calibration_cache();
    assert_string_equal(p, "/somewhere/cache/specd/calibration/");
    specd_free(p);
    setenv("XDG_CACHE_HOME", "relative/is/ignored", 1);
    setenv("HOME", getenv("HOME") ? getenv("HOME") : "/home/x", 1);
    p = specd_default_calibration_cache();
    assert_non_null(strstr(p, "/.cache/specd/calibration/"));
    specd_free(p);
    if (old_xdg) setenv("XDG_CACHE_HOME", old_xdg, 1);
    else unsetenv("XDG_CACHE_HOME");
    free(old_xdg);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int main(int argc, char **argv) {
    if (!tiny_model_paths(argc, argv, target_path, draft_path, sizeof target_path)) return 2;
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmp_dir, sizeof tmp_dir, "%s/specd-calibration-XXXXXX", base);
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_costs_learnt_are_written_and_read_back),
        cmocka_unit_test(test_a_directory_holds_a_file_per_setting),
        cmocka_unit_test(test_a_corrupt_file_is_ignored),
        cmocka_unit_test(test_a_version_3_file_is_read),
        cmocka_unit_test(test_held_lengths_timings_are_written_and_read_back),
        cmocka_unit_test(test_a_held_none_remeasures_with_two_drafts),
        cmocka_unit_test(test_a_file_of_an_older_version_is_replaced),
        cmocka_unit_test(test_the_fill_is_priced_for_an_attention_model),
        cmocka_unit_test(test_a_file_for_other_settings_is_stale),
        cmocka_unit_test(test_the_key_follows_the_model_file_and_threads),
        cmocka_unit_test(test_the_key_follows_the_placement),
        cmocka_unit_test(test_a_changed_model_makes_the_file_stale),
        cmocka_unit_test(test_an_unwritable_cache_leaves_a_note_and_the_run_goes_on),
        cmocka_unit_test(test_a_file_that_is_not_a_calibration_file_is_never_overwritten),
        cmocka_unit_test(test_off_means_no_file),
        cmocka_unit_test(test_the_path_may_be_freed_after_the_load),
        cmocka_unit_test(test_the_first_speculative_request_keeps_the_prompt_cache),
        cmocka_unit_test(test_the_default_is_under_the_xdg_cache),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return failed;
}
