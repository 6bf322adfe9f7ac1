/* run.c - `specd run`: one generation from the command line, streamed as text or as one JSON
 * object. */
#define _POSIX_C_SOURCE 200809L
#include "../util/args.h"
#include "../util/flag_names.h"
#include "../util/lora_arg.h"
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#define RUN_MAX_DRY_BREAKERS 32

typedef struct run_options {
    specd_engine_params engine;
    specd_generation_params gen;
    const char *prompt;
    const char *prompt_file;
    const char *grammar_file;
    const char *calibration_cache; /* --calibration-cache: a path, "off", or NULL for the default */
    const char *trace_steps;       /* --trace-steps: a file for one line a step, or NULL */
    bool json;
    specd_lora_adapter lora[SPECD_MAX_LORA], lora_draft[SPECD_MAX_LORA]; /* --lora..., --lora-draft */
    const char *dry_breakers[RUN_MAX_DRY_BREAKERS]; /* --dry-sequence-breaker, given ones */
    int32_t n_dry_breakers;
    bool gpu_layers_given; /* -ngl or -ngld: a CPU-only build says it runs on the CPU */
    bool list_devices;
    int warmup; /* --warmup 1, --no-warmup 0; -1: where a target layer is offloaded (run_warm_up) */
    const char *images[CLI_MAX_IMAGES]; /* --image FILE, in order */
    int32_t n_images;
} run_options;

