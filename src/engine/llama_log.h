/* llama_log.h - llama.cpp set up once per process (its backends, and specd's logger), and the
 * errors it reports while a model loads captured for the load's own message. */
#ifndef SPECD_LLAMA_LOG_H
#define SPECD_LLAMA_LOG_H

#include "specd.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Installs specd's logger and initializes llama.cpp's backends, once per process. */
void specd_llama_init(void);
/* llama.cpp's whole log on stderr (the latest engine's `verbose`); else its errors only. */
void specd_llama_log_verbose(bool verbose);

/* What llama.cpp reported as errors on this thread during one load step (the first line is the
 * cause; the lines after it are llama.cpp's "failed to load" echoes). */
typedef struct specd_log_capture {
    char text[512];
    size_t len;
} specd_log_capture;

/* Starts capturing this thread's llama.cpp errors into *c. */
void specd_log_capture_begin(specd_log_capture *c);
/* Stops capturing; returns the first line captured ("" when none), cut at the newline. */
const char *specd_log_capture_end(specd_log_capture *c);

/* Why llama_init_from_model failed for `what` ("target context", ...): llama.cpp's own reason
 * first where it gave one (`reason`, from specd_log_capture_end; e.g. a quantized cache that does
 * not divide the head size), the guess of too little memory only where it gave none or its reason
 * is about memory. Sets *error; returns SPECD_ERR_CONTEXT. */
specd_status specd_context_failed(char **error, const char *what, uint32_t n_ctx, const char *reason);

#endif
