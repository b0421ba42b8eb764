/* The int8 CPU backend's own functions (cpu_int8.c): x's rounding to int16 and the GEMV choice.
 * The kernels it calls, and the panel layout and epilogue they share, are cpu_int8_kernels.h. */
#ifndef TPGEN_CPU_INT8_H
#define TPGEN_CPU_INT8_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/cpu_int8_kernels.h"

/* xq [T, K] int16 and sx [T]: each token's x rounded on a grid of its own (rows split across
 * n_threads). */
void cpu_int8_quantize_x(int16_t *xq, float *sx, const float *x, int T, int K, int n_threads);

/* cpu_int8.c: the GEMV kernel the backend chose for a [N, K] matrix ("c", "avx2", "avxvnni",
 * "avx512vnni"; amx has no GEMV) and how (measured, cached, forced by TPGEN_CPU_ISA, or the only one / below the
 * measured size): for tests and --verbose. NULL when b is not an int8 backend. */
struct tp_backend;
const char *cpu_int8_gemv_choice(struct tp_backend *b, int N, int K, const char **how);

#endif
