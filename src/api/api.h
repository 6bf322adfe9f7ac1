/* api.h - what every transport's API files share (src/api/, used by src/rpc/ and src/server/):
 * error codes, strict parameter readers, init's settings, the thread's watch and client. No
 * transport here: JSON-RPC's dispatcher is src/rpc/rpc.h's. Nothing here reaches the engine
 * internals (llama.h): the API layer uses the public specd.h API and the server object (src/serve) only. */
#ifndef SPECD_API_H
#define SPECD_API_H

#include "../serve/fault.h"
#include "specd.h"
#include "specd_rpc.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* JSON-RPC 2.0 codes, then ours (the -32000..-32099 range the specification leaves to servers). */
/* Short names inside the API layer for the public codes (specd_rpc_error_code in specd_rpc.h). */
enum {
    API_PARSE_ERROR = SPECD_RPC_PARSE_ERROR,
    API_INVALID_REQUEST = SPECD_RPC_INVALID_REQUEST,
    API_METHOD_NOT_FOUND = SPECD_RPC_METHOD_NOT_FOUND,
    API_INVALID_PARAMS = SPECD_RPC_INVALID_PARAMS,
    API_INTERNAL_ERROR = SPECD_RPC_INTERNAL_ERROR,
    API_NO_MODEL = SPECD_RPC_NO_MODEL,
    API_BUSY = SPECD_RPC_BUSY,
    API_MODEL_LOAD = SPECD_RPC_MODEL_LOAD,
    API_GENERATION = SPECD_RPC_GENERATION,
    API_UNKNOWN_JOB = SPECD_RPC_UNKNOWN_JOB,
    API_FORBIDDEN = SPECD_RPC_FORBIDDEN,
};

typedef struct api_error {
    int code;
    char message[768];
    char field[160]; /* the offending parameter, or "" */
} api_error;

