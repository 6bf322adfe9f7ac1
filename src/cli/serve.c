/* serve.c - `specd serve`: its options (the model options typed once into init's settings, with
 * a server's defaults), the start-up (keys, models directory, the stop signals, the model load on
 * the JSON API's host) and the HTTP server (src/server/http.h) until SIGINT or SIGTERM. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "../server/http.h"
#include "../util/args.h"
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DEFAULT_MAX_CONNS_PER_IP 256
#define DEFAULT_TIME_LIMIT_S 600 /* --time-limit: no request holds a slot longer by default */
#define DEFAULT_STEP_LIMIT_MS 10 /* --step-limit (src/serve/heavy.h) */

static void serve_usage(FILE *out) {
    fputs("usage: specd serve -m TARGET [-md DRAFT] [options]\n"
          "\n"
          "  --host ADDR            IPv4 or IPv6 address to listen on (default 127.0.0.1; 0.0.0.0 or\n"
          "                         :: = everywhere)\n"
          "  --port N               port (default 8080; 0 = any free port, printed at start)\n"
          "  --api-key KEY          /rpc and /completion need 'Authorization: Bearer KEY' (or\n"
          "                         X-Api-Key: KEY); /health answers anyone with readiness only\n"
          "  --admin-api-key KEY    the key for the admin methods (init, shutdown: load or unload\n"
          "                         models); without it they are refused over HTTP. It also grants\n"
          "                         everything --api-key does. Must differ from --api-key\n"
          "  --models-dir DIR       init over HTTP may load only regular files under DIR (after\n"
          "                         resolving symlinks and '..'; relative paths are taken in DIR).\n"
          "                         Without it the admin key may load any file the process can read\n"
          "  --slot-save-path DIR   POST /slots/ID?action=save|restore|erase keep a slot's caches\n"
          "                         (the target's and the draft's) in files under DIR, as\n"
          "                         llama-server (every filename confined to DIR; a file saved for\n"
          "                         other models or another context is refused); without it: 501\n"
          "  --no-webui             GET / answers readiness as /health does, instead of the chat page\n"
          "  --mmproj FILE          the target's vision projector (llama.cpp's mmproj GGUF): chat\n"
          "                         image parts (data URIs) and /completion's multimodal_data,\n"
          "                         speculation on (the draft drafts from the text around them)\n"
          "  --mmproj-draft FILE    the draft model's own vision projector: it decodes images too\n"
          "  --chat-template-file F /v1/chat/completions renders messages with this Jinja template\n"
          "                         instead of the model's own (tokenizer.chat_template)\n"
          "  --jinja, --no-jinja    chat prompts through llama.cpp's Jinja chat code (default; tools,\n"
          "                         reasoning), or its older built-in formats (no tools)\n"
          "  --chat-template NAME   /v1/chat/completions formats messages with this llama.cpp built-in\n"
          "                         format (chatml, llama3, ...; no Jinja, no tools) instead\n"
          "  --max-body BYTES       largest request body (default 1048576); larger: 413\n"
          "  --request-timeout S    a request's headers and body must arrive within S seconds of\n"
          "                         the connection opening (or of the previous answer), however\n"
          "                         they trickle in; also the idle limit (default 10)\n"
          "  --max-conns N          open connections at most (default 4096, less if the open-file\n"
          "                         limit is lower)\n"
          "  --max-conns-per-ip N   open connections per client address (default 256; 0 = no limit)\n"
          "  --http-threads N       threads serving connections (default 4); completions and model\n"
          "                         loads run on their own threads and never hold these\n"
          "  -np, --parallel N      slots: completions that run side by side (default 4); each gets\n"
          "                         -c / N tokens of context unless --ctx-per-slot N says otherwise\n"
          "  --queue N              requests waiting for a slot at most (default 64); past it 503\n"
          "  -n, --n-predict N      tokens a completion gets when it asks for none (or -1), and the\n"
          "                         most it may ask for (more: 400); default -1: no limit\n"
          "  --temp T, --top-k K, --top-p P, --min-p P, --typical P, --repeat-penalty R,\n"
          "  --repeat-last-n N, --presence-penalty P, --frequency-penalty P, -s/--seed S\n"
          "                         what a request that gives none samples with (llama-server's;\n"
          "                         /props shows them; default llama.cpp's)\n"
          "  --time-limit S         a completion ends after S seconds in its slot, prompt included\n"
          "                         (stop_type time_limit; default 600; 0 = no limit)\n"
          "  --step-limit MS        a completion whose grammar costs over MS ms of CPU (and 10\n"
          "                         target passes) in one step ends (stop_type time_limit;\n"
          "                         default 10; 0 = no limit); a slot whose grammar stalls the\n"
          "                         others steps apart, never slowing them by more than half\n"
          "  --context-shift, --no-context-shift\n"
          "                         when a slot's context is full, drop the older half of what\n"
          "                         follows n_keep and go on, or stop there (default: stop, as\n"
          "                         llama-server 0.5.0; the stop says truncated)\n"
          "  --spec-type LIST       what every request that names no drafters drafts with\n"
          "                         (llama-server's names, comma-separated; repeated lists add up;\n"
          "                         default: the -md model or head; draft-mtp loads the target's\n"
          "                         MTP layers); a request's speculative.type replaces it\n"
          "  --draft-max, --spec-draft-n-max N\n"
          "                         the longest draft a request may ask for, and its default n_max\n"
          "                         (default: 8, at most 16; --spec-draft-n-max 0: requests draft\n"
          "                         only when they ask for an n_max, at most 16)\n"
          "  --draft-min, --spec-draft-n-min N\n"
          "                         a request's default n_min (default 0)\n"
          "  --draft-p-min, --spec-draft-p-min P\n"
          "                         a request's default p_min: drafting stops below this draft\n"
          "                         confidence (default 0)\n"
          "  --spec-ngram-simple-size-n N\n"
          "                         a request's default n-gram length for ngram-simple (and\n"
          "                         ngram-map, which shares it here; default 3)\n"
          "  --embedding, --embeddings\n"
          "                         also serve embeddings (/embedding, /embeddings,\n"
          "                         /v1/embeddings), on a context of the target of their own:\n"
          "                         completions and speculation go on as without it\n"
          "  --pooling none|mean|cls|last|rank\n"
          "                         the embeddings' pooling (default: the model's own)\n"
          "  --embd-normalize N     how pooled embeddings are normalized when a request does not\n"
          "                         say (embd_normalize): -1 none, 0 max absolute (int16), 1\n"
          "                         taxicab, 2 euclidean (default), p > 2 the p-norm\n"
          "  --rerank, --reranking  serve /rerank (/v1/rerank) with a reranker model:\n"
          "                         --embedding with --pooling rank\n"
          "  -md, --model-draft, --spec-draft-model FILE\n"
          "                         the draft model or drafting head (an eagle3 or dflash GGUF)\n"
          "  model options as for init: -m, -c, -t, -tb, -b, -ub, -fa on|off|auto\n"
          "                    (default auto with more than one slot, as llama-server; off with one),\n"
          "                    -ctk/-ctv/-ctkd/-ctvd TYPE (f32, f16, bf16, q8_0, q4_0, q4_1,\n"
          "                    iq4_nl, q5_0, q5_1), --batch-invariant on|off (default on),\n"
          "                    --lora FILE, --lora-scaled FILE:SCALE, --lora-init-without-apply,\n"
          "                    --lora-draft FILE, -a ALIAS, --no-warmup (as llama-server),\n"
          "                    -lm/--load-mode MODE, --draft-hold auto|on|off (as specd run),\n"
          "                    --verbose,\n"
          "                    and where the layers go:\n"
          "                    -ngl N|all, -ngld N|all, --device LIST, --device-draft LIST,\n"
          "                    --rpc HOST:PORT,... (as specd run --help says)\n"
          "  --list-devices         list the devices (GPUs, --rpc servers given before it) and exit\n"
          "\n"
          "routes: POST /rpc (JSON-RPC 2.0), GET /health, GET / (the chat page)\n"
          "  llama-server's: POST /completion (\"stream\": true for SSE), POST /infill (code\n"
          "        completion with the model's fill-in-the-middle tokens), POST /tokenize,\n"
          "        POST /detokenize, POST /apply-template (a chat's prompt), GET /props, GET /slots,\n"
          "        POST /slots/ID?action=save|restore|erase (--slot-save-path), GET /metrics\n"
          "        (Prometheus), GET and POST /lora-adapters, POST /embedding, /embeddings,\n"
          "        /v1/embeddings (--embedding), POST /rerank, /v1/rerank, /reranking,\n"
          "        /v1/reranking (--rerank)\n"
          "  OpenAI's: POST /v1/chat/completions (tools, reasoning), POST /v1/completions,\n"
          "        POST /v1/responses (the Responses API), GET /v1/models\n"
          "  Anthropic's: POST /v1/messages, POST /v1/messages/count_tokens\n"
          "SIGINT/SIGTERM stop it: every completion ends (stop_type shutdown; a queued blocking one\n"
          "gets 503), then it exits 0; after 10 s (or a second signal) it exits anyway.\n",
          out);
    cli_print_drafters(out);
}

