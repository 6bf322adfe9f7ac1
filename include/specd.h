/*
 * specd.h - public C API of libspecd, a speculative-decoding engine on llama.cpp.
 *
 * A speculative step: cheap drafters propose a token tree, the target model checks the whole tree
 * in one batched forward pass, and exact verification keeps what the target would have produced
 * itself (greedy: the same tokens; sampling: the same distribution).
 *
 * Conventions (as in llama.h and SQLite):
 *  - Opaque handles (specd_engine). Every *_new has one *_free.
 *  - Parameter structs come from *_default_params(), so new fields never break callers. Their
 *    first field, struct_size, is set there to the struct's size in this header; a call given a
 *    struct of another size (a program built against another specd.h) fails with a message
 *    instead of reading past it.
 *  - Results (specd_result) are filled by the library and owned by the caller until
 *    specd_result_clear(); clear a result before passing it again, or its arrays leak.
 *  - Functions that can fail return a specd_status and, when `error` is not NULL, store a
 *    heap-allocated message in *error (what failed, which input, what to do). The caller frees
 *    it with specd_free(). On success *error is set to NULL.
 *  - Threads: one engine runs one generation at a time. Calls on the same engine must not overlap;
 *    different engines are independent. specd_engine_request_stop() alone may be called from any
 *    thread while a generation runs, and so may the embedding calls (specd_embed, specd_rerank,
 *    specd_rerank_tokens: they have a context of their own).
 */
#ifndef SPECD_H
#define SPECD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header. libspecd follows semantic versioning: while MAJOR is 0, every MINOR
 * release may change the ABI (structs, enums), and the shared library's SONAME carries both
 * (libspecd.so.0.MINOR); from 1.0 on only MAJOR does. Compare with specd_version_number() at run
 * time to catch a header and a library that do not match. Each version's changes: docs/library.md
 * ("Versions and ABI"). 0.9 made this header the library alone: the command-line spellings
 * (specd_*_parse) and specd_grammar_thread_ms left it for specd's own front ends, and
 * specd_engine_new_v2 is gone, with no alias (no program outside specd called it): set
 * specd_engine_params.failed_input and call specd_engine_new, the one constructor. */
#define SPECD_VERSION_MAJOR 0
#define SPECD_VERSION_MINOR 9
#define SPECD_VERSION_PATCH 0
#define SPECD_VERSION_STRING "0.9.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH, e.g. 300 for 0.3.0. */
#define SPECD_VERSION_NUMBER (SPECD_VERSION_MAJOR * 10000 + SPECD_VERSION_MINOR * 100 + SPECD_VERSION_PATCH)

#if defined(__GNUC__)
#define SPECD_API __attribute__((visibility("default")))
#else
#define SPECD_API
#endif

typedef int32_t specd_token;

typedef enum specd_status {
    SPECD_OK = 0,
    SPECD_ERR_INVALID_ARGUMENT = 1, /* a parameter is out of range or missing */
    SPECD_ERR_MODEL_LOAD = 2,       /* a model file is missing, unreadable, not a regular file, not GGUF */
    SPECD_ERR_INCOMPATIBLE = 3,     /* target and draft vocabularies differ */
    SPECD_ERR_CONTEXT = 4,          /* the prompt does not fit the context, or KV allocation failed */
    SPECD_ERR_DECODE = 5,           /* llama_decode failed */
    SPECD_ERR_NO_MEMORY = 6,
    SPECD_ERR_CANCELLED = 7,        /* specd_engine_params.progress_callback stopped a model load */
} specd_status;

/* A short, constant English name for a status ("ok", "invalid argument", ...); never NULL
 * ("unknown status" for a value this version does not know). The error message a failing call
 * returns says more: what failed, which input, what to do. */
SPECD_API const char *specd_status_str(specd_status status);

/* ---- engine: models and contexts ------------------------------------------------------------ */

typedef struct specd_engine specd_engine;

/* Whether llama.cpp's flash attention kernel computes attention. On the CPU that kernel reads the
 * whole cache once per query token, while the plain path reads it once per pass: a verification
 * pass of several tokens pays the difference over again. But plain attention's products take
 * another kernel for one row than for several, so a batch-invariant target pads every one-token
 * pass to two rows, and where the weights' products are dear per row that costs more than flash
 * attention does (docs/internals.md has the measurements). SPECD_FLASH_ATTN_DEFAULT (the default)
 * chooses by that: flash attention, with bf16 K and V caches unless others are set (an f16 or f32
 * pair would make one-row passes past 256 cells take a split kernel, padded again), for a
 * batch-invariant CPU target with one slot whose weights give the same bits for one row as for
 * several (Q8_0 among them: specd_engine_invariance's setting says which ran); plain attention
 * for other one-slot CPU targets (F32 and F16 weights pad either way, and plain attention's passes
 * of several are the cheaper there), on a GPU and with several slots (as before 0.8: `specd serve`
 * asks for AUTO there, which invariance across slots needs). */
typedef enum specd_flash_attn {
    SPECD_FLASH_ATTN_OFF = 0,
    SPECD_FLASH_ATTN_ON = 1,
    SPECD_FLASH_ATTN_AUTO = 2,    /* llama.cpp decides (on where the backend supports it) */
    SPECD_FLASH_ATTN_DEFAULT = 3, /* specd decides, by the model and the placement (above). Since 0.8 */
} specd_flash_attn;

/* The type of a KV cache (keys: cache_type_k, values: cache_type_v; llama.cpp's -ctk / -ctv).
 * With flash attention off, llama.cpp multiplies the attention weights by V in V's type: in f16
 * the weights are rounded, and differently for a pass over one token than for a pass over several
 * (docs/internals.md); f32 avoids that for twice the V memory (n_ctx x layers x V width x 4
 * bytes). A quantized V cache needs flash attention, as in
 * llama.cpp; a quantized K or V cache needs the head size to be a multiple of the type's block
 * (32). Which of them keep verification bit for bit: specd_engine_invariance() and the README. */
typedef enum specd_cache_type {
    SPECD_CACHE_TYPE_DEFAULT = 0, /* K: f16; V: f32 with flash attention off, f16 with it on or with
                                   * the target's layers on a GPU (no invariance to keep there) */
    SPECD_CACHE_TYPE_F16 = 1,
    SPECD_CACHE_TYPE_F32 = 2,
    SPECD_CACHE_TYPE_BF16 = 3,
    SPECD_CACHE_TYPE_Q8_0 = 4,
    SPECD_CACHE_TYPE_Q4_0 = 5,
    SPECD_CACHE_TYPE_Q4_1 = 6,
    SPECD_CACHE_TYPE_IQ4_NL = 7,
    SPECD_CACHE_TYPE_Q5_0 = 8,
    SPECD_CACHE_TYPE_Q5_1 = 9,
} specd_cache_type;

/* The most LoRA adapters an engine loads for its target (and for its draft). */
#define SPECD_MAX_LORA 16

/* A LoRA adapter file (llama.cpp's GGUF adapter format, as llama-server's --lora) and its scale. */
typedef struct specd_lora_adapter {
    const char *path;
    float scale; /* 1 = as trained; 0 = loaded but off */
} specd_lora_adapter;

/* How a model file is read (llama.cpp's --load-mode values, in its order). */
typedef enum specd_load_mode {
    SPECD_LOAD_MODE_AUTO = 0,       /* "auto": mapped, unless a device cannot use a mapping */
    SPECD_LOAD_MODE_NONE = 1,       /* "none": read into memory, not mapped */
    SPECD_LOAD_MODE_MMAP = 2,       /* "mmap": memory-mapped */
    SPECD_LOAD_MODE_MLOCK = 3,      /* "mlock": read and locked in RAM (no swapping or compression) */
    SPECD_LOAD_MODE_MMAP_MLOCK = 4, /* "mmap+mlock": mapped and locked (RLIMIT_MEMLOCK may need raising) */
    SPECD_LOAD_MODE_DIRECT_IO = 5,  /* "dio": direct I/O where the system has it */
} specd_load_mode;

/* Whether the default (adaptive) draft length is held a spell of steps at a time, chosen by the
 * tokens each length would have made on the same steps over what its own steps cost, instead of
 * planned step by step. A GPU runs a pass from a captured CUDA graph only while its size holds,
 * and llama.cpp rebuilds a pass's graph when its size changes (docs/performance.md). */
typedef enum specd_draft_hold {
    SPECD_DRAFT_HOLD_AUTO = 0, /* held where the target's layers are on a GPU; on rpc-servers alone
                                * (their devices not known) once a change of pass size is learnt to
                                * cost a tenth of a pass, as a GPU behind one makes it */
    SPECD_DRAFT_HOLD_ON = 1,   /* held */
    SPECD_DRAFT_HOLD_OFF = 2,  /* planned step by step (the CPU's default) */
} specd_draft_hold;

/* Which input of specd_engine_params a failed specd_engine_new is about (failed_input below). */
typedef enum specd_engine_input {
    SPECD_INPUT_NONE = 0,   /* none in particular (a bad parameter, out of memory), or success */
    SPECD_INPUT_TARGET = 1, /* target_path: missing, not a regular file, not loadable, its context */
    SPECD_INPUT_DRAFT = 2,  /* draft_path: the same, or its vocabulary does not match the target's */
    SPECD_INPUT_MMPROJ = 3, /* mmproj_path: missing, not a projector, not for this target. Since 0.9 */
} specd_engine_input;
/* How an embedding pools the target's hidden states over an input's tokens (llama-server's
 * --pooling; llama.cpp's llama_pooling_type numbers). Since 0.9. */
typedef enum specd_pooling {
    SPECD_POOLING_DEFAULT = -1, /* the model's own (its GGUF's <arch>.pooling_type), NONE where it states none */
    SPECD_POOLING_NONE = 0,     /* "none": one embedding per token, not normalized */
    SPECD_POOLING_MEAN = 1,     /* "mean": the mean over the input's tokens */
    SPECD_POOLING_CLS = 2,      /* "cls": the first token's */
    SPECD_POOLING_LAST = 3,     /* "last": the last token's */
    SPECD_POOLING_RANK = 4,     /* "rank": a reranker's score (the model's classifier head: specd_rerank) */
} specd_pooling;

