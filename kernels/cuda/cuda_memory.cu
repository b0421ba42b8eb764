/* The CUDA backend's memory: device allocations, the memory plan's scratch, the pinned staging
 * copies between host and device, weight upload with conversion on the device, and the checks
 * that keep them out of a CUDA graph capture. cuda_backend.cu puts these in the backend's table;
 * the ops in the other files use tpc_no_capture, tpc_attn_part and tpc_upload_convert. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cuda/cuda_internal.h"

static const double MiB = 1048576.0;

/* Host waits on the stream are timestamped, so the NCCL watchdog (comm/comm_nccl.c) can tell a
 * step stuck in a collective (a CUDA graph replays its all-reduces where the communicator does
 * not see them) from one that is merely running. */
static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
#define TPC_WAIT(c, call)                                                                          \
    do {                                                                                           \
        __atomic_store_n(&(c)->wait_since_ns, now_ns(), __ATOMIC_RELAXED);                         \
        cudaError_t w_ = (call);                                                                   \
        __atomic_store_n(&(c)->wait_since_ns, (int64_t)0, __ATOMIC_RELAXED);                       \
        CUDA_CHECK(w_);                                                                            \
    } while (0)

double tp_cuda_host_wait_seconds(tp_backend *b) {
    const int64_t t = __atomic_load_n(&tpc(b)->wait_since_ns, __ATOMIC_RELAXED);
    return t ? (double)(now_ns() - t) * 1e-9 : 0.0;
}

void tpc_no_capture(tp_cuda *c, const char *what) {
    if (c->capturing)
        tp_die("cuda backend: %s cannot run inside a CUDA graph capture (graph_begin(%d) .. graph_end): only "
               "ops and the NCCL all-reduce may be captured; with --comm mpi and TP > 1 the all-reduce copies "
               "to the host, so decode graphs need --comm nccl",
               what, c->capture_key);
}

float *tpc_attn_part(tp_cuda *c, size_t bytes) {
    if (bytes <= c->attn_part_bytes) return c->attn_part;
    if (c->scratch_reserved)
        tp_die("cuda attention: this step needs %.1f MiB of split-K partials but the memory plan reserved %.1f MiB "
               "for steps of <= %d tokens, %d sequences, context <= %d (rank %d): a step beyond the limits given "
               "at start",
               bytes / MiB, c->attn_part_bytes / MiB, c->limits.max_tokens, c->limits.max_seqs, c->limits.max_ctx,
               c->rank);
    size_t nb = c->attn_part_bytes * 2;
    if (nb < bytes) nb = bytes;
    void *p = NULL;
    /* No plan (op tests): grow. cudaMalloc is allowed during a relaxed-mode capture
     * (cuda_graphs.cu); the old buffer may be referenced by graphs already made, so it is kept
     * until destroy. */
    cudaError_t e = cudaMalloc(&p, nb);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaGetLastError();
        cudaMemGetInfo(&fr, &tot);
        tp_die("out of device memory: attention partials need %.1f MiB, %.1f MiB free on device %d (rank %d)",
               nb / MiB, fr / MiB, c->device, c->rank);
    }
    if (c->attn_part) {
        if (c->n_graveyard == TPC_MAX_GRAVEYARD)
            tp_die("cuda backend: attention scratch regrown more than %d times", TPC_MAX_GRAVEYARD);
        c->graveyard[c->n_graveyard++] = c->attn_part;
    }
    c->attn_part = (float *)p;
    c->attn_part_bytes = nb;
    return c->attn_part;
}

/* ---- the memory plan's scratch (sizes: cuda_plan.c, shared with the CPU test of the plan) ---- */

void tpc_plan_scratch(tp_backend *b, const tp_step_limits *lim, tp_mem_plan *plan) {
    tpc_plan_scratch(lim, tpc(b)->sm_count, plan);
}

void tpc_reserve_scratch(tp_backend *b, const tp_step_limits *lim) {
    tp_cuda *c = tpc(b);
    tpc_no_capture(c, "reserve_scratch");
    if (c->n_graphs) tp_die("internal: reserve_scratch after CUDA graphs were captured");
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    if (c->attn_part) CUDA_CHECK(cudaFree(c->attn_part));
    if (c->lg_dev) CUDA_CHECK(cudaFree(c->lg_dev));
    tpc_scratch s;
    tpc_scratch_reserve(b, lim, c->sm_count, &s);
    c->attn_part = (float *)s.attn_part;
    c->attn_part_bytes = s.attn_part_bytes;
    c->lg_dev = s.lg;
    c->lg_bytes = s.lg_bytes;
    c->limits = *lim;
    c->scratch_reserved = 1;
}

/* ---- memory ---- */

void *tpc_alloc(tp_backend *b, size_t bytes, const char *what) {
    tp_cuda *c = tpc(b);
    tpc_no_capture(c, "alloc");
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 256);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaGetLastError(); /* allocation failures are not sticky; clear it */
        cudaMemGetInfo(&fr, &tot);
        tp_die("out of device memory: %s needs %.1f MiB, %.1f MiB free on device %d (rank %d; %.1f MiB total; %s)",
               what ? what : "(unnamed buffer)", bytes / MiB, fr / MiB, c->device, c->rank, tot / MiB,
               cudaGetErrorString(e));
    }
    return p;
}

void tpc_free(tp_backend *b, void *p) {
    if (!p) return;
    tpc_no_capture(tpc(b), "free");
    CUDA_CHECK(cudaFree(p));
}

size_t tpc_mem_available(tp_backend *b) {
    (void)b;
    size_t fr = 0, tot = 0;
    CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
    return fr;
}

/* Device-to-device, ordered on the stream like an op (capturable). */
void tpc_copy(tp_backend *b, void *dst, const void *src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, tpc(b)->stream));
}

