/* metrics.h - counters over the completions one server ran, for GET /metrics (Prometheus text).
 * Thread-safe: one lock, held briefly. Per-slot state is the scheduler's (server.h, the slots). */
#ifndef SPECD_SERVE_METRICS_H
#define SPECD_SERVE_METRICS_H

#include "specd.h"

#include <pthread.h>
#include <stdint.h>

#define SERVE_METRICS_MAX_DRAFTERS 8

typedef struct serve_drafter_metrics {
    specd_spec_type type;
    int64_t drafted, accepted; /* draft tokens verified, of which accepted */
    int64_t chosen;            /* steps whose draft was this drafter's */
} serve_drafter_metrics;

typedef struct serve_metrics {
    int64_t requests_total;          /* completions that finished (successfully) */
    int64_t prompt_tokens_total;     /* prompt tokens evaluated (cached ones not counted) */
    double prompt_seconds_total;
    int64_t tokens_predicted_total;
    double predicted_seconds_total;
    int64_t n_steps_total;           /* target passes while generating */
    int64_t drafted_total, accepted_total;
    int n_drafters;
    serve_drafter_metrics drafters[SERVE_METRICS_MAX_DRAFTERS]; /* in order of first use */
    specd_graph_info graphs;         /* the engine's graph computes and reuses (specd_engine_graph_counts) */
} serve_metrics;

typedef struct metrics_counter {
    pthread_mutex_t lock;
    serve_metrics totals;
} metrics_counter;

void metrics_counter_init(metrics_counter *m);
void metrics_counter_destroy(metrics_counter *m);
/* A completion finished with these statistics; `single_drafter` is the drafter it used when it
 * used exactly one (the per-drafter split of the statistics is then the totals), else NONE. */
void metrics_counter_record(metrics_counter *m, const specd_stats *stats, specd_spec_type single_drafter);
/* The engine's graph counts, read by the scheduler after each round (the thread that decodes: the
 * counters are not safe to read beside a pass). */
void metrics_counter_set_graphs(metrics_counter *m, specd_graph_info graphs);
serve_metrics metrics_counter_get(metrics_counter *m);

#endif
