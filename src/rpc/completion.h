/* completion.h - a completion request as the rpc layer holds it: parsed and checked from JSON,
 * then tokenized against the loaded engine; and running it into a response. */
#ifndef SPECD_RPC_COMPLETION_H
#define SPECD_RPC_COMPLETION_H

#include "state.h"

struct completion_request {
    json_t *prompt;                /* the request's prompt, echoed in the response (owned ref) */
    specd_token *tokens;           /* the prompt to generate from, after truncation (owned) */
    int32_t n_tokens;
    int32_t n_prompt_tokens;       /* before truncation */
    bool truncated;
    int32_t n_cached;              /* expected prompt cache reuse, for prompt_stats */
    int32_t n_ctx;
    specd_generation_params gen;   /* gen.sampling.logit_bias points into bias */
    specd_logit_bias *bias;        /* owned */
    const char **stops;            /* strings borrowed from stop_list */
    int n_stops;
    json_t *stop_list;             /* owned ref */
    json_t *logit_bias_json;       /* owned ref, for the settings echo */
    char *grammar;                 /* GBNF text (owned; gen.grammar points to it), NULL for none */
    int32_t n_keep;
    const char *n_predict_field;   /* the field that set gen.n_predict (n_predict or an alias), NULL: none */
    bool n_predict_by_server;      /* gen.n_predict is the server's -n / --n-predict (the request gave none) */
    int64_t t_max_predict_ms;      /* llama-server's: > 0, it ends at the next newline after that long */
    int64_t seed_requested;        /* -1: random */
    bool stream;
    bool debug;
    /* llama-server's fields (completion_llama.c) */
    bool return_tokens;            /* `tokens` (ids) in the response and in streamed chunks */
    bool parse_special;            /* special-token text in the prompt becomes those tokens */
    bool return_origins;           /* specd's `origins`: text pieces from accepted drafts or not */
    bool timings_per_token;        /* `timings` in every streamed chunk */
    bool cache_prompt;             /* false: the slot forgets its cache first, the prompt is decoded in full */
    bool llama_probs;              /* probs_format "llama": completion_probabilities as llama-server's */
    json_t *response_fields;       /* owned ref: the final response keeps only these paths, or NULL */
};

/* Parses and checks a completion request and tokenizes its prompt with `engine` (read-locked by
 * the caller). Returns NULL with *err set on any invalid field. */
completion_request *completion_request_parse(json_t *params, specd_engine *engine, rpc_error *err);
void completion_request_free(completion_request *req);

/* llama-server's /completion fields that the old API lacked (completion_llama.c): aliases
 * (max_tokens, logprobs, n), the flat speculative.* keys, json_schema, return_tokens, ..., and those
 * specd does not implement, accepted at values that change nothing and refused otherwise. Called
 * after the old API's fields were read (it looks at what they set). probs_format too. */
bool completion_parse_llama_fields(rpc_params *rp, completion_request *req, specd_engine *engine);
/* speculative.type as a list of drafter names in `sp` ("type"); shared by the nested object and
 * the flat key. */
bool completion_parse_spec_type(rpc_params *sp, specd_spec_params *spec, bool has_draft);

/* The generation_settings echo (new reference). */
json_t *completion_settings_json(const completion_request *req, specd_engine *engine);
/* prompt_stats {n_ctx, total_prompt_tokens, truncated, n_past, cached, to_eval} (new reference). */
json_t *completion_prompt_stats(const completion_request *req);

/* A completion running in a slot, driven by the scheduler (one thread). Text is decided as it
 * comes: with job->stream, partial responses go to job->updates; the final response (the rest of
 * the text, stop: true) comes from completion_exec_end. */
typedef struct completion_exec completion_exec;
/* Ready to run the job's request on `engine` (read-locked by the caller for as long as the exec
 * lives); NULL (job failed, error in the job) when out of memory. */
completion_exec *completion_exec_new(rpc_job *job, specd_engine *engine);
/* Validates the request and ingests its prompt into slot `slot`: false when that failed (the
 * final response from completion_exec_end is then NULL, the error in the job). */
bool completion_exec_open(completion_exec *x, int32_t slot);
/* One step of several execs (each in its own slot): each drafts (a cancelled job stops here),
 * then ONE target pass verifies every tree (specd_sessions_verify), then each keeps its accepted
 * tokens. done[i]: exec i is over. */
void completion_execs_step(completion_exec **xs, int32_t n, bool *done);
/* Ends the job for the time limit named `limit` (its stop_type time_limit, its stopping_limit
 * `limit`, a static string); on the scheduler thread, which alone reads the name. */
void completion_end_for_time(rpc_job *job, const char *limit);
/* The result so far (for the slots' statistics). */
const specd_result *completion_exec_result(const completion_exec *x);
/* The final response (new reference), or NULL with the job's error set; frees x. A job never
 * opened gets the response of a cancelled, empty completion. */
json_t *completion_exec_end(completion_exec *x);

/* A claimed job that will never run (its request was refused, or it could not be queued): it ends
 * at once, failed with `err`, and is unclaimed, so a poll of it (or of the latest job) sees it
 * finished with the error instead of waiting forever. */
void completion_end_unrun(rpc_job *job, const rpc_error *err);
/* Claims a completion for `job` (an id; the engine stays until it is unclaimed) and parses its
 * request (tokenizing the prompt); false with *err set (no model, invalid params), the job then
 * ended (completion_end_unrun) when it had been claimed. */
bool completion_claim_and_parse(rpc_job *job, json_t *params, rpc_error *err);

#endif
