/* The counter-based generator of fill_random, shared by both backends so a random-weight model
 * (`tpgen bench --random-weights`) holds the same numbers on the CPU and on a GPU, bit for bit
 * before the final rounding to the act dtype.
 *
 * Element i of a fill is a pure function of (seed, i):
 *   key  = splitmix64(seed ^ 0x5eedf11157a7e5)
 *   r    = splitmix64(key + splitmix64(j)), j = i / 2       (one 64-bit draw per pair)
 *   u1   = ((r >> 40) + 1) * 2^-24   in (0, 1]   (top 24 bits; log(u1) is finite)
 *   u2   = (r & 0xffffff) * 2^-24    in [0, 1)   (low 24 bits)
 *   rad  = sqrt(-2 log u1),  z0 = rad cos(2 pi u2) -> element 2j,  z1 = rad sin(2 pi u2) -> 2j+1
 *   x    = mean + std * z
 * All in f32. log and sincos are our own (below), made of correctly rounded operations only
 * (+ - * / sqrt fma, spelled TP_MUL etc. so no compiler fuses them), so the device computes
 * the very same bits as the host; libm's logf/sincosf and CUDA's differ in the last bit. Each
 * is within 1 ulp of the exact function (tests/gpu_math/test_gpu_math.c checks every input u1 and
 * u2 can take). The largest |z| is sqrt(2 * 24 ln 2) = 5.77. */
#ifndef TPGEN_TP_RNG_H
#define TPGEN_TP_RNG_H

#include "kernels/common/tp_hd.h"

TP_HD uint64_t tp_splitmix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

TP_HD uint64_t tp_rng_key(uint64_t seed) { return tp_splitmix64(seed ^ 0x5eedf11157a7e5ull); }

/* The 64 random bits of pair j. */
TP_HD uint64_t tp_rng_bits(uint64_t key, uint64_t j) { return tp_splitmix64(key + tp_splitmix64(j)); }

/* Natural log of a positive normal finite x, < 1 ulp (FreeBSD/musl logf: x = 2^k (1 + f) with
 * 1 + f in [sqrt(2)/2, sqrt(2)), s = f / (2 + f), log(1 + f) = f - hfsq + s (hfsq + R(s^2)),
 * R a degree-4 minimax fit). */
TP_HD float tp_logf_normal(float x) {
    const float ln2_hi = 6.9313812256e-01f, ln2_lo = 9.0580006145e-06f;
    const float Lg1 = 0.66666662693f, Lg2 = 0.40000972152f, Lg3 = 0.28498786688f, Lg4 = 0.24279078841f;
    uint32_t ix = tp_f32_bits(x);
    ix += 0x3f800000u - 0x3f3504f3u;
    const int k = (int)(ix >> 23) - 0x7f;
    ix = (ix & 0x007fffffu) + 0x3f3504f3u;
    const float f = TP_SUB(tp_bits_f32(ix), 1.0f);
    const float s = TP_DIV(f, TP_ADD(2.0f, f));
    const float z = TP_MUL(s, s), w = TP_MUL(z, z);
    const float t1 = TP_MUL(w, TP_ADD(Lg2, TP_MUL(w, Lg4)));
    const float t2 = TP_MUL(z, TP_ADD(Lg1, TP_MUL(w, Lg3)));
    const float R = TP_ADD(t2, t1);
    const float hfsq = TP_MUL(TP_MUL(0.5f, f), f);
    const float dk = (float)k;
    /* s*(hfsq+R) + dk*ln2_lo - hfsq + f + dk*ln2_hi, left to right */
    float r = TP_MUL(s, TP_ADD(hfsq, R));
    r = TP_ADD(r, TP_MUL(dk, ln2_lo));
    r = TP_SUB(r, hfsq);
    r = TP_ADD(r, f);
    return TP_ADD(r, TP_MUL(dk, ln2_hi));
}

