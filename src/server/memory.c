/* memory.c - memory that large requests took goes back to the system. glibc keeps what is freed
 * in its arenas: after 8 concurrent 1 MiB /tokenize bodies (their JSON, token lists and answers)
 * the process stayed 60-200 MB larger for good. Two things together return it (each alone does
 * not: measured with 8 x 1 MiB /tokenize, RSS 14 MB before, 71-158 MB after with neither, 53-72 MB
 * with fixed thresholds only, 16-21 MB with both):
 *  - fixed thresholds instead of glibc's moving ones, which rise with every large block freed
 *    (up to 32 MB to map, 64 MB kept at the top of an arena): blocks of 1 MiB or more are mapped
 *    and unmapped, and an arena's free top above 2 MiB is given back when freed into;
 *  - malloc_trim once the last large request in flight is done, for free blocks inside arenas
 *    (it walks them all: milliseconds, so once per burst, not per request). */
#include "server.h"

#include <stdatomic.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#define MMAP_THRESHOLD (1 << 20)
#define TRIM_THRESHOLD (2 << 20)

static atomic_int large_in_flight;

void memory_settle_start(void) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD);
#endif
}

void memory_large_request_begins(void) { atomic_fetch_add(&large_in_flight, 1); }

void memory_large_request_done(void) {
    if (atomic_fetch_sub(&large_in_flight, 1) != 1) return;
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}