void tpc_sync(tp_backend *b) {
    tp_cuda *c = tpc(b);
    TPC_WAIT(c, cudaStreamSynchronize(c->stream));
    CUDA_CHECK(cudaGetLastError());
}

void *tpc_host_alloc(tp_backend *b, size_t bytes, const char *what) {
    void *p = NULL;
    cudaError_t e = cudaMallocHost(&p, bytes ? bytes : 64);
    if (e != cudaSuccess) {
        cudaGetLastError();
        tp_die("cannot allocate %.1f MiB of pinned host memory for %s (rank %d): %s", bytes / MiB,
               what ? what : "(unnamed buffer)", tpc(b)->rank, cudaGetErrorString(e));
    }
    return p;
}

void tpc_host_free(tp_backend *b, void *p) {
    (void)b;
    if (p) CUDA_CHECK(cudaFreeHost(p));
}

/* ---- copies ---- */

/* Room for n <= stage_bytes bytes in the current staging buffer (or the other one, once the
 * device has finished copying out of it). Returns the buffer index; *off is the offset. The
 * caller records stage_ev[index] after issuing its copy. */
static int stage_take(tp_cuda *c, size_t n, size_t *off) {
    if (c->stage_used + n > c->stage_bytes) {
        c->stage_cur ^= 1;
        TPC_WAIT(c, cudaEventSynchronize(c->stage_ev[c->stage_cur]));
        c->stage_used = 0;
    }
    *off = c->stage_used;
    c->stage_used += (n + 255) & ~(size_t)255;
    return c->stage_cur;
}

/* Large copies out of memory that is already pinned (the engine's weight staging buffer, from
 * host_alloc) skip the extra host memcpy: one DMA, waited for before returning because the
 * caller may refill its buffer as soon as we return. */
static int is_pinned(const void *p) {
    cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return at.type == cudaMemoryTypeHost;
}

void tpc_to_device(tp_backend *b, void *dst, const void *src_host, size_t bytes) {
    tp_cuda *c = tpc(b);
    tpc_no_capture(c, "to_device");
    if (bytes >= ((size_t)1 << 20) && is_pinned(src_host)) {
        CUDA_CHECK(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, c->stream));
        TPC_WAIT(c, cudaStreamSynchronize(c->stream));
        return;
    }
    for (size_t done = 0; done < bytes;) {
        size_t n = bytes - done < c->stage_bytes ? bytes - done : c->stage_bytes, off;
        int i = stage_take(c, n, &off);
        memcpy((char *)c->stage[i] + off, (const char *)src_host + done, n);
        CUDA_CHECK(cudaMemcpyAsync((char *)dst + done, (char *)c->stage[i] + off, n, cudaMemcpyHostToDevice,
                                   c->stream));
        CUDA_CHECK(cudaEventRecord(c->stage_ev[i], c->stream));
        done += n;
    }
}

/* Synchronous. Chunk i+1 is in flight while the host copies chunk i out of the other buffer. */
void tpc_to_host(tp_backend *b, void *dst_host, const void *src, size_t bytes) {
    tp_cuda *c = tpc(b);
    tpc_no_capture(c, "to_host");
    if (bytes == 0) return;
    size_t n_chunks = (bytes + c->stage_bytes - 1) / c->stage_bytes;
    for (size_t k = 0; k <= n_chunks; k++) {
        if (k < n_chunks) { /* issue chunk k */
            size_t off = k * c->stage_bytes, n = bytes - off < c->stage_bytes ? bytes - off : c->stage_bytes;
            int i = (int)(k & 1);
            CUDA_CHECK(cudaMemcpyAsync(c->stage[i], (const char *)src + off, n, cudaMemcpyDeviceToHost, c->stream));
            CUDA_CHECK(cudaEventRecord(c->stage_ev[i], c->stream));
        }
        if (k > 0) { /* drain chunk k-1 */
            size_t off = (k - 1) * c->stage_bytes, n = bytes - off < c->stage_bytes ? bytes - off : c->stage_bytes;
            int i = (int)((k - 1) & 1);
            TPC_WAIT(c, cudaEventSynchronize(c->stage_ev[i]));
            memcpy((char *)dst_host + off, c->stage[i], n);
        }
    }
    CUDA_CHECK(cudaGetLastError());
    c->stage_used = c->stage_bytes; /* both buffers were reused above: next take switches and waits */
}

void tpc_upload_convert(tp_cuda *c, void *dst, const void *src, tp_dtype st, size_t n) {
    tp_dtype act = c->base.act;
    if (st == act) {
        tpc_to_device(&c->base, dst, src, n * tp_dtype_size(act));
        return;
    }
    tpc_no_capture(c, "upload");
    const size_t ss = tp_dtype_size(st), as = tp_dtype_size(act), chunk = c->stage_bytes / ss;
    for (size_t done = 0; done < n; done += chunk) {
        size_t m = n - done < chunk ? n - done : chunk, off;
        int i = stage_take(c, m * ss, &off);
        void *raw = (char *)c->conv[i] + off;
        memcpy((char *)c->stage[i] + off, (const char *)src + done * ss, m * ss);
        CUDA_CHECK(cudaMemcpyAsync(raw, (char *)c->stage[i] + off, m * ss, cudaMemcpyHostToDevice, c->stream));
        tpc_convert(c, (char *)dst + done * as, act, raw, st, m);
        CUDA_CHECK(cudaEventRecord(c->stage_ev[i], c->stream)); /* guards stage[i] and conv[i] */
    }
}

void tpc_upload(tp_backend *b, void *dst, const void *src_host, tp_dtype st, size_t n) {
    tpc_upload_convert(tpc(b), dst, src_host, st, n);
}