static bool key_value(cli_args *a, const char *flag, const char **slot) {
    const char *v = cli_value(a, flag);
    if (!v) return false;
    if (!*v) return cli_fail(a, "%s must not be empty: an empty key would be easy to guess", flag);
    *slot = v;
    return true;
}

/* --chat-template must name one of llama.cpp's built-in templates; the error lists them. */
static bool builtin_template(cli_args *a, const char *name) {
    char *names = NULL;
    if (specd_chat_template_is_builtin(name, &names)) return true;
    cli_fail(a, "--chat-template '%s' is not one of llama.cpp's built-in chat templates: %s", name,
             names ? names : "(out of memory listing them)");
    specd_free(names);
    return false;
}

/* --chat-template-file: the Jinja source, read whole (it is rendered per request). */
static bool read_template_file(cli_args *a, const char *path, char **out) {
    if (!path) return false;
    FILE *f = fopen(path, "rb");
    if (!f) return cli_fail(a, "--chat-template-file '%s' cannot be read: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (size_t n; buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
        len += n;
        if (len + 1 == cap) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    bool failed = ferror(f);
    fclose(f);
    if (!buf) return cli_fail(a, "out of memory reading --chat-template-file '%s'", path);
    buf[len] = '\0';
    if (failed || len == 0) {
        free(buf);
        return cli_fail(a, "--chat-template-file '%s' %s", path, failed ? "cannot be read" : "is empty");
    }
    free(*out); /* the last one given counts */
    *out = buf;
    return true;
}

#define SERVE_DEFAULT_PARALLEL 4

/* The defaults a server adds to the model options: llama-server's -np 4 (it serves several
 * clients); with more than one slot, llama-server's flash attention auto (on, on the CPU): the
 * slots' cells share one cache, and the kernel skips other slots' cells where the plain path reads
 * every one (tools/pass_costs: a pass of 8 tokens over 4 slots of 1000 cells, 86 against 99 ms);
 * paired rounds on the benchmark pair, against flash attention off: 4 clients 1.075x and 1.086x, 1
 * and 2 clients within noise (0.99-1.03x; docs/benchmarks-serve.md); and the calibration cache
 * `specd run` keeps, so a server starts from the pass costs earlier processes measured instead of
 * learning them while it serves (one client, benchmark pair: 91 against 86 tokens/s, interleaved;
 * docs/performance.md). --calibration-cache off: none. A full context stops generation unless
 * --context-shift, as llama-server 0.5.0 (the JSON API's init shifts by default, as it always did). */
static void add_server_defaults(api_engine_settings *s) {
    if (!s->parallel_given) s->params.n_parallel = SERVE_DEFAULT_PARALLEL;
    if (!s->context_shift_given) s->context_shift = false; /* llama-server 0.5.0's default */
    if (!s->flash_attn_given && s->params.n_parallel > 1) s->params.flash_attn = SPECD_FLASH_ATTN_AUTO;
    if (!s->calibration_given) {
        char *cache = specd_default_calibration_cache();
        free(s->calibration_cache);
        s->calibration_cache = cache ? strdup(cache) : NULL;
        specd_free(cache);
    }
    api_engine_settings_point(s);
}

/* The model options (the words no serve option took), typed once: -m, -md, -np, ... */
static bool parse_model_options(cli_args *a, const char *const *words, size_t n, http_options *o) {
    api_error err;
    if (api_engine_settings_parse_words(words, n, !o->list_devices, &o->models, &err)) return true;
    return cli_fail(a, "%s", err.message);
}

/* llama-server's switches for what specd's server always does, taken so that its command lines
 * start specd unchanged: continuous batching (every round's slots share one pass), /metrics and
 * /slots (always served). A switch for what specd does not do stays an unknown option. */
static bool is_always_on_switch(const char *f) {
    static const char *const names[] = {"-cb", "--cont-batching", "--metrics", "--slots"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(f, names[i])) return true;
    return false;
}

/* The sampling defaults, checked at start by the library's rules (a request gets them). */
static bool check_sampling(cli_args *a, const specd_sampling_params *sampling) {
    specd_generation_params g = specd_generation_default_params();
    g.sampling = *sampling;
    const char *field = NULL;
    char *message = NULL;
    if (specd_generation_params_validate(&g, &field, &message) == SPECD_OK) return true;
    cli_fail(a, "the sampling defaults (--temp, --top-k, ...): %s", message ? message : "out of range");
    specd_free(message);
    return false;
}

/* --calibration-cache naming a file that is not specd's (a model, by a slip of the tab key): refused
 * at start rather than left unwritten with a note. */
static bool check_calibration_cache(cli_args *a, const char *path) {
    char *message = NULL;
    if (!path || specd_calibration_cache_check(path, &message) == SPECD_OK) return true;
    cli_fail(a, "--calibration-cache: %s, or off", message ? message : "");
    specd_free(message);
    return false;
}

/* Returns 0 ok, 1 help, -1 error (in a->error). */
static int parse_serve_options(cli_args *a, http_options *o) {
    const char **words = calloc((size_t)a->argc + 1, sizeof *words);
    size_t n_words = 0;
    if (!words) return cli_fail(a, "out of memory"), -1;
    while (a->i < a->argc) {
        const char *f = a->argv[a->i++];
        bool ok = true;
        int sampling = 0;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            free(words);
            return 1;
        }
        if (!strcmp(f, "--host")) ok = (o->host = cli_value(a, f)) != NULL;
        else if (!strcmp(f, "--port")) ok = cli_int(a, f, 0, 65535, &o->port);
        else if (!strcmp(f, "--api-key")) ok = key_value(a, f, &o->api_key);
        else if (!strcmp(f, "--admin-api-key")) ok = key_value(a, f, &o->admin_key);
        else if (!strcmp(f, "--models-dir")) ok = (o->models_dir_arg = cli_value(a, f)) != NULL;
        else if (!strcmp(f, "--slot-save-path")) ok = (o->slot_save_path_arg = cli_value(a, f)) != NULL;
        else if (!strcmp(f, "--max-body")) ok = cli_int(a, f, 1, INT32_MAX, &o->max_body);
        else if (!strcmp(f, "--request-timeout") || !strcmp(f, "-to") || !strcmp(f, "--timeout"))
            ok = cli_int(a, f, 1, 3600, &o->request_timeout_s);
        else if (!strcmp(f, "--max-conns")) ok = cli_int(a, f, 1, 1 << 20, &o->max_conns);
        else if (!strcmp(f, "--max-conns-per-ip")) ok = cli_int(a, f, 0, 1 << 20, &o->max_conns_per_ip);
        else if (!strcmp(f, "--http-threads") || !strcmp(f, "--threads-http")) ok = cli_int(a, f, 1, 256, &o->http_threads);
        else if (is_always_on_switch(f)) continue; /* llama-server's switch for what specd's server always does */
        else if ((sampling = cli_sampling_flag(a, f, &o->sampling)) != 0) ok = sampling > 0;
        else if (!strcmp(f, "--no-webui")) o->web_page = false;
        else if (!strcmp(f, "--chat-template")) ok = (o->chat.builtin = cli_value(a, f)) && builtin_template(a, o->chat.builtin);
        else if (!strcmp(f, "--chat-template-file")) ok = read_template_file(a, cli_value(a, f), &o->chat.template_src);
        else if (!strcmp(f, "--jinja")) o->chat.jinja = true;
        else if (!strcmp(f, "--no-jinja")) o->chat.jinja = false;
        else if (!strcmp(f, "--list-devices")) o->list_devices = true;
        else if (!strcmp(f, "-n") || !strcmp(f, "--n-predict")) ok = cli_int(a, f, -1, INT32_MAX, &o->n_predict);
        else if (!strcmp(f, "--time-limit")) ok = cli_int(a, f, 0, 100 * 24 * 3600, &o->time_limit_s);
        else if (!strcmp(f, "--step-limit")) ok = cli_int(a, f, 0, 3600 * 1000, &o->step_limit_ms);
        else words[n_words++] = f; /* a model option, or a value of one: checked once all are in */
        if (!ok) {
            free(words);
            return -1;
        }
    }
    bool typed = parse_model_options(a, words, n_words, o);
    free(words);
    if (!typed || !check_sampling(a, &o->sampling) || !check_calibration_cache(a, o->models.calibration_cache))
        return -1;
    add_server_defaults(&o->models);
    if (strcmp(o->host, "localhost") == 0) o->host = "127.0.0.1";
    if (o->chat.builtin && o->chat.template_src) {
        cli_fail(a, "give either --chat-template NAME (a llama.cpp built-in format) or --chat-template-file FILE "
                 "(a Jinja template), not both");
        return -1;
    }
    if (o->chat.builtin) o->chat.jinja = false; /* a built-in format is applied without Jinja */
    if (o->chat.template_src && !o->chat.jinja) {
        cli_fail(a, "--chat-template-file needs Jinja: drop --no-jinja");
        return -1;
    }
    if (o->api_key && o->admin_key && strcmp(o->api_key, o->admin_key) == 0) {
        cli_fail(a, "--admin-api-key must differ from --api-key: every client with the API key would be an admin");
        return -1;
    }
    return 0;
}

