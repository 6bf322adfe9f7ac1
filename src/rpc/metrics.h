/* metrics.h - counters over the completions the JSON API ran (any transport), for `specd serve`'s
 * GET /metrics (Prometheus text) and GET /slots. Thread-safe: one lock, held briefly.
 * The "latest request" part is the engine's, whichever slot ran it; per-slot state is the
 * scheduler's (rpc_sched_slots_json, in `status`). */
#ifndef SPECD_RPC_METRICS_H
#define SPECD_RPC_METRICS_H

#include "rpc_internal.h"

#define RPC_METRICS_MAX_DRAFTERS 8

typedef struct rpc_drafter_metrics {
    specd_spec_type type;
    int64_t drafted, accepted; /* draft tokens verified, of which accepted */
    int64_t chosen;            /* steps whose draft was this drafter's */
} rpc_drafter_metrics;

typedef struct rpc_metrics {
    int64_t requests_total;          /* completions that finished (successfully) */
    int64_t prompt_tokens_total;     /* prompt tokens evaluated (cached ones not counted) */
    double prompt_seconds_total;
    int64_t tokens_predicted_total;
    double predicted_seconds_total;
    int64_t n_steps_total;           /* target passes while generating */
    int64_t drafted_total, accepted_total;
    int n_drafters;
    rpc_drafter_metrics drafters[RPC_METRICS_MAX_DRAFTERS]; /* in order of first use */
} rpc_metrics;

/* A completion starts on the slot: its task id, prompt tokens, context, and generation settings
 * (`params`, taken). */
void rpc_metrics_begin(int64_t id_task, int32_t n_prompt_tokens, int32_t n_ctx, json_t *params);
/* A completion finished with these statistics; `single_drafter` is the drafter it used when it
 * used exactly one (the per-drafter split of the statistics is then the totals), else NONE. */
void rpc_metrics_record(const specd_stats *stats, specd_spec_type single_drafter);
rpc_metrics rpc_metrics_get(void);
/* llama-server's /slots entry for the one slot (new reference); `n_ctx` is the engine's, shown
 * before the slot has run a request. */
json_t *rpc_metrics_slot_json(bool is_processing, int32_t n_ctx);

#endif