typedef struct specd_engine_params {
    uint32_t struct_size;    /* sizeof(specd_engine_params), set by specd_engine_default_params() */
    const char *target_path; /* GGUF of the target model (required) */
    const char *draft_path;  /* GGUF of the draft model, or NULL for none */
    int32_t n_ctx;           /* context length in tokens; 0 = the model's training context */
    int32_t n_batch;         /* largest prompt chunk per llama_decode; 0 = 512 */
    int32_t n_threads;       /* threads for both models (they run one after the other); 0 = all cores */
    int32_t draft_max;       /* largest draft the engine will ever verify (sizes buffers); 0 = 16 */
    /* Let llama.cpp (and ggml) log everything to stderr; false: only their errors, and errors
     * while loading go into specd_engine_new's message instead. llama.cpp has one logger per
     * process: libspecd installs its own once, at the first specd_engine_new, and each
     * specd_engine_new sets this choice for the whole process (the latest call decides, for all
     * engines). A program that calls llama_log_set itself replaces libspecd's logger. */
    bool verbose;
    specd_flash_attn flash_attn; /* both models; default SPECD_FLASH_ATTN_DEFAULT (see above) */
    specd_cache_type cache_type_v; /* the target's V cache, and the draft's unless cache_type_v_draft */
    /* Called by llama.cpp while it reads each model's weights (the target's, then the draft's),
     * on the thread running specd_engine_new, with that model's progress from 0 to 1 (several
     * calls per model, one per tensor; never while a file is being opened or a context made).
     * Return false to abort the load: specd_engine_new then frees what it loaded and returns
     * SPECD_ERR_CANCELLED. It must be quick and must not call libspecd. NULL (default): none.
     * The engine keeps no pointer to it after specd_engine_new returns. */
    bool (*progress_callback)(float progress, void *user_data);
    void *progress_user_data; /* passed to progress_callback */
    /* Where the measured costs of speculation (target passes by size, a draft token) are kept
     * between processes, so that a new engine starts with this machine's costs: a file, or a
     * directory (one that exists, or a path ending in '/') holding one file per models and
     * settings. NULL or "" (the default): no file; the costs are learnt from the engine's own
     * passes. Either way nothing is timed before the first request. The file is keyed by the
     * model files (size, modification time, a hash of their header), threads, batch size,
     * attention settings, backend and where the layers sit (placement); a file made for anything else, or one that does not
     * parse, is ignored (specd_engine_calibration says why) and replaced when the engine has
     * learnt the costs. Copied: the string need not outlive the call. */
    const char *calibration_cache;
    /* ---- where the layers go: GPU offload and llama.cpp's RPC servers (llama.cpp's flags) ----
     * Layers of the target kept on its offload devices (-ngl): -1 (the default) all of them and
     * the output layer, 0 none (the CPU only), N the last N (above the model's layer count: all).
     * With no device to offload to (a CPU-only llama.cpp, no RPC server) the model runs on the
     * CPU whatever this says; specd_gpu_offload_available() tells beforehand. */
    int32_t n_gpu_layers;
    int32_t n_gpu_layers_draft; /* the same for the draft (-ngld); default -1 */
    /* The target's offload devices (--device): llama.cpp device names joined by ',' as
     * specd_devices_describe lists them ("CUDA0", "Vulkan0,Vulkan1", "RPC0"), or "none" for the
     * CPU only. NULL or "": every GPU of this machine and every server of rpc_servers. A name
     * that is not there fails specd_engine_new (SPECD_ERR_INVALID_ARGUMENT, naming it and
     * listing the devices there are). Copied. */
    const char *devices;
    /* The draft's (--device-draft), as `devices`; NULL or "": every GPU of this machine, never an
     * RPC server (the draft stays local). The draft may sit on another device than the target. */
    const char *devices_draft;
    /* llama.cpp RPC servers for the target (--rpc): "HOST:PORT" of llama.cpp's rpc-server
     * processes, joined by ','. Their devices join the target's default devices, so with
     * n_gpu_layers -1 the target's layers are split over them (the draft stays local). Each
     * server is registered with ggml once per process (ggml keeps it until exit). Needs a
     * llama.cpp built with GGML_RPC (specd's own build is); else, or when a server cannot be
     * reached, specd_engine_new fails naming it. NULL or "": none. Copied. */
    const char *rpc_servers;
    /* Slots: sequences that generate side by side, each with its own KV sequence in the target
     * and in the draft context (llama-server's -np). 0 or 1 = one (default); at most
     * SPECD_MAX_PARALLEL. Sessions choose theirs with specd_session_new_in_slot. */
    int32_t n_parallel;
    /* The context of each slot in tokens; 0 (default) = n_ctx / n_parallel, the whole context
     * holding n_parallel of them. Given, the context holds n_parallel x n_ctx_per_slot tokens
     * and n_ctx is ignored. specd_engine_n_ctx reports the per-slot context. */
    int32_t n_ctx_per_slot;
    /* Load the target's multi-token-prediction (nextn) layers and give them a context of their own,
     * for the 'mtp' drafter (llama.cpp's draft-mtp): GLM-4.5 to 4.7, Qwen3.5, DeepSeek-V3 style
     * models ship them. specd_engine_new fails, naming the model, when the target has none. An
     * EAGLE-3 or DFlash head needs no flag: it is the draft_path file (its architecture says so).
     * Default false. */
    bool mtp;
    /* The target's K cache (-ctk), and the draft's K and V caches (-ctkd, -ctvd); DEFAULT: f16 for
     * K, and for the draft's V the target's V type (cache_type_v). */
    specd_cache_type cache_type_k;
    specd_cache_type cache_type_k_draft;
    specd_cache_type cache_type_v_draft;
    /* Batch-invariant verification (default true): the target's logits for a token do not depend
     * on how many other tokens (drafts, other slots, prompt chunks) share its pass, bit for bit, so
     * greedy output with speculation equals the target alone and every slot's output equals the
     * request alone, also at near ties. The engine picks kernel paths that compute each token
     * alone (see specd_engine_invariance for what runs and whether this configuration can be
     * invariant at all; a GPU or several slots with flash attention off cannot). false: the
     * fastest passes, exact only up to rounding (a token's logits move by about 1e-6 relative, or
     * 1e-3 with an f16 V cache, with the pass it is in). */
    bool batch_invariant;
    /* LoRA adapters of the target (--lora FILE, --lora-scaled FILE SCALE), loaded with the model,
     * at most SPECD_MAX_LORA; their scales are the default of every generation
     * (specd_generation_params.lora_scales). lora_init_without_apply: load them at scale 0
     * (llama-server's --lora-init-without-apply). The draft gets none unless lora_draft lists its
     * own (--lora-draft): the target's adapters change its function, and a draft without them
     * only lowers acceptance, never exactness. Paths copied. */
    const specd_lora_adapter *lora;
    int32_t n_lora;
    bool lora_init_without_apply;
    const specd_lora_adapter *lora_draft;
    int32_t n_lora_draft;
    /* How both model files are read (llama.cpp's -lm / --load-mode): SPECD_LOAD_MODE_AUTO (the
     * default, llama.cpp's: mapped, unless a device cannot use a mapping). */
    specd_load_mode load_mode;
    /* The default draft length's policy (specd_draft_hold): SPECD_DRAFT_HOLD_AUTO. Since 0.7. */
    specd_draft_hold draft_hold;
    /* llama.cpp's -ub (its physical batch). specd decodes each batch in one piece (a verification
     * pass must not be split), so the smaller of n_batch and n_ubatch is the batch; 0 = n_batch.
     * Since 0.7. */
    int32_t n_ubatch;
    /* llama.cpp's -tb: threads for passes of several tokens (prompt chunks, verification), for both
     * models; 0 = n_threads. Since 0.7. */
    int32_t n_threads_batch;
    /* Where not NULL (the default is NULL), specd_engine_new stores here which input is at fault
     * when it fails (SPECD_INPUT_NONE on success), e.g. to name the field of a request; a load
     * cancelled by progress_callback is blamed on the model it was reading. An output, the one
     * pointer of this struct written through. Since 0.9 (it replaces specd_engine_new_v2). */
    specd_engine_input *failed_input;
    /* Embeddings and reranking (llama-server's --embedding, --rerank): the engine gets one more
     * context of the target model, for specd_embed and specd_rerank only, beside the generation
     * contexts (which stay as they are: generation and speculation go on unchanged, and an
     * embedding never touches a slot's cache). It holds specd_engine_embed_n_max tokens, as
     * llama-server: n_ubatch (512 when 0), or n_batch when smaller, at most a slot's context
     * (llama.cpp decodes an embedding's tokens in one piece). Its attention settings are flash_attn and the cache types as given, llama.cpp's
     * defaults (auto, f16) where left DEFAULT, so its numbers are llama-server's; it runs no LoRA
     * adapter but the target's at their default scales. Default false. Since 0.9. */
    bool embedding;
    /* That context's pooling (--pooling); SPECD_POOLING_DEFAULT (the default): the model's own.
     * Ignored without `embedding`. Since 0.9. */
    specd_pooling pooling;
    /* A vision projector for the target (llama.cpp's --mmproj: a CLIP GGUF made for this model), so
     * that prompts may hold images (specd_tokenize_images). NULL or "" (the default): none. Not with
     * a drafting head (mtp, EAGLE-3, DFlash), nor for projectors whose positions are M-RoPE (Qwen2-VL
     * style): specd_engine_new refuses those by name (SPECD_INPUT_MMPROJ). Copied. Since 0.9. */
    const char *mmproj_path;
    /* The draft model's own vision projector (made for the draft, e.g. the small model of the same
     * family): the draft then decodes an image from its embeddings instead of a filler token and
     * drafts right after images as after text. It must make as many positions of an image as the
     * target's (a request whose image it would place otherwise is refused, naming both counts).
     * Needs draft_path (a draft model) and mmproj_path. NULL or "": none. Copied. Since 0.9. */
    const char *mmproj_draft_path;
} specd_engine_params;

/* The most slots an engine may have: each takes SPECD_TREE_MAX_BRANCHES of llama.cpp's 256
 * sequences (its own and the scratch ones of its draft trees). */
#define SPECD_MAX_PARALLEL 32

SPECD_API specd_engine_params specd_engine_default_params(void);
/* The name of a cache type ("f16", ...; "default" for DEFAULT); NULL for an unknown value. */
SPECD_API const char *specd_cache_type_name(specd_cache_type type);

/* Whether a model can be offloaded at all here: this llama.cpp has a GPU backend that found a GPU,
 * or an RPC server was registered (specd_engine_params.rpc_servers). False on a CPU-only build. */