static void run_usage(FILE *out) {
    fputs("usage: specd run -m TARGET [-md DRAFT] (-p PROMPT | -f FILE) [options]\n"
          "\n"
          "  -m, --model FILE         target model (GGUF)\n"
          "  -md, --model-draft, --spec-draft-model FILE\n"
          "                           draft model (GGUF); speculation is on when given\n"
          "  -p, --prompt TEXT        prompt text\n"
          "  -f, --file FILE          read the prompt from FILE\n"
          "  --mmproj FILE            the target's vision projector (llama.cpp's mmproj GGUF)\n"
          "  --image FILE             an image for the prompt (repeatable; needs --mmproj): where\n"
          "                           the prompt has <__media__>, else before it. Speculation\n"
          "                           stays on: the draft model drafts from the text around it\n"
          "  --mmproj-draft FILE      the draft model's own vision projector: it then decodes images\n"
          "                           too (it must make as many positions of an image as --mmproj)\n"
          "  -n, --n-predict N        tokens to generate (-1: until end of text; default -1)\n"
          "  -c, --ctx-size N         context size (default: the model's)\n"
          "  -b, --batch-size N       prompt batch size (default 512)\n"
          "  -t, --threads N          threads for both models (default: all cores)\n"
          "  -tb, --threads-batch N   threads for passes of several tokens (prompt, verification;\n"
          "                           default: -t)\n"
          "  -ub, --ubatch-size N     llama.cpp's physical batch: specd decodes a batch whole, so\n"
          "                           the smaller of -b and -ub is the batch\n"
          "  -fa, --flash-attn on|off|auto\n"
          "                           llama.cpp's flash attention (default: on, with bf16 caches,\n"
          "                           for a Q8_0-like CPU target whose one-token passes need no\n"
          "                           padding then; else off: on the CPU it makes passes over\n"
          "                           several tokens slower as the context fills)\n"
          "  -ctk, --cache-type-k TYPE, -ctv, --cache-type-v TYPE\n"
          "                           K and V cache types: f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl,\n"
          "                           q5_0, q5_1 (default K f16, V f32 with flash attention off, f16\n"
          "                           with it on, both bf16 where the default turned it on; a\n"
          "                           quantized V needs flash attention)\n"
          "  -ctkd, --cache-type-k-draft TYPE, -ctvd, --cache-type-v-draft TYPE\n"
          "                           the draft's (default: the target's)\n"
          "  --batch-invariant on|off verification logits independent of what shares a pass, bit for\n"
          "                           bit (default on; off: a little faster, exact up to rounding)\n"
          "  -lm, --load-mode MODE    how the models are read, llama.cpp's: auto (default: mapped\n"
          "                           unless a device cannot use it), none, mmap, mlock, mmap+mlock, dio\n"
          "  --lora FILE[,FILE...]    LoRA adapters for the target (repeatable; llama.cpp's GGUF)\n"
          "  --lora-scaled FILE:SCALE[,...]  (or FILE SCALE)\n"
          "                           the same at a scale (1: as trained)\n"
          "  --lora-init-without-apply load the adapters at scale 0\n"
          "  --lora-draft FILE[,FILE...]\n"
          "                           LoRA adapters for the draft (default: none; the draft without\n"
          "                           the target's adapter only lowers acceptance, never exactness)\n"
          "  -ngl, --n-gpu-layers N|all\n"
          "                           target layers on the GPU (default all; 0: the CPU only)\n"
          "  -ngld, --n-gpu-layers-draft N|all\n"
          "                           draft layers on the GPU (default all)\n"
          "  -dev, --device LIST      the target's devices, e.g. CUDA0,CUDA1, or none (default: every\n"
          "                           GPU and --rpc server; see --list-devices)\n"
          "  -devd, --device-draft LIST\n"
          "                           the draft's devices (default: every local GPU)\n"
          "  --rpc HOST:PORT,...      llama.cpp rpc-server processes to split the target over (the\n"
          "                           draft stays local)\n"
          "  --list-devices           list the devices (with the --rpc servers given before it), exit\n"
          "  --temp T                 temperature; 0 = greedy (default 0.8)\n"
          "  --top-k K                (default 40; 0 = off)\n"
          "  --top-p P                (default 0.95; 1 = off)\n"
          "  --min-p P                (default 0.05; 0 = off)\n"
          "  --typical P              locally typical sampling (default 1 = off)\n"
          "  --repeat-penalty X       (default 1 = off)   --repeat-last-n N (default 64)\n"
          "  --presence-penalty X     (default 0)         --frequency-penalty X (default 0)\n"
          "  --top-n-sigma N          keep tokens within N standard deviations of the top logit (off)\n"
          "  --min-keep N             top-p, min-p, typical and XTC keep at least N tokens (default 0)\n"
          "  --dynatemp-range R, --dynatemp-exp E\n"
          "                           dynamic temperature between temp-R and temp+R (default 0: off, 1)\n"
          "  --xtc-probability P, --xtc-threshold T\n"
          "                           XTC: drop the most likely tokens but one (default 0: off, 0.1)\n"
          "  --dry-multiplier X, --dry-base B, --dry-allowed-length N, --dry-penalty-last-n N,\n"
          "  --dry-sequence-breaker S DRY repetition penalty (default 0: off, 1.75, 2, 64; breakers\n"
          "                           \\n : \" * unless given, repeatable; \"none\" for none)\n"
          "  --mirostat N, --mirostat-lr ETA, --mirostat-ent TAU\n"
          "                           mirostat 1 or 2 (default 0: off, 0.1, 5)\n"
          "  --seed S                 random seed (default: from the clock); with a seed the text\n"
          "                           is the same with any speculation (coupled draws)\n"
          "  --no-reproducible        with a seed, verify by rejection sampling instead: the same\n"
          "                           distribution and a higher acceptance, the draws following the\n"
          "                           drafts\n"
          "  --ignore-eos             do not stop at end-of-generation tokens\n"
          "  --context-shift          when the context is full, drop the older half of what follows\n"
          "                           the first --keep tokens and go on (as llama-server)\n"
          "  --no-context-shift       stop when the context is full (the default)\n"
          "  --keep N                 tokens kept at the start on a context shift (-1: the prompt;\n"
          "                           default 0)\n"
          "  --grammar TEXT           GBNF grammar the output must match (start symbol root)\n"
          "  --grammar-file FILE      read the grammar from FILE\n"
          "  --spec, --spec-type LIST speculation: none, or a comma-separated list of the drafters\n"
          "                           below (llama-server's --spec-type names too); each step uses\n"
          "                           the one expected to pay most (default: the draft model or head\n"
          "                           given with -md); mtp loads the target's MTP layers,\n"
          "                           eagle3/dflash/dspark need that head as -md\n"
          "  --spec-ngram-n, --spec-ngram-simple-size-n N\n"
          "                           n-gram length of ngram-simple and ngram-map (default 3)\n"
          "  --spec-ngram-min-hits N  ngram-map drafts continuations seen N times (default 2)\n"
          "  --spec-ngram-cache FILE  static n-gram cache for ngram-cache (tools/build_ngram_cache)\n"
          "  --spec-suffix-branches N suffix drafts may be trees of up to N branches (1-8; default 1)\n"
          "  --draft-max, --spec-draft-n-max N\n"
          "                           longest draft per step (default 8)\n"
          "  --draft-min, --spec-draft-n-min N\n"
          "                           shortest draft per step (default 0)\n"
          "  --draft-p-min, --spec-draft-p-min P\n"
          "                           stop drafting below this draft confidence (default 0)\n"
          "  --draft-fixed            always draft --draft-max tokens (no adaptive length)\n"
          "  --draft-tree on|off|auto draft-model trees: forced, chains only, or where the measured\n"
          "                           costs say a branch pays (default auto; chains with flash\n"
          "                           attention off, where trees are not batch-invariant)\n"
          "  --draft-branches N       most branches of a draft-model tree (1-8; default 4)\n"
          "  --draft-p-split P        a branch needs this draft path probability (default 0.1)\n"
          "  --draft-tree-nodes N     most draft tokens in a tree (default 16)\n"
          "  --draft-hold auto|on|off the adaptive draft length held for spells of 16 steps, chosen\n"
          "                           by what each length made, or planned step by step (default\n"
          "                           auto: held where the target's layers are on a GPU, which runs\n"
          "                           a pass fastest while its size holds; on rpc-servers alone once\n"
          "                           a change of size is seen to cost a tenth of a pass)\n"
          "  --calibration-cache PATH|off\n"
          "                           file (or directory) keeping the measured costs of target\n"
          "                           passes and draft tokens between runs (default: a file per\n"
          "                           models and settings in $XDG_CACHE_HOME/specd/calibration/)\n"
          "  --json                   print one JSON object instead of streaming text\n"
          "  --warmup, --no-warmup    one pass of each model before the prompt (llama.cpp's warm-up);\n"
          "                           default: where a target layer is offloaded (a GPU loads its\n"
          "                           kernels then; on the CPU the prompt's pass reads the weights in)\n"
          "  --trace-steps FILE       write one line a step: history length, drafted, accepted,\n"
          "                           draft/verify/step ms, then each draft's confidence (the\n"
          "                           input of tools/policy_replay), then '|' and the draft tokens\n"
          "  --verbose                show llama.cpp's log\n",
          out);
    cli_print_drafters(out);
}

