/* cli.h - the specd program's subcommands and their shared output helpers. */
#ifndef SPECD_CLI_H
#define SPECD_CLI_H

#include "specd.h"

#include <stdio.h>

#include "../util/args.h" /* the exit codes */

int cli_run(int argc, char **argv);
/* `self` is this program's path: the benchmark runs it as a child, like the other tools. */
int cli_bench(int argc, char **argv, const char *self);
/* specd serve (serve.c): the JSON API and llama-server's and OpenAI's routes over HTTP. */
int cli_serve(int argc, char **argv);
/* llama.cpp's sampling flags (--temp, --top-k, --top-p, --min-p, --typical, --repeat-penalty,
 * --repeat-last-n, --presence-penalty, --frequency-penalty, -s/--seed) into *s, its value taken from `a`:
 * 1 handled, 0 not one of them, -1 a bad value (in a->error). sampling_flags.c */
int cli_sampling_flag(cli_args *a, const char *f, specd_sampling_params *s);
/* --list-devices (devices.c): prints llama.cpp's device list (after registering the RPC servers of
 * `rpc_servers`, NULL: none) to stdout; returns the exit code (an error is printed). */
int cli_list_devices(const char *rpc_servers);
/* specd bench --serve (bench_serve.c): specd serve against llama-server, concurrent clients. */
int cli_bench_serve(int argc, char **argv, const char *self);

/* image_prompt.c: `specd run --image`: the prompt tokenized with the image files (at most
 * CLI_MAX_IMAGES), through the engine's projector; without images, specd_tokenize. *error: heap. */
#define CLI_MAX_IMAGES 16
specd_status cli_tokenize_with_images(specd_engine *engine, const char *prompt, const char *const *paths,
                                      int32_t n_paths, specd_token **tokens, int32_t *n_tokens, char **error);

/* output.c */
/* Where the time before the first generated token went (specd run). */
typedef struct cli_startup {
    double load_ms;    /* models and contexts (specd_engine_new, less the calibration cache) */
    double warmup_ms;  /* specd_engine_warm_up; 0 when not made */
    double total_ms;   /* from the start of `run` to the report */
    specd_calibration_info calibration;
    specd_placement_info target, draft; /* where the layers are; draft.devices NULL: no draft */
    specd_graph_info graphs; /* the generation's graph computes and reuses (specd_engine_graph_counts) */
} cli_startup;

/* `spec` names the speculation used: "none", "draft", or a list such as "ngram-simple,draft". */
void cli_print_stats(FILE *out, const specd_stats *stats, specd_stop_reason reason, const char *spec,
                     const cli_startup *startup);
/* One line on `out` when the engine's verification is not batch-invariant (specd_engine_invariance):
 * "specd: note: verification is not batch-invariant: WHY"; nothing when it is. */
void cli_print_invariance_note(FILE *out, const specd_engine *engine);
/* The drafters --spec names (the drafter registry's rows): name, llama-server's name, help line. */
void cli_print_drafters(FILE *out);
/* Prints the --json object; returns false when out of memory. */
bool cli_print_json(FILE *out, const char *text, const specd_result *result, const char *spec,
                    const cli_startup *startup, const specd_engine *engine);

#endif
