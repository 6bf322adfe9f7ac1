/* openai.h - the OpenAI-compatible routes: openai.c (the routes, GET /v1/models, errors),
 * openai_request.c (a request's body into the server's typed request), openai_reply.c (the
 * answer built from the result in OpenAI's shape: a response, or chunks of a stream),
 * openai_choices.c (n > 1: one call per choice, their answers made one). What routes.c needs of
 * them. */
#ifndef SPECD_SERVER_OPENAI_H
#define SPECD_SERVER_OPENAI_H

#include "server.h"

typedef enum openai_kind { OPENAI_CHAT, OPENAI_TEXT } openai_kind;

/* The choices of one request with n > 1, shared by their calls (openai_choices.c). */
typedef struct openai_choices openai_choices;

/* One OpenAI request's choices that shape its answer: its reply's context (owned by the job). */
typedef struct openai_call {
    openai_kind kind;
    int index;               /* its choice's index (n > 1), 0 else */
    openai_choices *choices; /* n > 1: the request's choices (referenced); NULL: one */
    bool counts_prompt;      /* with choices: the first of its prompt's (its prompt tokens count) */
    char id[64];          /* chatcmpl-... / cmpl-... */
    json_int_t created;   /* Unix seconds */
    bool stream, include_usage, logprobs;
    int top_logprobs;     /* alternatives per token asked for */
    /* streaming state (the server's thread only) */
    specd_chat *chat;     /* chat through Jinja: the turn that parses the answer (owned); NULL: plain text */
    bool role_sent;       /* chat: the first chunk (role) is out */
    bool tool_calls_seen; /* streamed chat: a tool_calls delta went out (finish_reason tool_calls) */
    int block, next_block; /* Anthropic's stream: the open content block's index, the next one's */
    char block_kind;      /* the open block: 't' text, 'k' thinking, 'u' tool_use; 0: none */
    json_t *item;         /* the Responses API's stream: the output item being written (owned) */
    json_int_t sequence;  /* and its events' next sequence_number */
    json_int_t text_offset; /* /v1/completions logprobs: bytes of text so far */
    const struct openai_shape *shape; /* its dialect's builders (openai_shape_reply) */
} openai_call;

/* What one /v1 dialect (OpenAI's, Anthropic's, the Responses API) builds: a stream's events for
 * the text so far (a new array; NULL: nothing to send), and a blocking request's whole answer. */
typedef struct openai_shape {
    json_t *(*events)(openai_call *call, const serve_view *v);
    json_t *(*whole)(openai_call *call, const serve_view *v);
} openai_shape;

/* An error on a /v1 route, in OpenAI's shape. */
typedef struct openai_error {
    unsigned status;
    const char *type;    /* "invalid_request_error", "server_error", ... */
    char param[160];     /* "" = null */
    char message[900];
} openai_error;

/* ---- openai.c -------------------------------------------------------------------------------- */
/* Whether `url` (any method) is one of the /v1 routes; POST routes with a body / GET routes. */
bool openai_route_post(const char *url);
bool openai_route_get(const char *url);
/* GET /v1/models. */
enum MHD_Result openai_answer_get(struct MHD_Connection *c, api_host *host, const char *url);
/* A model's id as /v1/models lists it: the name's file name (heap). */
char *openai_model_id(const char *name);
/* OpenAI's finish_reason for a completion's stop: "length" for every cut (a limit, the context, a
 * time limit, a shutdown: the text is unfinished), "stop" for the rest. */
