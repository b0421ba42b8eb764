/* The CUDA backend: creation, the op table, destruction (device memory, host<->device copies and
 * weight upload: cuda_memory.cu).
 *
 * Activations, weights and the KV cache are F16 or BF16 (b->act) in device memory; every op
 * accumulates in f32. Copies go through two pinned staging buffers used in turn, each guarded by
 * an event, so the host fills one while the DMA engine drains the other (weights of a 16B model
 * stream from the mmapped checkpoint at the speed of the host memcpy). Uploads of another dtype
 * (F32 checkpoints, or BF16 into an F16 backend) land raw in a device buffer and are converted
 * there by a kernel: the host never converts. The ops live in the other files of this folder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cuda/cuda_internal.h"

#define STAGE_BYTES TPC_STAGE_BYTES         /* per staging buffer (sizes: cuda_plan.h) */
#define CUBLAS_WS_BYTES TPC_CUBLAS_WS_BYTES /* cuBLAS workspace */

/* ---- lifetime ---- */

/* kernel_name: the choices matmul_t (cuda_matmul.cu) and attention_t (cuda_attention.cu) make,
 * for a model's GEMMs (K % 8 == 0, arena pointers 16-byte aligned: the GEMV's conditions hold).
 * Above gemv_max_t: cuBLAS (cublasLt with the bias/GELU epilogue for fc_in and fc_out,
 * cublasGemmEx for the GEMMs without a bias and the f32 logits). Attention: the split-K decode
 * kernel when tpc_attn_is_decode (T queries of one sequence), the tiled prefill kernel otherwise. */
const char *tpc_kernel_name(tp_backend *b, tp_op_class op, int T, int D) {
    const int f16 = b->act == TP_F16;
    if (op == TP_OP_ATTENTION) {
        if (!tpc_attn_is_decode(T, 1)) return f16 ? "prefill-f16" : "prefill-bf16";
        if (D % 8 == 0) return f16 ? "decode-vec8-f16" : "decode-vec8-bf16";
        return f16 ? "decode-f16" : "decode-bf16";
    }
    if (T <= tpc(b)->gemv_max_t) return f16 ? "gemv-f16" : "gemv-bf16";
    if (op == TP_OP_LOGITS) return f16 ? "cublas-gemmex-f16" : "cublas-gemmex-bf16";
    return f16 ? "cublas-f16" : "cublas-bf16";
}

static void cuda_destroy(tp_backend *b) {
    tp_cuda *c = tpc(b);
    if (!c) return;
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    tpc_graphs_destroy(c);
    for (int i = 0; i < 2; i++) {
        CUDA_CHECK(cudaEventDestroy(c->stage_ev[i]));
        CUDA_CHECK(cudaFreeHost(c->stage[i]));
        CUDA_CHECK(cudaFree(c->conv[i]));
    }
    for (int i = 0; i < c->n_graveyard; i++) CUDA_CHECK(cudaFree(c->graveyard[i]));
    if (c->attn_part) CUDA_CHECK(cudaFree(c->attn_part));
    if (c->lg_dev) CUDA_CHECK(cudaFree(c->lg_dev));
    tpc_matmul_destroy(c);
    CUBLAS_CHECK(cublasDestroy(c->cublas));
    CUDA_CHECK(cudaFree(c->cublas_ws));
    CUDA_CHECK(cudaStreamDestroy(c->stream));
    free(c);
}

cudaStream_t tp_cuda_stream(tp_backend *b) {
    if (!b || !b->name || strcmp(b->name, "cuda") != 0)
        tp_die("internal: tp_cuda_stream on the %s backend", b && b->name ? b->name : "(null)");
    return tpc(b)->stream;
}

int tp_cuda_device(tp_backend *b) {
    if (!b || !b->name || strcmp(b->name, "cuda") != 0)
        tp_die("internal: tp_cuda_device on the %s backend", b && b->name ? b->name : "(null)");
    return tpc(b)->device;
}

/* The module's entry points (kernels/cuda_module.h): extern "C" through cuda_internal.h. */
TP_CUDA_EXPORT const char *tpcuda_interface(void) { return TPGEN_CUDA_IFACE; }

TP_CUDA_EXPORT int tpcuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* no driver / no device: not an error for this question */
        return 0;
    }
    return n;
}

