/* Reference rates that `tpgen bench` measures in the same run as the model, so its figures read
 * as fractions of what this machine can do: memory bandwidth (copy and read-only) for decode,
 * the backend's GEMM rate for prefill. Every rank runs them at once when ranks share a node, so
 * each is a per-rank share of the node, like the model's own traffic. */
#ifndef TPGEN_BENCH_PROBES_H
#define TPGEN_BENCH_PROBES_H

#include <stddef.h>

#include "kernels/backend.h"

/* Writes zeros to bytes of device memory at dst. */
void tp_bench_zero_device(tp_backend *b, void *dst, size_t bytes);

/* Device-to-device copy bandwidth in GB/s, STREAM convention (bytes read + written), median of
 * 7 copies of 256 MiB. On a CPU a copy also reads every destination line before writing it
 * (write-allocate), so it under-reports what a pure read stream gets: see tp_bench_read_gbs. */
double tp_bench_copy_gbs(tp_backend *b);

/* Read-only bandwidth of host memory in GB/s: `threads` OpenMP threads each sum their slice of
 * a buffer of 8 x the last-level cache (256 to 512 MiB, allocated by b as its weights are: on
 * the CPU backend 2 MiB aligned on transparent huge pages; each thread first-touches its own
 * slice), best of 7 passes. This is the floor for decode on the CPU backend, which reads its
 * weights and KV cache and writes almost nothing. b: the CPU backend (its memory is host
 * memory). *bytes_out: the buffer size. */
double tp_bench_read_gbs(tp_backend *b, int threads, size_t *bytes_out);

/* The backend's GEMM rate in GFLOP/s: matmul of x[T,K] by a [N,K] matrix, median of 5 after a
 * warm-up (OpenBLAS sgemm on the CPU, cuBLAS on the GPU). */
double tp_bench_gemm_gflops(tp_backend *b, int T, int N, int K);

#endif
