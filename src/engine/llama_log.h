/* llama_log.h - llama.cpp set up once per process (its backends, and specd's logger), and the
 * errors it reports while a model loads captured for the load's own message. */
#ifndef SPECD_LLAMA_LOG_H
#define SPECD_LLAMA_LOG_H

#include <stdbool.h>
#include <stddef.h>

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

#endif
