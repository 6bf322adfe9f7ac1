/* embed.c - embeddings and reranking (specd.h): a context of the target model of its own, made
 * with embeddings on and the asked pooling, beside the generation contexts. A separate context
 * because an embedding needs its input decoded in one batch from an empty cache, with pooling
 * that llama.cpp sets per context: on the slots' context it would evict their caches and change
 * their passes. Its lock serializes the embeddings among themselves; generation never takes it. */
#define _POSIX_C_SOURCE 200809L
#include "engine_internal.h"
#include "llama_log.h"

#include "../util/util.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct specd_embedder {
    pthread_mutex_t lock;     /* one embedding at a time on ctx and batch */
    struct llama_context *ctx;
    struct llama_batch batch; /* n_max tokens */
    int32_t n_max;            /* tokens one input may have: the context, decoded in one piece */
    int32_t n_dims;           /* floats of a row: n_embd_out, or the classifier's outputs under rank */
    specd_pooling pooling;    /* settled: never DEFAULT */
};

static const char *const pooling_names[] = {"none", "mean", "cls", "last", "rank"}; /* in specd_pooling's order */
#define N_POOLINGS (int)(sizeof pooling_names / sizeof *pooling_names)

const char *specd_pooling_name(specd_pooling pooling) {
    if (pooling == SPECD_POOLING_DEFAULT) return "default";
    return (int)pooling >= 0 && (int)pooling < N_POOLINGS ? pooling_names[pooling] : NULL;
}

/* llama.cpp's defaults where the caller left a setting DEFAULT (llama-server's, so that its numbers
 * are llama-server's), the caller's own otherwise: the engine's settled settings serve the
 * invariance of speculative passes, which an embedding does not need. */
static void attention_as_given(const specd_engine_params *p, struct llama_context_params *cp) {
    specd_engine_params given = *p;
    if (given.flash_attn == SPECD_FLASH_ATTN_DEFAULT) given.flash_attn = SPECD_FLASH_ATTN_AUTO;
    if (given.cache_type_k == SPECD_CACHE_TYPE_DEFAULT) given.cache_type_k = SPECD_CACHE_TYPE_F16;
    if (given.cache_type_v == SPECD_CACHE_TYPE_DEFAULT) given.cache_type_v = SPECD_CACHE_TYPE_F16;
    specd_apply_context_settings(&given, false, cp);
}

static struct llama_context_params embedding_context_params(const specd_engine *e, const specd_engine_params *p,
                                                            int32_t n_max) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_max;
    cp.n_batch = cp.n_ubatch = (uint32_t)n_max; /* one input, one piece: pooling sees all of it */
    cp.n_seq_max = 1;
    cp.embeddings = true;
    cp.pooling_type = (enum llama_pooling_type)p->pooling;
    cp.n_threads = e->params.n_threads;
    cp.n_threads_batch = e->params.n_threads_batch > 0 ? e->params.n_threads_batch : e->params.n_threads;
    cp.no_perf = true;
    attention_as_given(p, &cp);
    return cp;
}

/* Rank pooling reads the classifier's outputs (llama_model_n_cls_out of them, 1 for a model with
 * no classifier labels: its pooled state's first value); every other pooling the hidden state. */
static int32_t row_size(const struct llama_model *model, specd_pooling pooling) {
    if (pooling == SPECD_POOLING_RANK) return (int32_t)llama_model_n_cls_out(model);
    return llama_model_n_embd_out(model);
}

/* llama-server's bound: its physical batch (n_ubatch, 512 by default; --embedding makes n_batch
 * the same), within a slot's context. The engine's own batch may be smaller (invariance pads
 * passes, a tree needs room): an embedding does neither. */
static int32_t embed_n_max(const specd_engine *e, const specd_engine_params *p) {
    int32_t n = p->n_ubatch > 0 ? p->n_ubatch : 512;
    if (p->n_batch > 0 && p->n_batch < n) n = p->n_batch;
    return n < e->n_ctx ? n : e->n_ctx;
}

