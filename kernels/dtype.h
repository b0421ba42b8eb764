/* Element types of weights and activations, and host-side conversions between them.
 * fp16 and bf16 are stored as uint16_t bit patterns; conversions round to nearest even,
 * as torch does, and keep NaN/inf. */
#ifndef TPGEN_DTYPE_H
#define TPGEN_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum { TP_F32 = 0, TP_F16 = 1, TP_BF16 = 2 } tp_dtype;

static inline size_t tp_dtype_size(tp_dtype t) { return t == TP_F32 ? 4 : 2; }
static inline const char *tp_dtype_name(tp_dtype t) {
    return t == TP_F32 ? "F32" : t == TP_F16 ? "F16" : "BF16";
}

static inline float tp_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t tp_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float tp_f16_to_f32(uint16_t h) {
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
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t tp_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00);      /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);     /* overflow -> inf */
    if (a < 0x38800000u) {                                      /* subnormal or zero */
        if (a < 0x33000000u) return (uint16_t)sign;
        uint32_t man = (a & 0x7fffff) | 0x800000, shift = 126 - (a >> 23); /* 14..24 */
        uint32_t r = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((a - 0x38000000u) >> 13);
    uint32_t rem = a & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
    return (uint16_t)(sign | r);
}

/* n elements of src (type st) to f32 dst. */
static inline void tp_convert_to_f32(float *dst, const void *src, tp_dtype st, size_t n) {
    if (st == TP_F32) { memcpy(dst, src, n * 4); return; }
    const uint16_t *s = (const uint16_t *)src;
    if (st == TP_BF16) for (size_t i = 0; i < n; i++) dst[i] = tp_bf16_to_f32(s[i]);
    else for (size_t i = 0; i < n; i++) dst[i] = tp_f16_to_f32(s[i]);
}

static inline void tp_convert_from_f32(void *dst, tp_dtype dt, const float *src, size_t n) {
    if (dt == TP_F32) { memcpy(dst, src, n * 4); return; }
    uint16_t *d = (uint16_t *)dst;
    if (dt == TP_BF16) for (size_t i = 0; i < n; i++) d[i] = tp_f32_to_bf16(src[i]);
    else for (size_t i = 0; i < n; i++) d[i] = tp_f32_to_f16(src[i]);
}

#endif