/* The real path of a directory option (--models-dir, --slot-save-path), which must be one. */
static bool resolve_dir(cli_args *a, const char *flag, const char *arg, char **out) {
    if (!arg) return true;
    *out = realpath(arg, NULL);
    struct stat st;
    if (!*out || stat(*out, &st) != 0 || !S_ISDIR(st.st_mode)) return cli_fail(a, "%s '%s' is not a directory", flag, arg);
    return true;
}

/* Loads the models (on a load thread of their own, so that a stop signal is seen meanwhile).
 * Returns 0 when ready, 1 when a stop was asked for first, CLI_EXIT_USAGE on an error (printed). */
static int load_models(api_host *host, api_engine_settings *models) {
    api_error err;
    models->async = true;
    if (!api_host_load(host, models, &err)) { /* the settings are taken */
        fprintf(stderr, "specd: error: %s\n", err.message);
        return CLI_EXIT_USAGE;
    }
    for (;;) {
        if (stop_wait(20)) return 1;
        json_t *status = api_host_status(host);
        const char *state = json_string_value(json_object_get(status, "state"));
        int rc = !state || !strcmp(state, "loading") ? -1 : !strcmp(state, "ready") ? 0 : CLI_EXIT_USAGE;
        const char *note = json_string_value(json_object_get(status, "placement_note"));
        if (rc == 0 && note) fprintf(stderr, "specd: note: %s\n", note);
        json_t *invariance = json_object_get(status, "batch_invariant");
        if (rc == 0 && json_is_false(json_object_get(invariance, "invariant")))
            fprintf(stderr, "specd: note: verification is not batch-invariant: %s\n",
                    json_string_value(json_object_get(invariance, "note")));
        if (rc == CLI_EXIT_USAGE) {
            const char *why = json_string_value(json_object_get(status, "error"));
            fprintf(stderr, "specd: error: init: %s\n", why ? why : "loading failed");
        }
        json_decref(status);
        if (rc >= 0) return rc;
    }
}