TP_CUDA_EXPORT tp_backend *tpcuda_backend_create(int device, tp_dtype act, char *err, size_t err_size) {
    const int rank = tp_log_rank();
    if (act != TP_F16 && act != TP_BF16) {
        snprintf(err, err_size, "the CUDA backend computes in F16 or BF16 (--dtype f16|bf16), not %s",
                 tp_dtype_name(act));
        return NULL;
    }
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        cudaGetLastError();
        snprintf(err, err_size, "rank %d: no CUDA GPU is visible (cudaGetDeviceCount: %s)", rank,
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return NULL;
    }
    if (device < 0 || device >= n) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        snprintf(err, err_size,
                 "rank %d on this node has local rank %d but only %d GPU%s visible (CUDA_VISIBLE_DEVICES=%s); "
                 "start at most %d ranks per node",
                 rank, device, n, n == 1 ? " is" : "s are", vis ? vis : "unset", n);
        return NULL;
    }
    CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    if (prop.major < 8) {
        snprintf(err, err_size,
                 "rank %d: GPU %d (%s) has compute capability %d.%d; the CUDA backend needs 8.0 or newer "
                 "(BF16 tensor cores; this build has code for sm_80 and sm_90)",
                 rank, device, prop.name, prop.major, prop.minor);
        return NULL;
    }
    /* The fixed buffers below are allocated before the memory plan runs (it counts them as held):
     * a device without room for them is refused here with the figures, not by a failed cudaMalloc. */
    size_t dev_free = 0, dev_total = 0;
    CUDA_CHECK(cudaMemGetInfo(&dev_free, &dev_total));
    const size_t fixed = CUBLAS_WS_BYTES + 2 * STAGE_BYTES;
    if (dev_free < fixed) {
        snprintf(err, err_size,
                 "rank %d: GPU %d (%s) has %.1f MiB free of %.1f MiB; the CUDA backend needs %.1f MiB before any "
                 "model memory (cuBLAS workspace %.0f MiB, upload conversion buffers 2 x %.0f MiB)",
                 rank, device, prop.name, dev_free / 1048576.0, dev_total / 1048576.0, fixed / 1048576.0,
                 CUBLAS_WS_BYTES / 1048576.0, STAGE_BYTES / 1048576.0);
        return NULL;
    }

    tp_cuda *c = (tp_cuda *)calloc(1, sizeof *c);
    if (!c) tp_die("out of host memory creating the CUDA backend");
    c->device = device;
    c->rank = rank;
    c->sm_count = prop.multiProcessorCount;
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&c->cublas));
    CUBLAS_CHECK(cublasSetStream(c->cublas, c->stream));
    /* Keep every reduction in f32, including split-K reductions of F16/BF16 outputs. */
    CUBLAS_CHECK(cublasSetMathMode(c->cublas, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                                             CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    CUDA_CHECK(cudaMalloc(&c->cublas_ws, CUBLAS_WS_BYTES));
    CUBLAS_CHECK(cublasSetWorkspace(c->cublas, c->cublas_ws, CUBLAS_WS_BYTES));

    c->stage_bytes = STAGE_BYTES;
    for (int i = 0; i < 2; i++) {
        CUDA_CHECK(cudaMallocHost(&c->stage[i], c->stage_bytes));
        CUDA_CHECK(cudaMalloc(&c->conv[i], c->stage_bytes));
        CUDA_CHECK(cudaEventCreateWithFlags(&c->stage_ev[i], cudaEventDisableTiming));
    }
    /* attn_part and lg_dev: reserve_scratch (from the memory plan), or on demand without one */

    c->gemv_max_t = 4;
    const char *gm = getenv("TPGEN_GEMV_MAX_T");
    if (gm && *gm) {
        int v = atoi(gm);
        if (v < 0 || v > 4) tp_die("TPGEN_GEMV_MAX_T=%s: must be 0..4 (0 = always cuBLAS)", gm);
        c->gemv_max_t = v;
    }
    tpc_attention_init(c);
    tpc_matmul_init(c);

    tp_backend *b = &c->base;
    b->name = "cuda";
    b->act = act;
    b->kv = act;
    b->alloc = tpc_alloc;
    b->free = tpc_free;
    b->mem_available = tpc_mem_available;
    b->to_device = tpc_to_device;
    b->to_host = tpc_to_host;
    b->sync = tpc_sync;
    b->copy = tpc_copy;
    b->host_alloc = tpc_host_alloc;
    b->host_free = tpc_host_free;
    b->plan_scratch = tpc_plan_scratch;
    b->reserve_scratch = tpc_reserve_scratch;
    b->upload = tpc_upload;
    b->matrix_bytes = tpc_matrix_bytes;
    b->matrix_upload = tpc_matrix_upload;
    b->fill_random = tpc_fill_random;
    b->embed = tpc_embed;
    b->layernorm = tpc_layernorm;
    b->matmul = tpc_matmul;
    b->matmul_f32out = tpc_matmul_f32out;
    b->matmul_gelu = tpc_matmul_gelu;
    b->gelu_new = tpc_gelu_new;
    b->rmsnorm = tpc_rmsnorm;
    b->silu_mul = tpc_silu_mul;
    b->add = tpc_add;
    b->gather_rows = tpc_gather_rows;
    b->rotary_kv_write = tpc_rotary_kv_write;
    b->attention = tpc_attention;
    b->logits_stats = tpc_logits_stats;
    b->graph_launch = tpc_graph_launch;
    b->graph_begin = tpc_graph_begin;
    b->graph_end = tpc_graph_end;
    b->kernel_name = tpc_kernel_name;
    b->destroy = cuda_destroy;
    b->impl = c;
    return b;
}
