/* submit.c - a job's way into a server (serve_server_submit, server.h): its request checked once,
 * against the engine and the server's limits (serve_request_prepare, request.h), its prompt made
 * (tokenized, or the chat through its template, then cut to the context as llama-server cuts it),
 * the server's LoRA scales where it gives none, its cached prefix found, and the job queued for
 * the scheduler (scheduler.c). Messages start with the API's `where` and name fields as the API
 * spells them. */
#include "server_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *field_name(const serve_names *names, const char *library_field) {
    return names->field ? names->field(library_field) : library_field;
}

/* ---- the draft lengths, the drafters, the grammar, the bias: what needs the engine ------------ */

static bool check_draft_lengths(serve_request *r, specd_engine *e, const serve_names *names, serve_fault *fault) {
    int32_t max = specd_engine_draft_max(e);
    const char *fields[2] = {"speculative.draft_max", "speculative.draft_min"};
    int32_t values[2] = {r->gen.speculative.draft_max, r->gen.speculative.draft_min};
    for (int i = 0; i < 2; i++) {
        if (values[i] <= max) continue;
        const char *name = field_name(names, fields[i]);
        return serve_fail(fault, SERVE_INVALID, name, "%s: '%s' must be an integer from 0 to %d", names->where, name,
                          max);
    }
    return true;
}

static bool check_drafters(serve_request *r, specd_engine *e, const serve_names *names, serve_fault *fault) {
    if (!specd_spec_params_need(&r->gen.speculative, SPECD_SPEC_NEEDS_DRAFT_MODEL) || specd_engine_has_draft(e))
        return true;
    const char *name = field_name(names, "speculative.types");
    return serve_fail(fault, SERVE_INVALID, name, "%s: %s \"draft\" needs a draft model: init with -md FILE",
                      names->where, name);
}

/* A request's own adapter scales (request.h); without them the server gives its current ones. */
static bool check_lora(serve_request *r, specd_engine *e, const serve_names *names, serve_fault *fault) {
    if (r->n_lora == 0) return true;
    int32_t n = specd_engine_n_lora(e);
    if (!serve_lora_scales(r->lora, r->n_lora, n, names->where, "lora", r->lora_scales, fault)) return false;
    r->gen.lora_scales = n > 0 ? r->lora_scales : NULL;
    r->gen.n_lora_scales = n;
    return true;
}

/* The most a grammar may cost (its build and one step, CPU ms) under a step limit: never less than
 * SERVE_GRAMMAR_PRICE_MIN_MS, so that a grammar the step limit would let run is never refused here
 * (a slower machine, a sanitizer); 0: no limit, no price. */
static double grammar_budget_ms(const serve_limits *limits) {
    if (!limits || limits->step_limit_ms <= 0) return 0.0;
    double limit = (double)limits->step_limit_ms;
    return limit > SERVE_GRAMMAR_PRICE_MIN_MS ? limit : SERVE_GRAMMAR_PRICE_MIN_MS;
}

/* Checked against the vocabulary now rather than when it runs, and priced: a session builds it
 * again on the scheduler thread, and every step masks with it, so a grammar dearer than the step
 * limit would hold every other slot for as long (60000 alternatives: seconds a step) before the
 * limit could end it. */
