/* The int4 CPU backend's own functions (cpu_int4.c) for tests and --verbose. The kernels, the
 * packed layout and the arithmetic they share are cpu_int4_kernels.h. */
#ifndef TPGEN_CPU_INT4_H
#define TPGEN_CPU_INT4_H

struct tp_backend;
/* The tier an int4 product of a [N, K] matrix in groups of `group` takes at T tokens ("c", "avx2",
 * "avxvnni", "avx512vnni", "amx"), and in *how why (measured, cached, forced by TPGEN_CPU_ISA,
 * the highest tier): what cpu_int4.c's matmul would run. NULL when b is not an int4 backend. */
const char *cpu_int4_choice(struct tp_backend *b, int N, int K, int group, int T, const char **how);

#endif