/* sin and cos of 2 pi n / 2^24 for n < 2^24, each < 1 ulp. The reduction is exact: the nearest
 * quarter turn q = round(n / 2^22), and x = (n - q 2^22) / 2^22 in [-1/2, 1/2] is exact in f32,
 * so the angle is q pi/2 + x pi/2 with no rounding. sin(pi x/2) = x (pi/2 + z S(z)) and
 * cos(pi x/2) = 1 - (pi^2/8) z + z^2 C(z), z = x^2, with coefficients fitted for f32 (relative
 * error of the polynomials alone < 0.04 ulp). pi/2 and pi^2/8 are carried as hi + lo, and cos
 * adds its large term 1 - (pi^2/8) z as fdlibm's kernel cos does: w = 1 - h rounded, then the
 * exact parts lost by rounding (of w, of h = z pi^2/8 and of z = x^2) go into the small term,
 * so the result is rounded once in effect. */
TP_HD void tp_sincos_2pi_q24(uint32_t n, float *sn, float *cs) {
    const uint32_t qn = (n + (1u << 21)) >> 22; /* 0..4 */
    const int32_t m = (int32_t)n - (int32_t)(qn << 22);
    const float x = TP_MUL((float)m, 0x1p-22f);
    const float z = TP_MUL(x, x), zl = tp_fmaf(x, x, -z); /* x^2 = z + zl exactly */
    const float S3 = -6.459640861e-01f, S5 = 7.969258726e-02f, S7 = -4.681294318e-03f, S9 = 1.582559635e-04f;
    const float C4 = 2.536695004e-01f, C6 = -2.086347342e-02f, C8 = 9.191826102e-04f, C10 = -2.488276732e-05f;
    const float PIO2_HI = 1.570796371e+00f, PIO2_LO = -4.371139006e-08f;
    const float P2O8_HI = 1.233700514e+00f, P2O8_LO = 3.629644851e-08f; /* pi^2/8 */
    float ps = tp_fmaf(S9, z, S7);
    ps = tp_fmaf(ps, z, S5);
    ps = tp_fmaf(ps, z, S3);
    const float s = tp_fmaf(x, PIO2_HI, tp_fmaf(x, PIO2_LO, TP_MUL(TP_MUL(x, z), ps)));
    float pc = tp_fmaf(C10, z, C8);
    pc = tp_fmaf(pc, z, C6);
    pc = tp_fmaf(pc, z, C4);
    const float h = TP_MUL(z, P2O8_HI), hl = tp_fmaf(z, P2O8_HI, -h); /* z * hi = h + hl exactly */
    const float w = TP_SUB(1.0f, h);
    /* small = (1 - w - h) - hl - zl*hi - z*lo + z^2 C(z); the first difference is exact */
    float small = TP_SUB(TP_SUB(1.0f, w), h);
    small = TP_SUB(small, hl);
    small = tp_fmaf(-zl, P2O8_HI, small);
    small = tp_fmaf(-z, P2O8_LO, small);
    small = tp_fmaf(TP_MUL(z, z), pc, small);
    const float c = TP_ADD(w, small);
    switch (qn & 3u) {
    case 0: *sn = s; *cs = c; break;
    case 1: *sn = c; *cs = -s; break;
    case 2: *sn = -s; *cs = -c; break;
    default: *sn = -c; *cs = s; break;
    }
}

/* Two N(0,1) draws from 64 random bits (Box-Muller, f32). */
TP_HD void tp_normal_pair(uint64_t r, float *z0, float *z1) {
    const float u1 = TP_MUL((float)((r >> 40) + 1), 0x1p-24f); /* (0, 1] */
    const float rad = TP_SQRT(TP_MUL(-2.0f, tp_logf_normal(u1)));
    float sn, cs;
    tp_sincos_2pi_q24((uint32_t)(r & 0xffffffu), &sn, &cs);
    *z0 = TP_MUL(rad, cs);
    *z1 = TP_MUL(rad, sn);
}

/* Elements 2j and 2j+1 of a fill: mean + std * z. */
TP_HD void tp_fill_random_pair(uint64_t key, uint64_t j, float mean, float std, float *x0, float *x1) {
    float z0, z1;
    tp_normal_pair(tp_rng_bits(key, j), &z0, &z1);
    *x0 = TP_ADD(mean, TP_MUL(std, z0));
    *x1 = TP_ADD(mean, TP_MUL(std, z1));
}

#endif