SPECD_API bool specd_gpu_offload_available(void);
/* One line for a front end to show once when the user asked for -ngl / -ngld and nothing can be
 * offloaded: that the models run on the CPU and how to build with a GPU backend. NULL when
 * specd_gpu_offload_available(). A constant string. */
SPECD_API const char *specd_gpu_offload_note(void);
/* llama.cpp's --list-devices text, after registering `rpc_servers` (NULL: none):
 * "Available devices:\n" then per device "  NAME: DESCRIPTION (TOTAL MiB, FREE MiB free)\n",
 * or "  (none)\n" when there is only the CPU. Returns a heap string (specd_free) or NULL with
 * *error set (an RPC server that cannot be reached, out of memory). */
SPECD_API char *specd_devices_describe(const char *rpc_servers, char **error);

/* Loads the models, checks that the draft's vocabulary matches the target's (as llama.cpp does:
 * vocab type, add-BOS/EOS flags, BOS/EOS ids, sizes within 128, token texts equal from id 5 on),
 * and creates both contexts. Returns SPECD_OK and sets *out, or an error and *out = NULL (and,
 * where params->failed_input is set, which input is at fault). The one constructor.
 * Only regular files (or symlinks to them) are opened as models: a FIFO, a device, a socket or a
 * directory is refused at once (SPECD_ERR_MODEL_LOAD, "... is a FIFO, not a regular file"), so a
 * load never blocks on a file that has no end. It blocks the calling thread for as long as the
 * files take to read; progress_callback can abort it. Any thread; engines being made on several
 * threads at once are independent (each needs its own memory: a reload beside a serving engine
 * needs both in memory until the old one is freed). */
SPECD_API specd_status specd_engine_new(const specd_engine_params *params, specd_engine **out,
                                        char **error);

SPECD_API void specd_engine_free(specd_engine *engine);
/* One pass of the target (and of the draft model) on two tokens, then their caches cleared, as
 * llama.cpp's tools do at start-up: the weights are read in (a memory-mapped model is paged in by
 * its first pass) and a GPU loads the kernels of a pass, so the first request does not pay for
 * them. `specd serve` and JSON-RPC init do it unless told not to (--no-warmup, "warmup": false);
 * `specd run` where a target layer is offloaded (or --warmup). Call it right after
 * specd_engine_new, before any session: it changes no state a session sees. A drafting head is
 * not warmed. Returns SPECD_OK, or SPECD_ERR_DECODE with *error naming the model. */
SPECD_API specd_status specd_engine_warm_up(specd_engine *engine, char **error);

SPECD_API bool specd_engine_has_draft(const specd_engine *engine);
/* The context one generation may use: that of a slot (the whole context with one slot). */
SPECD_API int32_t specd_engine_n_ctx(const specd_engine *engine);
/* Slots (specd_engine_params.n_parallel), at least 1. */
SPECD_API int32_t specd_engine_n_parallel(const specd_engine *engine);
/* The longest draft the engine will verify (specd_engine_params.draft_max, 16 by default): the
 * ceiling of a request's speculative.draft_max. */
SPECD_API int32_t specd_engine_draft_max(const specd_engine *engine);
/* How many leading tokens of `prompt` slot `slot` holds in the target's KV cache already (the
 * prompt cache a session in that slot would reuse, at most n_prompt - 1: the last token is always
 * decoded). 0 for a slot out of range. Same thread rules as the sessions. */
SPECD_API int32_t specd_engine_slot_cached(const specd_engine *engine, int32_t slot, const specd_token *prompt,
                                           int32_t n_prompt);
/* Drops what slot `slot` holds in both caches, so the next session there decodes its whole prompt
 * (llama-server's cache_prompt: false). Nothing for a slot out of range. Call it between the
 * sessions of that slot (a live one would decode its history again). Same thread rules as the
 * sessions. */
SPECD_API void specd_engine_slot_forget(specd_engine *engine, int32_t slot);
/* Gives slot `to` the longest prefix of `prompt` that slot `from` holds (at most n_prompt - 1
 * tokens, as specd_engine_slot_cached counts), in the target's and the draft's caches, where that
 * is longer than what `to` holds: `to` forgets its own cache and shares `from`'s cells (llama.cpp's
 * sequence copy: no decode), so a session begun in `to` on `prompt` decodes only the rest. For the
 * choices of one request (OpenAI's n) and clients with a common system prompt. Returns the tokens
 * of `prompt` slot `to` holds afterwards. Nothing is shared (the count of `to` is returned) for a
 * slot out of range, from == to, a recurrent or hybrid model (their states cannot be shared by
 * position) or an engine with a drafting head. Call it between the sessions of `to`, while no pass
 * is under way (`from` may have a live session). Same thread rules as the sessions. */
SPECD_API int32_t specd_engine_slot_share(specd_engine *engine, int32_t from, int32_t to, const specd_token *prompt,
                                          int32_t n_prompt);
/* The tokens slot `slot` holds in the target's cache (0 for a slot out of range). Since 0.8. */
SPECD_API int32_t specd_engine_slot_tokens(specd_engine *engine, int32_t slot);
/* Slot `slot`'s caches as bytes (*data: heap, free with specd_free; *size): the target's cells and
 * the tokens they hold, the draft's the same, after a header naming the models, the slot's context
 * and the cache types. specd_engine_slot_restore puts such bytes back into a slot (what it held
 * dropped first; *n_tokens: the tokens it holds now), so that a later session there reuses them
 * as if it had decoded them; bytes saved for other models or another context are refused by name
 * (SPECD_ERR_INVALID_ARGUMENT). Not for recurrent or hybrid models or engines with a drafting head
 * (their state does not follow the cells). llama-server's slot save and restore. Call them between
 * the sessions of that slot, while no pass is under way; same thread rules as the sessions. Since 0.8. */
SPECD_API specd_status specd_engine_slot_save(specd_engine *engine, int32_t slot, void **data, size_t *size,
                                              char **error);
SPECD_API specd_status specd_engine_slot_restore(specd_engine *engine, int32_t slot, const void *data, size_t size,
                                                 int32_t *n_tokens, char **error);
SPECD_API int32_t specd_engine_n_vocab(const specd_engine *engine);
/* Whether the target's KV cache can move positions (llama_memory_can_shift), which
 * specd_generation_params.context_shift needs. False for e.g. recurrent models. */
SPECD_API bool specd_engine_can_shift_context(const specd_engine *engine);

/* Where one model's layers went (specd_engine_params n_gpu_layers, devices, rpc_servers). */
typedef struct specd_placement_info {
    const char *devices;        /* "CPU", or the offload devices' names joined by ','; owned by the engine */
    int32_t n_layers;           /* the model's repeating layers */
    int32_t n_layers_offloaded; /* of n_layers + 1 (the output layer counts, as in llama.cpp's log) */
} specd_placement_info;

/* The target's placement (draft false) or the draft's; all zero and devices NULL for a draft when
 * the engine has none. */
SPECD_API specd_placement_info specd_engine_placement(const specd_engine *engine, bool draft);

/* Where the engine's cost model came from (specd_engine_params.calibration_cache). */
typedef enum specd_calibration_source {
    SPECD_CALIBRATION_OFF = 0,    /* no cache file: learnt from the engine's own passes */
    SPECD_CALIBRATION_LOADED = 1, /* read from the cache file */
    SPECD_CALIBRATION_LEARNT = 2, /* no usable file: learnt from the passes, then written to it */
} specd_calibration_source;

typedef struct specd_calibration_info {
    specd_calibration_source source;
    const char *path; /* the cache file, or NULL (owned by the engine, valid until the next call on it) */
    /* One line when the file was ignored (stale or corrupt) or could not be read or written;
     * NULL when there is nothing to say. Owned by the engine, as path. */
    const char *note;
    double ms;            /* time spent on the cache so far: keying the models, reading, writing */
    int32_t n_sizes_known; /* target pass sizes whose cost is known (read or learnt) */
} specd_calibration_info;

SPECD_API specd_calibration_info specd_engine_calibration(specd_engine *engine);
/* The cache directory `specd run` uses by default: "$XDG_CACHE_HOME/specd/calibration/", else
 * "$HOME/.cache/specd/calibration/"; NULL when neither variable is set (or out of memory).
 * Free with specd_free. */
SPECD_API char *specd_default_calibration_cache(void);
/* Whether `path` may be given as an engine's calibration cache without putting another file at
 * risk: it does not exist yet, or is a folder, an empty file or a calibration file (its first line
 * "specd-calibration N"). SPECD_OK, or SPECD_ERR_INVALID_ARGUMENT with *error naming the file (free
 * with specd_free). An engine never overwrites any other file (a model named by mistake); it says
 * so in its calibration note: this refuses such a path up front. Since 0.8. */
SPECD_API specd_status specd_calibration_cache_check(const char *path, char **error);

/* Whether the engine's target passes are batch-invariant (specd_engine_params.batch_invariant):
 * what runs, and why not when they are not. Strings owned by the engine. */
typedef struct specd_invariance_info {
    bool invariant;      /* a token's target logits do not depend on its pass, bit for bit */
    bool requested;      /* specd_engine_params.batch_invariant */
    const char *setting; /* what runs, e.g. "flash attention, per-row kernel; K f16, V f16; passes of
                          * 2 to 62 tokens; removed cells kept until the cache is compacted" */
    const char *note;    /* why it is not invariant (what to do instead); NULL when it is */
} specd_invariance_info;

SPECD_API specd_invariance_info specd_engine_invariance(const specd_engine *engine);

/* How often llama.cpp could reuse a context's compute graph: a pass whose shape (tokens,
 * sequences, output rows, the cache's window) equals the pass before it skips building its graph,
 * and on a GPU only such passes replay a captured CUDA graph (docs/internals.md). passes: the
 * engine's llama_decode calls on the context since it was made (one graph compute each: a
 * context's micro-batch is its batch; warm-up passes not counted); reused: of them, how many
 * reused the graph of the pass before. Take two readings and subtract for one generation.
 * Since 0.8. */
typedef struct specd_graph_counts {
    int64_t passes;
    int64_t reused;
} specd_graph_counts;

typedef struct specd_graph_info {
    specd_graph_counts target; /* the target model's context */
    specd_graph_counts draft;  /* the draft model's (zeros without one) */
} specd_graph_info;