static bool check_grammar(serve_request *r, specd_engine *e, const serve_limits *limits, const serve_names *names,
                          serve_fault *fault) {
    if (r->gen.grammar_lazy && !r->grammar)
        return serve_fail(fault, SERVE_INVALID, "grammar_lazy", "%s: 'grammar_lazy' needs a 'grammar'", names->where);
    if (r->gen.grammar_lazy && !r->gen.n_grammar_trigger_patterns && !r->gen.n_grammar_trigger_tokens)
        return serve_fail(fault, SERVE_INVALID, "grammar_triggers", "%s: a lazy grammar needs 'grammar_triggers' (it "
                          "would never start)", names->where);
    for (int32_t i = 0; i < r->gen.n_grammar_trigger_tokens; i++)
        if (r->trigger_tokens[i] < 0 || r->trigger_tokens[i] >= specd_engine_n_vocab(e))
            return serve_fail(fault, SERVE_INVALID, "grammar_triggers", "%s: a token trigger needs 'token', a token id "
                              "from 0 to %d", names->where, specd_engine_n_vocab(e) - 1);
    if (!r->grammar) return true;
    char *message = NULL;
    double budget = grammar_budget_ms(limits), cost = 0.0;
    bool ok = specd_grammar_price(e, r->grammar, budget > 0.0 ? budget : -1.0, &cost, &message) == SPECD_OK;
    if (!ok) serve_fail(fault, SERVE_INVALID, "grammar", "%s: %s", names->where, message ? message : "bad grammar");
    specd_free(message);
    if (ok && budget > 0.0 && cost > budget)
        return serve_fail(fault, SERVE_INVALID, "grammar", "%s: 'grammar' costs too much to run beside other "
                          "requests: building it and one step over the vocabulary took %.0f ms of CPU, more than the "
                          "%.0f ms this server allows a step (--step-limit); use fewer alternatives or a smaller "
                          "grammar", names->where, cost, budget);
    return ok;
}

static bool check_logit_bias(serve_request *r, specd_engine *e, const serve_names *names, serve_fault *fault) {
    int32_t n_vocab = specd_engine_n_vocab(e);
    for (int32_t i = 0; i < r->gen.sampling.n_logit_bias; i++) {
        specd_token t = r->bias[i].token;
        if (t >= 0 && t < n_vocab) continue;
        return serve_fail(fault, SERVE_INVALID, "logit_bias", "%s: logit_bias[%d] must be [token id from 0 to %d, "
                          "number or false]", names->where, i, n_vocab - 1);
    }
    return true;
}

/* ---- the server's -n / --n-predict, and the ranges ------------------------------------------- */

/* A request that gives no n_predict (or -1, "until the end") gets the server's, and one that asks
 * for more is refused naming the field it used. */
static bool apply_n_predict_limit(serve_request *r, const serve_limits *limits, const serve_names *names,
                                  serve_fault *fault) {
    int32_t max = limits ? limits->n_predict_max : -1;
    if (max < 0) return true;
    if (r->gen.n_predict < 0) {
        r->gen.n_predict = max;
        r->n_predict_by_server = true;
        return true;
    }
    if (r->gen.n_predict <= max) return true;
    const char *field = r->n_predict_field ? r->n_predict_field : "n_predict";
    return serve_fail(fault, SERVE_INVALID, field, "%s: '%s' is %d, more than this server allows (-n / --n-predict "
                      "%d): ask for at most %d tokens, or leave it out to get %d", names->where, field,
                      r->gen.n_predict, max, max, max);
}

/* The slot asked for (id_slot), modulo the slots: llama-server lets it run past the last one and
 * wraps it round. Below -1 (any) it names nothing. */
static bool resolve_slot(serve_request *r, specd_engine *e, const serve_names *names, serve_fault *fault) {
    if (r->slot < -1)
        return serve_fail(fault, SERVE_INVALID, "id_slot", "%s: 'id_slot' must be -1 (any slot) or a slot number "
                          "from 0 (taken modulo the %d slots), got %d", names->where, specd_engine_n_parallel(e),
                          r->slot);
    if (r->slot >= 0) r->slot %= specd_engine_n_parallel(e);
    return true;
}

/* Every range, decided by the library; the message names the field as the API spells it. */
static bool check_ranges(serve_request *r, const serve_names *names, serve_fault *fault) {
    if (r->n_keep < -1 || r->n_keep > r->n_ctx)
        return serve_fail(fault, SERVE_INVALID, "n_keep", "%s: 'n_keep' must be from -1 (the whole prompt) to %d "
                          "(the context of a slot), got %d", names->where, r->n_ctx, r->n_keep);
    r->gen.n_keep = r->n_keep;
    const char *field = NULL;
    char *message = NULL;
    if (specd_generation_params_validate(&r->gen, &field, &message) == SPECD_OK) return true;
    const char *name = field ? field_name(names, field) : "";
    const char *detail = message && field ? message + strlen(field) : " is out of range";
    serve_fail(fault, SERVE_INVALID, name, "%s: '%s'%s", names->where, name, detail);
    specd_free(message);
    return false;
}

