/* Fuzz target: engine/sched/sampler.c on arbitrary logits (NaN, inf, ties, huge and tiny values come
 * straight from the bytes) and any settings the CLI accepts. Bytes: [mode][temperature][top_k]
 * [top_p][penalty][logprobs][seed][n_hist] [n_hist history ids as u16] then the logits (f32, LE;
 * V = what is left / 4, at least 1). mode bit 0: candidate mode when the settings allow it (the
 * k best raw logits and the log-sum-exp, as the step gathers them), else full logits.
 * The sampler must return, with an id in [0, V) and its top log-probabilities' ids in [0, V).
 *
 * A row that is not a distribution (NaN, +inf, or a penalty that overflows a huge finite logit to
 * inf) must be refused (-1), never loop or read out of bounds; the inputs that found those defects
 * (issue 9 part 1) replay from tests/fuzz/regress/sampler/. TPGEN_FUZZ_SAMPLER_KNOWN=1 (off by
 * default) restores the old input filter: NaN to 0, logits clamped to +-1e30, V rounded to even.
 *
 * The settings reach the sampler as the server and the CLI make them: parsed as doubles, then
 * narrowed to float. So temperature, top_p and the penalty may also be (float) of an edge double
 * (bit 7 of their byte, the table EDGE): 1e-300 (> 0 as a double, 0 as a float: top_p 1e-300 kept
 * no token, a hang at TP 1 and c[-1] at TP 2, issue 22), float denormals, -0, NaN, inf, and doubles
 * that round to 1. A finite row without a repetition penalty must always give a token (rc 0). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sampler.h"

#ifndef TPGEN_FUZZ_SAMPLER_KNOWN
#define TPGEN_FUZZ_SAMPLER_KNOWN 0
#endif

#define HEAD 8
#define MAX_V 4096

static int by_best(const void *a, const void *b) {
    return tp_cand_before(a, b) ? -1 : tp_cand_before(b, a) ? 1 : 0;
}

/* Doubles whose float is an edge: 0 from a positive double, denormals, the float's extremes, -0,
 * NaN, inf, 1 from a double just below or above it. */
static const double EDGE[16] = {1e-300, 4.9406564584124654e-324, 1e-46, 1.401298464324817e-45, 1e-40,
                                1.1754943508222875e-38, -0.0, -1e-300, NAN, INFINITY, 3.4028235677973366e38,
                                1e39, 0.99999999999999989, 1.0000000000000002, 0.999999997, 1e-7};

/* The setting from byte b: bit 7 set: (float) of an edge double (as the request parsers narrow
 * it), else the value from the byte's own table. */
static float narrowed(uint8_t b, float plain) { return b & 0x80 ? (float)EDGE[(b >> 3) & 15] : plain; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const float temps[16] = {0, 0, 1e-30f, 1e-6f, 0.01f, 0.1f, 0.5f, 0.7f, 1, 1, 1.5f, 2, 10, 50, 100, 1};
    static const float pens[8] = {1, 1, 1e-3f, 0.5f, 1.2f, 2, 100, 1};
    if (size < HEAD) return 0;
    tp_sampling s;
    s.temperature = narrowed(data[1], temps[data[1] & 15]);
    s.top_k = data[2] < 200 ? data[2] % 70 : data[2] == 255 ? 1 << 24 : (data[2] - 200) * 100;
    s.top_p = data[3] == 0 || data[3] >= 250 ? 1.0f : data[3] == 1 ? 1e-6f : data[3] / 250.0f;
    if (data[3] >= 128 && data[3] < 250 && (data[3] & 4)) s.top_p = narrowed(data[3], 1.0f);
    s.repetition_penalty = narrowed(data[4], pens[data[4] & 7]);
    s.logprobs = data[5] % (TP_MAX_CANDIDATES + 1);
    uint64_t seed = data[6];
    size_t n_hist = data[7] % 32, at = HEAD;
    if (size < at + 2 * n_hist) return 0;
    int32_t hist[32];
    for (size_t i = 0; i < n_hist; i++, at += 2) hist[i] = (int32_t)(data[at] | data[at + 1] << 8);
    size_t nv = (size - at) / 4;
    if (nv < 1) return 0;
    if (nv > MAX_V) nv = MAX_V;
    if (TPGEN_FUZZ_SAMPLER_KNOWN && (nv &= ~(size_t)1) == 0) return 0;
    int V = (int)nv;
    float *logits = malloc(nv * sizeof *logits);
    memcpy(logits, data + at, nv * sizeof *logits);
    for (int v = 0; TPGEN_FUZZ_SAMPLER_KNOWN && v < V; v++)
        logits[v] = isnan(logits[v]) ? 0 : logits[v] > 1e30f ? 1e30f : logits[v] < -1e30f ? -1e30f : logits[v];

    tp_rng rng;
    tp_rng_seed(&rng, seed, 0);
    tp_sample out;
    memset(&out, 0, sizeof out);
    int k = tp_sampling_candidates(&s), rc;
    if ((data[0] & 1) && k > 0) {
        tp_cand *c = malloc(nv * sizeof *c);
        for (int v = 0; v < V; v++) c[v] = (tp_cand){v, logits[v]};
        qsort(c, nv, sizeof *c, by_best);
        if (k > V) k = V;
        tp_cand *best = malloc((size_t)k * sizeof *best); /* exact size: ASan sees a read past it */
        memcpy(best, c, (size_t)k * sizeof *best);
        rc = tp_sample_candidates(&s, &rng, best, k, tp_logsumexp(logits, V), &out);
        free(best);
        free(c);
    } else {
        void *work = malloc(tp_sample_full_work_bytes(V));
        rc = tp_sample_full(&s, &rng, logits, V, hist, (int)n_hist, work, &out);
        free(work);
    }
    if (rc < 0) { /* refused: the row (after processing) was not finite; nothing was chosen */
        /* only a row that is no distribution, or one the penalty made so, may be refused: any
         * settings on a finite row give a token */
        if (isfinite(tp_logsumexp(logits, V)) && (s.repetition_penalty == 1.0f || n_hist == 0)) {
            fprintf(stderr, "a finite row was refused (temperature %g top_k %d top_p %g)\n", (double)s.temperature,
                    s.top_k, (double)s.top_p);
            abort();
        }
        free(logits);
        return 0;
    }
    if (out.id < 0 || out.id >= V) {
        fprintf(stderr, "sampler chose id %d of V = %d\n", (int)out.id, V);
        abort();
    }
    if (out.n_top < 0 || out.n_top > s.logprobs) abort();
    for (int i = 0; i < out.n_top; i++)
        if (out.top_ids[i] < 0 || out.top_ids[i] >= V) {
            fprintf(stderr, "top log-probability %d has id %d of V = %d\n", i, (int)out.top_ids[i], V);
            abort();
        }
    free(logits);
    return 0;
}
