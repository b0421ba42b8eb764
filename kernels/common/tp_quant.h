/* int8 weight-only quantization (--weights int8), shared by both backends.
 *
 * Per output channel (one row of an HF Linear weight [N, K]), symmetric: scale = absmax / 127,
 * q = round(w / scale) to nearest even, clamped to [-127, 127] (-128 unused, so the range is
 * symmetric); w is read back as q * scale. A row of zeros (lm_head's vocab padding) has scale 0
 * and q = 0. GEMMs sum q * x and multiply the sum by the row's scale once, so the product is that
 * of the dequantized matrix up to the sum's rounding (f32 on the GPU and in the CPU's panels; the
 * CPU's GEMV sums exactly on x rounded to int16, kernels/cpu/cpu_int8.c). Every operation is spelled out (TP_DIV,
 * TP_MUL): the host quantizes for both backends today, and a device quantizer would give the same
 * bits. Non-finite weights make the row's scale NaN or inf, so its outputs are NaN, as the
 * full-precision product of such a row would be. */
#ifndef TPGEN_TP_QUANT_H
#define TPGEN_TP_QUANT_H

#include "kernels/common/tp_hd.h"
#include "kernels/common/tp_rng.h"

#define TP_Q8_MAX 127

TP_HD float tp_q8_scale(float absmax) { return TP_DIV(absmax, (float)TP_Q8_MAX); }

TP_HD int8_t tp_q8_quantize(float w, float scale) {
    if (!(scale > 0.0f)) return 0; /* zero row (or NaN scale: the row is NaN through its scale) */
    float r = rintf(TP_DIV(w, scale)); /* current rounding mode: nearest even */
    if (r > (float)TP_Q8_MAX) r = (float)TP_Q8_MAX;
    if (r < -(float)TP_Q8_MAX) r = -(float)TP_Q8_MAX;
    return (int8_t)r;
}

TP_HD float tp_q8_dequant(int8_t q, float scale) { return TP_MUL((float)q, scale); }

/* max |w| over n floats (NaN propagates: a NaN row gets a NaN scale). */
TP_HD float tp_q8_absmax(const float *w, int64_t n) {
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float a = fabsf(w[i]);
        if (a > m || a != a) m = a;
        if (m != m) return m;
    }
    return m;
}

/* Row r of a [rows, cols] matrix of random weights, as f32 into tmp [cols]: element (r, c) is
 * the fill_random draw r * cols + c of the f32 backend (kernels/common/tp_rng.h), so
 * --random-weights with --weights int8 runs the quantized f32 model on either backend. */
TP_HD void tp_q8_random_row(float *tmp, uint64_t key, int64_t r, int cols, float mean, float std) {
    const uint64_t i0 = (uint64_t)r * (uint64_t)cols;
    for (int k = 0; k < cols;) {
        const uint64_t i = i0 + (uint64_t)k;
        float x0, x1;
        tp_fill_random_pair(key, i / 2, mean, std, &x0, &x1);
        if (i % 2 == 0) {
            tmp[k++] = x0;
            if (k < cols) tmp[k++] = x1;
        } else tmp[k++] = x1;
    }
}

#endif
