/* Prompt-lookup speculative decoding (`--speculate ngram:K[:N]`), rank 0.
 *
 * Drafts come from the sequence itself: the last n tokens (n = N, falling back to shorter down
 * to 1) are looked up earlier in the sequence (prompt + generated), and the up-to-K tokens that
 * followed their most recent earlier occurrence are proposed. The scheduler feeds the last
 * token + the drafts in one step, with a logits row per fed position, and keeps the longest
 * prefix the target accepts (sampler.h: tp_sample_verify_*): greedy output is that of plain
 * decoding, sampled output is distributed as plain sampling. Code completion copies names and
 * whole lines from its own context, which is where this pays. */
#ifndef TPGEN_SPECULATE_H
#define TPGEN_SPECULATE_H

#include <stddef.h>
#include <stdint.h>

#define TP_SPEC_MAX_K 64 /* drafts per step and sequence */
#define TP_SPEC_MAX_N 16 /* longest n-gram looked up */

/* "ngram:K" or "ngram:K:N" (N defaults to 3): 0, or -1 with why in err. */
int tp_speculate_parse(const char *spec, int *k, int *n, char *err, size_t err_size);

/* k drafts for the sequence hist[0..len) into drafts[]: the tokens after the occurrence, and
 * past the sequence's end the copy continues periodically (the sequence copying itself), so a
 * run of one token drafts k more of it. Returns k, or 0 when not even the last token occurs
 * earlier (or k <= 0). */
int tp_speculate_propose(const int32_t *hist, int len, int k, int n, int32_t *drafts);

#endif
