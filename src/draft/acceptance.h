/* acceptance.h - how often a drafter's tokens are accepted, by the drafter's confidence in them:
 * what the draft length is planned from (draft_length.h), learnt from every verified draft.
 *
 * Kept apart for greedy and sampled requests: greedy verification accepts a draft when it is the
 * target's argmax, rejection sampling with probability min(1, p/q), and a server mixes both (on the
 * benchmark pair, drafts of confidence 0.1-0.3 were accepted 60% of the time greedy and 72%
 * sampled, drafts above 0.9 99% and 90%). Counts decay, so estimates follow a changing text.
 * Not thread-safe: the engine's steps run on one thread at a time (specd.h). */
#ifndef SPECD_ACCEPTANCE_H
#define SPECD_ACCEPTANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPECD_ACCEPTANCE_BINS 10
#define SPECD_ACCEPTANCE_DEPTHS 16

typedef enum specd_accept_mode { SPECD_ACCEPT_GREEDY, SPECD_ACCEPT_SAMPLED, SPECD_ACCEPT_MODES } specd_accept_mode;

typedef struct specd_acceptance {
    double accepted[SPECD_ACCEPT_MODES][SPECD_ACCEPTANCE_BINS]; /* decayed counts by confidence */
    double drafted[SPECD_ACCEPT_MODES][SPECD_ACCEPTANCE_BINS];
    /* Every token the drafter drew, kept or not, by confidence (decayed): what the confidence of
     * the next token to draw is likely to be. */
    double drawn[SPECD_ACCEPT_MODES][SPECD_ACCEPTANCE_BINS];
    /* By depth: drafts verified at depth d (1-based, index d - 1) whose parents were all accepted,
     * and how many were accepted (decayed): a chain's acceptance given that it got this far. Runs
     * hold together: on the benchmark pair a third draft was accepted 85% of the time once the first
     * two were, where drafts were 80% on the whole. */
    double depth_accepted[SPECD_ACCEPT_MODES][SPECD_ACCEPTANCE_DEPTHS];
    double depth_drafted[SPECD_ACCEPT_MODES][SPECD_ACCEPTANCE_DEPTHS];
    uint32_t n_verdicts; /* verdicts recorded so far: the calibration file keeps these counts */
} specd_acceptance;

/* A mode's counts as one line of numbers (the calibration file's), and back. */
#define SPECD_ACCEPTANCE_NUMBERS (3 * SPECD_ACCEPTANCE_BINS + 2 * SPECD_ACCEPTANCE_DEPTHS)

void specd_acceptance_init(specd_acceptance *a);
/* A draft of this confidence at this depth (1-based; its parents all accepted), verified: accepted
 * or not. */
void specd_acceptance_record(specd_acceptance *a, specd_accept_mode mode, int32_t depth, float confidence,
                             bool accepted);
/* The chance a draft at this depth is accepted once its parents were, shrunk toward the mean: what
 * a token not drawn yet is expected to do there. */
double specd_acceptance_at_depth(const specd_acceptance *a, specd_accept_mode mode, int32_t depth);
/* Writes the mode's counts, space-separated, into out (size bytes; 1024 is plenty). */
void specd_acceptance_format(const specd_acceptance *a, specd_accept_mode mode, char *out, size_t size);
/* Reads counts written by specd_acceptance_format into the mode, each scaled by `weight` (what an
 * earlier process learnt counts for less than what this one sees). False, with nothing changed,
 * when `numbers` is not SPECD_ACCEPTANCE_NUMBERS finite counts, each accepted count within its
 * drafted one. */
bool specd_acceptance_parse(specd_acceptance *a, specd_accept_mode mode, const char *numbers, double weight);
/* The longest chain the verdicts so far vouch for: one past the deepest depth verified at least
 * `verdicts` times (1 before any). A cold engine's estimates say little about depths it has not
 * seen: drafting up to 15 tokens on a prior of 0.75 cost the first steps of a generation more than
 * the rest could win back. */
int32_t specd_acceptance_trusted_depth(const specd_acceptance *a, specd_accept_mode mode, double verdicts);
/* The estimated chance that a draft of this confidence is accepted: its bucket's rate, shrunk
 * toward the mode's overall rate (a bucket with few drafts borrows from the rest). */
double specd_acceptance_of(const specd_acceptance *a, specd_accept_mode mode, float confidence);
/* The mode's overall rate, with a prior of 0.75 worth two drafts: what a token not drawn yet
 * is expected to do. */
double specd_acceptance_mean(const specd_acceptance *a, specd_accept_mode mode);
/* A token drawn with this confidence (kept or not). */
void specd_acceptance_record_drawn(specd_acceptance *a, specd_accept_mode mode, float confidence);
/* The expectation of value(acceptance) over the confidence of the next token to draw: the sum over
 * confidence buckets of the share of drawn tokens in the bucket times value(the bucket's acceptance);
 * before any draw, value(the mean). What drawing a token is worth when it is kept only where its
 * confidence makes it pay. */
double specd_acceptance_expect(const specd_acceptance *a, specd_accept_mode mode,
                               double (*value)(double acceptance, const void *context), const void *context);

#endif
