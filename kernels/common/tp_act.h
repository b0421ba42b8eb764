/* gelu_new (HF NewGELUActivation), shared by both backends:
 *   gelu_new(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
 * computed through the identity 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)): one exp instead of
 * tanh, and no cancellation in 1 + tanh(u) for negative x, where the tanh form in f32 loses most
 * digits. Every operation is spelled out (TP_MUL etc.), so the only difference between the
 * backends is the exp itself: the C library's expf (< 1 ulp) on the CPU, CUDA's expf (<= 2 ulp,
 * CUDA's documented bound) on the device. Edge values: NaN -> NaN, +inf -> +inf, -inf -> NaN
 * (-inf * 0, as HF's tanh form gives), large negative x -> -0. */
#ifndef TPGEN_TP_ACT_H
#define TPGEN_TP_ACT_H

#include "kernels/common/tp_hd.h"

TP_HD float tp_expf(float x) { return expf(x); }

TP_HD float tp_gelu_new(float a) {
    const float c2 = -2.0f * 0.7978845608028654f; /* -2 sqrt(2/pi), folded by the compiler */
    const float a3 = TP_MUL(TP_MUL(TP_MUL(0.044715f, a), a), a);
    const float e = tp_expf(TP_MUL(c2, TP_ADD(a, a3)));
    return TP_DIV(a, TP_ADD(1.0f, e));
}

#endif