/* Not thread-safe against a running generation on the same engine: read it between steps (the
 * server reads it on its scheduler thread). */
SPECD_API specd_graph_info specd_engine_graph_counts(const specd_engine *engine);

/* The target's LoRA adapters (specd_engine_params.lora): how many, and adapter i's path (owned by
 * the engine) and default scale; false for an index out of range. */
SPECD_API int32_t specd_engine_n_lora(const specd_engine *engine);
SPECD_API bool specd_engine_lora(const specd_engine *engine, int32_t i, const char **path, float *scale);

/* ---- text <-> tokens ------------------------------------------------------------------------ */

/* Tokenizes `text` with the target's vocabulary, adding BOS when the model asks for it and
 * `add_special` is true. On success *tokens is a heap array (free with specd_free) of *n_tokens. */
SPECD_API specd_status specd_tokenize(const specd_engine *engine, const char *text, bool add_special,
                                      specd_token **tokens, int32_t *n_tokens, char **error);
/* The same, and with `parse_special` the text of special tokens ("<|im_start|>", "</s>") becomes
 * those tokens, as llama-server does with prompts: needed for the text a chat template makes.
 * specd_tokenize is this with parse_special false (special-token text stays plain text). */
SPECD_API specd_status specd_tokenize_special(const specd_engine *engine, const char *text, bool add_special,
                                              bool parse_special, specd_token **tokens, int32_t *n_tokens,
                                              char **error);

/* Text of one token as it appears in output (may be a single byte of a UTF-8 character).
 * Writes at most buf_size bytes (no terminator) and returns the length, or -(needed size). */
/* The same, and with `special` a control token ("<|python_tag|>", "<|channel|>") gives its text
 * instead of nothing: a chat format whose tool-call or reasoning markers are such tokens needs
 * them in the text it parses (llama-server's preserved_tokens). */
SPECD_API int32_t specd_token_to_piece_special(const specd_engine *engine, specd_token token, bool special, char *buf,
                                               int32_t buf_size);
SPECD_API int32_t specd_token_to_piece(const specd_engine *engine, specd_token token, char *buf,
                                       int32_t buf_size);

/* Text of a token sequence, heap-allocated and NUL-terminated (free with specd_free). */
SPECD_API char *specd_detokenize(const specd_engine *engine, const specd_token *tokens,
                                 int32_t n_tokens);

/* The target model's fill-in-the-middle tokens (its vocabulary's tokenizer.ggml.fim_*), -1 where it
 * has none: what /infill builds a code-completion prompt with. */
typedef struct specd_fim_tokens {
    specd_token pre, suf, mid, pad, rep, sep;
} specd_fim_tokens;
SPECD_API specd_fim_tokens specd_engine_fim_tokens(const specd_engine *engine);

/* ---- embeddings and reranking (an engine made with specd_engine_params.embedding) -------------
 * As llama-server's /embedding, /v1/embeddings and /rerank compute them: each input is decoded
 * alone, from an empty cache, in one batch, on the engine's embedding context; pooled embeddings
 * are normalized as llama-server's embd_normalize asks.
 * Threads: specd_embed, specd_rerank and specd_rerank_tokens may be called from any thread, also
 * while a generation runs on the engine (they use their own context, never the slots'); calls of
 * specd_embed and specd_rerank on one engine wait for each other (one context). The engine must
 * not be freed meanwhile.
 * Errors: SPECD_ERR_INVALID_ARGUMENT for an engine without embeddings (the message says to load it
 * with embedding on: --embedding), no tokens, a token id out of the vocabulary, rank pooling asked
 * of specd_embed or a pooling other than rank of specd_rerank; SPECD_ERR_CONTEXT for an input of
 * more than specd_engine_embed_n_max tokens; SPECD_ERR_DECODE when llama.cpp fails. */

/* The name of a pooling ("none", "mean", "cls", "last", "rank": llama-server's --pooling values;
 * "default" for SPECD_POOLING_DEFAULT); NULL for no specd_pooling. */
SPECD_API const char *specd_pooling_name(specd_pooling pooling);
/* The embedding context's pooling, settled (the model's own where DEFAULT was asked; never
 * DEFAULT), or SPECD_POOLING_DEFAULT for an engine without embeddings. */
SPECD_API specd_pooling specd_engine_pooling(const specd_engine *engine);
/* The most tokens one input may have (0 without embeddings). */
SPECD_API int32_t specd_engine_embed_n_max(const specd_engine *engine);

/* One input's embedding, filled by specd_embed and owned by the caller until specd_embedding_clear. */
typedef struct specd_embedding {
    float *values;    /* n_rows x n_dims floats, row after row (heap; specd_embedding_clear frees it) */
    int32_t n_rows;   /* 1 for a pooled embedding; the input's token count with SPECD_POOLING_NONE */
    int32_t n_dims;   /* floats per row: the model's embedding size (llama_model_n_embd_out) */
    int32_t n_tokens; /* the tokens decoded */
} specd_embedding;

/* The embedding of `tokens` (n_tokens of them: the caller tokenizes, e.g. with specd_tokenize,
 * add_special true, as llama-server does). `normalize`, for a pooled embedding: llama-server's
 * embd_normalize, -1 none, 0 max absolute scaled to int16 (32760), 1 taxicab, 2 euclidean (its
 * default), p > 2 the p-norm; SPECD_POOLING_NONE's rows are never normalized (as llama-server).
 * *out is overwritten (clear it first if it held one). */
SPECD_API specd_status specd_embed(specd_engine *engine, const specd_token *tokens, int32_t n_tokens,
                                   int32_t normalize, specd_embedding *out, char **error);
SPECD_API void specd_embedding_clear(specd_embedding *embedding);
/* llama-server's normalization of n floats (`normalize` as above) from in to out (may be the same). */
SPECD_API void specd_embed_normalize(const float *in, float *out, int32_t n, int32_t normalize);

/* The tokens a reranker reads for (query, document), as llama-server builds them: the model's
 * rerank template (GGUF tokenizer.chat_template.rerank) with "{query}" and "{document}" replaced,
 * tokenized with special tokens parsed; without one BOS (where the model adds it), the query, EOS
 * (where the model adds it; SEP where it has no EOS), SEP (where it adds it), the document, EOS.
 * *tokens: heap (specd_free), *n_tokens of them. Needs no embedding context. */
SPECD_API specd_status specd_rerank_tokens(const specd_engine *engine, const char *query, const char *document,
                                           specd_token **tokens, int32_t *n_tokens, char **error);
/* The relevance score of `document` for `query` (specd_rerank_tokens' tokens through the embedding
 * context, which must pool with SPECD_POOLING_RANK): the classifier's first output, as
 * llama-server's /rerank. *n_tokens (may be NULL): the prompt's tokens (also when they were too many). */
SPECD_API specd_status specd_rerank(specd_engine *engine, const char *query, const char *document, float *score,
                                    int32_t *n_tokens, char **error);
/* ---- images (specd_engine_params.mmproj_path; since 0.9) --------------------------------------- */

/* Whether the engine has a vision projector: prompts may hold images. */
SPECD_API bool specd_engine_has_vision(const specd_engine *engine);
/* The text that stands for an image in specd_tokenize_images's text: llama.cpp's mtmd marker
 * "<__media__>". A constant string. */
SPECD_API const char *specd_image_marker(void);
/* One image: the bytes of a file in a format llama.cpp's stb_image reads (PNG, JPEG, BMP, GIF, TGA,
 * PNM). Borrowed for the call. */
typedef struct specd_image {
    const unsigned char *data;
    size_t size;
} specd_image;
/* Whether a prompt token stands for a position of an image (specd_tokenize_images): negative. */
SPECD_API bool specd_token_is_image(specd_token token);
/* Tokenizes `text`, in which each specd_image_marker() stands for the next of `images` (as many
 * markers as images), through llama.cpp's mtmd as llama-server does: text as specd_tokenize_special,
 * and each image as the positions its embeddings take, one negative token each (specd_token_is_image;
 * the same image gives the same tokens, so a prompt cache holds it like text). The engine keeps the
 * images it tokenized (the latest 16 + 4 per slot), and a prompt with their tokens goes to
 * specd_session_new and specd_generate as any other: the target decodes the image's embeddings
 * there, the draft model a filler token in their place (it has no projector: it drafts from the
 * text around them), model-free drafters see them and never draft them, and output stays the
 * target's. A prompt may not end with an image. Errors (SPECD_ERR_INVALID_ARGUMENT): an engine
 * without a projector, a marker count that is not the image count, bytes that are not an image.
 * May run while a generation runs on the same engine (an image lock is taken). */
SPECD_API specd_status specd_tokenize_images(specd_engine *engine, const char *text, bool add_special,
                                             bool parse_special, const specd_image *images, int32_t n_images,
                                             specd_token **tokens, int32_t *n_tokens, char **error);

/* Whether the engine holds the image whose position `token` is (specd_tokenize_images's tokens: it
 * keeps the latest 16 + 4 per slot images); one it holds becomes its latest used, so a caller that
 * checks a prompt's images just before beginning it keeps them. A prompt whose image it let go
 * fails in specd_generate (SPECD_ERR_INVALID_ARGUMENT, saying so) until specd_image_tokens holds
 * it again. */
SPECD_API bool specd_engine_holds_image(const specd_engine *engine, specd_token token);
/* Holds `image` in the engine (again) and gives its first position's token and its count of
 * positions, as specd_tokenize_images gave them for it: the same unless another image took its
 * tokens meanwhile, so a caller rewrites the image's positions in its prompt (first - i for
 * position i). A server keeps a queued request's image bytes for this. */
SPECD_API specd_status specd_image_tokens(specd_engine *engine, const specd_image *image, specd_token *first,
                                          int32_t *n_positions, char **error);

/* ---- chat templates ------------------------------------------------------------------------- */

/* One message of a conversation; both strings are borrowed for the duration of the call. */
typedef struct specd_chat_message {
    const char *role;    /* "system", "user", "assistant", ... */
    const char *content;
} specd_chat_message;

