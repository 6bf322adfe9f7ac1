/* engine.c - loading the target and draft models, creating their contexts, and the engine's
 * accessors. Both contexts share the same threads and run one after the other, so they never
 * compete for the cores. */
#define _POSIX_C_SOURCE 200809L
#include "engine_internal.h"
#include "images.h"
#include "head_internal.h"
#include "llama_log.h"
#include "rpc_servers.h"

#include "../util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_N_BATCH 512
#define DEFAULT_DRAFT_MAX 16
/* Snapshots of a recurrent target's state for per-token rollback: each costs one more copy of the
 * state (tens of MB on large delta-net models), and most accepted runs are shorter. */
#define RS_SNAPSHOTS_MAX 8
#define MIN_SLOT_CTX 16

specd_engine_params specd_engine_default_params(void) {
    specd_engine_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = (uint32_t)sizeof p;
    p.n_gpu_layers = -1; /* llama.cpp's default: all layers on the GPU when there is one */
    p.n_gpu_layers_draft = -1;
    p.batch_invariant = true;
    p.flash_attn = SPECD_FLASH_ATTN_DEFAULT; /* settled once the target is loaded (attention.c) */
    p.pooling = SPECD_POOLING_DEFAULT;       /* the model's own */
    return p;
}

/* llama.cpp's load modes, in specd_load_mode's order. */
static const enum llama_load_mode load_modes[] = {LLAMA_LOAD_MODE_AUTO,  LLAMA_LOAD_MODE_NONE,
                                                  LLAMA_LOAD_MODE_MMAP,  LLAMA_LOAD_MODE_MLOCK,
                                                  LLAMA_LOAD_MODE_MMAP_MLOCK, LLAMA_LOAD_MODE_DIRECT_IO};
#define N_LOAD_MODES (sizeof load_modes / sizeof load_modes[0])

static enum llama_load_mode llama_load_mode_of(specd_load_mode mode) {
    return (unsigned)mode < N_LOAD_MODES ? load_modes[mode] : LLAMA_LOAD_MODE_AUTO;
}

static int32_t default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int32_t)n : 1;
}

static char *copy_string(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

static const char *file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "a special file";
}

static specd_status open_failed(const char *path, const char *role, char **error) {
    specd_set_error(error, "cannot open the %s model '%s': %s", role, path, strerror(errno));
    return SPECD_ERR_MODEL_LOAD;
}

static specd_status not_regular(const char *path, const char *role, mode_t mode, char **error) {
    specd_set_error(error, "the %s model '%s' is %s, not a regular file: pass the path of a GGUF file", role,
                    path, file_kind(mode));
    return SPECD_ERR_MODEL_LOAD;
}

/* Only a readable regular file (or a symlink to one) is a model: llama.cpp's open of a FIFO
 * blocks until a writer comes, maybe never, and a load cannot be aborted there. stat() looks
 * without opening (opening a device can have effects); the open that checks readability is
 * non-blocking, and fstat checks again what it opened, in case the path changed in between. */
static specd_status check_model_file(const char *path, const char *role, char **error) {
    struct stat st;
    if (stat(path, &st) != 0) return open_failed(path, role, error);
    if (!S_ISREG(st.st_mode)) return not_regular(path, role, st.st_mode, error);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return open_failed(path, role, error);
    bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    close(fd);
    return regular ? SPECD_OK : not_regular(path, role, st.st_mode, error);
}

/* The caller's progress callback, and whether it asked to stop. */
typedef struct load_progress {
    const specd_engine_params *params;
    bool cancelled;
} load_progress;

static bool on_load_progress(float progress, void *user_data) {
    load_progress *lp = user_data;
    if (lp->params->progress_callback(progress, lp->params->progress_user_data)) return true;
    lp->cancelled = true;
    return false;
}

static specd_status load_model(const specd_engine_params *params, const char *path, const char *role,
                               specd_model_slot *slot, char **error) {
    specd_status st = check_model_file(path, role, error);
    if (st != SPECD_OK) return st;
    struct llama_model **out = &slot->model;
    struct llama_model_params mp = llama_model_default_params();
    /* the target's nextn layers are left out unless the MTP head will run them (as llama.cpp does) */
    mp.load_mtp = params->mtp && !strcmp(role, "target");
    mp.load_mode = llama_load_mode_of(params->load_mode);
    specd_placement_apply(&slot->placement, &mp);
    load_progress lp = {.params = params};
    if (params->progress_callback) { /* without one, llama.cpp's own prints dots in verbose mode */
        mp.progress_callback = on_load_progress;
        mp.progress_callback_user_data = &lp;
    }
    specd_log_capture capture;
    specd_log_capture_begin(&capture);
    *out = llama_model_load_from_file(path, mp);
    const char *reason = specd_log_capture_end(&capture);
    if (*out) {
        specd_placement_loaded(&slot->placement, *out);
        return SPECD_OK;
    }
    if (lp.cancelled) {
        specd_set_error(error, "loading the %s model '%s' was cancelled (the progress callback returned false)",
                        role, path);
        return SPECD_ERR_CANCELLED;
    }
    if (*reason)
        specd_set_error(error, "cannot load the %s model '%s': not a GGUF model llama.cpp can read "
                        "(llama.cpp: %s)", role, path, reason);
    else
        specd_set_error(error, "cannot load the %s model '%s': not a GGUF model llama.cpp can read "
                        "(run with --verbose for llama.cpp's reason)", role, path);
    return SPECD_ERR_MODEL_LOAD;
}

