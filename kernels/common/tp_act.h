/* The activations shared by both backends: gelu_new (CodeGen) and silu (LLaMA's gated MLP).
 *
 * gelu_new (HF NewGELUActivation):
 *   gelu_new(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
 * computed through the identity 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)): one exp instead of
 * tanh, and no cancellation in 1 + tanh(u) for negative x, where the tanh form in f32 loses most
 * digits. Every operation is spelled out (TP_MUL etc.), the exp included (tp_expf), so the two
 * backends compute the same bits, and a CPU loop of it vectorizes (the C library's expf is a
 * call per element: GELU was 9% of a bf16 prefill, perf). Edge values: NaN -> NaN, +inf -> +inf,
 * -inf -> NaN (-inf * 0, as HF's tanh form gives), large negative x -> -0. */
#ifndef TPGEN_TP_ACT_H
#define TPGEN_TP_ACT_H

#include "kernels/common/tp_hd.h"

/* c ? a : b as bits, no branch (a ternary here is a branch after gcc's PRE: no vector loop). */
TP_HD float tp_select_f32(int c, float a, float b) {
    const uint32_t m = 0u - (uint32_t)(c != 0);
    return tp_bits_f32((tp_f32_bits(a) & m) | (tp_f32_bits(b) & ~m));
}

/* exp(x) in f32 operations only (within 1.05 ulp of exp in double: 1.042 at worst over all 2^32
 * inputs, subnormal results on their own grid; 0 / +inf past the ends; NaN -> NaN; tests/gpu_math):
 *  - x = n ln2 + r, |r| <= ln2 / 2: n = round(x log2 e) by adding 1.5 * 2^23 (the sum's low bits
 *    are n), r = (x - n c1) - n c2, Cody-Waite: c1 = 355/512 has 9 bits, so n c1 is exact for the
 *    |n| <= 246 left after the clamp, and c1 + c2 = ln2 to ~1e-11;
 *  - exp(r) = 1 + r + r^2 (1/2 + r/6 + ... + r^5/5040): Taylor to degree 7, whose remainder
 *    r^8 / 8! is under 0.1 ulp on |r| <= ln2 / 2;
 *  - times 2^n as two normal powers of two, 2^h 2^(n - h) with h = floor(n / 2), so that the products
 *    themselves overflow to +inf and round into the subnormals (once) as exp does.
 * x is clamped to [-170, 170] first (exp is 0 and +inf well before either end); a NaN passes
 * the clamp and stays NaN. No branches: a CPU loop of it is a vector loop. */
TP_HD float tp_expf(float x) {
    x = tp_select_f32(x < -170.0f, -170.0f, x);
    x = tp_select_f32(x > 170.0f, 170.0f, x);
    const float shift = 12582912.0f; /* 1.5 * 2^23: x log2e + shift rounds to an integer (nearest even) */
    const float kf = TP_ADD(TP_MUL(x, 1.44269504088896341f), shift);
    const float n = TP_SUB(kf, shift);
    const int32_t ni = (int32_t)(tp_f32_bits(kf) - tp_f32_bits(shift)); /* n as an integer, |n| <= 246 */
    const float r = TP_SUB(TP_SUB(x, TP_MUL(n, 0.693359375f)), TP_MUL(n, -2.12194440e-4f));
    float p = 1.0f / 5040.0f;
    p = TP_ADD(TP_MUL(p, r), 1.0f / 720.0f);
    p = TP_ADD(TP_MUL(p, r), 1.0f / 120.0f);
    p = TP_ADD(TP_MUL(p, r), 1.0f / 24.0f);
    p = TP_ADD(TP_MUL(p, r), 1.0f / 6.0f);
    p = TP_ADD(TP_MUL(p, r), 0.5f);
    p = TP_ADD(TP_ADD(TP_MUL(TP_MUL(p, r), r), r), 1.0f);
    const int32_t h = ni >> 1; /* floor(n / 2): arithmetic shift (gcc, clang, nvcc) */
    const float s1 = tp_bits_f32((uint32_t)(h + 127) << 23), s2 = tp_bits_f32((uint32_t)(ni - h + 127) << 23);
    return TP_MUL(TP_MUL(p, s1), s2);
}

TP_HD float tp_gelu_new(float a) {
    const float c2 = -2.0f * 0.7978845608028654f; /* -2 sqrt(2/pi), folded by the compiler */
    const float a3 = TP_MUL(TP_MUL(TP_MUL(0.044715f, a), a), a);
    const float e = tp_expf(TP_MUL(c2, TP_ADD(a, a3)));
    return TP_DIV(a, TP_ADD(1.0f, e));
}

/* SiLU (HF LLaMA's hidden_act "silu"): silu(z) = z / (1 + exp(-z)), torch's formula, with tp_expf.
 * Within ~2 ulp of the exact value (exp's 1.05 ulp shrunk by e / (1 + e), the sum and the division's
 * half ulps; tests/gpu_math). Edge values: NaN -> NaN, +inf -> +inf, -inf -> NaN (-inf / inf, as
 * torch's formula gives), z below ~-88 -> -0 (exp(-z) overflows; the exact value is under
 * 88 e^-88 ~ 5e-37 in magnitude). */
TP_HD float tp_silu(float z) { return TP_DIV(z, TP_ADD(1.0f, tp_expf(-z))); }

/* The gated MLP's activation, one element: silu(gate) * up in f32 (LLaMA: act_fn(gate_proj(x)) *
 * up_proj(x)), rounded once to the act dtype by the caller. */
TP_HD float tp_silu_mul(float gate, float up) { return TP_MUL(tp_silu(gate), up); }

#endif
