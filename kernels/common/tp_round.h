/* f32 <-> F16 / BF16, shared by both backends (and the host conversions of kernels/dtype.h).
 * Rounding is to nearest, ties to even, as torch and the CUDA _rn intrinsics do.
 *  - NaN stays NaN with its sign: F16 0x7e00 (quiet, payload dropped); BF16 keeps the top
 *    payload bits and sets the quiet bit (0x0040), so a signalling NaN never turns into inf.
 *  - Overflow: F16 values of magnitude >= 65520 (the midpoint above 65504) become inf; BF16
 *    rounds to inf past 0x7f7f8000.
 *  - Subnormals: F16 rounds f32 values below 2^-14 onto its subnormal grid (2^-24 steps), ties
 *    to even; below 2^-25 (half the smallest subnormal) to a signed zero. BF16 keeps f32's
 *    subnormals (same exponent range), rounded like normals.
 * The device uses these functions too (not __float2half_rn), so NaN bit patterns agree across
 * backends, not just values. */
#ifndef TPGEN_TP_ROUND_H
#define TPGEN_TP_ROUND_H

#include "kernels/common/tp_hd.h"

TP_HD float tp_bf16_to_f32(uint16_t h) { return tp_bits_f32((uint32_t)h << 16); }

TP_HD uint16_t tp_f32_to_bf16(float f) {
    uint32_t u = tp_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

TP_HD float tp_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) u = sign;
        else { /* subnormal: normalize */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            u = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) u = sign | 0x7f800000u | (man << 13);
    else u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    return tp_bits_f32(u);
}

TP_HD uint16_t tp_f32_to_f16(float f) {
    const uint32_t u = tp_f32_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00);      /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);     /* overflow -> inf */
    if (a < 0x38800000u) {                                      /* subnormal or zero */
        if (a < 0x33000000u) return (uint16_t)sign;             /* <= 2^-25 ties to even zero */
        const uint32_t man = (a & 0x7fffff) | 0x800000, shift = 126 - (a >> 23); /* 14..24 */
        uint32_t r = man >> shift;
        const uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((a - 0x38000000u) >> 13);
    const uint32_t rem = a & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
    return (uint16_t)(sign | r);
}

#endif