/* Whether the slot's memory can drop its last tokens, and its description for messages. */
static void describe_slot(specd_model_slot *slot, const char *role) {
    bool recurrent = llama_model_is_recurrent(slot->model), hybrid = llama_model_is_hybrid(slot->model);
    slot->can_drop_tail = !recurrent && !hybrid;
    char arch[48];
    if (llama_model_meta_val_str(slot->model, "general.architecture", arch, sizeof arch) < 0)
        snprintf(arch, sizeof arch, "unknown architecture");
    snprintf(slot->desc, sizeof slot->desc, "%s model (%s%s)", role, arch,
             recurrent ? ", recurrent" : hybrid ? ", hybrid recurrent" : "");
}

/* One view per slot of a context: the slot's sequence, its own token list. */
static specd_status make_views(specd_engine *e, const specd_model_slot *shared, int32_t n_branches,
                               specd_model_slot **out, const char *role, char **error) {
    *out = calloc((size_t)e->n_parallel, sizeof **out);
    for (int32_t i = 0; *out && i < e->n_parallel; i++) {
        specd_model_slot *v = &(*out)[i];
        *v = *shared;
        v->seq = i;
        v->branch_base = e->n_parallel + i * (n_branches - 1);
        v->n_seq_max = n_branches;
        v->cap = e->n_ctx;
        v->n_kv = 0;
        v->kv_tokens = specd_alloc_array((size_t)e->n_ctx, sizeof *v->kv_tokens);
        if (!v->kv_tokens) break;
    }
    if (!*out || !(*out)[e->n_parallel - 1].kv_tokens) {
        specd_set_error(error, "out of memory for the %s token lists", role);
        return SPECD_ERR_NO_MEMORY;
    }
    return SPECD_OK;
}

/* SPECD_LLAMA_PERF=1 (a debugging aid, as llama.cpp's own LLAMA_GRAPH_REUSE_DISABLE): llama.cpp
 * keeps its per-context counters and each context prints them when freed, on stderr: passes, the
 * time in them, and how often llama.cpp reused its graph, which on a GPU decides whether CUDA
 * graphs replay (docs/benchmarks-gpu.md). */
static bool llama_perf_wanted(void) {
    const char *v = getenv("SPECD_LLAMA_PERF");
    return v && v[0] && strcmp(v, "0") != 0;
}

static void print_llama_perf(const specd_model_slot *slot) {
    struct llama_perf_context_data d = llama_perf_context(slot->ctx);
    fprintf(stderr, "specd: llama.cpp counters of the %s: %d tokens in passes of several (%.1f ms), %d passes of "
            "one (%.1f ms), graph reused %d times\n", slot->desc, d.n_p_eval, d.t_p_eval_ms, d.n_eval, d.t_eval_ms,
            d.n_reused);
}

static bool keeps_recurrent_state(const struct llama_model *m) {
    return m && (llama_model_is_recurrent(m) || llama_model_is_hybrid(m));
}

/* One slot with the target offloaded (a GPU, an RPC server): each context keeps one sequence in a
 * cache that is not unified. llama.cpp checks every pair of sequences of a unified cache on each
 * decode (llama_batch_allocr::init, 256 x 256 whatever the context holds: about 65 us a pass on
 * this CPU, a tenth of a small model's pass on a GPU, more of a draft's). The other sequences a
 * slot would use are for trees, which lose to chains there (specd_engine_auto_trees) and which the
 * drafters draft as chains where a context holds one sequence (draft_tree.c, head_drafter.c), and
 * for invariance, which an offloaded target is not given. Recurrent states keep their own layout. */
static bool one_sequence_contexts(const specd_engine *e) {
    bool caches = !keeps_recurrent_state(e->target.model) && (!e->draft.model || !keeps_recurrent_state(e->draft.model));
    return e->n_parallel == 1 && e->target.placement.n_layers_offloaded > 0 && e->inv.attention == SPECD_INVARIANT_NONE &&
           caches;
}

bool specd_engine_one_sequence(const specd_engine *e) { return e->one_sequence; }

/* The context of one model, shared by every slot (n_branches: tree branches a slot may decode,
 * the first in the slot's own sequence, the others in scratch sequences after the slots'). */