/* ---- the prompt ------------------------------------------------------------------------------ */

static bool append_tokens(serve_request *r, const specd_token *t, int32_t n, int32_t *cap) {
    if (r->n_tokens + n > *cap) {
        int32_t grown_cap = (r->n_tokens + n) * 2 + 16;
        specd_token *grown = realloc(r->tokens, (size_t)grown_cap * sizeof *grown);
        if (!grown) return false;
        r->tokens = grown;
        *cap = grown_cap;
    }
    if (n) memcpy(r->tokens + r->n_tokens, t, (size_t)n * sizeof *t);
    r->n_tokens += n;
    return true;
}

/* A text, with the request's images where their markers stand when it has images (the one text of
 * its prompt: tokenize_parts, tokenize_messages). */
static bool tokenize_text(serve_request *r, specd_engine *e, const char *text, bool first, int32_t *cap,
                          const serve_names *names, serve_fault *fault) {
    specd_token *t = NULL;
    int32_t n = 0;
    char *message = NULL;
    bool ok = (r->n_images > 0 ? specd_tokenize_images(e, text, first, r->parse_special, r->images, r->n_images, &t,
                                                       &n, &message)
                               : specd_tokenize_special(e, text, first, r->parse_special, &t, &n, &message)) == SPECD_OK;
    if (!ok) serve_fail(fault, SERVE_INVALID, "prompt", "%s: prompt: %s", names->where, message ? message : "");
    else if (!append_tokens(r, t, n, cap)) ok = serve_fail(fault, SERVE_INTERNAL, "prompt", "out of memory");
    specd_free(t);
    specd_free(message);
    return ok;
}

/* Text parts and token ids in order; BOS only before a leading text part. */
static bool tokenize_parts(serve_request *r, specd_engine *e, const serve_names *names, serve_fault *fault) {
    int32_t cap = 0, n_vocab = specd_engine_n_vocab(e);
    if (r->n_images > 0 && (r->n_parts != 1 || !r->parts[0].text))
        return serve_fail(fault, SERVE_INVALID, "prompt", "%s: a prompt with images must be one string (with a %s "
                          "marker per image), not token ids or several prompts", names->where, specd_image_marker());
    for (int32_t i = 0; i < r->n_parts; i++) {
        const serve_prompt_part *p = &r->parts[i];
        if (p->text) {
            if (!tokenize_text(r, e, p->text, i == 0, &cap, names, fault)) return false;
        } else if (p->token < 0 || p->token >= n_vocab) {
            return serve_fail(fault, SERVE_INVALID, "prompt", "%s: prompt[%d] must be a string or a token id from 0 "
                              "to %d", names->where, i, n_vocab - 1);
        } else if (!append_tokens(r, &p->token, 1, &cap)) {
            return serve_fail(fault, SERVE_INTERNAL, "prompt", "out of memory");
        }
    }
    return true;
}

/* The conversation through the chat template, as one text. */
static bool tokenize_messages(serve_request *r, specd_engine *e, const serve_names *names, serve_fault *fault) {
    if (!r->chat_template && !specd_engine_chat_template(e))
        return serve_fail(fault, SERVE_INVALID, "messages", "the model has no chat template: start `specd serve` with "
                          "--chat-template NAME (one of llama.cpp's built-in templates, e.g. chatml, llama3), or "
                          "use /v1/completions");
    specd_chat_message *list = calloc((size_t)r->n_messages, sizeof *list);
    if (!list) return serve_fail(fault, SERVE_INTERNAL, "", "out of memory");
    for (int32_t i = 0; i < r->n_messages; i++) list[i] = (specd_chat_message){r->messages[i].role, r->messages[i].content};
    char *text = NULL, *why = NULL;
    bool ok = specd_chat_apply_template(e, list, r->n_messages, r->chat_template, true, &text, &why) == SPECD_OK;
    if (!ok) serve_fail(fault, SERVE_INVALID, "messages", "the chat template failed: %s", why ? why : "unknown error");
    int32_t cap = 0;
    ok = ok && tokenize_text(r, e, text, true, &cap, names, fault);
    specd_free(text);
    specd_free(why);
    free(list);
    return ok;
}

