/* OpenBLAS's kernel set on a CPU newer than the library (kernels/backend.h,
 * tp_cpu_blas_core_override).
 *
 * A DYNAMIC_ARCH OpenBLAS picks its kernels once, in its library constructor, from CPUID's
 * family and model; a model the library does not know gets its generic "Prescott" kernels (SSE3).
 * Debian 12's OpenBLAS 0.3.21 does not know Intel's family 6 model 207 (Emerald Rapids): there the
 * f32 prefill of CodeGen-350M took 7.4 s against 1.4-1.5 s with OPENBLAS_CORETYPE set (sgemm 35
 * against 185-250 GFLOP/s, 2 threads). So when the core OpenBLAS chose is not one of its AVX2 or
 * AVX-512 cores and the CPU has those instructions, tpgen names the core by the features
 * (tp_blas_core_for) and util/threads.c re-executes the program with OPENBLAS_CORETYPE set. The
 * user's own OPENBLAS_CORETYPE always wins. */
#include <stdlib.h>
#include <strings.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_isa.h"

char *openblas_get_corename(void); /* OpenBLAS (its cblas.h; declared here: one header-independent use) */

const char *tp_blas_core_for(const char *corename, int avx2_fma, int avx512, int avx512bf16) {
    /* OpenBLAS's names (openblas_get_corename) of the cores with AVX2 + FMA kernels or better */
    static const char *const strong[] = {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"};
    if (corename)
        for (size_t i = 0; i < sizeof strong / sizeof *strong; i++)
            if (strcasecmp(corename, strong[i]) == 0) return NULL;
    if (avx512 && avx512bf16) return "COOPERLAKE"; /* AVX-512 kernels with the bf16 ones */
    if (avx512) return "SKYLAKEX";
    if (avx2_fma) return "HASWELL";
    return NULL; /* an older CPU: OpenBLAS's own choice is right */
}

const char *tp_cpu_blas_core_name(void) { return openblas_get_corename(); }

const char *tp_cpu_blas_core_override(void) {
    const char *user = getenv("OPENBLAS_CORETYPE");
    if (user && *user) return NULL;
    const cpu_features *f = cpu_features_get();
    return tp_blas_core_for(openblas_get_corename(), f->avx2_fma, f->avx512, f->avx512bf16);
}