/* Formats a conversation into prompt text with llama.cpp's chat templates (llama_chat_apply_template,
 * which knows llama.cpp's built-in formats and recognizes a model's Jinja template as one of them;
 * it runs no Jinja itself).
 *  - template_name NULL or "": the target model's own template (GGUF tokenizer.chat_template);
 *    an error when the model has none, or when llama.cpp does not recognize it.
 *  - otherwise one of llama.cpp's built-in templates ("chatml", "llama3", "mistral-v7", ...), or a
 *    template the model stores under that name (tokenizer.chat_template.NAME); an unknown name is an
 *    error that lists the built-in ones.
 * With add_assistant the text ends with the opening of an assistant turn, for the model to write.
 * On success *out is heap text (free with specd_free); on failure SPECD_ERR_INVALID_ARGUMENT and
 * *error. Safe from any thread (it reads the model's metadata only). */
SPECD_API specd_status specd_chat_apply_template(const specd_engine *engine, const specd_chat_message *messages,
                                                 size_t n_messages, const char *template_name,
                                                 bool add_assistant, char **out, char **error);

/* The target model's own chat template text (tokenizer.chat_template), or NULL when it has none.
 * Owned by the engine. */
SPECD_API const char *specd_engine_chat_template(const specd_engine *engine);

/* ---- Jinja chat: llama.cpp's templates, tool calls and reasoning ----------------------------
 * The same code llama-server runs with --jinja (the pinned llama.cpp's common/chat: its Jinja
 * engine and the chat formats and tool-call parsers of dozens of model families). A turn begins
 * with an OpenAI-shaped request and gives the prompt; the text the model then generates is parsed
 * back into content, reasoning_content and tool calls, as a whole or as streamed deltas. */
typedef struct specd_chat specd_chat;

/* Renders request_json, a JSON object with OpenAI's chat fields: messages (roles system,
 * developer, user, assistant (with tool_calls), tool (with tool_call_id); content a string or text
 * parts), tools ([{type: "function", function: {name, description, parameters}}]), tool_choice
 * ("auto", "none", "required" or {type: "function", function: {name}}), parallel_tool_calls,
 * add_generation_prompt (default true), chat_template_kwargs (an object, e.g. {"enable_thinking":
 * false}), reasoning_format ("deepseek" (default), "auto", "deepseek-legacy", "none") and
 * json_schema. template_src: Jinja source to use instead of the target model's own template
 * (tokenizer.chat_template; NULL or "": that one, ChatML when the model has none).
 * *out: free with specd_chat_free. On bad input or a template that fails to render:
 * SPECD_ERR_INVALID_ARGUMENT and *error. Safe from any thread. */
SPECD_API specd_status specd_chat_begin(const specd_engine *engine, const char *template_src,
                                        const char *request_json, specd_chat **out, char **error);

/* What to generate with (JSON, owned by chat): {prompt, format, grammar, grammar_lazy,
 * grammar_triggers, preserved_tokens, additional_stops (stop strings to add), generation_prompt,
 * supports_thinking}. The prompt is text for specd_tokenize with parse_special. */
SPECD_API const char *specd_chat_params(const specd_chat *chat);

/* Parses text, all the model generated so far (is_final: it is complete). *deltas (may be NULL):
 * a JSON array of what changed since the last call, each in OpenAI's chat delta shape ({content},
 * {reasoning_content} or {tool_calls: [{index, id, type, function: {name, arguments}}]}), heap,
 * free with specd_free. A final text that does not parse in the template's format:
 * SPECD_ERR_INVALID_ARGUMENT and *error (the message parsed so far stays). */
SPECD_API specd_status specd_chat_update(specd_chat *chat, const char *text, bool is_final, char **deltas,
                                         char **error);

/* The answer parsed so far, an OpenAI assistant message (JSON, owned by chat, valid until the
 * next specd_chat_update): {role, content, reasoning_content?, tool_calls?}. */
SPECD_API const char *specd_chat_answer(const specd_chat *chat);

SPECD_API void specd_chat_free(specd_chat *chat);

/* The capabilities of the template (template_src as in specd_chat_begin) as llama-server's /props
 * chat_template_caps gives them: a JSON object of booleans (supports_tools, supports_tool_calls,
 * supports_parallel_tool_calls, supports_system_role, ...), heap (specd_free), or NULL with *error. */
SPECD_API char *specd_chat_caps(const specd_engine *engine, const char *template_src, char **error);
/* Whether `name` is one of llama.cpp's built-in chat templates. When it is not and `names` is not
 * NULL, *names is the list of them, "chatml, llama2, ..." (heap, free with specd_free; NULL when
 * out of memory). */
SPECD_API bool specd_chat_template_is_builtin(const char *name, char **names);

/* ---- generation ----------------------------------------------------------------------------- */

typedef struct specd_logit_bias {
    specd_token token;
    float bias; /* added to the logit; -INFINITY forbids the token */
} specd_logit_bias;

/* The request's sampling transforms, applied in llama.cpp's order: logit bias, penalties,
 * top-k, typical-p, top-p, min-p, temperature. temperature <= 0 means greedy (argmax after bias and
 * penalties). Target and draft see the same transforms; verification is exact for all of them.
 * Mirostat is the exception, see below. */
typedef struct specd_sampling_params {
    float temperature;       /* default 0.8 */
    int32_t top_k;           /* <= 0: off; default 40 */
    float top_p;             /* >= 1: off; default 0.95 */
    float min_p;             /* <= 0: off; default 0.05 */
    int32_t repeat_last_n;   /* history window for the penalties; -1 = whole context; default 64 */
    float repeat_penalty;    /* 1 = off */
    float presence_penalty;  /* 0 = off */
    float frequency_penalty; /* 0 = off */
    const specd_logit_bias *logit_bias; /* borrowed for the duration of the call */
    int32_t n_logit_bias;
    uint64_t seed;           /* SPECD_SEED_RANDOM = from the clock */
    /* Mirostat (llama.cpp's, as the old llama-server applied it): bias, penalties, DRY,
     * temperature, then mirostat's truncation instead of top-k/top-p/min-p. 1 = v1 (a top-k from
     * a Zipf fit of the 100 most probable tokens), 2 = v2 (the tokens whose surprise -log2 p is at
     * most mu); mu starts at 2 tau and moves by eta (surprise - tau) after each drawn token. With
     * speculation each drafted position is verified with the mu it would have after the drafts
     * before it (their surprises under the target's distributions), so it stays exact; drafts are
     * drawn with the step's first mu. With temperature <= 0 it is greedy and mirostat has no
     * effect. Same seed, same output (our generator, not llama.cpp's mt19937). */
    int32_t mirostat;        /* 0 = off (default), 1 or 2 */
    float mirostat_tau;      /* target surprise in bits, >= 0; default 5 */
    float mirostat_eta;      /* learning rate, >= 0; default 0.1 */
    /* Locally typical sampling (llama.cpp's typical sampler, after top-k): keep the tokens whose
     * surprise is closest to the entropy, up to this much probability. >= 1: off (default 1). */
    float typical_p;
    /* With an explicit seed and temperature > 0 (no mirostat): the text depends only on the seed,
     * the prompt and the target, the same with or without speculation, with any draft length or
     * tree and whatever other slots run (default true). Each token is then the Gumbel-max draw
     * at its index in the output, with noise keyed by (seed, index, token): an exact draw from the
     * target's distribution, and drafts are verified by whether they equal it (the draft model
     * proposes its own draw from q under the same noise). Acceptance is the chance that two such
     * draws agree, a little below rejection sampling's; false (or a random seed) keeps rejection
     * sampling, whose draws follow the drafts: the same distribution, not the same text. */
    bool reproducible;
    /* llama.cpp's other samplers, in its order: penalties, DRY, top-n-sigma, top-k, typical-p,
     * top-p, min-p, XTC, temperature (with dynatemp). Each is a function of the logits and the
     * history up to the position, so p and q are computed per drafted position and verification
     * stays exact; XTC's coin is part of the distribution (the mixture of removing the top tokens
     * with xtc_probability and not). Greedy (temperature <= 0) is the argmax after bias, penalties
     * and DRY; XTC and the temperature's range then change nothing. */
    float top_n_sigma;       /* keep tokens whose logit is within n standard deviations of the top one; <= 0 off (default -1) */
    int32_t min_keep;        /* top-p, min-p, typical-p and XTC keep at least this many tokens (default 0) */
    float dynatemp_range;    /* temperature from temp - range to temp + range by the entropy; 0 off (default) */
    float dynatemp_exponent; /* how the entropy maps to that range (default 1) */
    float xtc_probability;   /* XTC: with this probability drop every token with probability >= the threshold but the
                              * least likely of them; 0 off (default) */
    float xtc_threshold;     /* default 0.1; above 0.5 XTC does nothing (llama.cpp's rule) */
    float dry_multiplier;    /* DRY repetition penalty (koboldcpp's, through llama.cpp's sampler); 0 off (default) */
    float dry_base;          /* default 1.75 */
    int32_t dry_allowed_length;  /* repeats this long are free (default 2) */
    int32_t dry_penalty_last_n;  /* tokens it looks back (default 64, llama.cpp's); -1 the context; 0 off */
    /* Strings that end a repeated sequence; NULL: llama.cpp's default ("\n", ":", "\"", "*"), else
     * n_dry_sequence_breakers of them (0: none). Borrowed until the session is freed. */
    const char *const *dry_sequence_breakers;
    int32_t n_dry_sequence_breakers;
} specd_sampling_params;

#define SPECD_SEED_RANDOM UINT64_MAX

typedef enum specd_spec_type {
    SPECD_SPEC_AUTO = -1, /* DRAFT when the engine has a draft model, else NONE */
    SPECD_SPEC_NONE = 0,  /* target alone */
    SPECD_SPEC_DRAFT = 1, /* a draft model proposes chains */
    /* Model-free drafters (no draft model needed; they win when the output repeats earlier text): */
    SPECD_SPEC_NGRAM_SIMPLE = 2, /* prompt lookup: what followed the latest earlier copy of the last n tokens */
    SPECD_SPEC_NGRAM_MAP = 3,    /* n-gram -> continuations with hit counts; drafts only frequent ones */
    SPECD_SPEC_NGRAM_CACHE = 4,  /* n-gram statistics: this context, earlier requests, a static file */
    SPECD_SPEC_SUFFIX = 5,       /* suffix tree over prompts and past outputs (SuffixDecoding) */
    /* Drafting heads, fed the target's own hidden states (the engine loads them, see
     * specd_engine_params.mtp and draft_path); each drafts chains sampled from its q: */
    SPECD_SPEC_MTP = 6,    /* the target's multi-token-prediction (nextn) layers */
    SPECD_SPEC_EAGLE3 = 7, /* an EAGLE-3 head (draft_path: an eagle3 GGUF) */
    SPECD_SPEC_DFLASH = 8, /* a DFlash block-diffusion head (draft_path: a dflash GGUF): a block per pass */
    SPECD_SPEC_DSPARK = 9, /* DFlash with its Markov head (a dflash GGUF with markov_w1) */
    /* More model-free drafters, as llama.cpp's: */
    SPECD_SPEC_NGRAM_MOD = 10,     /* hashed n-gram -> next token table, rebuilt when it stops paying */
    SPECD_SPEC_NGRAM_MAP_K4V = 11, /* n-gram key -> up to 4 continuations, the most seen drafted */
} specd_spec_type;

