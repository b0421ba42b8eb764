/* tp_blas_core_for (kernels/cpu/cpu_blas_core.c): the OPENBLAS_CORETYPE tpgen sets when OpenBLAS
 * took a generic core for a CPU it does not know, by the CPU's features; nothing when OpenBLAS
 * already runs AVX2 or AVX-512 kernels or the CPU has neither. */
#include <stdio.h>
#include <string.h>

#include "kernels/backend.h"

static int fails;
static void expect(const char *core, int avx2, int avx512, int bf16, const char *want) {
    const char *got = tp_blas_core_for(core, avx2, avx512, bf16);
    const int ok = (!got && !want) || (got && want && strcmp(got, want) == 0);
    printf("%s: OpenBLAS %s, avx2 %d avx512 %d avx512_bf16 %d -> %s\n", ok ? "ok" : "FAIL", core ? core : "(null)", avx2,
           avx512, bf16, got ? got : "(keep)");
    fails += !ok;
}

int main(void) {
    expect("Prescott", 1, 1, 1, "COOPERLAKE"); /* Emerald Rapids under OpenBLAS 0.3.21 */
    expect("Prescott", 1, 1, 0, "SKYLAKEX");
    expect("Prescott", 1, 0, 0, "HASWELL");
    expect("Sandybridge", 1, 0, 0, "HASWELL");
    expect("Prescott", 0, 0, 0, NULL); /* an old CPU: the library is right */
    expect(NULL, 1, 1, 0, "SKYLAKEX");
    expect("Haswell", 1, 1, 1, NULL); /* OpenBLAS's AVX2 and AVX-512 cores: kept */
    expect("Zen", 1, 1, 1, NULL);
    expect("SkylakeX", 1, 1, 1, NULL);
    expect("COOPERLAKE", 1, 1, 1, NULL);
    expect("SapphireRapids", 1, 1, 1, NULL);
    if (fails) printf("%d checks failed\n", fails);
    return fails ? 1 : 0;
}
