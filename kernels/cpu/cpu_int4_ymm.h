/* The ymm int4 tiles, included by cpu_int4_avx2.c once per tier with
 *   Y_SFX     the tier's name in function names (avx2, avxvnni)
 *   Y_TARGET  its target attribute string
 *   Y_DP(a, x, w)  a + the pair products of x and w (int32 lanes, exact)
 *   Y_DPB(a, w, x) a + the 4 products a lane of w's unsigned bytes and x's signed bytes (exact
 *                  where each pair of products fits int16: vpmaddubsw saturates)
 * cpu_int4_avx512.c's scheme on 8-row halves: a 64-byte line is two ymm of 16 words, rows 0-7
 * and 8-15 of the panel; (w >> 4 i) & 15 is k pair 4 s + i of those rows. Tiles: MT tokens x one
 * panel (2 halves), int32 lanes split in S chains by nibble index at small MT (16 registers); the
 * lines prefetched as the zmm tiles' (cpu_int4_kernels.h). */
#define Y_CAT2(a, b) a##b
#define Y_CAT(a, b) Y_CAT2(a, b)
#define Y_NAME(n) Y_CAT(n, Y_SFX)

/* o[t][8 h + r] = the f32 sums (acc, before sx) of token t0 + t, row 8 h + r of the panel p0. */
static inline __attribute__((always_inline, target(Y_TARGET))) void Y_NAME(ytile_)(
    const cpu_i4_x *x, const uint8_t *p0, int t0, const int MT, const int S, float o[YMR][NR]) {
    const int K = x->K, KG = x->KG, ng = K / KG, steps = KG / 8;
    const int16_t *xr = x->xq + (size_t)t0 * K;
    const int32_t *xs = x->xsum + (size_t)t0 * ng;
    const __m256i m4 = _mm256_set1_epi16(15);
    const float *sc = cpu_i4_scales(p0, K);
    const uint8_t *zp = cpu_i4_zeros(p0, K, KG);
    __m256 f[YMR][2];
    YUNROLL for (int t = 0; t < MT; t++) YUNROLL for (int h = 0; h < 2; h++) f[t][h] = _mm256_setzero_ps();
    for (int g = 0; g < ng; g++) {
        __m256i a[4][YMR][2];
        YUNROLL for (int c = 0; c < S; c++) YUNROLL for (int t = 0; t < MT; t++) YUNROLL for (int h = 0; h < 2; h++)
            a[c][t][h] = _mm256_setzero_si256();
        const uint8_t *line = p0 + (size_t)g * KG * 8;
        const long pg = (long)g * KG / 2;
        for (int s = 0; s < steps; s++, line += 64) {
            cpu_i4_prefetch(line, MT, CPU_I4_PF);
            __m256i raw[2];
            YUNROLL for (int h = 0; h < 2; h++) raw[h] = _mm256_load_si256((const __m256i *)(line + 32 * h));
            YUNROLL for (int i = 0; i < 4; i++) {
                __m256i w[2];
                YUNROLL for (int h = 0; h < 2; h++) w[h] = i == 3 ? _mm256_srli_epi16(raw[h], 12)
                                                          : i == 0 ? _mm256_and_si256(raw[h], m4)
                                                                   : _mm256_and_si256(_mm256_srli_epi16(raw[h], 4 * i), m4);
                YUNROLL for (int t = 0; t < MT; t++) {
                    int32_t pr;
                    memcpy(&pr, xr + (size_t)t * K + 2 * (pg + 4 * s + i), sizeof pr);
                    const __m256i xv = _mm256_set1_epi32(pr);
                    YUNROLL for (int h = 0; h < 2; h++) a[i % S][t][h] = Y_DP(a[i % S][t][h], xv, w[h]);
                }
            }
        }
        YUNROLL for (int h = 0; h < 2; h++) {
            const __m256i z = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(zp + g * NR + 8 * h)));
            const __m256 scv = _mm256_load_ps(sc + g * NR + 8 * h);
            YUNROLL for (int t = 0; t < MT; t++) {
                __m256i v = a[0][t][h];
                YUNROLL for (int c = 1; c < S; c++) v = _mm256_add_epi32(v, a[c][t][h]);
                v = _mm256_sub_epi32(v, _mm256_mullo_epi32(z, _mm256_set1_epi32(xs[(size_t)t * ng + g])));
                f[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), scv, f[t][h]);
            }
        }
    }
    YUNROLL for (int t = 0; t < MT; t++) YUNROLL for (int h = 0; h < 2; h++) _mm256_storeu_ps(o[t] + 8 * h, f[t][h]);
}

/* 8-bit x (x->gx; cpu_int4_kernels.h): cpu_int4_avx512.c's A8 scheme on ymm halves: a half-line's
 * nibbles masked to bytes (k 8 s + {0, 4, 1, 5} a lane, then {2, 6, 3, 7}: x's lo plane order),
 * Y_DPB against x's 4 bytes broadcast: 4 a line and token where 16-bit x takes 8 Y_DP. The high
 * nibbles are shifted (16 q x 127 x 2 would saturate vpmaddubsw's int16). A function apart from
 * ytile_: the two as one with a compile-time flag (as cpu_int4_avx512.c's ztile) ran both forms
 * 15-20% slower on avx2 (`TPGEN_CPU_ISA=avx2 bench_int4_gemm 2 1024 128 20 wall`, T = 1, two
 * alternating runs each, Zen 5, 2026-12-07), where the zmm merge cost nothing. */
