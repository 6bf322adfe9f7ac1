/* request.h - one completion request as every front end hands it to the server: filled once from
 * the API's own JSON (JSON-RPC, llama-server's /completion, OpenAI's routes), checked once
 * (serve_request_prepare), run by the scheduler as this C struct. Nothing here knows JSON.
 *
 * Adding a field: the struct (here), the parsers that read it (api/request_json.c,
 * server/openai_request.c), the code that uses it. Ownership: every pointer is the request's own
 * (serve_request_clear frees it); gen.grammar and gen.sampling.logit_bias point into it. */
#ifndef SPECD_SERVE_REQUEST_H
#define SPECD_SERVE_REQUEST_H

#include "fault.h"
#include "lora.h"
#include "specd.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A piece of the prompt: text (tokenized with BOS before a leading piece) or one token id. */
typedef struct serve_prompt_part {
    char *text;        /* NULL: `token` */
    specd_token token;
} serve_prompt_part;

/* A chat message; the prompt is the conversation through a chat template. */
typedef struct serve_message {
    char *role;
    char *content;
} serve_message;

typedef struct serve_request {
    /* What to generate from: prompt parts, or else chat messages. */
    serve_prompt_part *parts;
    int32_t n_parts, cap_parts;
    serve_message *messages;
    int32_t n_messages, cap_messages;
    char *chat_template;           /* messages: a llama.cpp built-in template; NULL: the model's own */
    bool parse_special;            /* special-token text in the prompt becomes those tokens */
    /* How: the library's parameters, and what the server does around them. */
    specd_generation_params gen;
    char *grammar;                 /* GBNF (gen.grammar); NULL: none */
    char *grammar_prefill;         /* text the grammar reads first (gen.grammar_prefill); NULL: none */
    char **trigger_patterns;       /* a lazy grammar's (gen.grammar_trigger_patterns) */
    specd_token *trigger_tokens;   /* (gen.grammar_trigger_tokens) */
    int32_t cap_patterns, cap_trigger_tokens;
    specd_logit_bias *bias;        /* gen.sampling.logit_bias */
    char **stops;                  /* stop strings, none empty */
    int32_t n_stops;
    /* llama-server's preserved_tokens: texts of single tokens whose text the output keeps even when
     * they are control tokens (a chat format's tool-call markers); made into `preserved` ids by
     * serve_request_prepare (a text that is not one token is left out, as llama-server does). */
    char **preserved_texts;
    int32_t n_preserved_texts;
    int32_t n_keep;                /* tokens kept at the start when the prompt or a context shift cuts */
    /* llama-server's id_slot: the slot to run in, waiting for it while it is busy (queued requests
     * for other slots go by); taken modulo the slots by serve_request_prepare, as llama-server
     * does. -1: the server picks (the idle slot whose cache shares most of the prompt). */
    int32_t slot;
    const char *n_predict_field;   /* the field that set gen.n_predict (a static string); NULL: none */
    int64_t t_max_predict_ms;      /* > 0: ends at the next newline once that long passed since the first token */
    int64_t seed_requested;        /* the seed as asked, -1: random */
    bool stream;                   /* answered piece by piece as the text is decided */
    bool cache_prompt;             /* false: the slot forgets its cache first */
    bool return_origins;           /* keep which text came from accepted drafts */
    bool context_shift;            /* a full context shifts, where the model's cache can (the server's
                                    * --context-shift); off: generation stops there */
    /* A conversation through a chat template: refused, not cut, when it does not fit a slot. Cutting
     * drops its start (the system prompt, the tools) and the model answers a different prompt
     * (llama-server refuses every prompt that does not fit). */
    bool whole_prompt;
    /* DRY's sequence breakers (gen.sampling.dry_sequence_breakers points here); NULL: llama.cpp's */
    char **dry_breakers;
    int32_t n_dry_breakers;
    /* The request's own LoRA adapter scales (llama-server's `lora`; adapters left out: 0); none:
     * the server's current ones (serve_server_set_lora). gen.lora_scales points at lora_scales. */
    serve_lora *lora;
    int32_t n_lora;
    float lora_scales[SPECD_MAX_LORA];
    /* The images of the prompt, in the order of their markers (specd_image_marker) in its text:
     * each `data` the request's own (malloc'd). None: the prompt is text and tokens. */
    specd_image *images;
    int32_t n_images, cap_images;
    /* Set by serve_request_prepare. */
    specd_token *tokens;           /* the prompt to generate from, after truncation */
    int32_t n_tokens;
    int32_t n_prompt_tokens;       /* before truncation */
    bool truncated;
    int32_t n_ctx;                 /* a slot's context */
    bool n_predict_by_server;      /* gen.n_predict is the server's limit (the request gave none) */
    int32_t n_cached;              /* expected prompt cache reuse (set by the server) */
    specd_token *preserved;        /* preserved_texts as token ids */
    int32_t n_preserved;
} serve_request;

