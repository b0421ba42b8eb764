/* Error checks for the CUDA backend and the NCCL communicator: every CUDA and cuBLAS call goes
 * through one of these. A failure prints file:line, the call and the library's own error string,
 * then ends the job through tp_die (every rank exits, see util/log.h). Usable from C and CUDA. */
#ifndef TPGEN_CUDA_CHECK_H
#define TPGEN_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "util/log.h"
#ifdef __cplusplus
}
#endif

#define CUDA_CHECK(call)                                                                              \
    do {                                                                                              \
        cudaError_t e_ = (call);                                                                      \
        if (e_ != cudaSuccess)                                                                        \
            tp_die("CUDA error at %s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, cudaGetErrorString(e_), \
                   cudaGetErrorName(e_));                                                             \
    } while (0)

/* After kernel launches: launch-configuration errors surface here, faults at the next sync. */
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(call)                                                                            \
    do {                                                                                              \
        cublasStatus_t s_ = (call);                                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                              \
            tp_die("cuBLAS error at %s:%d: %s: %s (%s)", __FILE__, __LINE__, #call,                   \
                   cublasGetStatusString(s_), cublasGetStatusName(s_));                               \
    } while (0)

#endif
