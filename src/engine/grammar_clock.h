/* grammar_clock.h - instrumentation for specd's own server, not part of the library's API
 * (specd.h): the CPU time the calling thread has spent so far in llama.cpp's grammar engine, for
 * the grammars of the sessions it steps, in ms. The scheduler (src/serve) reads it around a round
 * to see what the round's grammars cost (an ambiguous grammar's cost grows with every token, and
 * no preemption or other work counts in it). It is exported from libspecd only because the
 * scheduler lives in another shared library (libspecd-rpc); no program should call it. */
#ifndef SPECD_GRAMMAR_CLOCK_H
#define SPECD_GRAMMAR_CLOCK_H

#include "specd.h"

SPECD_API double specd_grammar_thread_ms(void);

#endif