const char *openai_finish_reason(serve_stop stop);
/* A dispatcher error object (borrowed) -> an openai_error. */
void openai_error_from_rpc(json_t *error, openai_error *err);
/* A JSON API error -> an openai_error (a 400 for the client's mistakes). */
void openai_error_from(const api_error *rerr, openai_error *err);
/* The server's fault (a stream's failure) -> an openai_error. */
void openai_error_from_fault(const serve_fault *fault, openai_error *err);
/* The error body {"error": {message, type, param, code}} (new). */
json_t *openai_error_body(const openai_error *err);
bool openai_fail_with(openai_error *err, unsigned status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
enum MHD_Result openai_send_error(struct MHD_Connection *c, const openai_error *err);
enum MHD_Result openai_fail(struct MHD_Connection *c, unsigned status, const char *type, const char *param,
                            const char *message);

/* ---- image_parts.c --------------------------------------------------------------------------- */
/* The image parts of `messages` (image_url, a base64 data URI) into req's images, in order, each
 * part made a text part of the image marker; false with *err (a 400 naming the part). */
bool openai_take_images(json_t *messages, serve_request *req, openai_error *err);
/* Anthropic's image block ({"type": "image", "source": {"type": "base64", "media_type", "data"}})
 * and the Responses API's input_image part ({"image_url": "data:..."}) as OpenAI image parts
 * (new); NULL with *err naming `where`. */
json_t *openai_image_from_anthropic(json_t *block, const char *where, openai_error *err);
json_t *openai_image_from_input_image(json_t *part, const char *where, openai_error *err);

/* ---- openai_messages.c ----------------------------------------------------------------------- */
/* A message's content (a string, null, or text parts, joined; heap); NULL with *err naming
 * messages[index].content. */
char *openai_message_text(json_t *content, size_t index, openai_error *err);
/* The "text" strings of `parts` (an array whose every part was checked to hold one), joined in
 * order (heap); NULL when out of memory. One pass to size, one to copy. */
char *openai_join_texts(json_t *parts);
/* The same as a JSON string (new), as the Anthropic and Responses readers put it in a chat message;
 * NULL when out of memory or not UTF-8. */
json_t *openai_joined_text(json_t *parts);
/* The index of the first of `parts` (an array) that is not a text part, a "type" among `types`
 * (NULL-terminated) beside a "text" string; -1 when all are (then openai_join_texts joins them). */
long openai_first_non_text_part(json_t *parts, const char *const *types);
/* --no-jinja: `messages` checked (roles and text) into req's messages; false with *err. */
bool openai_read_messages(json_t *messages, serve_request *req, openai_error *err);
/* Jinja: `messages` checked as llama-server takes them (tool calls and results too). */
bool openai_check_jinja_messages(json_t *messages, openai_error *err);

/* ---- openai_chat.c --------------------------------------------------------------------------- */
/* A chat request's prompt through llama.cpp's Jinja chat code: req gets the prompt text and the
 * template's stop strings, *turn the turn that parses the answer (specd_chat_free); false with
 * *err (a 400 naming the field for the client's mistakes). */
bool openai_chat_prompt(api_host *host, json_t *body, const http_chat *chat, serve_request *req, specd_chat **turn,
                        openai_error *err);
/* POST /apply-template: {"prompt": the text a chat request's body (borrowed, openai_parse_body's)
 * would be given}; NULL with *err. */
json_t *openai_apply_template(api_host *host, json_t *body, const http_chat *chat, openai_error *err);

/* ---- openai_request.c ------------------------------------------------------------------------ */
/* The body as a JSON object without its nulls (OpenAI's clients send null for "not given"); NULL
 * with *err (400) when it is not one. */
json_t *openai_parse_body(const char *text, size_t len, openai_error *err);
/* The body as a JSON object (new, nulls kept), what every /v1 dialect reads first; NULL with *err, a
 * 400 saying it is no object, or not JSON and where (a number out of range: its field in param). */
json_t *openai_load_object(const char *text, size_t len, openai_error *err);
/* The body (borrowed, openai_parse_body's) of a request with one output (no `n`, one prompt), or
 * of one choice -> a completion for a call worker (server.h), OpenAI's own fields read into its
 * request and its reply OpenAI's; NULL with *err set. `chat`: how chat prompts are made
 * (--no-jinja, ...). The fields OpenAI shares with the JSON API (openai_shared_fields) are left
 * for the API layer: the caller shares the body with the call (completion_call_share). An
 * insertion (/v1/completions with a suffix) adds /infill's drafters to the body, as if the client
 * had named them. Its reply context (call->reply.ctx) is the openai_call, for an API that rewrites
 * its requests as OpenAI's chats (anthropic.c, responses.c) to answer with its own formatter. */
completion_call *openai_build_call(api_host *host, openai_kind kind, json_t *body, const http_chat *chat,
                                   openai_error *err);
/* Whether a /v1/completions body holds a list of several prompts (strings or token-id lists):
 * one output each (openai_choices_call). */
bool openai_several_prompts(openai_kind kind, json_t *body);
/* The fields OpenAI's requests share with the JSON API (temperature, top_p, stop, ...), read by the
 * API layer's one reader (api/request_json.h) as it submits. */
extern const char *const openai_shared_fields[];

/* ---- openai_choices.c: n > 1 ------------------------------------------------------------------ */
/* The call for a body (borrowed) with OpenAI's `n` (checked: 1 to the server's slots) or several
 * prompts: the first output's call, the others in its `more`, their answers merged; NULL with *err. */
completion_call *openai_choices_call(api_host *host, openai_kind kind, json_t *body, const http_chat *chat,
                                     openai_error *err);

/* Whether `key` is one of the fields the chat and text routes read as /completion reads them
 * (temperature, seed, stop, llama.cpp's samplers: DRY, XTC, mirostat, ..., a request's lora): the
 * Responses API passes them through to its chat request, as llama-server does. */
bool openai_shared_field(const char *key);
/* Whether a /v1/chat/completions request may hold `key` (read, passed on, ignored or refused with a
 * reason there): /apply-template takes a chat request's body and refuses other fields (typos). */
bool openai_chat_field_known(const char *key);

/* ---- openai_reply.c -------------------------------------------------------------------------- */
/* The text generated so far, valid UTF-8 (heap); and, for a chat through Jinja, the assistant
 * message it parses into ({role, content, reasoning_content?, tool_calls?}, new): output that
 * does not parse in the template's format is given as plain content rather than lost. */
char *openai_text_so_far(const serve_view *v);
json_t *openai_chat_message(openai_call *call, const serve_view *v);
/* The chat deltas (OpenAI's shape, a new array) the text so far adds to the turn; NULL: none. A final
 * text that does not parse adds what the content deltas have not sent of it, as plain content. */
json_t *openai_chat_deltas(openai_call *call, const serve_view *v);
/* The job's formatter over `call` (taken): the final answer is OpenAI's response object; with
 * stream, every piece is an array of chunk events (the final one ends with finish_reason and,
 * with include_usage, usage). */
serve_reply openai_reply_formatter(openai_call *call);
/* The job's formatter over `call` (taken) in `shape` (static), what every dialect's formatter is:
 * JSON items; streamed, each piece and the last are shape->events, else the last is shape->whole. */
serve_reply openai_shape_reply(openai_call *call, const openai_shape *shape);
/* n > 1: the count the choices of one request share (a reference each; n of them in all). A
 * choice's final answer counted (prompt_tokens 0 for a prompt counted already): true for the
 * request's last, with the sums (the one usage chunk of a stream goes out then). */
openai_choices *openai_choices_new(int n);
openai_choices *openai_choices_ref(openai_choices *g);
bool openai_choices_final(openai_choices *g, json_int_t prompt_tokens, json_int_t completion_tokens,
                          json_int_t *prompt_sum, json_int_t *completion_sum);
void openai_choices_unref(openai_choices *g);
/* Frees an openai_call (the formatter's free_ctx; the turn and the open item with it). */
void openai_call_free(void *call);
/* Answers `c` with the stream of the chunks of `call`'s jobs (its choices'), ending with data: [DONE]. */
enum MHD_Result openai_stream_respond(struct MHD_Connection *c, const completion_call *call);

/* ---- setup_call.c: a completion request set up and run on a call worker ------------------------ */
typedef enum setup_kind {
    SETUP_CHAT,           /* /v1/chat/completions */
    SETUP_TEXT,           /* /v1/completions */
    SETUP_ANTHROPIC,      /* /v1/messages */
    SETUP_RESPONSES,      /* /v1/responses */
    SETUP_APPLY_TEMPLATE, /* /apply-template: the prompt, nothing generated */
    SETUP_COUNT_TOKENS,   /* /v1/messages/count_tokens */
    SETUP_COMPLETION,     /* /completion (llama-server's): its refusal is the answer, {"error"} */
    SETUP_INFILL,         /* /infill: the same */
} setup_kind;
typedef struct setup_call setup_call;
/* A request of `kind` whose body text (`body`, taken, `len` bytes) a worker reads, sets up and runs
 * (setup_call_run, a call_fn); NULL when out of memory. */
setup_call *setup_call_new(setup_kind kind, api_host *host, const http_chat *chat, char *body, size_t len);
void setup_call_free(void *s);
/* Sets up and runs: a blocking completion's answer ({"result": answer} or {"error"}), a streamed
 * one's {"result": {"id"}} at once (its jobs left in its call); NULL when refused (setup_call_error) or
 * when it made its answer itself (setup_call_answer). /completion's and /infill's refusal is their
 * answer, {"error": {code, message, data}}. */
json_t *setup_call_run(void *s);
/* Once run: its completion's call (borrowed; NULL: none); the refusal (NULL: none); the answer of
 * /apply-template or count_tokens (taken). */
completion_call *setup_call_completion(setup_call *s);
const openai_error *setup_call_error(const setup_call *s);
json_t *setup_call_answer(setup_call *s);
/* Once run: /infill was refused because the model has no fill-in-the-middle tokens (llama-server
 * answers 501 not_supported_error in its own error shape). */
bool setup_call_not_supported(const setup_call *s);

/* ---- anthropic.c, anthropic_reply.c: Anthropic's Messages API --------------------------------- */
/* Whether `url` is /v1/messages or /v1/messages/count_tokens. */
bool anthropic_route(const char *url);
/* Anthropic's error body {"type": "error", "error": {type, message}} (new), and the answer with it. */
json_t *anthropic_error_body(const openai_error *err);
enum MHD_Result anthropic_send_error(struct MHD_Connection *c, const openai_error *err);
/* POST /v1/messages -> a completion for a call worker answered in Anthropic's shape; NULL with *err. */
completion_call *anthropic_completion_call(api_host *host, const char *body, size_t len, const http_chat *chat,
                                           openai_error *err);
/* POST /v1/messages/count_tokens: {input_tokens}; NULL with *err. */
json_t *anthropic_count_tokens(api_host *host, const char *body, size_t len, const http_chat *chat, openai_error *err);
/* The job's formatter over `call` (taken): Anthropic's message, or its named events. */
serve_reply anthropic_reply_formatter(openai_call *call);
enum MHD_Result anthropic_stream_respond(struct MHD_Connection *c, serve_job *job);

/* ---- responses.c, responses_reply.c: OpenAI's Responses API ------------------------------------- */
bool responses_route(const char *url);
/* A refusal of the chat request a /v1/responses body became, naming the field the client sent
 * (messages -> input, max_tokens -> max_output_tokens). */
void responses_name_field(openai_error *err);
/* POST /v1/responses -> a completion for a call worker answered as a response; NULL with *err. */
completion_call *responses_completion_call(api_host *host, const char *body, size_t len, const http_chat *chat,
                                           openai_error *err);
/* The job's formatter over `call` (taken): a response object, or the Responses API's events. */
serve_reply responses_reply_formatter(openai_call *call);
enum MHD_Result responses_stream_respond(struct MHD_Connection *c, serve_job *job);

#endif