static specd_status create_context(specd_engine *e, specd_model_slot *slot, int32_t n_branches,
                                   specd_model_slot **views, const char *role, char **error) {
    bool one_sequence = e->one_sequence;
    if (one_sequence) n_branches = 1;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)e->n_ctx * (uint32_t)e->n_parallel;
    cp.n_batch = (uint32_t)e->n_batch;
    cp.n_ubatch = (uint32_t)e->n_batch;
    cp.n_seq_max = (uint32_t)(e->n_parallel * n_branches);
    /* llama.cpp reserves a row of logits per sequence whatever the batch, and aborts the process
     * when that exceeds its outputs (0: n_batch): `serve -np 3 -b 8` did (3 x 8 branches). */
    cp.n_outputs_max = cp.n_batch > cp.n_seq_max ? cp.n_batch : cp.n_seq_max;
    cp.kv_unified = !one_sequence; /* tree branches share their prefix cells; slots share the cells */
    cp.n_threads = e->params.n_threads;
    cp.n_threads_batch = e->params.n_threads_batch > 0 ? e->params.n_threads_batch : e->params.n_threads;
    cp.no_perf = !llama_perf_wanted();
    specd_apply_context_settings(&e->params, slot == &e->draft, &cp);
    if (slot == &e->target) {
        /* Flash attention "auto" is on for a CPU target (as llama.cpp decides): the plan counts on it. */
        if (e->inv.attention == SPECD_INVARIANT_FLASH) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
        specd_invariance_context_params(&e->inv, &cp);
        slot->inv = &e->inv;
    }
    /* Per-token rollback of a recurrent target's state, where its architecture has it (llama.cpp
     * sets 0 otherwise): n_rs_seq snapshots of the whole state, so at most RS_SNAPSHOTS_MAX;
     * longer drafts use a checkpoint. The draft decodes one token at a time: no use to it. */
    if (slot == &e->target) cp.n_rs_seq = (uint32_t)(e->params.draft_max < RS_SNAPSHOTS_MAX ? e->params.draft_max
                                                                                           : RS_SNAPSHOTS_MAX);
    specd_log_capture capture;
    specd_log_capture_begin(&capture);
    slot->ctx = llama_init_from_model(slot->model, cp);
    const char *reason = specd_log_capture_end(&capture);
    if (!slot->ctx) {
        char what[64];
        snprintf(what, sizeof what, "%s context", role);
        return specd_context_failed(error, what, cp.n_ctx, reason);
    }
    slot->n_rs_seq = (int32_t)llama_n_rs_seq(slot->ctx);
    describe_slot(slot, role); /* every view copies what the model's memory can do */
    slot->one_token_passes = slot == &e->draft;
    slot->pads_joint_passes = slot == &e->draft && slot->placement.n_layers_offloaded > 0;
    specd_slot_forget_checkpoints(slot, -1); /* none yet: each view starts without a buffer */
    specd_status st = make_views(e, slot, n_branches, views, role, error);
    if (st != SPECD_OK) return st;
    struct llama_context *ctx = slot->ctx;
    *slot = (*views)[0];
    slot->ctx = ctx;
    return SPECD_OK;
}

/* Moves the active view's own fields back to views[from] and views[to]'s in. Only these: other
 * threads read the shared ones (ctx, model) through the accessors while a session runs. */
static void swap_view(specd_model_slot *active, specd_model_slot *views, int32_t from, int32_t to) {
    views[from].kv_tokens = active->kv_tokens;
    views[from].n_kv = active->n_kv;
    views[from].logits_offset = active->logits_offset;
    views[from].features = active->features;
    active->features = views[to].features;
    memcpy(views[from].lora_scales, active->lora_scales, sizeof active->lora_scales);
    memcpy(active->lora_scales, views[to].lora_scales, sizeof active->lora_scales);
    active->kv_tokens = views[to].kv_tokens;
    active->n_kv = views[to].n_kv;
    active->seq = views[to].seq;
    active->branch_base = views[to].branch_base;
    active->logits_offset = views[to].logits_offset;
}

void specd_engine_use_slot(specd_engine *e, int32_t slot) {
    if (slot == e->active_slot || slot < 0 || slot >= e->n_parallel) return;
    swap_view(&e->target, e->target_views, e->active_slot, slot);
    if (e->draft_views) swap_view(&e->draft, e->draft_views, e->active_slot, slot);
    e->active_slot = slot;
}