/* f is the flag `name` or its llama.cpp 0.5.0 spelling `llama_name`. */
static bool is_flag(const char *f, const char *name, const char *llama_name) {
    return !strcmp(f, name) || !strcmp(f, llama_name);
}

/* --spec (or llama.cpp's --spec-type): 'none', 'draft' (the plain draft-model loop), or a list
 * such as 'ngram-simple,draft'. */
static bool parse_spec(cli_args *a, const char *flag, specd_spec_params *sp) {
    const char *v = cli_value(a, flag);
    if (!v) return false;
    char *err = NULL;
    bool ok = specd_spec_params_parse_types(sp, v, &err) == SPECD_OK;
    if (!ok) cli_fail(a, "%s must be none or a comma-separated list of %s: %s", flag, specd_spec_type_names(),
                      err ? err : "");
    specd_free(err);
    return ok;
}

/* The flag that sets each field the library checks (specd_generation_params_validate). */
static const char *flag_of(const char *field) {
    static const struct {
        const char *field, *flag;
    } flags[] = {
        {"sampling.temperature", "--temp"},           {"sampling.top_p", "--top-p"},
        {"sampling.min_p", "--min-p"},                {"sampling.typical_p", "--typical"},
        {"sampling.repeat_penalty", "--repeat-penalty"}, {"sampling.repeat_last_n", "--repeat-last-n"},
        {"sampling.presence_penalty", "--presence-penalty"}, {"sampling.frequency_penalty", "--frequency-penalty"},
        {"speculative.draft_max", "--draft-max"},     {"speculative.draft_min", "--draft-min"},
        {"speculative.draft_p_min", "--draft-p-min"}, {"speculative.ngram_n", "--spec-ngram-n"},
        {"speculative.ngram_min_hits", "--spec-ngram-min-hits"},
        {"speculative.suffix_branches", "--spec-suffix-branches"}, {"n_keep", "--keep"},
        {"speculative.tree", "--draft-tree"}, {"speculative.draft_branches", "--draft-branches"},
        {"speculative.draft_p_split", "--draft-p-split"}, {"speculative.draft_tree_nodes", "--draft-tree-nodes"},
        {"sampling.top_n_sigma", "--top-n-sigma"},    {"sampling.min_keep", "--min-keep"},
        {"sampling.dynatemp_range", "--dynatemp-range"}, {"sampling.dynatemp_exponent", "--dynatemp-exp"},
        {"sampling.xtc_probability", "--xtc-probability"}, {"sampling.xtc_threshold", "--xtc-threshold"},
        {"sampling.dry_multiplier", "--dry-multiplier"}, {"sampling.dry_base", "--dry-base"},
        {"sampling.dry_allowed_length", "--dry-allowed-length"}, {"sampling.dry_penalty_last_n", "--dry-penalty-last-n"},
        {"sampling.mirostat", "--mirostat"},          {"sampling.mirostat_tau", "--mirostat-ent"},
        {"sampling.mirostat_eta", "--mirostat-lr"},
    };
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        if (!strcmp(field, flags[i].field)) return flags[i].flag;
    return field;
}

/* Ranges are the library's to decide: the flags are read as numbers, then checked here once,
 * and the message names the flag. */
static bool ranges_valid(cli_args *a, const specd_generation_params *g) {
    const char *field = NULL;
    char *err = NULL;
    if (specd_generation_params_validate(g, &field, &err) == SPECD_OK) return true;
    cli_fail(a, "%s%s", field ? flag_of(field) : "", err && field ? err + strlen(field) : (err ? err : ""));
    specd_free(err);
    return false;
}

static bool parse_draft_tree(cli_args *a, const char *flag, specd_draft_tree_mode *out) {
    const char *v = cli_value(a, flag);
    if (!v) return false;
    return specd_draft_tree_mode_from_name(v, out) || cli_fail(a, "%s expects on, off or auto, got '%s'", flag, v);
}

/* --dry-sequence-breaker S (repeatable; "none": no breakers): kept in o->dry_breakers. */
static bool add_dry_breaker(cli_args *a, const char *flag, run_options *o) {
    const char *v = cli_value(a, flag);
    if (!v) return false;
    if (o->n_dry_breakers == RUN_MAX_DRY_BREAKERS)
        return cli_fail(a, "%s: at most %d breakers", flag, RUN_MAX_DRY_BREAKERS);
    if (strcmp(v, "none")) o->dry_breakers[o->n_dry_breakers++] = v;
    o->gen.sampling.dry_sequence_breakers = o->dry_breakers;
    o->gen.sampling.n_dry_sequence_breakers = o->n_dry_breakers;
    return true;
}

/* llama.cpp's DRY, top-n-sigma, XTC, dynatemp, min-keep and mirostat flags; false when f is none of
 * them (*ok untouched), else *ok says whether its value parsed. */
