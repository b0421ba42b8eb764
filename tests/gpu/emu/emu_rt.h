/* The emulated device's runtime state, shared by its parts (tests/gpu/emu): device memory is host
 * memory this runtime maps and tracks (emu_rt.cpp), work submitted to a stream runs at once on
 * the calling thread unless the stream is capturing, when it is recorded with its arguments'
 * values for a graph (emu_rt.cpp); cuBLAS/cuBLASLt (emu_blas.cpp) and NCCL (emu_nccl.cpp) check
 * their operands here and submit their work the same way. Nothing here is in tpgen's product
 * code paths: only libtpgen-cuda-emu.so links it. */
#ifndef TPGEN_TESTS_GPU_EMU_RT_H
#define TPGEN_TESTS_GPU_EMU_RT_H

#include <cuda_runtime.h>
#include <stddef.h>

#include <functional>

/* Ends the job (every rank, util/log.h's tp_die) with "emulated CUDA: ..." */
[[noreturn]] void emu_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The device allocation holding [p, p + bytes), or dies naming call and what ("the source",
 * "matrix A"...): p is host memory, or the range runs past the allocation. */
void emu_check_device(const char *call, const char *what, const void *p, size_t bytes);
/* 1 when p lies in a device allocation (its one-past-the-end address included). */
int emu_is_device(const void *p);

/* Work on stream s: recorded when s is capturing, else run now. kernel: a __global__ name
 * counted in the launch report, or NULL for other work (copies, GEMMs, collectives). */
void emu_submit(cudaStream_t s, const char *kernel, std::function<void()> run);
/* What runs now, for a fault's message: "kernel NAME" or "host code". */
const char *emu_current_work(void);
/* 1 while s is capturing (cudaStreamBeginCapture .. cudaStreamEndCapture). */
int emu_capturing(cudaStream_t s);

#endif
