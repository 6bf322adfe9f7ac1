/* base64.h - base64 decoding, for images sent inside JSON (data URIs, llama-server's
 * multimodal_data). */
#ifndef SPECD_BASE64_H
#define SPECD_BASE64_H

#include <stdbool.h>
#include <stddef.h>

/* Standard or URL-safe base64, '=' padding optional, whitespace skipped: the bytes (malloc'd,
 * *size of them), or NULL with *bad set when `text` is not base64 (or holds nothing), NULL alone
 * when out of memory. */
unsigned char *specd_base64_decode(const char *text, size_t *size, bool *bad);

#endif
