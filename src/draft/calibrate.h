/* calibrate.h - what speculation costs with these models on this machine, kept between processes.
 *
 * The draft length controller needs T(n), the cost of a target pass over n tokens, and the cost of
 * a draft token (draft_length.h). Nothing is timed for its own sake: timed passes produce nothing,
 * cost about 0.7 s before the first prompt token on the benchmark pair, and clear both KV caches
 * (a request after them loses its prompt cache). Instead:
 *  - an engine given a cache file (specd_engine_params.calibration_cache) starts with the costs an
 *    earlier process measured with the same model files, threads, batch, attention settings and
 *    CPU backend;
 *  - without one, costs start from a prior shape and are learnt from the passes the generation
 *    makes anyway (the first passes of each size, then one level factor for all sizes), and the
 *    file is written when something new was learnt, for the next process.
 * A file that does not parse, or was made for other model files or settings, is never trusted: it
 * is ignored with a one-line note (specd_engine_calibration) and replaced, when it is a calibration
 * file (its first line "specd-calibration N"); any other file (a model named by mistake) is never
 * overwritten (specd_calibration_replaceable).
 *
 * The file is text:
 *     specd-calibration 4       (a version 3 file, which has no held lines, is read too)
 *     key <the identity below>
 *     target_ms <n> <ms>        one line per size known (1..SPECD_DL_MAX_BATCH), increasing n:
 *                               a pass over n tokens on an empty cache
 *     draft_ms <ms>             when a draft model's token cost is known (after a step's first)
 *     first_draft_ms <ms>       and the first draft token of a step (costs.h)
 *     acceptance greedy|sampled <numbers>   the draft model's acceptance counts (acceptance.h),
 *                               read at half weight
 *     held <k> <tokens> <ms> <steps>        where draft lengths are held (an offloaded target:
 *                               held_lengths.h), what length k made, decayed; the best drives
 *                               first in the next process
 *     check <16 hex digits>     FNV-1a 64 of every byte above
 * The key: for each model, its size, modification time (ns) and an FNV-1a 64 hash of its first
 * 64 KiB (the GGUF header and metadata); the threads, batch size, flash attention and V cache
 * type; and a hash of llama.cpp's system info (the CPU backend and its features). A directory
 * given as the cache holds one file per models and settings, named by a hash of the paths and
 * settings, so switching between them keeps each one's costs. */
#ifndef SPECD_CALIBRATE_H
#define SPECD_CALIBRATE_H

#include "../engine/engine.h"
#include "acceptance.h"
#include "costs.h"
#include "held_lengths.h"

#include <stddef.h>

/* The calibration cache of an engine (kept in its learned state, learned.h). */
typedef struct specd_calibration_state {
    char *path;  /* the cache file; NULL: none */
    char *key;   /* the key of these models and settings; NULL when they could not be keyed */
    char *note;  /* the latest note about the file, or NULL */
    specd_calibration_source source;
    double ms;   /* spent keying, reading and writing */
    uint32_t saved_learnt; /* costs.n_learnt when the file was last read or written */
    uint32_t saved_verdicts; /* acceptance.n_verdicts then */
} specd_calibration_state;

/* What identifies a measurement: the models and the settings that change what a pass costs. */
typedef struct specd_calibration_identity {
    const char *target_path;
    const char *draft_path; /* NULL: none */
    int32_t n_threads;
    int32_t n_batch;
    specd_flash_attn flash_attn;
    specd_cache_type cache_type_v; /* the effective type (F16 or F32) */
    /* Where the layers are, "target=CUDA0:33/33;draft=CPU:0/5" (placement.h): a pass on a GPU
     * costs differently. NULL or "" when both models are wholly on the CPU, so that files made
     * before placements were keyed stay valid. */
    const char *placement;
    /* Threads for passes of several tokens where they differ from n_threads (-tb); 0: the same,
     * so that files made before it was keyed stay valid. */
    int32_t n_threads_batch;
} specd_calibration_identity;

/* The key line of `id` into out (size bytes; 1024 is plenty). False, with out empty, when a model
 * file cannot be read (the cache is then not used). */
bool specd_calibration_key(const specd_calibration_identity *id, char *out, size_t size);

/* What the file keeps, and where it stands (learned.c holds them). */
typedef struct specd_calibrated {
    specd_calibration_state *state;
    specd_costs *costs;
    specd_acceptance *acceptance; /* the draft model's */
    bool has_draft;               /* the draft's costs and acceptance are kept only with one */
    specd_held_lengths *held;     /* the held lengths' timings; NULL where lengths are not held */
    int32_t held_max;             /* the longest length that may drive (the engine's draft_max) */
} specd_calibrated;

/* Once, when the engine's learned state is made: keys the models and settings, and when the
 * engine was given a cache (specd_engine_params.calibration_cache) and its file fits, puts its
 * costs into `k`. Never fails the engine: a file that cannot be used only leaves a note. */
void specd_calibration_open(const specd_engine *engine, const specd_calibrated *k);
/* After a generation: writes the file when the costs learnt something since it was read or
 * written (a write that fails leaves a note; the engine goes on). */
void specd_calibration_save(const specd_calibrated *k);
/* Whether the cache may be written at `path`: it does not exist yet, is a folder, or is an empty
 * file or a calibration file (its first line "specd-calibration N"); not any other file. */
bool specd_calibration_replaceable(const char *path);
/* Frees the strings (when the engine frees its learned state). */
void specd_calibration_close(specd_calibration_state *calibration);
/* What specd_engine_calibration reports. */
specd_calibration_info specd_calibration_describe(const specd_calibration_state *c, const specd_costs *costs);

#endif