static bool parse_llama_sampler_flag(cli_args *a, const char *f, run_options *o, bool *ok) {
    specd_sampling_params *s = &o->gen.sampling;
    static const struct {
        const char *flag;
        size_t offset;
    } floats[] = {
        {"--top-n-sigma", offsetof(specd_sampling_params, top_n_sigma)},
        {"--top-nsigma", offsetof(specd_sampling_params, top_n_sigma)},
        {"--dynatemp-range", offsetof(specd_sampling_params, dynatemp_range)},
        {"--dynatemp-exp", offsetof(specd_sampling_params, dynatemp_exponent)},
        {"--xtc-probability", offsetof(specd_sampling_params, xtc_probability)},
        {"--xtc-threshold", offsetof(specd_sampling_params, xtc_threshold)},
        {"--dry-multiplier", offsetof(specd_sampling_params, dry_multiplier)},
        {"--dry-base", offsetof(specd_sampling_params, dry_base)},
        {"--mirostat-lr", offsetof(specd_sampling_params, mirostat_eta)},
        {"--mirostat-ent", offsetof(specd_sampling_params, mirostat_tau)},
    }, ints[] = {
        {"--min-keep", offsetof(specd_sampling_params, min_keep)},
        {"--dry-allowed-length", offsetof(specd_sampling_params, dry_allowed_length)},
        {"--dry-penalty-last-n", offsetof(specd_sampling_params, dry_penalty_last_n)},
        {"--mirostat", offsetof(specd_sampling_params, mirostat)},
    };
    double d = 0.0;
    int64_t i = 0;
    for (size_t k = 0; k < sizeof floats / sizeof *floats; k++)
        if (!strcmp(f, floats[k].flag)) {
            *ok = cli_float(a, f, -HUGE_VAL, HUGE_VAL, &d);
            *(float *)((char *)s + floats[k].offset) = (float)d;
            return true;
        }
    for (size_t k = 0; k < sizeof ints / sizeof *ints; k++)
        if (!strcmp(f, ints[k].flag)) {
            *ok = cli_int(a, f, INT32_MIN, INT32_MAX, &i);
            *(int32_t *)((char *)s + ints[k].offset) = (int32_t)i;
            return true;
        }
    if (strcmp(f, "--dry-sequence-breaker")) return false;
    *ok = add_dry_breaker(a, f, o);
    return true;
}

/* Sampling and speculation flags; returns 1 when handled, 0 when not ours, -1 on error. */
static int parse_generation_flag(cli_args *a, const char *f, run_options *o) {
    specd_sampling_params *s = &o->gen.sampling;
    specd_spec_params *sp = &o->gen.speculative;
    int64_t i = 0;
    double d = 0.0;
    bool ok = true;
    int sampling = cli_sampling_flag(a, f, s);
    if (sampling != 0) return sampling;
    if (!strcmp(f, "-n") || !strcmp(f, "--n-predict")) { ok = cli_int(a, f, -1, INT32_MAX, &i); o->gen.n_predict = (int32_t)i; }
    else if (parse_llama_sampler_flag(a, f, o, &ok)) {}
    else if (!strcmp(f, "--no-reproducible")) s->reproducible = false;
    else if (!strcmp(f, "--ignore-eos")) o->gen.ignore_eos = true;
    else if (!strcmp(f, "--context-shift")) o->gen.context_shift = true;
    else if (!strcmp(f, "--no-context-shift")) o->gen.context_shift = false;
    else if (!strcmp(f, "--keep")) { ok = cli_int(a, f, INT32_MIN, INT32_MAX, &i); o->gen.n_keep = (int32_t)i; }
    else if (!strcmp(f, "--grammar")) ok = (o->gen.grammar = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--grammar-file")) ok = (o->grammar_file = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--spec") || !strcmp(f, "--spec-type")) ok = parse_spec(a, f, sp);
    else if (is_flag(f, "--draft-max", "--spec-draft-n-max")) { ok = cli_int(a, f, INT32_MIN, INT32_MAX, &i); sp->draft_max = (int32_t)i; }
    else if (is_flag(f, "--draft-min", "--spec-draft-n-min")) { ok = cli_int(a, f, INT32_MIN, INT32_MAX, &i); sp->draft_min = (int32_t)i; }
    else if (is_flag(f, "--draft-p-min", "--spec-draft-p-min")) { ok = cli_float(a, f, -HUGE_VAL, HUGE_VAL, &d); sp->draft_p_min = (float)d; }
    else if (!strcmp(f, "--draft-fixed")) sp->adaptive = false;
    else if (is_flag(f, "--spec-ngram-n", "--spec-ngram-simple-size-n")) { ok = cli_int(a, f, INT32_MIN, INT32_MAX, &i); sp->ngram_n = (int32_t)i; }
    else if (!strcmp(f, "--spec-ngram-min-hits")) { ok = cli_int(a, f, INT32_MIN, INT32_MAX, &i); sp->ngram_min_hits = (int32_t)i; }
    else if (!strcmp(f, "--spec-ngram-cache")) ok = (sp->ngram_cache_path = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--draft-tree")) ok = parse_draft_tree(a, f, &sp->tree);
    else if (!strcmp(f, "--draft-branches")) { ok = cli_int(a, f, INT32_MIN, INT32_MAX, &i); sp->draft_branches = (int32_t)i; }
    else if (!strcmp(f, "--draft-p-split")) { ok = cli_float(a, f, -HUGE_VAL, HUGE_VAL, &d); sp->draft_p_split = (float)d; }
    else if (!strcmp(f, "--draft-tree-nodes")) { ok = cli_int(a, f, INT32_MIN, INT32_MAX, &i); sp->draft_tree_nodes = (int32_t)i; }
    else if (!strcmp(f, "--spec-suffix-branches")) { ok = cli_int(a, f, INT32_MIN, INT32_MAX, &i); sp->suffix_branches = (int32_t)i; }
    else return 0;
    return ok ? 1 : -1;
}

