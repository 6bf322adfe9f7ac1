/* page.c - GET /: one self-contained HTML page (src/server/page.html, embedded at build time by
 * cmake/embed.cmake): a chat with the loaded model over /v1/chat/completions, streaming, that
 * marks each piece of the answer by where it came from (accepted draft or the target's own) and
 * shows the speculative statistics. It holds no secret: the API key, when the server has one, is
 * typed into the page and sent with its requests. */
#include "server.h"

#include <stddef.h>

extern const unsigned char specd_page_html[];
extern const size_t specd_page_html_size;

enum MHD_Result page_respond(struct MHD_Connection *c) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(specd_page_html_size, (void *)specd_page_html, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    /* The page runs only its own inline script and talks only to this server. */
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                            "connect-src 'self'; img-src 'self' data:");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}
