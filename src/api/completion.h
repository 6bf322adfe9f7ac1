/* completion.h - the one way a completion reaches the scheduler, whatever the transport: a
 * request claimed on the host, handed to its serving server (whose queue is the one between a
 * transport and the scheduler), and its answer waited for while whoever asked still wants it.
 * JSON-RPC's completion methods (src/rpc) and specd serve's routes (src/server) both come through
 * here; neither claims, submits or waits on its own. */
#ifndef SPECD_API_COMPLETION_H
#define SPECD_API_COMPLETION_H

#include "host.h"
#include "request_json.h"

/* A request read by its front end (OpenAI's, Anthropic's, ...: *req, its contents taken whatever
 * happens) handed to the host's serving server with the formatter of its answer (`reply`, taken
 * too): the host's defaults applied, then the fields it shares with the JSON API (`names` of
 * `fields`, borrowed; none when fields is NULL) read as this API reads them, in llama-server's
 * dialect, over whatever the front end set. The job (referenced), or NULL with *err set (a field
 * refused: before any claim, as a front end's own refusals). */
serve_job *api_completion_submit(api_host *h, serve_request *req, json_t *fields, const char *const *names,
                                 serve_reply reply, api_error *err);

/* A request in `dialect` (params borrowed) read over the host's defaults and handed over, its
 * answer in the JSON API's shape (reply_json.h). `stream` overrides the request's own field: the
 * answer comes piece by piece. The job (referenced), or NULL with *err set; a refused request
 * still got an id, so a poll of the latest finds it ended with the error. */
serve_job *api_completion_begin(api_host *h, json_t *params, request_dialect dialect, bool stream, api_error *err);

/* The final answer of `job` (new; the formatter's item), waited for while this thread's caller
 * still wants it (api_watch_thread: a client that went away cancels it); NULL with *err set. */
void *api_completion_wait(serve_job *job, api_error *err);

#endif