static bool parse_flash_attn(cli_args *a, const char *flag, specd_flash_attn *out) {
    const char *v = cli_value(a, flag);
    if (!v) return false;
    return specd_flash_attn_parse(v, out) || cli_fail(a, "%s expects on, off or auto, got '%s'", flag, v);
}

static bool parse_cache_type(cli_args *a, const char *flag, specd_cache_type *out) {
    const char *v = cli_value(a, flag);
    if (!v) return false;
    return specd_cache_type_parse(v, out) ||
           cli_fail(a, "%s expects f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0 or q5_1, got '%s'", flag, v);
}

static bool parse_load_mode(cli_args *a, const char *flag, specd_load_mode *out) {
    const char *v = cli_value(a, flag);
    if (!v) return false;
    return specd_load_mode_parse(v, out) ||
           cli_fail(a, "%s expects auto, none, mmap, mlock, mmap+mlock or dio (llama.cpp's load modes), got '%s'", flag, v);
}

static bool parse_draft_hold(cli_args *a, const char *flag, specd_draft_hold *out) {
    const char *v = cli_value(a, flag);
    if (!v) return false;
    return specd_draft_hold_parse(v, out) || cli_fail(a, "%s expects auto, on or off, got '%s'", flag, v);
}

static bool parse_on_off(cli_args *a, const char *flag, bool *out) {
    const char *v = cli_value(a, flag);
    if (!v) return false;
    if (strcmp(v, "on") && strcmp(v, "off")) return cli_fail(a, "%s expects on or off, got '%s'", flag, v);
    *out = !strcmp(v, "on");
    return true;
}

/* An -ngl value into *out; *asked is set when it asks for offload (0 asks for the CPU). */
static bool parse_gpu_layers(cli_args *a, const char *flag, int32_t *out, bool *asked) {
    const char *v = cli_value(a, flag);
    if (!v) return false;
    if (!specd_gpu_layers_parse(v, out)) return cli_fail(a, "%s expects a layer count, -1 or all, got '%s'", flag, v);
    if (*out != 0) *asked = true;
    return true;
}

/* --lora FILE[,FILE...], --lora-scaled FILE:SCALE[,...] or FILE SCALE, --lora-draft FILE[,FILE...],
 * --lora-init-without-apply; 0 when f is none of them. The values are split in place (argv is
 * ours), so the adapters' paths point into argv. */
static int parse_lora_flag(cli_args *a, const char *f, run_options *o) {
    specd_engine_params *e = &o->engine;
    if (!strcmp(f, "--lora-init-without-apply")) return e->lora_init_without_apply = true;
    bool draft = !strcmp(f, "--lora-draft"), scaled = !strcmp(f, "--lora-scaled");
    if (!draft && !scaled && strcmp(f, "--lora")) return 0;
    specd_lora_adapter *list = draft ? o->lora_draft : o->lora;
    int32_t *n = draft ? &e->n_lora_draft : &e->n_lora;
    e->lora = o->lora;
    e->lora_draft = o->lora_draft;
    if (!cli_value(a, f)) return -1;
    char *value = a->argv[a->i - 1];
    if (scaled && !lora_arg_is_scaled_list(value)) { /* llama.cpp's older form: FILE SCALE */
        const char *text = cli_value(a, f);
        float scale;
        if (!text) return -1;
        if (!lora_arg_scale(text, &scale))
            return cli_fail(a, "--lora-scaled expects FILE:SCALE or FILE SCALE, got the scale '%s'", text) ? 1 : -1;
        if (*n == SPECD_MAX_LORA) return cli_fail(a, "%s: at most %d adapters", f, SPECD_MAX_LORA) ? 1 : -1;
        list[(*n)++] = (specd_lora_adapter){value, scale};
        return 1;
    }
    char why[300];
    if (!lora_arg_split(f, value, scaled, list, n, why, sizeof why)) return cli_fail(a, "%s", why) ? 1 : -1;
    return 1;
}

/* Where the layers go, with llama.cpp's flags; 0 when f is none of them. */
static int parse_placement_flag(cli_args *a, const char *f, run_options *o) {
    specd_engine_params *e = &o->engine;
    bool ok = true;
    if (!strcmp(f, "-ngl") || !strcmp(f, "--n-gpu-layers") || !strcmp(f, "--gpu-layers"))
        ok = parse_gpu_layers(a, f, &e->n_gpu_layers, &o->gpu_layers_given);
    else if (!strcmp(f, "-ngld") || !strcmp(f, "--n-gpu-layers-draft") || !strcmp(f, "--gpu-layers-draft"))
        ok = parse_gpu_layers(a, f, &e->n_gpu_layers_draft, &o->gpu_layers_given);
    else if (!strcmp(f, "-dev") || !strcmp(f, "--device")) ok = (e->devices = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "-devd") || !strcmp(f, "--device-draft")) ok = (e->devices_draft = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--rpc")) ok = (e->rpc_servers = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--list-devices")) o->list_devices = true;
    else return 0;
    return ok ? 1 : -1;
}

