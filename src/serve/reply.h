/* reply.h - how a job's answer takes an API's shape. The API that submits a request gives a
 * formatter (serve_reply); the server calls it on its own thread, as the text is decided, with a
 * view of the running request (serve_view), and keeps what it returns (opaque items: the API's
 * JSON, say) in the job until the API takes them back (job.h). So the answer is built once, from
 * the result, in the API's own shape; the server never knows what an item is. */
#ifndef SPECD_SERVE_REPLY_H
#define SPECD_SERVE_REPLY_H

#include "origins.h"
#include "request.h"

/* Why a completion ended, as every API reports it (stop_type). */
typedef enum serve_stop {
    SERVE_STOP_EOS,        /* an end-of-generation token */
    SERVE_STOP_LIMIT,      /* n_predict */
    SERVE_STOP_CONTEXT,    /* the context is full */
    SERVE_STOP_WORD,       /* a stop string */
    SERVE_STOP_CANCELLED,  /* cancelled, or its client went away */
    SERVE_STOP_SHUTDOWN,   /* the server is stopping or unloading its models */
    SERVE_STOP_TIME_LIMIT, /* a time limit (stopping_limit names it) */
} serve_stop;

/* "eos", "limit", "context", "word", "cancelled", "shutdown", "time_limit". */
const char *serve_stop_name(serve_stop stop);

/* What a formatter sees; valid during the call only. */
typedef struct serve_view {
    const serve_request *request;
    specd_engine *engine;          /* for token pieces and the drafters a request used */
    const char *model;             /* the server's name for its model */
    int64_t id;                    /* the job's */
    int32_t slot;                  /* the slot it ran in; -1: none (it ended while queued) */
    const specd_result *result;    /* tokens, probabilities and statistics so far */
    const char *text;              /* the generated text (raw bytes, cut at a matched stop string) */
    size_t from, to;               /* this piece of it: text[from, to) */
    int32_t probs_from, probs_to;  /* result tokens whose probability entries come with this piece */
    int32_t tokens_from, tokens_to; /* result tokens not handed out with an earlier piece */
    const serve_origins *origins;  /* where the text came from (request->return_origins), else NULL */
    /* The final answer only. */
    bool final;
    serve_stop stop;
    const char *stopping_limit;    /* the field or flag whose limit ended it; "" */
    const char *stopping_word;     /* the stop string that matched; "" */
    bool truncated;                /* the prompt was cut, the context shifted, or it ended at the context */
} serve_view;

typedef struct serve_reply {
    /* A piece of a streamed answer (request->stream); NULL: nothing to send for it. */
    void *(*update)(void *ctx, const serve_view *view);
    /* The final answer (streamed or not); NULL only when out of memory. */
    void *(*final)(void *ctx, const serve_view *view);
    void (*free_item)(void *item);
    void (*free_ctx)(void *ctx); /* may be NULL */
    void *ctx;                   /* the job's from submission on */
} serve_reply;

#endif
