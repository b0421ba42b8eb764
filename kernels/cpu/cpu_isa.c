/* CPU ISA tiers and TPGEN_CPU_ISA (cpu_isa.h). */
#include "kernels/cpu/cpu_isa.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cpu_features detect(void) {
    cpu_features f = {0};
#if defined(__x86_64__)
    __builtin_cpu_init();
    f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    /* AVX-VNNI: CPUID leaf 7, subleaf 1, EAX bit 4 (read directly: clang 14's
     * __builtin_cpu_supports does not know "avxvnni"); the OS state is AVX2's */
    unsigned a = 0, bx = 0, cx = 0, dx = 0;
    f.avxvnni = f.avx2_fma && __get_cpuid_count(7, 1, &a, &bx, &cx, &dx) && (a >> 4 & 1);
    f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && f.avx2_fma;
    f.avx512vnni = f.avx512 && __builtin_cpu_supports("avx512vnni");
    f.avx512bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
    /* AMX: CPUID leaf 7 EDX bits 24 (AMX-TILE) and 25 (AMX-INT8); Linux (>= 5.16) gives a
     * process the tile data only when asked (arch_prctl ARCH_REQ_XCOMP_PERM, XTILEDATA = 18):
     * without that a tile instruction faults. Asked once here, for every thread to come. */
    a = bx = cx = dx = 0;
    const int amx_cpu = f.avx512 && __get_cpuid_count(7, 0, &a, &bx, &cx, &dx) && (dx >> 24 & 1) && (dx >> 25 & 1);
#if defined(SYS_arch_prctl)
    f.amx_int8 = amx_cpu && syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18) == 0;
#else
    (void)amx_cpu;
#endif
#endif
    return f;
}

const cpu_features *cpu_features_get(void) {
    static cpu_features f;
    static int done; /* the same answer from every thread: a benign race */
    if (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
        f = detect();
        __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
    }
    return &f;
}

const char *cpu_tier_name(cpu_tier t) {
    static const char *const names[] = {"c", "avx2", "avxvnni", "avx512", "amx"};
    return t >= CPU_TIER_C && t <= CPU_TIER_AMX ? names[t] : "?";
}

cpu_tier cpu_tier_best(void) {
    const cpu_features *f = cpu_features_get();
    return f->amx_int8   ? CPU_TIER_AMX
           : f->avx512   ? CPU_TIER_AVX512
           : f->avxvnni  ? CPU_TIER_AVXVNNI
           : f->avx2_fma ? CPU_TIER_AVX2
                         : CPU_TIER_C;
}

int cpu_tier_forced(cpu_tier *tier, int *forced, char *err, size_t err_size) {
    *forced = 0;
    *tier = cpu_tier_best();
    const char *e = getenv("TPGEN_CPU_ISA");
    if (!e || !*e) return 0;
    cpu_tier want;
    if (strcmp(e, "c") == 0) want = CPU_TIER_C;
    else if (strcmp(e, "amx") == 0) want = CPU_TIER_AMX;
    else if (strcmp(e, "avx2") == 0) want = CPU_TIER_AVX2;
    else if (strcmp(e, "avxvnni") == 0) want = CPU_TIER_AVXVNNI;
    else if (strcmp(e, "avx512") == 0 || strcmp(e, "avx512bf16") == 0 || strcmp(e, "avx512vnni") == 0)
        want = CPU_TIER_AVX512;
    else {
        snprintf(err, err_size, "TPGEN_CPU_ISA=%s: expected amx, avx512, avxvnni, avx2 or c (avx512bf16 and "
                                "avx512vnni also mean avx512)", e);
        return -1;
    }
    const cpu_features *f = cpu_features_get();
    const int have = want == CPU_TIER_C || (want == CPU_TIER_AVX2 && f->avx2_fma) ||
                     (want == CPU_TIER_AVXVNNI && f->avxvnni) || (want == CPU_TIER_AVX512 && f->avx512) ||
                     (want == CPU_TIER_AMX && f->amx_int8);
    if (!have) {
        snprintf(err, err_size, "TPGEN_CPU_ISA=%s: this CPU does not support it (best here: %s)", e,
                 cpu_tier_name(cpu_tier_best()));
        return -1;
    }
    *tier = want;
    *forced = 1;
    return 0;
}

int cpu_isa_old_env_check(char *err, size_t err_size) {
    const char *e = getenv("TPGEN_INT8_ISA");
    if (!e || !*e) return 0;
    snprintf(err, err_size, "TPGEN_INT8_ISA=%s: this variable is gone; TPGEN_CPU_ISA=amx|avx512|avxvnni|avx2|c now forces "
                            "the kernels of every op family, int8 included (unset TPGEN_INT8_ISA)", e);
    return -1;
}