static bool add_image(cli_args *a, const char *f, run_options *o) {
    const char *path = cli_value(a, f);
    if (path && o->n_images == CLI_MAX_IMAGES) return cli_fail(a, "at most %d --image files", CLI_MAX_IMAGES);
    if (path) o->images[o->n_images++] = path;
    return path != NULL;
}

static int parse_engine_flag(cli_args *a, const char *f, run_options *o) {
    specd_engine_params *e = &o->engine;
    int64_t i = 0;
    bool ok = true;
    if (!strcmp(f, "-m") || !strcmp(f, "--model")) ok = (e->target_path = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "-md") || !strcmp(f, "--model-draft") || !strcmp(f, "--spec-draft-model"))
        ok = (e->draft_path = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "-c") || !strcmp(f, "--ctx-size")) { ok = cli_int(a, f, 0, 1 << 24, &i); e->n_ctx = (int32_t)i; }
    else if (!strcmp(f, "-b") || !strcmp(f, "--batch-size")) { ok = cli_int(a, f, 1, 1 << 20, &i); e->n_batch = (int32_t)i; }
    else if (!strcmp(f, "-t") || !strcmp(f, "--threads")) { ok = cli_int(a, f, 1, 1024, &i); e->n_threads = (int32_t)i; }
    else if (!strcmp(f, "-tb") || !strcmp(f, "--threads-batch")) { ok = cli_int(a, f, 1, 1024, &i); e->n_threads_batch = (int32_t)i; }
    else if (!strcmp(f, "-ub") || !strcmp(f, "--ubatch-size")) { ok = cli_int(a, f, 1, 1 << 20, &i); e->n_ubatch = (int32_t)i; }
    else if (!strcmp(f, "-fa") || !strcmp(f, "--flash-attn")) ok = parse_flash_attn(a, f, &e->flash_attn);
    else if (!strcmp(f, "-ctv") || !strcmp(f, "--cache-type-v")) ok = parse_cache_type(a, f, &e->cache_type_v);
    else if (!strcmp(f, "-ctk") || !strcmp(f, "--cache-type-k")) ok = parse_cache_type(a, f, &e->cache_type_k);
    else if (!strcmp(f, "-ctvd") || !strcmp(f, "--cache-type-v-draft")) ok = parse_cache_type(a, f, &e->cache_type_v_draft);
    else if (!strcmp(f, "-ctkd") || !strcmp(f, "--cache-type-k-draft")) ok = parse_cache_type(a, f, &e->cache_type_k_draft);
    else if (!strcmp(f, "--batch-invariant")) ok = parse_on_off(a, f, &e->batch_invariant);
    else if (!strcmp(f, "-lm") || !strcmp(f, "--load-mode")) ok = parse_load_mode(a, f, &e->load_mode);
    else if (!strcmp(f, "--draft-hold")) ok = parse_draft_hold(a, f, &e->draft_hold);
    else if (!strcmp(f, "-p") || !strcmp(f, "--prompt")) ok = (o->prompt = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "-f") || !strcmp(f, "--file")) ok = (o->prompt_file = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--mmproj")) ok = (e->mmproj_path = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--mmproj-draft")) ok = (e->mmproj_draft_path = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--image")) ok = add_image(a, f, o);
    else if (!strcmp(f, "--calibration-cache")) ok = (o->calibration_cache = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--json")) o->json = true;
    else if (!strcmp(f, "--warmup")) o->warmup = 1;
    else if (!strcmp(f, "--no-warmup")) o->warmup = 0;
    else if (!strcmp(f, "--trace-steps")) ok = (o->trace_steps = cli_value(a, f)) != NULL;
    else if (!strcmp(f, "--verbose")) e->verbose = true;
    else return 0;
    return ok ? 1 : -1;
}

/* Returns 0 on success, 1 when help was printed, -1 on error (message in a->error). */
static int parse_run_options(cli_args *a, run_options *o) {
    while (a->i < a->argc) {
        const char *f = a->argv[a->i++];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) return 1;
        int r = parse_engine_flag(a, f, o);
        if (r == 0) r = parse_placement_flag(a, f, o);
        if (r == 0) r = parse_lora_flag(a, f, o);
        if (r == 0) r = parse_generation_flag(a, f, o);
        if (r < 0) return -1;
        if (r == 0) return cli_fail(a, "unknown option '%s' (see specd run --help)", f) ? 0 : -1;
    }
    if (o->list_devices) return 0;
    if (!o->engine.target_path) return cli_fail(a, "no target model: pass -m FILE") ? 0 : -1;
    if (!o->prompt && !o->prompt_file) return cli_fail(a, "no prompt: pass -p TEXT or -f FILE") ? 0 : -1;
    if (o->prompt && o->prompt_file) return cli_fail(a, "give either -p or -f, not both") ? 0 : -1;
    if (o->n_images > 0 && !o->engine.mmproj_path)
        return cli_fail(a, "--image needs the target's vision projector: pass --mmproj FILE") ? 0 : -1;
    if (o->gen.grammar && o->grammar_file)
        return cli_fail(a, "give either --grammar or --grammar-file, not both") ? 0 : -1;
    if (!ranges_valid(a, &o->gen)) return -1;
    if (specd_spec_params_need(&o->gen.speculative, SPECD_SPEC_NEEDS_DRAFT_MODEL) && !o->engine.draft_path)
        return cli_fail(a, "--spec draft needs a draft model: pass -md FILE") ? 0 : -1;
    /* the MTP head is the target's own layers: loaded when the list names it */
    o->engine.mtp = specd_spec_params_need(&o->gen.speculative, SPECD_SPEC_NEEDS_TARGET_NEXTN);
    return 0;
}