specd_status specd_embedder_new(specd_engine *e, const specd_engine_params *p, char **error) {
    if ((int)p->pooling < SPECD_POOLING_DEFAULT || (int)p->pooling >= N_POOLINGS) {
        specd_set_error(error, "pooling must be a specd_pooling (SPECD_POOLING_DEFAULT, _NONE, _MEAN, _CLS, _LAST or "
                        "_RANK; got %d)", (int)p->pooling);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    struct specd_embedder *m = calloc(1, sizeof *m);
    if (!m) {
        specd_set_error(error, "out of memory for the embedding context");
        return SPECD_ERR_NO_MEMORY;
    }
    pthread_mutex_init(&m->lock, NULL);
    e->embedder = m; /* freed with the engine from here on, whatever fails below */
    m->n_max = embed_n_max(e, p);
    struct llama_context_params cp = embedding_context_params(e, p, m->n_max);
    specd_log_capture capture;
    specd_log_capture_begin(&capture);
    m->ctx = llama_init_from_model(e->target.model, cp);
    const char *reason = specd_log_capture_end(&capture);
    if (!m->ctx) return specd_context_failed(error, "embedding context", cp.n_ctx, reason);
    m->pooling = (specd_pooling)llama_pooling_type(m->ctx);
    m->n_dims = row_size(e->target.model, m->pooling);
    m->batch = llama_batch_init(m->n_max, 0, 1);
    if (!m->batch.token) {
        specd_set_error(error, "out of memory for an embedding batch of %d tokens", m->n_max);
        return SPECD_ERR_NO_MEMORY;
    }
    specd_lora_apply_defaults(e, m->ctx);
    return SPECD_OK;
}

void specd_embedder_free(specd_engine *e) {
    struct specd_embedder *m = e->embedder;
    if (!m) return;
    if (m->batch.token) llama_batch_free(m->batch);
    if (m->ctx) llama_free(m->ctx);
    pthread_mutex_destroy(&m->lock);
    free(m);
    e->embedder = NULL;
}

specd_pooling specd_engine_pooling(const specd_engine *e) {
    return e && e->embedder ? e->embedder->pooling : SPECD_POOLING_DEFAULT;
}

int32_t specd_engine_embed_n_max(const specd_engine *e) { return e && e->embedder ? e->embedder->n_max : 0; }

void specd_embed_normalize(const float *in, float *out, int32_t n, int32_t normalize) {
    double sum = 0.0; /* in double, as llama.cpp's common_embd_normalize: the same floats come out */
    if (normalize < 0) {
        sum = 1.0;
    } else if (normalize == 0) { /* the largest magnitude maps to 32760: an int16's range */
        for (int32_t i = 0; i < n; i++)
            if (sum < fabsf(in[i])) sum = fabsf(in[i]);
        sum /= 32760.0;
    } else if (normalize == 2) {
        for (int32_t i = 0; i < n; i++) sum += in[i] * in[i]; /* a float product, summed in double */
        sum = sqrt(sum);
    } else {
        for (int32_t i = 0; i < n; i++) sum += pow(fabsf(in[i]), normalize);
        sum = pow(sum, 1.0 / normalize);
    }
    const float scale = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
    for (int32_t i = 0; i < n; i++) out[i] = in[i] * scale;
}

void specd_embedding_clear(specd_embedding *embedding) {
    if (!embedding) return;
    free(embedding->values);
    memset(embedding, 0, sizeof *embedding);
}

/* The input is fit to decode: embeddings on, tokens there, in the vocabulary, few enough. */
static specd_status check_input(const specd_engine *e, const specd_token *tokens, int32_t n, char **error) {
    if (!e->embedder) {
        specd_set_error(error, "this engine has no embedding context: load the model with embeddings on "
                        "(specd_engine_params.embedding; --embedding, or --rerank for a reranker)");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (!tokens || n <= 0) {
        specd_set_error(error, "the input has no tokens: an embedding needs at least one");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= e->n_vocab) {
            specd_set_error(error, "token %d of the input (%d) is not in the vocabulary (0 to %d)", i, tokens[i],
                            e->n_vocab - 1);
            return SPECD_ERR_INVALID_ARGUMENT;
        }
    if (n > e->embedder->n_max) {
        specd_set_error(error, "input (%d tokens) is too large to process. increase the physical batch size "
                        "(current batch size: %d; -b and -ub)", n, e->embedder->n_max);
        return SPECD_ERR_CONTEXT;
    }
    return SPECD_OK;
}

/* Decodes the tokens as sequence 0 of an empty cache, every token an output (pooling none reads
 * each; the others pool over all of them). Locked by the caller. */
static specd_status decode_input(struct specd_embedder *m, const specd_token *tokens, int32_t n, char **error) {
    llama_memory_t mem = llama_get_memory(m->ctx);
    if (mem) llama_memory_clear(mem, true); /* an encoder-only model keeps no cache */
    m->batch.n_tokens = n;
    for (int32_t i = 0; i < n; i++) {
        m->batch.token[i] = tokens[i];
        m->batch.pos[i] = i;
        m->batch.n_seq_id[i] = 1;
        m->batch.seq_id[i][0] = 0;
        m->batch.logits[i] = 1;
    }
    int rc = llama_decode(m->ctx, m->batch);
    if (rc != 0) {
        specd_set_error(error, "llama_decode failed on the embedding context (%d) for an input of %d tokens", rc, n);
        return SPECD_ERR_DECODE;
    }
    return SPECD_OK;
}

/* The decoded rows into out (n_rows x n_dims, allocated here). */
static specd_status read_rows(struct specd_embedder *m, int32_t n, int32_t normalize, specd_embedding *out,
                              char **error) {
    bool per_token = m->pooling == SPECD_POOLING_NONE;
    int32_t rows = per_token ? n : 1;
    out->values = specd_alloc_array((size_t)rows * (size_t)m->n_dims, sizeof *out->values);
    if (!out->values) {
        specd_set_error(error, "out of memory for an embedding of %d x %d floats", rows, m->n_dims);
        return SPECD_ERR_NO_MEMORY;
    }
    for (int32_t r = 0; r < rows; r++) {
        const float *row = per_token ? llama_get_embeddings_ith(m->ctx, r) : llama_get_embeddings_seq(m->ctx, 0);
        if (!row) {
            specd_set_error(error, "llama.cpp gave no embedding for %s", per_token ? "a token" : "the input");
            return SPECD_ERR_DECODE;
        }
        float *dst = out->values + (size_t)r * (size_t)m->n_dims;
        if (per_token) memcpy(dst, row, (size_t)m->n_dims * sizeof *dst); /* per token: never normalized */
        else specd_embed_normalize(row, dst, m->n_dims, normalize);
    }
    out->n_rows = rows;
    out->n_dims = m->n_dims;
    out->n_tokens = n;
    return SPECD_OK;
}

/* One input through the embedding context; for rank pooling `normalize` -1 keeps the scores. */
static specd_status embed_locked(specd_engine *e, const specd_token *tokens, int32_t n, int32_t normalize,
                                 specd_embedding *out, char **error) {
    struct specd_embedder *m = e->embedder;
    pthread_mutex_lock(&m->lock);
    specd_status st = decode_input(m, tokens, n, error);
    if (st == SPECD_OK) st = read_rows(m, n, normalize, out, error);
    pthread_mutex_unlock(&m->lock);
    if (st != SPECD_OK) specd_embedding_clear(out);
    return st;
}

specd_status specd_embed(specd_engine *e, const specd_token *tokens, int32_t n_tokens, int32_t normalize,
                         specd_embedding *out, char **error) {
    if (error) *error = NULL;
    memset(out, 0, sizeof *out);
    specd_status st = check_input(e, tokens, n_tokens, error);
    if (st != SPECD_OK) return st;
    if (e->embedder->pooling == SPECD_POOLING_RANK) {
        specd_set_error(error, "the embedding context pools with rank: its output is a reranker's score, not an "
                        "embedding (use specd_rerank; /rerank)");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    return embed_locked(e, tokens, n_tokens, normalize, out, error);
}

/* ---- reranking ------------------------------------------------------------------------------- */

/* `text` with every "{query}" and "{document}" replaced (heap, NULL: out of memory). */
static char *fill_template(const char *text, const char *query, const char *document) {
    size_t nq = strlen(query), nd = strlen(document), cap = strlen(text) + 1, len = 0;
    for (const char *p = text; (p = strchr(p, '{')); p++) cap += nq + nd; /* room for any replacement */
    char *out = malloc(cap);
    if (!out) return NULL;
    for (const char *p = text; *p;) {
        const char *with = !strncmp(p, "{query}", 7) ? query : !strncmp(p, "{document}", 10) ? document : NULL;
        if (!with) {
            out[len++] = *p++;
            continue;
        }
        size_t n = with == query ? nq : nd;
        memcpy(out + len, with, n);
        len += n;
        p += with == query ? 7 : 10;
    }
    out[len] = '\0';
    return out;
}

static specd_status template_tokens(const specd_engine *e, const char *tmpl, const char *query, const char *document,
                                    specd_token **tokens, int32_t *n, char **error) {
    char *prompt = fill_template(tmpl, query, document);
    if (!prompt) {
        specd_set_error(error, "out of memory for the rerank prompt");
        return SPECD_ERR_NO_MEMORY;
    }
    specd_status st = specd_tokenize_special(e, prompt, false, true, tokens, n, error);
    free(prompt);
    return st;
}

/* BOS query EOS SEP document EOS, each special token where the vocabulary asks for it. */
static specd_status joined_tokens(const specd_engine *e, const char *query, const char *document, specd_token **tokens,
                                  int32_t *n, char **error) {
    specd_token *q = NULL, *d = NULL;
    int32_t nq = 0, nd = 0;
    specd_status st = specd_tokenize_special(e, query, false, false, &q, &nq, error);
    if (st == SPECD_OK) st = specd_tokenize_special(e, document, false, false, &d, &nd, error);
    const struct llama_vocab *v = e->vocab;
    specd_token bos = llama_vocab_bos(v), sep = llama_vocab_sep(v);
    specd_token eos = llama_vocab_eos(v) != LLAMA_TOKEN_NULL ? llama_vocab_eos(v) : sep;
    bool add_bos = llama_vocab_get_add_bos(v), add_eos = llama_vocab_get_add_eos(v), add_sep = llama_vocab_get_add_sep(v);
    specd_token_list l = {0}; /* the prompt without a template */
    bool ok = st == SPECD_OK && (!add_bos || specd_token_list_add(&l, &bos, 1)) && specd_token_list_add(&l, q, nq) &&
              (!add_eos || specd_token_list_add(&l, &eos, 1)) && (!add_sep || specd_token_list_add(&l, &sep, 1)) &&
              specd_token_list_add(&l, d, nd) && (!add_eos || specd_token_list_add(&l, &eos, 1));
    free(q);
    free(d);
    if (st == SPECD_OK && !ok) {
        specd_set_error(error, "out of memory for the rerank prompt");
        st = SPECD_ERR_NO_MEMORY;
    }
    if (st != SPECD_OK) {
        free(l.v);
        return st;
    }
    *tokens = l.v;
    *n = l.n;
    return SPECD_OK;
}

specd_status specd_rerank_tokens(const specd_engine *e, const char *query, const char *document, specd_token **tokens,
                                 int32_t *n_tokens, char **error) {
    if (error) *error = NULL;
    *tokens = NULL;
    *n_tokens = 0;
    if (!query || !document) {
        specd_set_error(error, "a rerank needs a query and a document");
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    const char *tmpl = llama_model_chat_template(e->target.model, "rerank");
    return tmpl ? template_tokens(e, tmpl, query, document, tokens, n_tokens, error)
                : joined_tokens(e, query, document, tokens, n_tokens, error);
}

specd_status specd_rerank(specd_engine *e, const char *query, const char *document, float *score, int32_t *n_tokens,
                          char **error) {
    if (error) *error = NULL;
    if (n_tokens) *n_tokens = 0;
    if (e->embedder && e->embedder->pooling != SPECD_POOLING_RANK) {
        specd_set_error(error, "the embedding context pools with %s, not rank: load the reranker with --rerank "
                        "(--pooling rank)", specd_pooling_name(e->embedder->pooling));
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    specd_token *tokens = NULL;
    int32_t n = 0;
    specd_status st = specd_rerank_tokens(e, query, document, &tokens, &n, error);
    if (n_tokens) *n_tokens = n; /* also for a prompt too long: the caller's message says how long */
    if (st == SPECD_OK) st = check_input(e, tokens, n, error);
    specd_embedding out = {0};
    if (st == SPECD_OK) st = embed_locked(e, tokens, n, -1, &out, error);
    free(tokens);
    if (st != SPECD_OK) return st;
    *score = out.values[0];
    specd_embedding_clear(&out);
    return SPECD_OK;
}
