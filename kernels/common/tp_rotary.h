/* Rotary position embedding, shared by both backends (the two pair styles: kernels/backend.h,
 * tp_attn_shape).
 *   inv_freq[i] = 1 / theta^((2i) / R) (theta 10000 for CodeGen), in f32, on the host (both backends build the table
 *                 there with tp_rope_inv_freq, so it is the same table bit for bit)
 *   angle       = (float)pos * inv_freq[i], one f32 multiply (HF's order: at pos 2000 one ulp
 *                 of the angle is 1e-4 rad, so it matters for parity)
 *   a' = a cos - b sin,   b' = b cos + a sin   for each pair (a, b) of the style:
 *   GPT-J (a, b) = (x[2i], x[2i+1]);  NeoX/LLaMA (a, b) = (x[i], x[i + R/2]) (HF's
 *   q cos + rotate_half(q) sin, the same two products and one sum)
 * sin and cos of the angle: sinf/cosf of the C library on the CPU (< 1 ulp), CUDA's accurate
 * sincosf on the device (<= 2 ulp, CUDA's documented bound). */
#ifndef TPGEN_TP_ROTARY_H
#define TPGEN_TP_ROTARY_H

#include "kernels/common/tp_hd.h"

/* Host only (powf differs between the C library and CUDA; the table is made once per call). */
static inline float tp_rope_inv_freq(int i, int R, float theta) { return 1.0f / powf(theta, (float)(2 * i) / (float)R); }

TP_HD float tp_rope_angle(int pos, float inv_freq) { return TP_MUL((float)pos, inv_freq); }

TP_HD void tp_rope_sincos(float angle, float *sn, float *cs) {
#if defined(__CUDA_ARCH__)
    sincosf(angle, sn, cs);
#else
    *sn = sinf(angle);
    *cs = cosf(angle);
#endif
}

/* Rotates the pair (x0, x1) by the angle with cosine cs and sine sn. */
TP_HD void tp_rope_rotate(float *x0, float *x1, float cs, float sn) {
    const float a = *x0, b = *x1;
    *x0 = TP_SUB(TP_MUL(a, cs), TP_MUL(b, sn));
    *x1 = TP_ADD(TP_MUL(b, cs), TP_MUL(a, sn));
}

/* The pair i < R/2 of a head in the style: offsets of a and b in the head. */
TP_HD int tp_rope_pair_a(int style, int i) { return style ? i : 2 * i; }
TP_HD int tp_rope_pair_b(int style, int i, int R) { return style ? i + R / 2 : 2 * i + 1; }

#endif