static char *read_file(const char *path, const char *what, char *error, size_t error_size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(error, error_size, "cannot read the %s file '%s'", what, path);
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (size_t n; buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
        len += n;
        if (cap - len - 1 == 0) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    fclose(f);
    if (!buf) snprintf(error, error_size, "out of memory reading '%s'", path);
    else buf[len] = '\0';
    return buf;
}

typedef struct stream_state {
    specd_engine *engine;
    FILE *trace; /* --trace-steps, or NULL */
} stream_state;

/* --trace-steps: one line a step (tools/policy_replay reads it). */
static void trace_step(const specd_step_info *step, void *user_data) {
    stream_state *s = user_data;
    fprintf(s->trace, "%d %d %d %.3f %.3f %.3f", step->n_history, step->n_drafted, step->n_accepted, step->draft_ms,
            step->verify_ms, step->step_ms);
    for (int32_t i = 0; i < step->n_drafted; i++) fprintf(s->trace, " %.4f", step->confidences[i]);
    if (step->n_drafted > 0) fputs(" |", s->trace);
    for (int32_t i = 0; i < step->n_drafted; i++) fprintf(s->trace, " %d", step->drafts[i]);
    fputc('\n', s->trace);
}

static bool stream_tokens(const specd_token *tokens, int32_t n, void *user_data) {
    stream_state *s = user_data;
    for (int32_t i = 0; i < n; i++) {
        char piece[256];
        int32_t len = specd_token_to_piece(s->engine, tokens[i], piece, (int32_t)sizeof piece);
        if (len > 0) fwrite(piece, 1, (size_t)len, stdout);
    }
    fflush(stdout);
    return true;
}

/* The speculation used, as reported: "none", "draft", or the list ("ngram-simple,draft"). */
/* The speculation used, as reported: "none", "draft", or the list ("ngram-simple,draft"); the
 * library decides (AUTO, mirostat, draft_max 0). */
static const char *effective_spec(const run_options *o, const specd_engine *e, char *buf, size_t size) {
    specd_spec_type drafters[SPECD_SPEC_MAX_TYPES];
    int32_t n = specd_generation_drafters(e, &o->gen, drafters, NULL);
    snprintf(buf, size, "%s", n == 0 ? "none" : "");
    for (int32_t i = 0; i < n; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", i ? "," : "", specd_spec_type_name(drafters[i]));
    }
    return buf;
}

static int report(const run_options *o, specd_engine *engine, const specd_result *result, cli_startup *startup) {
    char spec_buf[256];
    const char *type = effective_spec(o, engine, spec_buf, sizeof spec_buf);
    startup->calibration = specd_engine_calibration(engine);
    startup->target = specd_engine_placement(engine, false);
    startup->draft = specd_engine_placement(engine, true);
    if (!o->json) {
        fputc('\n', stdout);
        cli_print_invariance_note(stderr, engine);
        cli_print_stats(stderr, &result->stats, result->stop_reason, type, startup);
        return 0;
    }
    char *text = specd_detokenize(engine, result->tokens, result->n_tokens);
    bool ok = text && cli_print_json(stdout, text, result, type, startup, engine);
    specd_free(text);
    if (!ok) fprintf(stderr, "specd: error: out of memory writing the JSON output\n");
    return ok ? 0 : CLI_EXIT_RUNTIME;
}

/* A note about the calibration cache (stale, corrupt, not writable), once: it never stops a run. */
static void print_calibration_note(specd_engine *engine, char *last, size_t size) {
    const char *note = specd_engine_calibration(engine).note;
    if (!note || !strcmp(note, last)) return;
    fprintf(stderr, "specd: note: %s\n", note);
    snprintf(last, size, "%s", note);
}

/* The warm-up where asked, or by default where a target layer is offloaded: there a GPU loads a
 * pass's kernels on its first use; on the CPU the prompt's own pass reads the weights in, and one
 * more pass would only lengthen a one-shot run. */
static specd_status run_warm_up(const run_options *o, specd_engine *engine, cli_startup *startup, char **error) {
    bool offloaded = specd_engine_placement(engine, false).n_layers_offloaded > 0;
    if (o->warmup == 0 || (o->warmup < 0 && !offloaded)) return SPECD_OK;
    double t0 = now_ms();
    specd_status st = specd_engine_warm_up(engine, error);
    startup->warmup_ms = now_ms() - t0;
    return st;
}

static specd_graph_counts counts_since(specd_graph_counts now, specd_graph_counts before) {
    return (specd_graph_counts){now.passes - before.passes, now.reused - before.reused};
}

/* The graph computes of one generation: the engine counts from its start (calibration passes too). */
static specd_graph_info graph_counts_since(const specd_engine *engine, specd_graph_info before) {
    specd_graph_info now = specd_engine_graph_counts(engine);
    return (specd_graph_info){counts_since(now.target, before.target), counts_since(now.draft, before.draft)};
}

/* Loads, tokenizes, generates, reports. */
static int execute(run_options *o, const char *prompt_text, double t_start) {
    specd_engine *engine = NULL;
    char *error = NULL, note[1024] = "";
    /* Asked for offload where there is none (no GPU backend, no --rpc): said once, not an error. */
    const char *offload_note = o->gpu_layers_given && !o->engine.rpc_servers ? specd_gpu_offload_note() : NULL;
    if (offload_note) fprintf(stderr, "specd: note: %s\n", offload_note);
    double t0 = now_ms();
    specd_status st = specd_engine_new(&o->engine, &engine, &error);
    cli_startup startup = {.load_ms = now_ms() - t0};
    if (st == SPECD_OK) {
        startup.load_ms -= specd_engine_calibration(engine).ms;
        print_calibration_note(engine, note, sizeof note);
        st = run_warm_up(o, engine, &startup, &error);
    }
    specd_token *prompt = NULL;
    int32_t n_prompt = 0;
    if (st == SPECD_OK)
        st = cli_tokenize_with_images(engine, prompt_text, o->images, o->n_images, &prompt, &n_prompt, &error);
    stream_state stream = {engine, NULL};
    o->gen.user_data = &stream;
    if (!o->json) o->gen.on_tokens = stream_tokens;
    if (st == SPECD_OK && o->trace_steps && !(stream.trace = fopen(o->trace_steps, "we"))) {
        fprintf(stderr, "specd: error: cannot write the step trace '%s': %s\n", o->trace_steps, strerror(errno));
        specd_free(prompt);
        specd_engine_free(engine);
        return CLI_EXIT_USAGE;
    }
    if (stream.trace) o->gen.on_step = trace_step;
    specd_result result = {0};
    specd_graph_info graphs_before = specd_engine_graph_counts(engine);
    if (st == SPECD_OK) st = specd_generate(engine, prompt, n_prompt, &o->gen, &result, &error);
    startup.graphs = graph_counts_since(engine, graphs_before);
    int rc = 0;
    if (st != SPECD_OK) {
        fprintf(stderr, "specd: error: %s\n", error ? error : "unknown failure");
        rc = st == SPECD_ERR_DECODE || st == SPECD_ERR_NO_MEMORY ? CLI_EXIT_RUNTIME : CLI_EXIT_USAGE;
    } else {
        print_calibration_note(engine, note, sizeof note); /* a file that could not be written */
        startup.total_ms = now_ms() - t_start;
        rc = report(o, engine, &result, &startup);
    }
    if (stream.trace && fclose(stream.trace) != 0 && rc == 0) {
        fprintf(stderr, "specd: error: cannot write the step trace '%s': %s\n", o->trace_steps, strerror(errno));
        rc = CLI_EXIT_RUNTIME;
    }
    specd_result_clear(&result);
    specd_free(prompt);
    specd_free(error);
    specd_engine_free(engine);
    return rc;
}

/* --calibration-cache: "off" is none; without the flag, the default directory. The result is
 * owned by the caller (NULL: none). */
static char *calibration_cache_path(const run_options *o) {
    if (o->calibration_cache && !strcmp(o->calibration_cache, "off")) return NULL;
    if (!o->calibration_cache) return specd_default_calibration_cache();
    size_t n = strlen(o->calibration_cache) + 1;
    char *copy = malloc(n);
    if (copy) memcpy(copy, o->calibration_cache, n);
    return copy;
}

int cli_run(int argc, char **argv) {
    double t_start = now_ms();
    run_options o = {.engine = specd_engine_default_params(), .gen = specd_generation_default_params(), .warmup = -1};
    cli_args a = {.argc = argc, .argv = argv};
    int parsed = parse_run_options(&a, &o);
    if (parsed == 1) {
        run_usage(stdout);
        return 0;
    }
    if (parsed < 0 || a.error[0]) {
        fprintf(stderr, "specd: error: %s\n", a.error);
        return CLI_EXIT_USAGE;
    }
    if (o.list_devices) return cli_list_devices(o.engine.rpc_servers);
    char *file_text = NULL, *grammar_text = NULL, err[512] = "";
    if (o.prompt_file && !(file_text = read_file(o.prompt_file, "prompt", err, sizeof err))) goto fail;
    if (o.grammar_file && !(grammar_text = read_file(o.grammar_file, "grammar", err, sizeof err))) goto fail;
    if (grammar_text) o.gen.grammar = grammar_text;
    char *calibration_cache = calibration_cache_path(&o), *why = NULL;
    if (o.calibration_cache && calibration_cache && specd_calibration_cache_check(calibration_cache, &why) != SPECD_OK) {
        snprintf(err, sizeof err, "--calibration-cache: %s, or off", why ? why : "");
        specd_free(why);
        free(calibration_cache);
        free(grammar_text);
        goto fail; /* a file that is not specd's (a model, by a slip) is refused, not left with a note */
    }
    o.engine.calibration_cache = calibration_cache;
    int rc = execute(&o, file_text ? file_text : o.prompt, t_start);
    free(calibration_cache);
    free(file_text);
    free(grammar_text);
    return rc;
fail:
    fprintf(stderr, "specd: error: %s\n", err);
    free(file_text);
    return CLI_EXIT_USAGE;
}
