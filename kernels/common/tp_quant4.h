/* 4-bit weights (--weights int4, AWQ and GPTQ checkpoints), shared by both backends.
 *
 * The canonical form every source is brought to on the host before a backend stores it
 * (tp_q4_host): for a matrix W [N, K] (an HF Linear weight, [out, in]) in groups of G
 * consecutive k of one row (G divides K),
 *     w[n, k] = (q[n, k] - zero[n, k / G]) * scale[n, k / G]
 * q and zero are integers 0..15 (one per byte here; backends pack them), scale is f32. This is
 * the dequantization of AWQ (GEMM packing) and of GPTQ (with its stored zeros + 1, or zeros as
 * stored in the v2 format) exactly: a checkpoint's f16 scales are exact in f32 and the products
 * (q - zero) * scale are taken in f32 by the kernels, not rounded to f16 as some PyTorch
 * dequantizers do (the reference, tools/fixtures, dequantizes in float64).
 *
 * --weights int4 quantizes at load by round-to-nearest, per group, asymmetric with a zero point
 * (tp_q4_quantize_group): the 16 levels span [min(0, min w), max(0, max w)], so 0 is a level and
 * every level is used where a symmetric grid would leave one side's half unused; the kernels need
 * a zero point anyway (AWQ and GPTQ have one), and it costs one integer product per group.
 *
 * Kernels sum (q - zero) * x per group exactly in integers where x is rounded to an integer grid
 * (the CPU's int16 x, as the int8 family), then scale the group's sum: the rounding is x's and
 * the f32 sum over groups. Every operation here is spelled out (TP_DIV, TP_MUL): the host
 * quantizes for both backends, and a device quantizer would give the same bits. */
#ifndef TPGEN_TP_QUANT4_H
#define TPGEN_TP_QUANT4_H

#include "kernels/common/tp_hd.h"

#define TP_Q4_LEVELS 15         /* q in 0..15 */
#define TP_Q4_DEFAULT_GROUP 128 /* --weights int4: k per group, as AWQ and GPTQ exports use */
#define TP_Q4_GROUP_ALIGN 32    /* a group size must be a multiple of this (the kernels' k step) */

/* One matrix (or one rank's slice of it) in canonical form, host memory. */
typedef struct {
    const uint8_t *q;     /* [N, K], 0..15 */
    const float *scale;   /* [N, K / group] */
    const uint8_t *zero;  /* [N, K / group], 0..15 */
    int group;            /* G: k per group, divides K, a multiple of TP_Q4_GROUP_ALIGN */
} tp_q4_host;

/* RTN of one group of n weights (file comment): q [n], *scale, *zero. A group of zeros has scale 0
 * and q = zero = 0; a NaN or inf weight makes the scale NaN or inf, so the group's outputs are NaN
 * as the full-precision product would be. */
TP_HD void tp_q4_quantize_group(const float *w, int n, uint8_t *q, float *scale, uint8_t *zero) {
    float mn = 0.0f, mx = 0.0f, bad = 0.0f;
    for (int i = 0; i < n; i++) {
        const float v = w[i];
        bad = TP_ADD(bad, TP_MUL(v, 0.0f)); /* NaN once a NaN or an inf has passed */
        if (v < mn) mn = v;
        if (v > mx) mx = v;
    }
    const float s = bad != bad ? bad : TP_DIV(TP_SUB(mx, mn), (float)TP_Q4_LEVELS);
    *scale = s;
    if (!(s > 0.0f)) { /* zeros, or NaN: q and zero 0, the scale carries it */
        for (int i = 0; i < n; i++) q[i] = 0;
        *zero = 0;
        return;
    }
    float z = rintf(TP_DIV(-mn, s));
    if (z < 0.0f) z = 0.0f;
    if (z > (float)TP_Q4_LEVELS) z = (float)TP_Q4_LEVELS;
    *zero = (uint8_t)z;
    for (int i = 0; i < n; i++) {
        float r = TP_ADD(rintf(TP_DIV(w[i], s)), z);
        if (r < 0.0f) r = 0.0f;
        if (r > (float)TP_Q4_LEVELS) r = (float)TP_Q4_LEVELS;
        q[i] = (uint8_t)r;
    }
}

/* The weight a (q, zero, scale) triple stands for, in f32: (q - zero) * scale, one rounding. */
TP_HD float tp_q4_dequant(int q, int zero, float scale) { return TP_MUL((float)(q - zero), scale); }

/* Bytes one product with an int4 [N, K] matrix reads: the nibbles, a scale (f32) and a zero
 * (one byte) per group, without layout padding (tpgen bench's weight bytes per step). */
TP_HD size_t tp_q4_read_bytes(int64_t N, int64_t K, int64_t group) {
    return (size_t)(N * K / 2 + N * (K / group) * 5);
}

#endif