static inline __attribute__((always_inline, target(Y_TARGET))) void Y_NAME(ytile8_)(
    const cpu_i4_x *x, const uint8_t *p0, int t0, const int MT, const int S, float o[YMR][NR]) {
    const int K = x->K, KG = x->KG, ng = K / KG, steps = KG / 8;
    const int8_t *xl = x->xlo + (size_t)t0 * K;
    const int32_t *xs = x->xsum + (size_t)t0 * ng;
    const float *gx = x->gx + (size_t)t0 * ng;
    const __m256i m4 = _mm256_set1_epi8(15);
    const float *sc = cpu_i4_scales(p0, K);
    const uint8_t *zp = cpu_i4_zeros(p0, K, KG);
    __m256 f[YMR][2];
    YUNROLL for (int t = 0; t < MT; t++) YUNROLL for (int h = 0; h < 2; h++) f[t][h] = _mm256_setzero_ps();
    for (int g = 0; g < ng; g++) {
        __m256i a[2][YMR][2]; /* [nibble half chain][token][row half] */
        YUNROLL for (int c = 0; c < S; c++) YUNROLL for (int t = 0; t < MT; t++) YUNROLL for (int h = 0; h < 2; h++)
            a[c][t][h] = _mm256_setzero_si256();
        const uint8_t *line = p0 + (size_t)g * KG * 8;
        const size_t kg = (size_t)g * KG;
        for (int s = 0; s < steps; s++, line += 64) {
            cpu_i4_prefetch(line, MT, CPU_I4_PF);
            __m256i w[2][2]; /* [nibble half][row half] */
            YUNROLL for (int h = 0; h < 2; h++) {
                const __m256i raw = _mm256_load_si256((const __m256i *)(line + 32 * h));
                w[0][h] = _mm256_and_si256(raw, m4);
                w[1][h] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            }
            YUNROLL for (int t = 0; t < MT; t++) YUNROLL for (int c = 0; c < 2; c++) {
                int32_t quad;
                memcpy(&quad, xl + (size_t)t * K + kg + 8 * (size_t)s + 4 * c, sizeof quad);
                const __m256i xv = _mm256_set1_epi32(quad);
                YUNROLL for (int h = 0; h < 2; h++) a[c % S][t][h] = Y_DPB(a[c % S][t][h], w[c][h], xv);
            }
        }
        YUNROLL for (int h = 0; h < 2; h++) {
            const __m256i z = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(zp + g * NR + 8 * h)));
            const __m256 scv = _mm256_load_ps(sc + g * NR + 8 * h);
            YUNROLL for (int t = 0; t < MT; t++) {
                __m256i v = a[0][t][h];
                if (S == 2) v = _mm256_add_epi32(v, a[1][t][h]);
                v = _mm256_sub_epi32(v, _mm256_mullo_epi32(z, _mm256_set1_epi32(xs[(size_t)t * ng + g])));
                const __m256 c = _mm256_mul_ps(scv, _mm256_set1_ps(gx[(size_t)t * ng + g])); /* scale * gx, rounded */
                f[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), c, f[t][h]);
            }
        }
    }
    YUNROLL for (int t = 0; t < MT; t++) YUNROLL for (int h = 0; h < 2; h++) _mm256_storeu_ps(o[t] + 8 * h, f[t][h]);
}

#define Y_TILE(M, S)                                                                                                   \
    __attribute__((target(Y_TARGET), noinline)) static void Y_CAT(Y_NAME(ytile_), _##M)(                              \
        const cpu_i4_x *x, const uint8_t *p0, int t0, float o[YMR][NR]) {                                              \
        Y_NAME(ytile_)(x, p0, t0, M, S, o);                                                                            \
    }
Y_TILE(1, 4) Y_TILE(2, 2) Y_TILE(3, 1) Y_TILE(4, 1)
#undef Y_TILE
#define Y_TILE8(M, S)                                                                                                  \
    __attribute__((target(Y_TARGET), noinline)) static void Y_CAT(Y_NAME(ytile8_), _##M)(                             \
        const cpu_i4_x *x, const uint8_t *p0, int t0, float o[YMR][NR]) {                                              \
        Y_NAME(ytile8_)(x, p0, t0, M, S, o);                                                                           \
    }
Y_TILE8(1, 2) Y_TILE8(2, 2) Y_TILE8(3, 1) Y_TILE8(4, 1)
#undef Y_TILE8
static ytile_fn *const Y_NAME(g_ytiles_)[2][YMR + 1] = {
    {NULL, Y_CAT(Y_NAME(ytile_), _1), Y_CAT(Y_NAME(ytile_), _2), Y_CAT(Y_NAME(ytile_), _3), Y_CAT(Y_NAME(ytile_), _4)},
    {NULL, Y_CAT(Y_NAME(ytile8_), _1), Y_CAT(Y_NAME(ytile8_), _2), Y_CAT(Y_NAME(ytile8_), _3),
     Y_CAT(Y_NAME(ytile8_), _4)}};

void Y_CAT(cpu_int4_gemv_, Y_SFX)(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                                  const cpu_i4_epi *e) {
    ypanels(Y_NAME(g_ytiles_)[x->gx != NULL], x, q, N, P0, P1, t0, t1, e, 2);
}
void Y_CAT(cpu_int4_gemm_, Y_SFX)(const cpu_i4_x *x, const uint8_t *q, int N, int P0, int P1, int t0, int t1,
                                  const cpu_i4_epi *e) {
    ypanels(Y_NAME(g_ytiles_)[x->gx != NULL], x, q, N, P0, P1, t0, t1, e, YMR);
}
