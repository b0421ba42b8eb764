/* Faults the emulated device must catch (tests/gpu_emu.cmake, each through expect_error.sh): the
 * emulator's runtime, kernels and cuBLAS, driven directly with one planted fault each.
 * usage: test_emu_faults host-pointer|past-end|gemm-ld|copy-direction|graph-value */
#include "tests/gpu/emu/emu.h"

#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/emu/emu_rt.h"

__global__ void fill_kernel(float *y, int n, float v) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = v;
}

static void check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "test_emu_faults: %s: %s\n", what, cudaGetErrorString(e));
        exit(2);
    }
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    float *d = NULL;
    check(cudaMalloc((void **)&d, 100 * sizeof(float)), "cudaMalloc");
    cudaStream_t s;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    if (!strcmp(mode, "host-pointer")) {
        static float host[100];
        emu_launch(1, 128, 0, s, "fill_kernel", fill_kernel, host, 100, 1.0f);
    } else if (!strcmp(mode, "past-end")) {
        emu_launch(1, 128, 0, s, "fill_kernel", fill_kernel, d, 128, 1.0f); /* 28 floats too many */
    } else if (!strcmp(mode, "copy-direction")) {
        float h[100];
        check(cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
    } else if (!strcmp(mode, "gemm-ld")) {
        cublasHandle_t h;
        cublasCreate(&h);
        cublasSetStream(h, s);
        const float one = 1.0f, zero = 0.0f;
        void *a, *b, *c;
        check(cudaMalloc(&a, 8 * 8 * 2), "cudaMalloc");
        check(cudaMalloc(&b, 8 * 8 * 2), "cudaMalloc");
        check(cudaMalloc(&c, 8 * 8 * 2), "cudaMalloc");
        /* A is 8 x 8 with ld 8; ld 16 reads past it */
        const cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 8, 8, 8, &one, a, CUDA_R_16F, 16, b,
                                               CUDA_R_16F, 8, &zero, c, CUDA_R_16F, 8, CUBLAS_COMPUTE_32F,
                                               CUBLAS_GEMM_DEFAULT);
        fprintf(stderr, "cublasGemmEx returned %d\n", (int)st);
    } else if (!strcmp(mode, "graph-value")) { /* a graph replays the value captured, not the current one */
        float n_val = 1.0f;
        check(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), "begin");
        emu_launch(1, 128, 0, s, "fill_kernel", fill_kernel, d, 100, n_val);
        cudaGraph_t g;
        check(cudaStreamEndCapture(s, &g), "end");
        cudaGraphExec_t e;
        check(cudaGraphInstantiate(&e, g, 0), "instantiate");
        n_val = 2.0f; /* changed after the capture */
        check(cudaGraphLaunch(e, s), "launch");
        float h[100];
        check(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost), "cudaMemcpy");
        printf("graph replayed value %g (current %g)\n", h[0], n_val);
        return h[0] == 1.0f ? 0 : 1;
    } else {
        fprintf(stderr, "usage: test_emu_faults host-pointer|past-end|gemm-ld|copy-direction|graph-value\n");
        return 2;
    }
    fprintf(stderr, "test_emu_faults: %s: the fault passed silently\n", mode);
    return 1;
}