static specd_status validate_params(const specd_engine_params *p, char **error) {
    if (!p || !p->target_path || !*p->target_path) {
        specd_set_error(error, "no target model given: pass its GGUF path (-m)");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (p->struct_size != sizeof *p) {
        specd_set_error(error, "specd_engine_params.struct_size is %u, this libspecd %s expects %zu: start "
                        "from specd_engine_default_params() and build against the specd.h of the library "
                        "you link", p->struct_size, SPECD_VERSION_STRING, sizeof *p);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (p->flash_attn != SPECD_FLASH_ATTN_OFF && p->flash_attn != SPECD_FLASH_ATTN_ON &&
        p->flash_attn != SPECD_FLASH_ATTN_AUTO && p->flash_attn != SPECD_FLASH_ATTN_DEFAULT) {
        specd_set_error(error, "flash_attn must be SPECD_FLASH_ATTN_OFF, _ON, _AUTO or _DEFAULT (got %d)",
                        (int)p->flash_attn);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    const specd_cache_type types[] = {p->cache_type_k, p->cache_type_v, p->cache_type_k_draft, p->cache_type_v_draft};
    const char *names[] = {"cache_type_k", "cache_type_v", "cache_type_k_draft", "cache_type_v_draft"};
    for (int i = 0; i < 4; i++)
        if (!specd_cache_type_name(types[i])) {
            specd_set_error(error, "%s must be a specd_cache_type (SPECD_CACHE_TYPE_DEFAULT, _F16, _F32, _BF16, _Q8_0, "
                            "...; got %d)", names[i], (int)types[i]);
            return SPECD_ERR_INVALID_ARGUMENT;
        }
    if ((unsigned)p->draft_hold > SPECD_DRAFT_HOLD_OFF) {
        specd_set_error(error, "draft_hold must be a specd_draft_hold (SPECD_DRAFT_HOLD_AUTO, _ON or _OFF; got %d)",
                        (int)p->draft_hold);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if ((unsigned)p->load_mode >= N_LOAD_MODES) {
        specd_set_error(error, "load_mode must be a specd_load_mode (SPECD_LOAD_MODE_AUTO, _NONE, _MMAP, _MLOCK, "
                        "_MMAP_MLOCK or _DIRECT_IO; got %d)", (int)p->load_mode);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (p->n_gpu_layers < -1 || p->n_gpu_layers_draft < -1) {
        specd_set_error(error, "n_gpu_layers and n_gpu_layers_draft must be -1 (all), 0 (none) or a layer count "
                        "(got %d, %d)", p->n_gpu_layers, p->n_gpu_layers_draft);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (p->n_parallel < 0 || p->n_parallel > SPECD_MAX_PARALLEL || p->n_ctx_per_slot < 0) {
        specd_set_error(error, "n_parallel must be from 0 to %d and n_ctx_per_slot not negative (got %d, %d)",
                        SPECD_MAX_PARALLEL, p->n_parallel, p->n_ctx_per_slot);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (p->n_ctx < 0 || p->n_batch < 0 || p->n_threads < 0 || p->draft_max < 0 || p->n_ubatch < 0 ||
        p->n_threads_batch < 0) {
        specd_set_error(error, "n_ctx, n_batch, n_threads, draft_max, n_ubatch and n_threads_batch must not be "
                        "negative (got %d, %d, %d, %d, %d, %d)", p->n_ctx, p->n_batch, p->n_threads, p->draft_max,
                        p->n_ubatch, p->n_threads_batch);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    return SPECD_OK;
}

/* A recurrent or hybrid model serves one slot: its state checkpoints (state.c) belong to the slot
 * that runs, and each sequence would cost a whole state. Said once on stderr, never silently. */
static void one_slot_for_recurrent_models(specd_engine *e) {
    if (e->params.n_parallel <= 1) return;
    if (!keeps_recurrent_state(e->target.model) && !keeps_recurrent_state(e->draft.model)) return;
    fprintf(stderr, "specd: note: %d slots asked for, but the %s model keeps a recurrent state: it serves one slot "
            "(requests beyond it wait in the queue)\n", e->params.n_parallel,
            keeps_recurrent_state(e->target.model) ? "target" : "draft");
    e->params.n_parallel = 1;
}

/* Settles n_ctx, n_batch, threads and the shared batch once the target is loaded. */
static specd_status size_engine(specd_engine *e, char **error) {
    int32_t n_train = llama_model_n_ctx_train(e->target.model);
    e->n_parallel = e->params.n_parallel > 1 ? e->params.n_parallel : 1;
    int32_t total = e->params.n_ctx > 0 ? e->params.n_ctx : n_train;
    e->n_ctx = e->params.n_ctx_per_slot > 0 ? e->params.n_ctx_per_slot : total / e->n_parallel;
    if (e->n_ctx < MIN_SLOT_CTX) {
        specd_set_error(error, "a context of %d tokens for %d slots leaves %d per slot; each needs at least %d: "
                        "raise -c or --ctx-per-slot, or lower -np", total, e->n_parallel, e->n_ctx, MIN_SLOT_CTX);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (e->params.n_threads == 0) e->params.n_threads = default_threads();
    if (e->params.draft_max == 0) e->params.draft_max = DEFAULT_DRAFT_MAX;
    int32_t n_batch = e->params.n_batch > 0 ? e->params.n_batch : DEFAULT_N_BATCH;
    if (e->params.n_ubatch > 0 && e->params.n_ubatch < n_batch) n_batch = e->params.n_ubatch; /* one piece */
    int32_t tree_max = e->params.draft_max + 1;
    e->n_batch = n_batch > tree_max ? n_batch : tree_max;
    if (e->n_batch > e->n_ctx) e->n_batch = e->n_ctx > tree_max ? e->n_ctx : tree_max;
    return SPECD_OK;
}

/* The one batch every decode reuses: e->n_batch tokens, and the padding token of an invariant
 * target pass (invariance.h). */
static specd_status make_batch(specd_engine *e, char **error) {
    e->batch_cap = e->n_batch;
    e->batch = llama_batch_init(e->batch_cap + 1, 0, SPECD_TREE_MAX_BRANCHES);
    if (!e->batch.token) {
        specd_set_error(error, "out of memory for a batch of %d tokens", e->batch_cap);
        return SPECD_ERR_NO_MEMORY;
    }
    return SPECD_OK;
}

/* A draft whose vocabulary is llama.cpp-compatible with the target's drafts in the target's tokens;
 * one that tokenizes text its own way drafts through text (draft/vocab_bridge.h), which needs a
 * tokenizer on both sides. Said once at start-up, never silently; the message of a refusal names
 * both files. */
static specd_status check_pair(specd_engine *e, char **error) {
    char *why = NULL;
    specd_status st = specd_check_vocab_compatible(e->target.model, e->draft.model, &why);
    const struct llama_vocab *t = llama_model_get_vocab(e->target.model), *d = llama_model_get_vocab(e->draft.model);
    bool tokenizers = llama_vocab_type(t) != LLAMA_VOCAB_TYPE_NONE && llama_vocab_type(d) != LLAMA_VOCAB_TYPE_NONE;
    if (st != SPECD_OK && tokenizers) {
        e->draft_vocab_differs = true;
        fprintf(stderr, "specd: draft: another vocabulary (%d vs %d tokens): drafts go through text\n",
                llama_vocab_n_tokens(d), llama_vocab_n_tokens(t));
        st = SPECD_OK;
    } else if (st != SPECD_OK) {
        specd_set_error(error, "the draft model '%s' cannot draft for the target model '%s': %s", e->draft_path,
                        e->target_path, why ? why : "their vocabularies differ");
    }
    free(why);
    return st;
}

/* Records which input a failure is about; returns st. */
static specd_status blame(specd_engine_input *failed, specd_engine_input input, specd_status st) {
    if (st != SPECD_OK) *failed = input;
    return st;
}

/* The LoRA adapters (lora.c), with llama.cpp's reason for a file it cannot load in the message. */
static specd_status load_adapters(specd_engine *e, const specd_engine_params *params, char **error) {
    specd_log_capture capture;
    specd_log_capture_begin(&capture);
    specd_status st = specd_lora_load(e, params, error);
    const char *reason = specd_log_capture_end(&capture);
    if (st == SPECD_ERR_MODEL_LOAD && *reason && error && *error) {
        char *first = *error;
        *error = NULL;
        specd_set_error(error, "%s; llama.cpp: %s", first, reason);
        free(first);
    }
    return st;
}

/* -fa's default made a setting (specd.h, SPECD_FLASH_ATTN_DEFAULT): the weights are read again
 * only then, and only for a target batch invariance covers (no recurrent state, no sliding window:
 * invariance.c's check_models), where flash attention spares every padded pass. */
static void settle_attention(specd_engine *e) {
    bool invariant_kind = e->target.can_drop_tail && llama_model_n_swa(e->target.model) == 0;
    bool agree = e->params.flash_attn == SPECD_FLASH_ATTN_DEFAULT && invariant_kind && specd_invariance_weights_agree(e);
    specd_settle_default_attention(&e->params, e->target.placement.n_layers_offloaded > 0, agree);
}

static bool given(const char *path) { return path && *path; }

/* The projectors asked for, against the models: a drafting head reads the target's features
 * position by position, which an image's positions would need the head to be given as well (not
 * done yet, so the pair is refused by name); the draft's own projector needs a draft model and the
 * target's projector. */
static specd_status check_projectors(const specd_engine_params *p, bool draft_model, bool head, char **error) {
    if (!given(p->mmproj_path)) {
        specd_set_error(error, "the draft's vision projector %s needs the target's (--mmproj) as well",
                        p->mmproj_draft_path);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (head || p->mtp) {
        specd_set_error(error, "the vision projector %s cannot go with a drafting head (mtp, EAGLE-3, DFlash): use "
                        "a draft model (-md) or model-free drafters with images", p->mmproj_path);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (given(p->mmproj_draft_path) && !draft_model) {
        specd_set_error(error, "the draft's vision projector %s needs a draft model (-md)", p->mmproj_draft_path);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    return SPECD_OK;
}

/* Loads both models (params: the caller's, for the progress callback) and creates their
 * contexts; on failure *failed names the input at fault. */
static specd_status engine_load(specd_engine *e, const specd_engine_params *params, specd_engine_input *failed,
                                char **error) {
    /* The files first: a path that is no model fails before any RPC server is contacted. */
    specd_status st = check_model_file(e->target_path, "target", error);
    if (st != SPECD_OK) return blame(failed, SPECD_INPUT_TARGET, st);
    if (e->draft_path && (st = check_model_file(e->draft_path, "draft", error)) != SPECD_OK)
        return blame(failed, SPECD_INPUT_DRAFT, st);
    st = specd_rpc_servers_add(params->rpc_servers, error);
    if (st == SPECD_OK) st = specd_placement_of(params, false, &e->target.placement, error);
    if (st != SPECD_OK) return blame(failed, SPECD_INPUT_TARGET, st);
    if (e->draft_path) st = specd_placement_of(params, true, &e->draft.placement, error);
    if (st != SPECD_OK) return blame(failed, SPECD_INPUT_DRAFT, st);
    st = load_model(params, e->target_path, "target", &e->target, error);
    if (st != SPECD_OK) return blame(failed, SPECD_INPUT_TARGET, st);
    specd_settle_default_v_cache(&e->params, e->target.placement.n_layers_offloaded > 0);
    if (e->draft_path) {
        st = load_model(params, e->draft_path, "draft", &e->draft, error);
        /* an EAGLE-3 or DFlash file is a head: it is checked against the target as one (head.c) */
        if (st == SPECD_OK && !specd_head_is_head_model(e->draft.model)) st = check_pair(e, error);
        if (st != SPECD_OK) return blame(failed, SPECD_INPUT_DRAFT, st);
    }
    st = load_adapters(e, params, error);
    if (st != SPECD_OK) return blame(failed, e->lora.n < params->n_lora ? SPECD_INPUT_TARGET : SPECD_INPUT_DRAFT, st);
    for (int32_t i = 0; i < e->lora.n; i++) e->target.lora_scales[i] = e->lora.scales[i]; /* every view starts so */
    e->vocab = llama_model_get_vocab(e->target.model);
    e->n_vocab = llama_vocab_n_tokens(e->vocab);
    one_slot_for_recurrent_models(e);
    describe_slot(&e->target, "target");
    settle_attention(e);
    st = size_engine(e, error);
    if (st == SPECD_OK) st = specd_invariance_plan(e, error);
    e->one_sequence = one_sequence_contexts(e); /* once: the contexts are made so, and sessions ask per step */
    if (st == SPECD_OK) st = make_batch(e, error);
    if (st != SPECD_OK) return st;
    /* Tree branches are sequences of their own; a recurrent state verifies chains only (kv.c), and
     * each sequence would cost a whole state (times the rollback snapshots). */
    bool chains_only = llama_model_is_recurrent(e->target.model) || llama_model_is_hybrid(e->target.model);
    st = create_context(e, &e->target, chains_only ? 1 : SPECD_TREE_MAX_BRANCHES, &e->target_views, "target", error);
    if (st == SPECD_OK && params->embedding) st = specd_embedder_new(e, params, error);
    if (st != SPECD_OK) return blame(failed, SPECD_INPUT_TARGET, st);
    bool draft_is_head = e->draft.model && specd_head_is_head_model(e->draft.model);
    if (e->draft.model && !draft_is_head)
        st = blame(failed, SPECD_INPUT_DRAFT, create_context(e, &e->draft, SPECD_TREE_MAX_BRANCHES, &e->draft_views,
                                                             "draft", error));
    if (st == SPECD_OK) specd_lora_apply_draft(e);
    if (st == SPECD_OK && ((params->mmproj_path && *params->mmproj_path) || given(params->mmproj_draft_path))) {
        st = check_projectors(params, e->draft.model && !draft_is_head, draft_is_head, error);
        if (st == SPECD_OK)
            st = specd_images_load(e, params->mmproj_path, given(params->mmproj_draft_path) ? params->mmproj_draft_path
                                                                                             : NULL, error);
        if (st != SPECD_OK) return blame(failed, SPECD_INPUT_MMPROJ, st);
    }
    if (st != SPECD_OK || (!draft_is_head && !params->mtp)) return st;
    struct llama_model *head_model = NULL;
    if (draft_is_head) { /* the head owns it from here */
        head_model = e->draft.model;
        e->draft.model = NULL;
    }
    return blame(failed, head_model ? SPECD_INPUT_DRAFT : SPECD_INPUT_TARGET,
                 specd_head_new(e, head_model, e->draft_path, params->mtp, error));
}

specd_status specd_engine_new(const specd_engine_params *params, specd_engine **out, char **error) {
    /* read only from a struct of this header's size: an older one ends before the field */
    specd_engine_input *failed_input =
        params && params->struct_size == sizeof *params ? params->failed_input : NULL;
    specd_engine_input failed = SPECD_INPUT_NONE;
    if (failed_input) *failed_input = SPECD_INPUT_NONE;
    if (error) *error = NULL;
    *out = NULL;
    specd_status st = validate_params(params, error);
    if (st != SPECD_OK) {
        bool no_target = !params || !params->target_path || !*params->target_path;
        if (failed_input && no_target) *failed_input = SPECD_INPUT_TARGET;
        return st;
    }
    specd_llama_init();
    specd_llama_log_verbose(params->verbose);
    specd_engine *e = calloc(1, sizeof *e);
    if (!e) {
        specd_set_error(error, "out of memory for the engine");
        return SPECD_ERR_NO_MEMORY;
    }
    e->params = *params;
    e->target_path = copy_string(params->target_path);
    e->draft_path = params->draft_path && *params->draft_path ? copy_string(params->draft_path) : NULL;
    e->params.target_path = e->target_path;
    e->params.draft_path = e->draft_path;
    e->calibration_cache = params->calibration_cache ? copy_string(params->calibration_cache) : NULL;
    e->params.calibration_cache = e->calibration_cache;
    e->params.progress_callback = NULL; /* only the load calls it: the engine keeps no caller's pointer */
    e->params.progress_user_data = NULL;
    e->params.devices = e->params.devices_draft = e->params.rpc_servers = NULL; /* the placements keep them */
    e->params.lora = e->params.lora_draft = NULL; /* the adapters are loaded (lora.c keeps the paths) */
    e->params.mmproj_path = e->params.mmproj_draft_path = NULL; /* the projectors are loaded (images.c) */
    e->params.failed_input = NULL; /* written during the call only */
    atomic_init(&e->stop_requests, 0u);
    bool copied = e->target_path && (e->draft_path || !params->draft_path || !*params->draft_path) &&
                  (e->calibration_cache || !params->calibration_cache);
    if (!copied) specd_set_error(error, "out of memory for the model and calibration cache paths");
    st = copied ? engine_load(e, params, &failed, error) : SPECD_ERR_NO_MEMORY;
    if (st != SPECD_OK) {
        if (failed_input) *failed_input = failed;
        specd_engine_free(e);
        return st;
    }
    *out = e;
    return SPECD_OK;
}

/* Frees a context and its model, and every slot's token list (the active one's is in *slot). */
static void free_slot(specd_model_slot *slot, specd_model_slot *views, int32_t n_views, int32_t active) {
    if (slot->ctx && llama_perf_wanted()) print_llama_perf(slot);
    if (slot->ctx) llama_free(slot->ctx);
    if (slot->model) llama_model_free(slot->model);
    if (views) {
        for (int32_t i = 0; i < n_views; i++)
            if (i != active) free(views[i].kv_tokens);
        if (views[active].kv_tokens != slot->kv_tokens) free(views[active].kv_tokens); /* never swapped in */
    }
    free(slot->kv_tokens);
    specd_slot_free_checkpoints(slot);
    free(views);
    memset(slot, 0, sizeof *slot);
}

bool specd_engine_image_known(const specd_engine *e, specd_token token) {
    return specd_images_known(e->images, token);
}

void specd_engine_free(specd_engine *e) {
    if (!e) return;
    if (e->learned) e->free_learned(e->learned);
    specd_head_free(e); /* before the target: its context reads the target's */
    specd_embedder_free(e); /* so does the embedding context */
    specd_images_free(e->images); /* before the target: the projector was made for its model */
    free_slot(&e->draft, e->draft_views, e->n_parallel, e->active_slot);
    free_slot(&e->target, e->target_views, e->n_parallel, e->active_slot);
    specd_lora_free(e); /* the adapters went with their models; their paths are ours */
    if (e->batch.token) llama_batch_free(e->batch);
    free(e->target_path);
    free(e->draft_path);
    free(e->calibration_cache);
    free(e);
}

specd_placement_info specd_engine_placement(const specd_engine *e, bool draft) {
    const specd_model_slot *slot = draft ? &e->draft : &e->target;
    if (!slot->model) return (specd_placement_info){0};
    return (specd_placement_info){slot->placement.names, slot->placement.n_layers, slot->placement.n_layers_offloaded};
}

bool specd_engine_has_draft(const specd_engine *e) { return e && e->draft.ctx != NULL; }
int32_t specd_engine_n_ctx(const specd_engine *e) { return e->n_ctx; }
int32_t specd_engine_n_vocab(const specd_engine *e) { return e->n_vocab; }
int32_t specd_engine_n_parallel(const specd_engine *e) { return e ? e->n_parallel : 0; }

int32_t specd_engine_draft_max(const specd_engine *e) { return e ? e->params.draft_max : 0; }

bool specd_engine_auto_trees(const specd_engine *e) {
    return e->inv.attention != SPECD_INVARIANT_PLAIN && e->target.placement.n_layers_offloaded == 0;
}

specd_invariance_info specd_engine_invariance(const specd_engine *e) {
    return (specd_invariance_info){e->inv.attention != SPECD_INVARIANT_NONE, e->inv.requested, e->inv.setting,
                                   e->inv.note[0] ? e->inv.note : NULL};
}

/* llama.cpp counts its reuses per context (llama_perf_context, kept whether or not its timings
 * are), and the engine counts its own decodes of each (kv.c): one decode is one graph compute,
 * since each context's micro-batch is its batch (create_context). */
static specd_graph_counts graph_counts_of(const specd_model_slot *slot, int64_t passes) {
    if (!slot->ctx) return (specd_graph_counts){0, 0};
    return (specd_graph_counts){passes, llama_perf_context(slot->ctx).n_reused};
}

specd_graph_info specd_engine_graph_counts(const specd_engine *e) {
    if (!e) return (specd_graph_info){{0, 0}, {0, 0}};
    return (specd_graph_info){graph_counts_of(&e->target, e->target_decodes),
                              graph_counts_of(&e->draft, e->draft_decodes)};
}

int32_t specd_engine_slot_cached(const specd_engine *e, int32_t slot, const specd_token *prompt, int32_t n_prompt) {
    if (!e || slot < 0 || slot >= e->n_parallel || !prompt) return 0;
    const specd_model_slot *v = slot == e->active_slot ? &e->target : &e->target_views[slot];
    int32_t n = 0;
    while (n < n_prompt - 1 && n < v->n_kv && v->kv_tokens[n] == prompt[n]) n++;
    return n;
}

/* The first n tokens of view `from` into view `to` (its own cache dropped first): shared cells. */
static void share_cells(specd_model_slot *from, specd_model_slot *to, int32_t n) {
    specd_invariance_seq_rm(to->inv, to->ctx, to->seq, -1, -1);
    specd_slot_forget_checkpoints(to, -1);
    llama_memory_seq_cp(llama_get_memory(to->ctx), from->seq, to->seq, 0, n);
    memcpy(to->kv_tokens, from->kv_tokens, (size_t)n * sizeof *to->kv_tokens);
    memcpy(to->lora_scales, from->lora_scales, sizeof to->lora_scales); /* what the cells were made with */
    to->n_kv = n;
}

static int32_t common_prefix(const specd_model_slot *v, const specd_token *prompt, int32_t n_max) {
    int32_t n = 0;
    while (n < n_max && n < v->n_kv && v->kv_tokens[n] == prompt[n]) n++;
    return n;
}

int32_t specd_engine_slot_share(specd_engine *e, int32_t from, int32_t to, const specd_token *prompt, int32_t n_prompt) {
    if (!e || to < 0 || to >= e->n_parallel || !prompt) return 0;
    int32_t own = specd_engine_slot_cached(e, to, prompt, n_prompt);
    if (from < 0 || from >= e->n_parallel || from == to || e->head) return own;
    specd_model_slot *tf = specd_engine_target_view(e, from), *tt = specd_engine_target_view(e, to);
    int32_t n = common_prefix(tf, prompt, n_prompt - 1);
    if (n <= own || !tf->can_drop_tail) return own;
    specd_model_slot *df = specd_engine_draft_view(e, from), *dt = specd_engine_draft_view(e, to);
    if (df && !df->can_drop_tail) return own;
    share_cells(tf, tt, n);
    /* the draft's cache follows its history lazily: what it holds of the prompt, if more than to's */
    int32_t n_draft = df && !e->draft_vocab_differs ? common_prefix(df, prompt, n) : 0; /* its tokens are not the prompt's */
    if (n_draft > (dt ? common_prefix(dt, prompt, n) : 0)) share_cells(df, dt, n_draft);
    return n;
}

void specd_engine_slot_forget(specd_engine *e, int32_t slot) {
    if (!e || slot < 0 || slot >= e->n_parallel) return;
    specd_slot_truncate(specd_engine_target_view(e, slot), 0);
    specd_model_slot *draft = specd_engine_draft_view(e, slot);
    if (draft) specd_slot_truncate(draft, 0);
    specd_head_forget_slot(e, slot);
}

void specd_engine_request_stop(specd_engine *e) { atomic_fetch_add(&e->stop_requests, 1u); }

const char *specd_version(void) { return SPECD_VERSION_STRING; }

int specd_version_number(void) { return SPECD_VERSION_NUMBER; }