/* Defaults: the library's generation parameters, a random seed, the prompt cache on. */
void serve_request_init(serve_request *r);
void serve_request_clear(serve_request *r);

/* Building the prompt and the lists; false when out of memory. */
bool serve_request_add_text(serve_request *r, const char *text);
bool serve_request_add_token(serve_request *r, specd_token token);
bool serve_request_add_message(serve_request *r, const char *role, const char *content);
bool serve_request_add_stop(serve_request *r, const char *stop);
/* Takes `data` (malloc'd, `size` bytes: an image file), the prompt's next image; false when out of
 * memory (data freed). */
bool serve_request_take_image(serve_request *r, unsigned char *data, size_t size);
/* One of preserved_tokens (copied); false when out of memory. */
bool serve_request_add_preserved(serve_request *r, const char *token_text);
/* Whether the output shows `token`'s text as a preserved token's (serve_request_prepare made the ids). */
bool serve_request_preserves(const serve_request *r, specd_token token);
bool serve_request_set_grammar(serve_request *r, const char *gbnf); /* NULL or "": none */
/* DRY's sequence breakers (copied; none empty): they replace llama.cpp's default list. */
bool serve_request_set_dry_breakers(serve_request *r, const char *const *breakers, int32_t n);
/* Takes `bias` (malloc'd, n entries). */
void serve_request_take_logit_bias(serve_request *r, specd_logit_bias *bias, int32_t n);
/* Takes `gbnf` (malloc'd). */
void serve_request_take_grammar(serve_request *r, char *gbnf);
/* A lazy grammar's trigger, as llama-server gives them (grammar_triggers' {type, value, token}):
 * SERVE_TRIGGER_WORD `value` anywhere in the output, PATTERN a regex, PATTERN_FULL a regex the
 * whole output must match, TOKEN `token`; made into gen's patterns and tokens as llama.cpp's
 * sampler makes them. False when out of memory. */
typedef enum serve_trigger { SERVE_TRIGGER_TOKEN, SERVE_TRIGGER_WORD, SERVE_TRIGGER_PATTERN, SERVE_TRIGGER_PATTERN_FULL }
    serve_trigger;
bool serve_request_add_trigger(serve_request *r, serve_trigger type, const char *value, specd_token token);
/* The text the grammar reads first (a chat template's generation prompt); false when out of memory. */
bool serve_request_set_grammar_prefill(serve_request *r, const char *text);

/* request_images.c: before its session begins, the request's images held by `e` again where the
 * engine let them go while it waited (their positions rewritten as the engine now gives them).
 * False with *message (heap) when an image cannot be held. */
bool serve_request_hold_images(serve_request *r, specd_engine *e, char **message);

/* How an API names what the checks refuse: `where` starts each message ("completion params"),
 * `field` maps the library's field names ("sampling.top_p", "speculative.draft_max") onto the
 * API's (NULL: as they are). */
typedef struct serve_names {
    const char *where;
    const char *(*field)(const char *library_field);
} serve_names;

/* The least a grammar's price may be held to (submit.c): under it no grammar is refused as dear. */
#define SERVE_GRAMMAR_PRICE_MIN_MS 100.0

/* What a server allows one request (its -n / --n-predict, --time-limit, --step-limit). */
typedef struct serve_limits {
    int32_t n_predict_max; /* -1: none; else the n_predict of a request that gives none, and its ceiling */
    int64_t time_limit_ms; /* 0: none; else how long a request may hold its slot, prompt included */
    int64_t step_limit_ms; /* 0: none; else the floor of a heavy slot's step limit (heavy.h) */
} serve_limits;

/* Checks the request against `engine` and `limits` and makes its prompt: every range (the
 * library's rules), the draft lengths against the engine's, the grammar and the logit bias
 * against the vocabulary, the chat template; then the prompt tokenized and, when it does not fit
 * a slot, cut keeping n_keep tokens and dropping whole blocks after them (llama-server's old rule),
 * or refused when the request is a whole_prompt (field "messages").
 * False with *fault set (SERVE_INVALID naming the field) otherwise. */
bool serve_request_prepare(serve_request *r, specd_engine *engine, const serve_limits *limits,
                           const serve_names *names, serve_fault *fault);

#endif