/* A prompt that does not fit: the first n_keep tokens stay, whole blocks of half the rest after
 * them go (as the old API, llama-server, did); a conversation is refused instead (whole_prompt). */
static bool truncate_prompt(serve_request *r, const serve_names *names, serve_fault *fault) {
    r->n_prompt_tokens = r->n_tokens;
    if (r->n_tokens == 0)
        return serve_fail(fault, SERVE_INVALID, "prompt", "%s: the prompt is empty (the model adds no BOS token): "
                          "give some text or token ids", names->where);
    if (r->n_tokens < r->n_ctx) return true;
    if (!r->whole_prompt && r->n_images > 0) /* a cut through an image would leave part of it */
        return serve_fail(fault, SERVE_INVALID, "prompt", "%s: the prompt is %d tokens with its images but a slot's "
                          "context holds %d: a prompt with images is not cut (part of an image would go): shorten it, "
                          "or start the server with a larger -c (each of the -np slots gets -c / -np)", names->where,
                          r->n_tokens, r->n_ctx);
    if (r->whole_prompt)
        return serve_fail(fault, SERVE_INVALID, "messages", "%s: the conversation is %d tokens through the chat "
                          "template (any tools' descriptions included) but a slot's context holds %d: shorten the "
                          "conversation, or start the server with a larger -c (each of the -np slots gets -c / -np)",
                          names->where, r->n_tokens, r->n_ctx);
    int32_t n_keep = r->n_keep < 0 ? r->n_tokens : r->n_keep;
    int32_t block = (r->n_ctx - n_keep) / 2;
    if (n_keep >= r->n_ctx - 1 || block < 1)
        return serve_fail(fault, SERVE_INVALID, "n_keep", "%s: the prompt has %d tokens, the context holds %d, and "
                          "n_keep (%d) leaves nothing to drop: lower n_keep, shorten the prompt or init with a larger "
                          "-c", names->where, r->n_tokens, r->n_ctx, r->n_keep);
    int32_t erased = (r->n_tokens - n_keep - block) / block * block;
    if (r->n_tokens - erased >= r->n_ctx) erased += block;
    memmove(r->tokens + n_keep, r->tokens + n_keep + erased, (size_t)(r->n_tokens - n_keep - erased) * sizeof *r->tokens);
    r->n_tokens -= erased;
    r->truncated = true;
    return true;
}

/* The first token is predicted at the prompt's last position, which must be text: an image's
 * positions take embeddings, not tokens a pass could end with. */
static bool check_prompt_end(serve_request *r, const serve_names *names, serve_fault *fault) {
    if (r->n_tokens == 0 || !specd_token_is_image(r->tokens[r->n_tokens - 1])) return true;
    return serve_fail(fault, SERVE_INVALID, "prompt", "%s: the prompt ends with an image: put some text after its "
                      "marker", names->where);
}

/* preserved_tokens' texts as ids: each text that is one token (with special-token text parsed),
 * the others left out as llama-server leaves them. */
static bool resolve_preserved(serve_request *r, specd_engine *e, serve_fault *fault) {
    free(r->preserved);
    r->preserved = NULL;
    r->n_preserved = 0;
    if (r->n_preserved_texts == 0) return true;
    r->preserved = malloc((size_t)r->n_preserved_texts * sizeof *r->preserved);
    if (!r->preserved) return serve_fail(fault, SERVE_INTERNAL, "preserved_tokens", "out of memory");
    for (int32_t i = 0; i < r->n_preserved_texts; i++) {
        specd_token *ids = NULL;
        int32_t n = 0;
        if (specd_tokenize_special(e, r->preserved_texts[i], false, true, &ids, &n, NULL) == SPECD_OK && n == 1)
            r->preserved[r->n_preserved++] = ids[0];
        specd_free(ids);
    }
    return true;
}

