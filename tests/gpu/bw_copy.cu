/* Device-to-device copy bandwidth: cudaMemcpy of 1 GiB (DeviceToDevice), median of 10 timed
 * copies after one warm-up, timed with CUDA events. Reported the STREAM way, bytes read + bytes
 * written per second, which is also how `tpgen bench` counts its copy floor; a decode step only
 * reads its weights, so its GB/s compare with this number (the card's achievable bandwidth).
 * usage: bw_copy [--json] [MiB]      exits 77 when no GPU is visible */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(call)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "bw_copy: CUDA error at %s:%d: %s: %s\n", __FILE__, __LINE__, #call,  \
                    cudaGetErrorString(e_));                                                      \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int json = 0;
    size_t mib = 1024;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else mib = (size_t)strtoull(argv[i], NULL, 10);
    }
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("SKIPPED: no CUDA GPU is visible\n");
        return 77;
    }
    const size_t bytes = mib << 20;
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 1, bytes));
    CK(cudaMemset(b, 0, bytes));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice)); /* warm-up */
    float ms[10];
    for (int i = 0; i < 10; i++) {
        CK(cudaEventRecord(e0));
        CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms[i], e0, e1));
    }
    qsort(ms, 10, sizeof *ms, cmp_float);
    const float med = 0.5f * (ms[4] + ms[5]);
    const double gbs = 2.0 * bytes / (med * 1e-3) / 1e9;
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    if (json)
        printf("{\"device\": \"%s\", \"bytes\": %zu, \"ms\": %.4f, \"gb_per_s\": %.1f}\n", p.name, bytes, med, gbs);
    else
        printf("%s: cudaMemcpy D2D of %zu MiB: median %.3f ms, %.1f GB/s (read + write)\n", p.name, mib, med, gbs);
    CK(cudaFree(a));
    CK(cudaFree(b));
    return 0;
}