/* What the options took. */
static void free_options(http_options *o) {
    api_engine_settings_free(&o->models);
    free(o->models_dir);
    free(o->slot_save_path);
    free(o->chat.template_src);
}

int cli_serve(int argc, char **argv) {
    http_options o = {.host = "127.0.0.1", .port = 8080, .max_body = 1 << 20, .request_timeout_s = 10, .web_page = true,
                       .max_conns_per_ip = DEFAULT_MAX_CONNS_PER_IP, .http_threads = 4, .n_predict = -1,
                       .time_limit_s = DEFAULT_TIME_LIMIT_S, .step_limit_ms = DEFAULT_STEP_LIMIT_MS,
                       .chat = {.jinja = true}, .sampling = specd_generation_default_params().sampling};
    cli_args a = {.argc = argc, .argv = argv};
    int parsed = parse_serve_options(&a, &o);
    if (parsed == 0 && (!resolve_dir(&a, "--models-dir", o.models_dir_arg, &o.models_dir) ||
                        !resolve_dir(&a, "--slot-save-path", o.slot_save_path_arg, &o.slot_save_path)))
        parsed = -1;
    if (parsed != 0) {
        if (parsed == 1) serve_usage(stdout);
        else fprintf(stderr, "specd: error: %s\n", a.error);
        free_options(&o);
        return parsed == 1 ? 0 : CLI_EXIT_USAGE;
    }
    if (o.list_devices) {
        int rc = cli_list_devices(o.models.rpc_servers); /* the last --rpc */
        free_options(&o);
        return rc;
    }
    if (!(o.rpc = api_host_new())) {
        fprintf(stderr, "specd: error: out of memory\n");
        free_options(&o);
        return CLI_EXIT_RUNTIME;
    }
    http_fit_connection_limits(&o);
    memory_settle_start();
    api_host_set_limits(o.rpc, (serve_limits){.n_predict_max = (int32_t)o.n_predict,
                                               .time_limit_ms = o.time_limit_s * 1000,
                                               .step_limit_ms = o.step_limit_ms});
    api_host_set_sampling(o.rpc, &o.sampling);
    /* Block the stop signals before any thread starts, so only the signal thread sees them. */
    int rc = stop_watch_start() ? 0 : CLI_EXIT_RUNTIME;
    if (rc == 0) rc = load_models(o.rpc, &o.models);
    if (rc == 0) rc = http_serve(&o);
    else if (rc == 1) rc = 0; /* stopped while loading */
    api_host_free(o.rpc);
    free_options(&o);
    return rc;
}
