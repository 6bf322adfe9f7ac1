/* calibrate.c - one timed pass per batch size, so the draft length controller starts from this
 * machine's real cost curve instead of a guess (see calibrate.h). */
#include "calibrate.h"

#include "../util/util.h"

/* Decodes n copies of a token at positions 0..n-1 with logits for all (as verification does);
 * returns the time in ms, or a negative value when llama_decode fails. */
static double time_pass(specd_engine *e, specd_model_slot *slot, int32_t n) {
    struct llama_batch *b = &e->batch;
    specd_token token = llama_vocab_bos(e->vocab) >= 0 ? llama_vocab_bos(e->vocab) : 0;
    b->n_tokens = n;
    for (int32_t i = 0; i < n; i++) {
        b->token[i] = token;
        b->pos[i] = i;
        b->n_seq_id[i] = 1;
        b->seq_id[i][0] = 0;
        b->logits[i] = 1;
    }
    llama_memory_seq_rm(llama_get_memory(slot->ctx), -1, 0, -1);
    slot->n_kv = 0;
    double t0 = specd_now_ms();
    int32_t rc = llama_decode(slot->ctx, *b);
    double ms = specd_now_ms() - t0;
    llama_memory_seq_rm(llama_get_memory(slot->ctx), -1, 0, -1);
    return rc == 0 ? ms : -1.0;
}

static specd_status calibrate_slot_failed(char **error, const char *role, int32_t n) {
    specd_set_error(error, "calibration pass of %d tokens failed in the %s model", n, role);
    return SPECD_ERR_DECODE;
}

/* One pass for each size not timed yet; the first size of the run is timed on its second pass
 * (the first of a process pays one-time set-up). A single pass can be slowed by the rest of the
 * machine, but the level is corrected by every real pass (draft_length.h), and a slowed size
 * shows as a pass dearer than the next size's: that size is timed again and keeps the faster time.
 * (A size can really cost more than the next, when the GEMM tiles the larger one better; then the
 * second time confirms the first.) Measured on the benchmark pair: model loading and calibration
 * 1.36 s -> 0.66-0.84 s of a 128-token `specd run`. */
static specd_status time_target_sizes(specd_engine *e, int32_t max_tokens, char **error) {
    specd_draft_length *costs = &e->costs;
    bool timed_now[SPECD_DL_MAX_BATCH + 1] = {false}; /* sizes timed earlier are not touched again */
    bool warmed = false;
    for (int32_t n = 1; n <= max_tokens; n++) {
        if (costs->base_ms[n] > 0.0) continue;
        if (!warmed && time_pass(e, &e->target, n) < 0.0) return calibrate_slot_failed(error, "target", n);
        warmed = true;
        double ms = time_pass(e, &e->target, n);
        if (ms < 0.0) return calibrate_slot_failed(error, "target", n);
        specd_draft_length_record_calibration(costs, n, ms);
        timed_now[n] = true;
    }
    for (int32_t n = 1; n < max_tokens; n++) {
        if (!timed_now[n] || costs->base_ms[n] <= costs->base_ms[n + 1]) continue;
        double ms = time_pass(e, &e->target, n);
        if (ms < 0.0) return calibrate_slot_failed(error, "target", n);
        if (ms < costs->base_ms[n]) specd_draft_length_record_calibration(costs, n, ms);
    }
    return SPECD_OK;
}

specd_status specd_calibrate_costs(specd_engine *e, int32_t max_tokens, char **error) {
    if (max_tokens > SPECD_DL_MAX_BATCH) max_tokens = SPECD_DL_MAX_BATCH;
    if (max_tokens > e->batch_cap) max_tokens = e->batch_cap;
    specd_status st = time_target_sizes(e, max_tokens, error);
    if (st != SPECD_OK) return st;
    if (e->draft.ctx && e->costs.draft_ms <= 0.0) {
        if (time_pass(e, &e->draft, 1) < 0.0) return calibrate_slot_failed(error, "draft", 1);
        double ms = time_pass(e, &e->draft, 1);
        if (ms < 0.0) return calibrate_slot_failed(error, "draft", 1);
        specd_draft_length_record_draft(&e->costs, 1, ms);
    }
    return SPECD_OK;
}
