/* What the NCCL communicator (comm/comm_nccl.c, plain C) needs from the CUDA backend: the stream
 * every op runs on (all-reduce goes on it too, so it is ordered with the ops without events) and
 * the device ordinal (both die when b is not the CUDA backend), and how long the host has been
 * waiting for the stream (the watchdog's view of a stuck step). */
#ifndef TPGEN_CUDA_BACKEND_H
#define TPGEN_CUDA_BACKEND_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "kernels/backend.h"

cudaStream_t tp_cuda_stream(tp_backend *b);
int tp_cuda_device(tp_backend *b);
/* Seconds the host has been blocked waiting for this backend's stream (0: not waiting now).
 * Safe to call from another thread (the NCCL watchdog). */
double tp_cuda_host_wait_seconds(tp_backend *b);

#ifdef __cplusplus
}
#endif

#endif
