/* A GEMV's panels over the backend's threads, balanced as they run (cpu_split.c): the int8, int4
 * and bf16 GEMVs' one way to share a matrix.
 *
 * Each thread starts on its own contiguous range of panels (one sequential read, as a static split
 * gives) and takes it in chunks; a thread whose range is done takes chunks from the end of the
 * range with the most panels left, so the owner's read stays sequential. A static split alone
 * left one of 2 threads waiting 10-14% of every GEMV on a memory-bound decode step (Zen 5 VM: the
 * threads stream at different rates, and libgomp's barrier spin was 13% of a step's samples). Each
 * panel is computed by one thread with the same arithmetic wherever it runs, so the bits do not
 * depend on the split. */
#ifndef TPGEN_CPU_SPLIT_H
#define TPGEN_CPU_SPLIT_H

#include <stddef.h>

/* Runs panels [P0, P1) on the calling thread. */
typedef void cpu_split_fn(void *ctx, int P0, int P1);

/* Panels [0, np) over nt threads (one OpenMP team; on the calling thread alone where !parallel or
 * nt is 1), in chunks of about chunk_bytes (panel_bytes each; at least `align` panels, a multiple of
 * it: a kernel's tile). cpu_s: NULL, or where the largest of the threads' CPU times goes (the load-time
 * tuning's timed run, cpu_tune.h). */
void cpu_split_panels(int np, int nt, int parallel, size_t panel_bytes, size_t chunk_bytes, int align,
                      cpu_split_fn *fn, void *ctx, double *cpu_s);

/* Chunk size of a GEMV: 64 KiB of weights (a few panels; ~16 chunks a thread on CodeGen-350M's
 * [3072 x 1024] at 4 bits). */
#define CPU_SPLIT_CHUNK_BYTES ((size_t)64 << 10)

#endif