/* Sets *err and returns false, so callers can `return api_fail(...)`. */
bool api_fail(api_error *err, int code, const char *field, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* The JSON-RPC error object {code, message, data: {field}} for err (new reference). */
json_t *api_error_object(const api_error *err);
/* A body jansson could not parse (its error `jerr` over `text`): API_PARSE_ERROR saying where, and
 * for a number out of range (1e999, 2^64) the field it was given for (parse_error.c). */
void api_parse_error(const char *text, size_t len, const json_error_t *jerr, api_error *err);
/* The server's fault in this API's codes. */
void api_error_from_fault(const serve_fault *fault, api_error *err);

/* ---- strict parameter readers (params.c) ------------------------------------------------------
 * Each getter returns 1 when the field is present and valid (value stored), 0 when absent, -1 when
 * present but wrongly typed or out of range (err set, naming the field). api_params_finish fails
 * on any field no getter asked for: unknown and misspelled fields are errors, never ignored. */
#define API_MAX_FIELDS 160 /* the completion request knows about 100 names (llama-server's included) */
typedef struct api_params {
    json_t *obj;        /* borrowed; NULL means no params */
    const char *where;  /* "completion params", ... for messages */
    const char *prefix; /* "speculative." for nested objects, else "" */
    bool null_is_absent; /* a null value reads as a field not given (llama-server's clients send them) */
    const char *seen[API_MAX_FIELDS];
    int n_seen;
    api_error *err;
} api_params;

void api_params_open(api_params *p, json_t *obj, const char *where, const char *prefix, api_error *err);
json_t *api_get_value(api_params *p, const char *name); /* borrowed, marks the field as known */
int api_get_int(api_params *p, const char *name, int64_t min, int64_t max, int64_t *out);
int api_get_number(api_params *p, const char *name, double min, double max, double *out);
int api_get_bool(api_params *p, const char *name, bool *out);
/* The same into a field of a params struct: left as it is when absent; false (error set) when
 * present but of the wrong type or out of range. */
bool api_read_int32(api_params *p, const char *name, int64_t min, int64_t max, int32_t *slot);
bool api_read_float(api_params *p, const char *name, double min, double max, float *slot);
/* Type only (an integer that fits int32 / a number that fits a float): for fields whose range
 * the library decides (specd_generation_params_validate). */
bool api_read_any_int32(api_params *p, const char *name, int32_t *slot);
bool api_read_any_float(api_params *p, const char *name, float *slot);
int api_get_string(api_params *p, const char *name, const char **out);
bool api_params_finish(api_params *p);
/* "prefix" + name, for messages about a field */
const char *api_field_name(const api_params *p, const char *name, char *buf, size_t size);

/* ---- engine settings for init (init_args.c) --------------------------------------------------- */
typedef struct api_engine_settings {
    specd_engine_params params; /* paths point into the strings below */
    char *model;                /* owned */
    char *model_draft;          /* owned, may be NULL */
    char *mmproj;               /* owned, may be NULL (--mmproj: the target's vision projector) */
    char *mmproj_draft;         /* owned, may be NULL (--mmproj-draft: the draft's own) */
    char *alias;                /* owned, may be NULL */
    char *calibration_cache;    /* owned, may be NULL (--calibration-cache) */
    char *devices;              /* owned, may be NULL (--device) */
    char *devices_draft;        /* owned, may be NULL (--device-draft) */
    char *rpc_servers;          /* owned, may be NULL (--rpc) */
    /* --lora FILE, --lora-scaled FILE SCALE (the target's) and --lora-draft FILE: owned arrays of
     * SPECD_MAX_LORA (or NULL) that params.lora and params.lora_draft point to, their paths owned
     * (on the heap, so the settings may be copied) */
    specd_lora_adapter *lora, *lora_draft;
    /* -ngl or -ngld was given (not the default): a CPU-only build then says it runs on the CPU */
    bool gpu_layers_given;
    int32_t n_queue;            /* --queue: requests waiting for a slot at most; -1: the default */
    bool parallel_given;        /* -np / n_parallel was given (a server's default applies otherwise) */
    bool flash_attn_given;      /* -fa / flash_attn was given */
    bool calibration_given;     /* --calibration-cache / calibration_cache was given (a path or off) */
    bool no_warmup;             /* --no-warmup / "warmup": false: no warm-up pass (specd_engine_warm_up) */
    bool async;
    /* What a request that names none drafts with (api_host_request_defaults): --spec-type's list,
     * --draft-max / --spec-draft-n-max, --spec-draft-n-min, --spec-draft-p-min,
     * --spec-ngram-simple-size-n; the library's defaults otherwise, n_max the engine's --draft-max */
    specd_spec_params speculative;
    /* --context-shift / --no-context-shift: a full context drops older tokens and generation goes on
     * (where the model's cache can shift). On by default here (the JSON API always shifted); specd
     * serve turns it off unless given, as llama-server 0.5.0 (context_shift_given) */
    bool context_shift;
    bool context_shift_given;
    /* --embd-normalize: how an embedding request that gives no embd_normalize normalizes pooled
     * embeddings (llama-server's; 2, euclidean, by default) */
    int32_t embd_normalize;
} api_engine_settings;

/* From init's params: {"cmd": "-m x -c 2048"}, {"args": ["-m", "x"]} or a settings object. */
bool api_engine_settings_parse(json_t *params, api_engine_settings *out, api_error *err);
/* From command-line words ("-m", "x", "-c", "2048"), as `specd serve` passes its model options;
 * without `need_model` a missing -m is no error (--list-devices). */
bool api_engine_settings_parse_words(const char *const *words, size_t n, bool need_model, api_engine_settings *out,
                                     api_error *err);
/* Points params' paths at the settings' strings again (after one of them was replaced). */
void api_engine_settings_point(api_engine_settings *s);
void api_engine_settings_free(api_engine_settings *s);

/* init's params for a caller confined to `models_dir` (a real path: absolute, no symlinks, no
 * trailing slash): a copy of `params` (new reference) in which every path init would use,
 * whichever of init's forms named it, is pinned to its real path after the one check of
 * confine.h: the target and draft must be regular files under models_dir, the calibration cache a
 * file or folder under it (or a new name in an existing folder there); a relative path is taken
 * relative to models_dir. NULL with *err set otherwise: API_INVALID_PARAMS with one message per
 * field for every refused path, so it never tells whether a path outside the directory exists. */
json_t *api_init_params_confine(json_t *params, const char *models_dir, api_error *err);

typedef struct api_host api_host;

/* Whether whoever waits for this thread's blocking calls still wants the answer (an HTTP client
 * still connected). `specd serve` sets it on the thread that runs a blocking completion; the
 * completion asks every API_WATCH_MS while it waits and cancels itself when the answer is no
 * longer wanted. NULL (the default): always wanted. */
typedef bool (*api_still_wanted_fn)(void *user_data);
void api_watch_thread(api_still_wanted_fn fn, void *user_data);
bool api_thread_still_wanted(void);
#define API_WATCH_MS 200
/* Which client this thread's calls are for (`specd serve`: its connection), 0 (the default):
 * none known. One client's completions, queued or running, may take only its share of the
 * serving server's slots and queue places (src/api/completion.c), so that it cannot make everybody
 * else's requests busy. */
void api_client_thread(uint64_t client);
uint64_t api_thread_client(void);

#endif
