/* CPU ISA tiers shared by every kernel family of the CPU backend (f32, bf16, int8 GEMV/GEMM,
 * attention), and TPGEN_CPU_ISA, the one override that forces them all.
 *
 * Tiers, in order: c (plain C, any CPU) < avx2 (AVX2 + FMA) < avxvnni (AVX2 + AVX-VNNI) <
 * avx512 (AVX-512 F/BW/VL) < amx (AVX-512 + AMX-TILE/AMX-INT8, with Linux's permission for
 * the tile data). A family runs the kernels it has at or below a tier, each needing its own
 * extension too (int8's avx512vnni needs AVX512-VNNI, bf16's avx512bf16 AVX512-BF16); only the
 * int8 GEMM and oneDNN's bf16 GEMMs have an amx kernel, the others run their avx512 one there.
 *
 * Without TPGEN_CPU_ISA each family measures its candidates (every kernel this CPU runs) on the
 * model's shapes at load and keeps the fastest (cpu_tune.h). TPGEN_CPU_ISA=TIER caps every
 * family at TIER, with no measurement: each runs its highest kernel at or below TIER (int8 with
 * avx512 -> avx512vnni; bf16 with avxvnni -> avx2, its highest kernel below). A tier this CPU
 * lacks is refused. The older names avx512bf16 and avx512vnni are read as avx512. */
#ifndef TPGEN_CPU_ISA_H
#define TPGEN_CPU_ISA_H

#include <stddef.h>

typedef enum { CPU_TIER_C = 0, CPU_TIER_AVX2 = 1, CPU_TIER_AVXVNNI = 2, CPU_TIER_AVX512 = 3, CPU_TIER_AMX = 4 } cpu_tier;

/* CPU features the kernels ask for (CPUID, once). */
typedef struct {
    int avx2_fma, avxvnni, avx512, avx512vnni, avx512bf16; /* avx512: F + BW + VL */
    int amx_int8; /* AMX-TILE + AMX-INT8, on top of avx512, and the kernel let this process use tiles */
} cpu_features;
const cpu_features *cpu_features_get(void);

const char *cpu_tier_name(cpu_tier t); /* "c", "avx2", "avxvnni", "avx512", "amx" */
/* The highest tier this CPU runs. */
cpu_tier cpu_tier_best(void);
/* TPGEN_CPU_ISA: 0 and *forced = 0 when unset; 0 and the tier in *tier with *forced = 1 when
 * valid and supported here; -1 with a message naming the variable when not. */
int cpu_tier_forced(cpu_tier *tier, int *forced, char *err, size_t err_size);
/* TPGEN_INT8_ISA, the old int8-only override, is refused (-1, message) when set: one variable
 * forces every family now. */
int cpu_isa_old_env_check(char *err, size_t err_size);

#endif