/* Whether the draft model may draft trees (specd_spec_params.tree). */
typedef enum specd_draft_tree_mode {
    SPECD_DRAFT_TREE_AUTO = 0, /* the cost model decides each split */
    SPECD_DRAFT_TREE_OFF = 1,  /* chains only */
    SPECD_DRAFT_TREE_ON = 2,   /* every split that passes draft_p_split */
} specd_draft_tree_mode;

/* "auto", "off", "on"; NULL for an unknown mode. */
SPECD_API const char *specd_draft_tree_mode_name(specd_draft_tree_mode mode);
/* The mode with this name ("auto", "off", "on"); false when there is none. */
SPECD_API bool specd_draft_tree_mode_from_name(const char *name, specd_draft_tree_mode *mode);

/* Most branches of a draft tree: each branch is one sequence in the target's context. */
#define SPECD_TREE_MAX_BRANCHES 8

/* Most drafters one request may list (specd_spec_params.types). */
#define SPECD_SPEC_MAX_TYPES 8

/* "none", "draft", "ngram-simple", "ngram-map", "ngram-cache", "suffix", "mtp", "eagle3", "dflash",
 * "dspark", "ngram-mod", "ngram-map-k4v" ("auto" for AUTO); NULL for an unknown type. */
SPECD_API const char *specd_spec_type_name(specd_spec_type type);
/* The type with this name; returns false when there is none. llama-server's --spec-type names are
 * accepted too: "draft-simple" (draft), "draft-mtp", "draft-eagle3", "draft-dflash", "draft-dspark",
 * "ngram-map-k" (ngram-map). */
SPECD_API bool specd_spec_type_from_name(const char *name, specd_spec_type *type);
/* Every type's name, for help and messages: "none, draft, ngram-simple, ..." (a constant string). */
SPECD_API const char *specd_spec_type_names(void);

/* Sets sp->type / sp->types from drafter names: one name sets `type` ("none", "draft", a
 * model-free type; n_types = 0), several set the list ("ngram-simple", "draft"); "auto" is not a
 * name here and "none" cannot be part of a list. SPECD_ERR_INVALID_ARGUMENT with a message
 * naming the bad entry otherwise. specd_spec_params_parse_types takes the same as one
 * comma-separated string ("ngram-simple,draft", as `specd run --spec`). */
struct specd_spec_params;
SPECD_API specd_status specd_spec_params_set_types(struct specd_spec_params *sp, const char *const *names,
                                                   int32_t n_names, char **error);
SPECD_API specd_status specd_spec_params_parse_types(struct specd_spec_params *sp, const char *list,
                                                     char **error);

/* What a drafter type needs the engine to have loaded (one column of the drafter registry). */
typedef enum specd_spec_needs {
    SPECD_SPEC_NEEDS_NOTHING = 0,      /* model-free: the token history alone */
    SPECD_SPEC_NEEDS_DRAFT_MODEL = 1,  /* a draft model (specd_engine_params.draft_path) */
    SPECD_SPEC_NEEDS_TARGET_NEXTN = 2, /* the target's own MTP (nextn) layers (specd_engine_params.mtp) */
    SPECD_SPEC_NEEDS_HEAD_FILE = 3,    /* a head fed the target's hidden states: its GGUF as draft_path */
} specd_spec_needs;
/* What `type` needs; SPECD_SPEC_NEEDS_NOTHING for none, auto and unknown types. */
SPECD_API specd_spec_needs specd_spec_type_needs(specd_spec_type type);
/* Whether sp names (as its one type or in its list) a drafter that needs `needs`; auto names none
 * (it drafts with what the engine loaded). */
SPECD_API bool specd_spec_params_need(const struct specd_spec_params *sp, specd_spec_needs needs);

typedef struct specd_spec_params {
    specd_spec_type type; /* default SPECD_SPEC_AUTO */
    int32_t draft_max;    /* longest draft per step; default 8 (capped by the engine's draft_max) */
    int32_t draft_min;    /* shortest draft worth verifying; default 0 (the policy chooses, no drafts too) */
    float draft_p_min;    /* stop drafting when the draft's probability of its token is below this */
    bool adaptive;        /* choose the draft length per step from measured costs; default true */
    /* Several drafters: when n_types > 0 this list replaces `type`. Each step drafts with the one
     * expected to give the most tokens per second in this context (calibrated per drafter);
     * DRAFT, when listed, is the fallback when the model-free ones have nothing good. */
    specd_spec_type types[SPECD_SPEC_MAX_TYPES];
    int32_t n_types;
    int32_t ngram_n;              /* n-gram length of ngram-simple and ngram-map; default 3 */
    int32_t ngram_min_hits;       /* ngram-map drafts continuations seen this often; default 2 */
    const char *ngram_cache_path; /* static cache file for ngram-cache (build_ngram_cache), or NULL */
    /* Most branches of a suffix draft (1..8): above 1 the suffix drafter may propose a small tree of
     * its best continuations, verified in one target pass. Default 1 (chains): such trees
     * have not paid for themselves so far (docs/performance.md). */
    int32_t suffix_branches;
    /* Draft-model trees: branches where the draft is unsure, verified in one target pass (exact
     * at every temperature). tree: SPECD_DRAFT_TREE_AUTO (default: a sibling or side branch is
     * drafted only when the measured costs say it raises tokens per second), _ON (every split
     * that passes draft_p_split), _OFF (chains). Trees need a draft model and no grammar;
     * elsewhere they are chains. */
    specd_draft_tree_mode tree;
    int32_t draft_branches; /* most branches of a draft-model tree, 1..8; default 4 (1 = chains) */
    float draft_p_split;    /* a split needs this draft path probability (llama.cpp's); default 0.1 */
    int32_t draft_tree_nodes; /* most draft tokens in a tree, 1..256; default 16 */
} specd_spec_params;

/* Called with the tokens each step adds to the output (accepted drafts plus the target's token).
 * Return false to stop generation after this step. The step's statistics are counted before the
 * call: the first (result->stats.n_accepted - its value at the previous call) of the tokens are
 * accepted drafts, the rest the target's own (a stop among them cuts the list short).
 * The result passed to specd_generate is already filled up to these tokens when the callback runs:
 * they are the last n_tokens of result->tokens, and with n_probs > 0 their probabilities are the
 * last n_tokens * result->n_probs entries of result->probs. Keep a pointer to the result in
 * user_data to stream them (read them during the callback only: the arrays grow later). */
typedef bool (*specd_token_callback)(const specd_token *tokens, int32_t n_tokens, void *user_data);

/* What one step did, for tracing and analysis (specd_generation_params.on_step). Pointers are
 * valid during the call only. */
typedef struct specd_step_info {
    int32_t n_history;     /* tokens before the step: the prompt and the output so far */
    int32_t n_drafted;     /* draft tokens the step verified (every node of a tree) */
    int32_t n_accepted;    /* of them accepted */
    double draft_ms;       /* drafting */
    double verify_ms;      /* the target pass (its part, by tokens, of one shared with other slots) */
    double step_ms;        /* the whole step: drafting, the pass, verification, bookkeeping */
    const float *confidences; /* n_drafted: the drafter's confidence in each draft token, in the
                               * order drafted (a chain's from its first token on) */
    const specd_token *drafts; /* n_drafted: the draft tokens, in the same order */
} specd_step_info;
typedef void (*specd_step_callback)(const specd_step_info *step, void *user_data);

/* One candidate of a position's probability list (specd_result.probs). */
typedef struct specd_token_prob {
    specd_token token; /* -1: padding, when fewer than n_probs tokens have a non-zero probability */
    float prob;
} specd_token_prob;

