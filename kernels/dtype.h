/* Element types of weights and activations, and host-side conversions between them.
 * fp16 and bf16 are stored as uint16_t bit patterns; conversions round to nearest even,
 * as torch does, and keep NaN/inf (kernels/common/tp_round.h, shared with the CUDA backend). */
#ifndef TPGEN_DTYPE_H
#define TPGEN_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/common/tp_round.h" /* tp_f32_to_f16 / bf16 and back: one rounding for both backends */

typedef enum { TP_F32 = 0, TP_F16 = 1, TP_BF16 = 2 } tp_dtype;

static inline size_t tp_dtype_size(tp_dtype t) { return t == TP_F32 ? 4 : 2; }
static inline const char *tp_dtype_name(tp_dtype t) {
    return t == TP_F32 ? "F32" : t == TP_F16 ? "F16" : "BF16";
}
/* As the command line spells it (--dtype, --kv-cache-dtype). */
static inline const char *tp_dtype_flag(tp_dtype t) { return t == TP_F32 ? "f32" : t == TP_F16 ? "f16" : "bf16"; }

/* Element i of a 16-bit / 32-bit array that may sit at any byte offset: a tensor of a .bin or
 * .safetensors file starts wherever its record does, odd offsets included, and a misaligned
 * uint16_t* dereference is undefined behaviour. memcpy of 2 or 4 bytes compiles to one load. */
static inline uint16_t tp_load_u16(const void *p, size_t i) {
    uint16_t v;
    memcpy(&v, (const unsigned char *)p + 2 * i, 2);
    return v;
}
static inline float tp_load_f32(const void *p, size_t i) {
    float v;
    memcpy(&v, (const unsigned char *)p + 4 * i, 4);
    return v;
}

/* n elements of src (type st, any alignment) to f32 dst. */
static inline void tp_convert_to_f32(float *dst, const void *src, tp_dtype st, size_t n) {
    if (st == TP_F32) { memcpy(dst, src, n * 4); return; }
    if (st == TP_BF16) for (size_t i = 0; i < n; i++) dst[i] = tp_bf16_to_f32(tp_load_u16(src, i));
    else for (size_t i = 0; i < n; i++) dst[i] = tp_f16_to_f32(tp_load_u16(src, i));
}

static inline void tp_convert_from_f32(void *dst, tp_dtype dt, const float *src, size_t n) {
    if (dt == TP_F32) { memcpy(dst, src, n * 4); return; }
    uint16_t *d = (uint16_t *)dst;
    if (dt == TP_BF16) for (size_t i = 0; i < n; i++) d[i] = tp_f32_to_bf16(src[i]);
    else for (size_t i = 0; i < n; i++) d[i] = tp_f32_to_f16(src[i]);
}

#endif