bool serve_request_prepare(serve_request *r, specd_engine *e, const serve_limits *limits, const serve_names *names,
                           serve_fault *fault) {
    r->n_ctx = specd_engine_n_ctx(e);
    r->n_tokens = 0;
    bool ok = check_draft_lengths(r, e, names, fault) && check_drafters(r, e, names, fault) &&
              check_grammar(r, e, limits, names, fault) && check_logit_bias(r, e, names, fault) &&
              check_lora(r, e, names, fault) && apply_n_predict_limit(r, limits, names, fault) && check_ranges(r, names, fault) &&
              resolve_slot(r, e, names, fault) && resolve_preserved(r, e, fault);
    ok = ok && (r->n_messages > 0 ? tokenize_messages(r, e, names, fault) : tokenize_parts(r, e, names, fault));
    if (!ok || !truncate_prompt(r, names, fault) || !check_prompt_end(r, names, fault)) return false;
    /* A full context shifts where the server says so (--context-shift) and the model's cache can. */
    r->gen.context_shift = r->context_shift && specd_engine_can_shift_context(e);
    r->gen.n_keep = r->n_keep;
    return true;
}

/* ---- the job queued ------------------------------------------------------------------------ */

/* Room in the queue (s->lock held): busy when every slot and the queue are taken. */
static bool make_room_locked(serve_server *s, serve_fault *fault) {
    if (s->closed) return serve_fail(fault, SERVE_BUSY, "", "the server is stopping: retry later");
    /* counted together: a job not admitted yet is still headed for an idle slot */
    int32_t taken = s->n_running + s->n_queued;
    if (taken >= s->n_slots + s->queue_max)
        return serve_fail(fault, SERVE_BUSY, "", "busy: all %d slots are busy and %d requests are queued (the most "
                          "--queue allows); retry later", s->n_slots, taken - s->n_slots);
    if (s->n_queued < s->queue_cap) return true;
    int32_t cap = s->queue_cap ? s->queue_cap * 2 : 16;
    serve_job **grown = realloc(s->queue, (size_t)cap * sizeof *grown);
    if (!grown) return serve_fail(fault, SERVE_INTERNAL, "", "completion: out of memory");
    s->queue = grown;
    s->queue_cap = cap;
    return true;
}

bool serve_server_submit(serve_server *s, serve_job *job, const serve_names *names, serve_fault *fault) {
    serve_request *req = &job->request;
    serve_limits limits = s->limits; /* the step limit as it is now: a grammar is priced against it */
    pthread_mutex_lock(&s->lock);
    if (limits.step_limit_ms > 0) limits.step_limit_ms = (int64_t)s->step_limit_now_ms;
    pthread_mutex_unlock(&s->lock);
    if (!serve_request_prepare(req, s->engine, &limits, names, fault)) {
        serve_job_fail(job, fault);
        return false;
    }
    int32_t n_lora = specd_engine_n_lora(s->engine);
    if (req->n_lora == 0 && n_lora > 0) { /* the server's current scales (prepare took a request's own) */
        pthread_mutex_lock(&s->lock);
        memcpy(req->lora_scales, s->lora, sizeof req->lora_scales);
        pthread_mutex_unlock(&s->lock);
        req->gen.lora_scales = req->lora_scales;
        req->gen.n_lora_scales = n_lora;
    }
    req->n_cached = serve_history_cached_prefix(&s->history, req->tokens, req->n_tokens);
    pthread_mutex_lock(&job->lock); /* a job's lock before the server's */
    pthread_mutex_lock(&s->lock);
    bool ok = make_room_locked(s, fault);
    if (ok) {
        job->waker_lock = &s->lock;
        job->waker = &s->wake;
        serve_job_ref(job);
        s->queue[s->n_queued++] = job;
        pthread_cond_broadcast(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&job->lock);
    if (!ok) serve_job_fail(job, fault);
    return ok;
}