typedef struct specd_generation_params {
    uint32_t struct_size; /* sizeof(specd_generation_params), set by specd_generation_default_params() */
    int32_t n_predict; /* tokens to generate; < 0 = until end of generation or context end */
    bool ignore_eos;   /* keep going past end-of-generation tokens (they are then not sampled) */
    specd_sampling_params sampling;
    specd_spec_params speculative;
    specd_token_callback on_tokens; /* may be NULL */
    void *user_data;
    /* Context shift (llama.cpp's server and its old completion API do this). When prompt +
     * output fill the context, instead of stopping with SPECD_STOP_CONTEXT, keep the first
     * n_keep tokens, drop half of those after them (the oldest), and move the rest back: the KV
     * caches of target and draft are shifted in place (a RoPE shift, nothing is re-evaluated), so
     * generation goes on past n_ctx tokens. stats.n_context_shifts counts the shifts.
     *  - Only with n_predict >= 0: an unlimited generation (n_predict < 0) still stops at the end
     *    of the context, so a model that never ends its text cannot run forever (the rule
     *    llama-server used: "n_predict = -1 is limited to the context").
     *  - Generation also stops (SPECD_STOP_CONTEXT) when a shift would free nothing.
     *  - Speculation stays exact: a step never drafts past the point where the shift happens, so
     *    the output equals that of the target alone with the same shifts.
     *  - Needs specd_engine_can_shift_context(); specd_generate refuses the request otherwise.
     * Default false. */
    bool context_shift;
    /* Tokens at the start of the history a shift keeps: 0 = none (a leading BOS is kept anyway),
     * -1 = the whole prompt. As in llama-server, a BOS the model adds is not counted (one more
     * token is kept), and at most n_ctx - 4 are kept. Default 0. */
    int32_t n_keep;
    /* The target's probabilities for every emitted token, drafted ones included (as llama-server's
     * n_probs): the n_probs most probable candidates at that position, sorted by probability
     * (descending; the lower id first on ties), in specd_result.probs. Default 0: off, and then
     * nothing is computed. Capped at the vocabulary size.
     * By default they are the softmax of the target's raw logits at temperature 1, before any
     * sampling transform (bias, penalties, top-k/p, min-p, temperature): the model's own view,
     * the same whether the token was drafted or not, and the same with speculation on or off.
     * With post_sampling_probs they are the distribution the token was drawn from instead, after
     * the request's transforms (greedy: 1 for the chosen token; lists may be shorter, padded). */
    int32_t n_probs;
    bool post_sampling_probs;
    /* GBNF grammar the output must match (llama.cpp's format, start symbol "root"); NULL or "" =
     * none. Borrowed for the duration of the call. It constrains the generated text only, never
     * the prompt. The next token is chosen as llama.cpp's sampler does by default: a draw from
     * the transformed distribution is kept when the grammar allows it, otherwise the draw is
     * repeated over the allowed tokens only (greedy: the argmax over allowed tokens). Drafts are
     * cut at their first token the grammar refuses, and verification stays exact. When the
     * grammar allows nothing more (it is complete and end-of-generation is refused, e.g. by
     * ignore_eos), generation stops with SPECD_STOP_EOG. Its ( ) groups may nest at most 1000
     * deep (llama.cpp's parser recurses per level and overflows the stack far beyond that). */
    const char *grammar;
    /* With a grammar: text the grammar reads before the first generated token, which the prompt
     * already ends with (NULL or "": none). llama.cpp's tool-call grammars begin with the template's
     * generation prompt (specd_chat_params' generation_prompt), as llama-server prefills it.
     * Tokenized with special tokens; a token the grammar refuses is an error. Borrowed. */
    const char *grammar_prefill;
    /* With a grammar: lazy (llama.cpp's lazy grammar, as llama-server applies a tool-call grammar
     * for tool_choice "auto"): the output is free until one of grammar_trigger_patterns (regular
     * expressions, matched against the output from its start; the grammar reads from the match's
     * first group) matches, or one of grammar_trigger_tokens is generated; from there on the
     * grammar holds, and speculation stays exact under it. Borrowed. Each pattern (ECMAScript, as
     * std::regex reads it) is at most 4096 bytes, nests its groups at most 100 deep and grows to at
     * most 10000 atoms with its {m,n} repetitions written out (std::regex's compiler recurses per
     * character and per level); specd_generation_params_validate refuses others, and bad ones. */
    bool grammar_lazy;
    const char *const *grammar_trigger_patterns;
    int32_t n_grammar_trigger_patterns;
    const specd_token *grammar_trigger_tokens;
    int32_t n_grammar_trigger_tokens;
    /* Called after each step with what it did (specd_step_info), with user_data; NULL (default):
     * not called. For tracing and analysis: `specd run --trace-steps FILE` writes one line a step,
     * and tools/policy_replay replays such steps against every fixed draft length. */
    specd_step_callback on_step;
    /* The scales of the engine's LoRA adapters for this generation (llama-server's per-request
     * `lora`), n_lora_scales of them, one per adapter (specd_engine_n_lora); NULL (default): the
     * engine's. A slot whose cache was made with other scales decodes its prompt again. Sessions
     * with different scales never share a target pass (each gets its own). Borrowed until the
     * session is freed. */
    const float *lora_scales;
    int32_t n_lora_scales;
} specd_generation_params;

SPECD_API specd_generation_params specd_generation_default_params(void);

/* Checks every field of `params` that has a range (NaN and infinities too), as specd_generate
 * does first: SPECD_OK, or SPECD_ERR_INVALID_ARGUMENT with *error = "FIELD DETAIL", e.g.
 * "sampling.repeat_penalty must be a finite number > 0, 1 for off (got 0)", and *field (when not
 * NULL) pointing to a static string naming the first bad field as in the struct
 * ("sampling.repeat_penalty", "speculative.draft_max", "n_probs", ...), so a front end can name
 * it in its own terms (the message after the field name and one space reads on its own).
 * Checks that need an engine (a draft model for 'draft', logit-bias tokens inside the vocabulary,
 * a context that can shift) are specd_generate's. */
SPECD_API specd_status specd_generation_params_validate(const specd_generation_params *params,
                                                        const char **field, char **error);

/* Why a request runs on the target alone (specd_generation_drafters). */
typedef enum specd_spec_off {
    SPECD_SPEC_ON = 0,            /* it speculates */
    SPECD_SPEC_OFF_NONE = 1,      /* speculative.type is none */
    SPECD_SPEC_OFF_NO_DRAFT = 2,  /* AUTO on an engine without a draft model */
    SPECD_SPEC_OFF_DRAFT_MAX = 3, /* speculative.draft_max is 0 */
    SPECD_SPEC_OFF_MIROSTAT = 4,  /* no longer given: mirostat is verified per drafted position (0.5 and before) */
} specd_spec_off;

/* The drafters specd_generate will use for `params` on `engine`, in order, AUTO resolved (the one
 * place that decides it): writes up to SPECD_SPEC_MAX_TYPES types to out and returns how many; 0
 * when the request runs on the target alone, and then *why (when not NULL) says why. */
SPECD_API int32_t specd_generation_drafters(const specd_engine *engine, const specd_generation_params *params,
                                            specd_spec_type out[SPECD_SPEC_MAX_TYPES], specd_spec_off *why);

/* Checks that `grammar` (GBNF) parses for the engine's vocabulary, as specd_generate would ("" is
 * no grammar: fine). Returns SPECD_OK, or SPECD_ERR_INVALID_ARGUMENT with *error saying why
 * (llama.cpp's reason, read back from what it prints on stderr). */
SPECD_API specd_status specd_grammar_check(const specd_engine *engine, const char *grammar, char **error);
/* specd_grammar_check, and what the grammar costs: *cost_ms is the CPU time this thread spent
 * building it (what a session does again when it begins) and masking the whole vocabulary once at
 * its start (a step's least work). With budget_ms > 0 the masking stops once the cost passes it
 * (*cost_ms is then "at least"), so pricing a dear grammar costs about the budget beyond its build;
 * 0: the whole vocabulary, whatever it costs; below 0: no masking, the build's cost only.
 * A server refuses a grammar whose price would stall its other slots. Since 0.8. */
SPECD_API specd_status specd_grammar_price(const specd_engine *engine, const char *grammar, double budget_ms,
                                           double *cost_ms, char **error);
/* JSON Schema -> GBNF (the output is JSON the schema allows) through llama.cpp's common converter,
 * the one llama-server uses for `json_schema` and `response_format`: the same grammar, except that
 * a string's characters are written as ranges of Unicode scalar values (valid UTF-8 only) where
 * llama.cpp writes a negated class. `schema_json` is the schema as JSON text. Returns the grammar
 * (heap, specd_free), or NULL with *error (heap) holding llama.cpp's reason. llama.cpp ignores what
 * it does not know (unknown keywords, formats, ...): the JSON API refuses those first, and bounds
 * what llama.cpp's recursion would overflow a stack on (depth through $refs, property names over
 * 256 bytes: src/api/json_schema_check.h); this call itself only refuses text nested deeper than
 * 512 levels, so bound a hostile schema the same way before calling it. Needs no engine; safe from
 * any thread. */
SPECD_API char *specd_json_schema_grammar(const char *schema_json, char **error);

typedef enum specd_stop_reason {
    SPECD_STOP_LIMIT = 0,    /* n_predict tokens generated */
    SPECD_STOP_EOG = 1,      /* the target produced an end-of-generation token */
    SPECD_STOP_CONTEXT = 2,  /* the context is full (and context_shift is off or cannot apply) */
    SPECD_STOP_CALLBACK = 3, /* on_tokens returned false, or specd_engine_request_stop */
} specd_stop_reason;

SPECD_API const char *specd_stop_reason_name(specd_stop_reason reason);

#define SPECD_STATS_MAX_DRAFT 32

typedef struct specd_drafter_stats {
    specd_spec_type type;
    int32_t n_calls;    /* steps it was asked for a draft */
    int32_t n_chosen;   /* steps its draft was the one verified */
    int32_t n_drafted;  /* draft tokens of its that were verified */
    int32_t n_accepted; /* of which accepted */
    double draft_ms;    /* time it spent drafting */
} specd_drafter_stats;

typedef struct specd_stats {
    int32_t n_prompt;         /* prompt tokens */
    int32_t n_prompt_cached;  /* of which reused from the KV cache */
    int32_t n_predicted;      /* tokens generated */
    int32_t n_steps;          /* target verification passes (speculative steps) */
    int32_t n_drafted;        /* draft tokens proposed */
    int32_t n_accepted;       /* draft tokens accepted */
    /* draft_len_hist[k]: steps that drafted k tokens (k capped at SPECD_STATS_MAX_DRAFT - 1) */
    int32_t draft_len_hist[SPECD_STATS_MAX_DRAFT];
    /* accepted_at[i]: drafts whose token at position i was accepted; drafted_at[i]: drafts that
     * had a token at position i. Their ratio is the acceptance rate by draft position. */
    int32_t accepted_at[SPECD_STATS_MAX_DRAFT];
    int32_t drafted_at[SPECD_STATS_MAX_DRAFT];
    double prompt_ms;         /* prompt ingest, target and draft */
    double decode_ms;         /* from the first generated token to the last */
    /* Sessions of other slots drafting and verifying in the same decodes and passes
     * (specd_sessions_draft / specd_sessions_verify) each count their part of them, in proportion
     * to their tokens there: the parts add up to the decode or pass. */
    double draft_ms;          /* of decode_ms: drafting */
    double verify_ms;         /* of decode_ms: target passes */
    double sample_ms;         /* of decode_ms: sampling and verification arithmetic */
    /* The engine's cost model at the end of the generation (speculative runs only; 0 = unknown):
     * verify_cost_ms[n - 1] is the time of a target pass over n tokens, draft_token_ms that of one
     * draft token. With accepted_at/drafted_at they bound what any draft chain could reach. */
    double verify_cost_ms[SPECD_STATS_MAX_DRAFT];
    double draft_token_ms;
    /* Per drafter when several are listed (or a model-free one): drafters[i] for types[i]. */
    int32_t n_drafters;
    specd_drafter_stats drafters[SPECD_SPEC_MAX_TYPES];
    /* Context shifts (specd_generation_params.context_shift): how many happened, the tokens they
     * dropped in all, and the tokens each kept at the start (the effective n_keep; 0 when none
     * happened). After shifts the KV cache holds those first tokens, not the whole prompt. */
    int32_t n_context_shifts;
    int32_t n_context_discarded;
    int32_t n_context_kept;
    /* Steps whose draft was a tree of several branches (draft-model trees, suffix_branches > 1),
     * not a chain; the draft tokens of those steps, and the tokens they accepted. */
    int32_t n_tree_steps;
    int32_t n_tree_drafted;
    int32_t n_tree_accepted;
    /* The cost model's price of a target pass whose size differs from the pass before (llama.cpp
     * builds its graph anew: on a GPU a third of a pass, on a CPU nothing to speak of), ms; 0 =
     * none or not learnt yet. The draft-length policy prices a change of size with it
     * (docs/performance.md). Since 0.7. */
    double resize_ms;
    /* Where the policy holds one draft length for a spell of steps (specd_draft_hold), chosen by
     * what the lengths made (docs/performance.md): the one
     * held at the end of the generation; -1 where the planner chooses each step's, or nothing does
     * (a fixed length, no draft model, no speculation). Since 0.7. */
    int32_t held_draft_length;
} specd_stats;

SPECD_API double specd_stats_acceptance_rate(const specd_stats *stats);
SPECD_API double specd_stats_mean_accepted_per_step(const specd_stats *stats);
SPECD_API double specd_stats_decode_tokens_per_s(const specd_stats *stats);

typedef struct specd_result {
    specd_token *tokens; /* generated tokens (owned; release with specd_result_clear) */
    int32_t n_tokens;
    specd_stop_reason stop_reason;
    specd_stats stats;
    /* With specd_generation_params.n_probs > 0: n_probs (the request's, capped at the vocabulary
     * size) entries per generated token, token i's list at probs + i * n_probs; owned, released by
     * specd_result_clear (NULL while there are no tokens). Without: NULL and 0. */
    specd_token_prob *probs;
    int32_t n_probs;
} specd_result;

/* Generates from `prompt` (tokens, e.g. from specd_tokenize). The KV cache keeps the longest
 * common prefix with the previous call, so a repeated or extended prompt is not re-evaluated.
 * On success fills *result; on failure returns an error and leaves *result empty. */
SPECD_API specd_status specd_generate(specd_engine *engine, const specd_token *prompt,
                                      int32_t n_prompt, const specd_generation_params *params,
                                      specd_result *result, char **error);

SPECD_API void specd_result_clear(specd_result *result);

/* ---- sessions: one generation, step by step --------------------------------------------------
 *
 * specd_generate is a loop over a session. A program that wants its own loop (to interleave
 * several generations, schedule steps, or look at each step) drives a session itself; the
 * output is the same as specd_generate's: greedy the very tokens of the target alone, sampling
 * its exact distribution. A step is the C counterpart of llama.cpp's common_speculative_draft +
 * common_sampler_sample_and_accept_n + common_speculative_accept:
 *
 *     specd_session *s;
 *     specd_session_new(engine, prompt, n_prompt, &params, &s, &err);
 *     while (!specd_session_done(s)) {
 *         specd_session_draft(s, &n_drafted, &err);     // the drafters propose a token tree
 *         if (specd_session_done(s)) break;             // stopped before the step (see below)
 *         specd_session_verify(s, &n_accepted, &err);   // one target pass, exact verification
 *         specd_session_accept(s, &n_emitted, &err);    // keep the accepted path, emit tokens
 *     }                                                 // (or specd_session_step for all three)
 *     specd_session_take_result(s, &result);
 *     specd_session_free(s);
 *
 * Several sessions may exist against one engine and be stepped in turn from one thread: each
 * step first makes the engine's caches hold that session's history (the longest common prefix
 * stays; what differs is decoded again), so interleaving costs re-decoding but never changes an
 * output. On an engine with several slots (n_parallel), sessions in different slots
 * (specd_session_new_in_slot) keep their own KV sequences and interleave without re-decoding. What sessions learn (costs, the drafters' memory) is shared through the engine.
 * Threads: the rules of the engine apply (one call on an engine at a time);
 * specd_engine_request_stop stops every session of the engine at its next draft (a session
 * created afterwards is not stopped).
 * `params` is copied, but what its pointers point to (logit_bias, grammar, user_data) must stay
 * valid until the session is freed. Errors: a call out of order (verify before draft, ...) or
 * after the end is SPECD_ERR_INVALID_ARGUMENT with a message; after a failed step the session
 * can only be freed. */
typedef struct specd_session specd_session;

/* Validates the request (as specd_generate), ingests the prompt; *out owned by the caller. */
SPECD_API specd_status specd_session_new(specd_engine *engine, const specd_token *prompt, int32_t n_prompt,
                                         const specd_generation_params *params, specd_session **out,
                                         char **error);
/* The same in slot `slot` (0 .. specd_engine_n_parallel - 1): its own KV sequences in both
 * contexts, so sessions in different slots interleave without re-decoding each other's history.
 * specd_session_new is slot 0. Two live sessions in one slot still work (they re-decode). */
SPECD_API specd_status specd_session_new_in_slot(specd_engine *engine, int32_t slot, const specd_token *prompt,
                                                 int32_t n_prompt, const specd_generation_params *params,
                                                 specd_session **out, char **error);
/* specd_session_new_in_slot without ingesting the prompt: the slot keeps what its cache shares with
 * the prompt, the rest (specd_session_pending_prompt tokens) joins specd_sessions_verify's passes
 * in chunks, beside the other slots' trees, so a long prompt delays the running generations by
 * at most one chunk per pass. Stepping the session on its own (specd_session_draft) ingests
 * what is left at once. */
SPECD_API specd_status specd_session_begin_in_slot(specd_engine *engine, int32_t slot, const specd_token *prompt,
                                                   int32_t n_prompt, const specd_generation_params *params,
                                                   specd_session **out, char **error);
SPECD_API int32_t specd_session_pending_prompt(const specd_session *s);
/* Asks this session alone to stop at its next draft (stop reason SPECD_STOP_CALLBACK). Safe from
 * any thread while another steps the session. */
SPECD_API void specd_session_request_stop(specd_session *s);
/* Drafts this step's tree (*n_drafted tokens; 0 when nothing is worth verifying: the step then
 * gives the target's own token). When the session stops before the step (stop requested, the
 * context full without a shift) it is done and there is nothing to verify. */
SPECD_API specd_status specd_session_draft(specd_session *s, int32_t *n_drafted, char **error);
/* One target pass over the tree and exact verification: *n_accepted draft tokens accepted. */
SPECD_API specd_status specd_session_verify(specd_session *s, int32_t *n_accepted, char **error);
/* specd_session_draft for several sessions (each in its own slot) whose trees will share ONE
 * target pass (specd_sessions_verify): each drafts knowing what the slots before it put in the
 * pass, so a draft token must raise the whole pass's tokens per ms, T(all the tokens) measured, to
 * be kept. As slots fill, drafting shrinks and stops where it does not pay; and the engine times
 * whole rounds (this call to the last specd_session_accept of its sessions) per number of
 * sessions, drafting and not: where drafted rounds made less, the adaptive sessions of such rounds
 * draft nothing (sessions with draft_min >= 1 or adaptive off still draft). status[i] (may be
 * NULL) and errors[i] (may be NULL; free each with specd_free) are session i's outcome; returns
 * the first failure, or SPECD_OK. */
SPECD_API specd_status specd_sessions_draft(specd_session *const *sessions, int32_t n, specd_status *status,
                                            char **errors);
/* (A session still ingesting its prompt is left as it is: status SPECD_OK.) */
/* specd_session_verify for several sessions in ONE target pass: their trees decoded together
 * (each in its slot's sequences; n sessions of one engine, each in a different slot, all drafted),
 * then each verified exactly as alone. Sessions still ingesting their prompt
 * (specd_session_begin_in_slot) add their next chunk instead, in the room the trees leave in the
 * batch (-b). The pass that holds the last chunk of a prompt also takes that session's first step
 * when the room allows (its last prompt token decoded with logits, the first token verified and
 * emitted, on_tokens called, all within this call): a session that was ingesting before this
 * call is never accepted after it. When the trees do not fit one batch together (draft_max) each
 * gets its own pass.
 * Outcomes per session (each array may be NULL, else n entries): n_accepted[i] (0 for a chunk),
 * status[i], errors[i] (a message to free with specd_free, or NULL). A session whose tree cannot be
 * verified fails alone; a failed pass fails every session in it. Returns the first failure, or
 * SPECD_OK. A call out of order (a session not drafted, two in one slot, sessions of different
 * engines) changes nothing: SPECD_ERR_INVALID_ARGUMENT for all, the message in errors[0]. */
SPECD_API specd_status specd_sessions_verify(specd_session *const *sessions, int32_t n, int32_t *n_accepted,
                                             specd_status *status, char **errors);
/* Keeps the accepted path in the caches and emits the step's tokens (accepted drafts plus the
 * target's token, *n_emitted, fewer when a stop comes among them); on_tokens is called here. */
SPECD_API specd_status specd_session_accept(specd_session *s, int32_t *n_emitted, char **error);
/* draft + verify + accept; *done when the generation is over (or the step failed). */
SPECD_API specd_status specd_session_step(specd_session *s, bool *done, char **error);
SPECD_API bool specd_session_done(const specd_session *s);
/* The result so far (tokens, probabilities, statistics, stop reason once done); owned by the
 * session, valid until the next call on it. */
SPECD_API const specd_result *specd_session_result(const specd_session *s);
/* Moves the result out (clear it with specd_result_clear); the session keeps an empty one. */
SPECD_API void specd_session_take_result(specd_session *s, specd_result *out);
SPECD_API void specd_session_free(specd_session *s);

/* Asks a running specd_generate to stop after its current step. Safe from any thread. */
SPECD_API void specd_engine_request_stop(specd_engine *engine);

/* Frees memory that libspecd returned (strings, token arrays, error messages). NULL is fine. */
SPECD_API void specd_free(void *ptr);

/* The library's version as "MAJOR.MINOR.PATCH" (SPECD_VERSION_STRING of the build), and as
 * SPECD_VERSION_NUMBER. A program built against this header can check at start-up that it runs
 * with the library it was built for: specd_version_number() / 100 == SPECD_VERSION_NUMBER / 100
 * (same MAJOR.MINOR). */
SPECD_API const char *specd_version(void);
SPECD_API int specd_version_number(void);

#ifdef __cplusplus
}
#endif

#endif /* SPECD_H */
