/* Emulated cuBLAS and cuBLASLt: the calls libtpgen-cuda makes, with cuBLAS's semantics
 * (column-major; op(A) m x k, op(B) k x n, C/D m x n; leading dimensions; alpha, beta; a bias per
 * row of D and the GELU epilogue in f32 before the one rounding to D's type), computed by
 * OpenBLAS's sgemm in f32 from the F16/BF16/F32 operands. Only CUBLAS_COMPUTE_32F with F32
 * scales; other compute types, data types, epilogues or attributes are errors (status
 * NOT_SUPPORTED or INVALID_VALUE), never a guess. Each operand's extent (from its leading
 * dimension) must lie in one device allocation, else the job ends naming the call and operand.
 * The work is submitted on the handle's stream (emu_rt.h): captured into a graph like a kernel. */
#include <cblas.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "kernels/common/tp_round.h"
#include "tests/gpu/emu/emu_rt.h"

struct cublasContext {
    cudaStream_t stream;
};
struct cublasLtContext {
    int unused;
};

static size_t type_size(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }
static int type_ok(cudaDataType t) { return t == CUDA_R_16F || t == CUDA_R_16BF || t == CUDA_R_32F; }
static const char *type_name(cudaDataType t) {
    return t == CUDA_R_16F ? "CUDA_R_16F" : t == CUDA_R_16BF ? "CUDA_R_16BF" : t == CUDA_R_32F ? "CUDA_R_32F" : "?";
}

static float load(const void *p, cudaDataType t, size_t i) {
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    const uint16_t h = ((const uint16_t *)p)[i];
    if (t == CUDA_R_16BF) {
        const uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    return tp_f16_to_f32(h);
}
static void store(void *p, cudaDataType t, size_t i, float v) {
    if (t == CUDA_R_32F) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = t == CUDA_R_16BF ? tp_f32_to_bf16(v) : tp_f32_to_f16(v);
}

/* One GEMM, every operand described: D = epi(alpha op(A) op(B) + beta C + bias). */
struct gemm {
    const char *call;
    int ta, tb, m, n, k;
    const void *A, *B, *C;
    void *D;
    cudaDataType at, bt, ct, dt, biast;
    int lda, ldb, ldc, ldd;
    float alpha, beta;
    const void *bias;
    int gelu;
};

static size_t extent(int rows, int cols, int ld, cudaDataType t) {
    return rows && cols ? ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * type_size(t) : 0;
}

/* Checks the operands; 0, or the status to return. */
static cublasStatus_t gemm_check(const gemm &g) {
    const int ar = g.ta ? g.k : g.m, ac = g.ta ? g.m : g.k, br = g.tb ? g.n : g.k, bc = g.tb ? g.k : g.n;
    if (g.m < 0 || g.n < 0 || g.k < 0) return CUBLAS_STATUS_INVALID_VALUE;
    if (g.lda < (ar > 1 ? ar : 1) || g.ldb < (br > 1 ? br : 1) || g.ldc < (g.m > 1 ? g.m : 1) ||
        g.ldd < (g.m > 1 ? g.m : 1)) {
        fprintf(stderr, "emulated CUDA: %s: a leading dimension below its matrix's rows (lda %d < %d, ldb %d < %d or "
                "ldc %d < %d)\n", g.call, g.lda, ar, g.ldb, br, g.ldc, g.m);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    char what[128];
    snprintf(what, sizeof what, "matrix A (%d x %d, ld %d, %s)", ar, ac, g.lda, type_name(g.at));
    emu_check_device(g.call, what, g.A, extent(ar, ac, g.lda, g.at));
    snprintf(what, sizeof what, "matrix B (%d x %d, ld %d, %s)", br, bc, g.ldb, type_name(g.bt));
    emu_check_device(g.call, what, g.B, extent(br, bc, g.ldb, g.bt));
    if (g.beta != 0.0f) {
        snprintf(what, sizeof what, "matrix C (%d x %d, ld %d, %s)", g.m, g.n, g.ldc, type_name(g.ct));
        emu_check_device(g.call, what, g.C, extent(g.m, g.n, g.ldc, g.ct));
    }
    snprintf(what, sizeof what, "matrix D (%d x %d, ld %d, %s)", g.m, g.n, g.ldd, type_name(g.dt));
    emu_check_device(g.call, what, g.D, extent(g.m, g.n, g.ldd, g.dt));
    if (g.bias) {
        snprintf(what, sizeof what, "the bias (%d, %s)", g.m, type_name(g.biast));
        emu_check_device(g.call, what, g.bias, (size_t)g.m * type_size(g.biast));
    }
    return CUBLAS_STATUS_SUCCESS;
}

static float gelu_tanh(float x) { /* cuBLASLt's GELU epilogue: the tanh approximation */
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

static void gemm_run(const gemm &g) {
    const int ar = g.ta ? g.k : g.m, ac = g.ta ? g.m : g.k, br = g.tb ? g.n : g.k, bc = g.tb ? g.k : g.n;
    std::vector<float> a((size_t)ar * ac + 1), b((size_t)br * bc + 1), d((size_t)g.m * g.n + 1, 0.0f);
    for (int j = 0; j < ac; j++)
        for (int i = 0; i < ar; i++) a[(size_t)j * ar + i] = load(g.A, g.at, (size_t)j * g.lda + i);
    for (int j = 0; j < bc; j++)
        for (int i = 0; i < br; i++) b[(size_t)j * br + i] = load(g.B, g.bt, (size_t)j * g.ldb + i);
    if (g.m && g.n && g.k)
        cblas_sgemm(CblasColMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans, g.m, g.n, g.k,
                    1.0f, a.data(), ar > 1 ? ar : 1, b.data(), br > 1 ? br : 1, 0.0f, d.data(), g.m > 1 ? g.m : 1);
    for (int j = 0; j < g.n; j++)
        for (int i = 0; i < g.m; i++) {
            float v = g.alpha * d[(size_t)j * g.m + i];
            if (g.beta != 0.0f) v += g.beta * load(g.C, g.ct, (size_t)j * g.ldc + i);
            if (g.bias) v += load(g.bias, g.biast, (size_t)i);
            if (g.gelu) v = gelu_tanh(v);
            store(g.D, g.dt, (size_t)j * g.ldd + i, v);
        }
}

/* ---- cuBLAS ---- */

extern "C" cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
    *h = new cublasContext{NULL};
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) {
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t mode) {
    const int m = (int)mode & ~(int)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    return m == CUBLAS_DEFAULT_MATH ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED; /* f32 reductions only */
}
extern "C" cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t, void *ws, size_t bytes) {
    if (bytes) emu_check_device("cublasSetWorkspace", "the workspace", ws, bytes);
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" const char *cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_INVALID_VALUE: return "an unsupported value or parameter was passed to the function";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    default: return "unknown error";
    }
}
extern "C" const char *cublasGetStatusName(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

static int op_of(cublasOperation_t o, int *t) {
    if (o != CUBLAS_OP_N && o != CUBLAS_OP_T) return 0;
    *t = o == CUBLAS_OP_T;
    return 1;
}

extern "C" cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                                       int k, const void *alpha, const void *A, cudaDataType at, int lda, const void *B,
                                       cudaDataType bt, int ldb, const void *beta, void *C, cudaDataType ct, int ldc,
                                       cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    gemm g{};
    g.call = "cublasGemmEx";
    if (!op_of(transa, &g.ta) || !op_of(transb, &g.tb) || compute != CUBLAS_COMPUTE_32F || at != bt ||
        at == CUDA_R_32F || !type_ok(at) || !type_ok(ct) ||
        (algo != CUBLAS_GEMM_DEFAULT && algo != CUBLAS_GEMM_DEFAULT_TENSOR_OP)) {
        fprintf(stderr, "emulated CUDA: cublasGemmEx: not emulated: ops %d/%d, compute %d, types %s/%s/%s, algo %d\n",
                (int)transa, (int)transb, (int)compute, type_name(at), type_name(bt), type_name(ct), (int)algo);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    g.m = m, g.n = n, g.k = k;
    g.A = A, g.B = B, g.C = C, g.D = C;
    g.at = at, g.bt = bt, g.ct = ct, g.dt = ct;
    g.lda = lda, g.ldb = ldb, g.ldc = ldc, g.ldd = ldc;
    g.alpha = *(const float *)alpha; /* host pointer mode */
    g.beta = *(const float *)beta;
    const cublasStatus_t st = gemm_check(g);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    emu_submit(h->stream, NULL, [g]() { gemm_run(g); });
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- cuBLASLt: descriptors live in the opaque structs' storage ---- */

struct lt_op {
    cublasComputeType_t compute;
    cudaDataType scale;
    int32_t ta, tb;
    uint32_t epi;
    int32_t biast; /* -1: D's type */
    const void *bias;
};
struct lt_layout {
    cudaDataType t;
    uint64_t rows, cols;
    int64_t ld;
};
static_assert(sizeof(lt_op) <= sizeof(cublasLtMatmulDescOpaque_t), "lt_op");
static_assert(sizeof(lt_layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "lt_layout");
static lt_op *OP(cublasLtMatmulDesc_t d) { return (lt_op *)d->data; }
static lt_layout *LAY(cublasLtMatrixLayout_t l) { return (lt_layout *)l->data; }

extern "C" cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
    *h = new cublasLtContext{0};
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute,
                                                   cudaDataType_t scale) {
    if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    *d = (cublasLtMatmulDesc_t)calloc(1, sizeof(cublasLtMatmulDescOpaque_t));
    *OP(*d) = lt_op{compute, scale, 0, 0, CUBLASLT_EPILOGUE_DEFAULT, -1, NULL};
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    free(d);
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a,
                                                         const void *buf, size_t size) {
    lt_op *o = OP(d);
    int32_t i32;
    switch (a) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB:
        if (size != sizeof i32) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&i32, buf, 4);
        if (i32 != CUBLAS_OP_N && i32 != CUBLAS_OP_T) return CUBLAS_STATUS_NOT_SUPPORTED;
        (a == CUBLASLT_MATMUL_DESC_TRANSA ? o->ta : o->tb) = i32 == CUBLAS_OP_T;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
        if (size != 4) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&o->epi, buf, 4);
        if (o->epi != CUBLASLT_EPILOGUE_DEFAULT && o->epi != CUBLASLT_EPILOGUE_BIAS && o->epi != CUBLASLT_EPILOGUE_GELU &&
            o->epi != CUBLASLT_EPILOGUE_GELU_BIAS)
            return CUBLAS_STATUS_NOT_SUPPORTED;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
        if (size != 4) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&o->biast, buf, 4);
        return type_ok((cudaDataType)o->biast) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
        if (size != sizeof(void *)) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&o->bias, buf, sizeof(void *));
        return CUBLAS_STATUS_SUCCESS;
    default:
        fprintf(stderr, "emulated CUDA: cublasLtMatmulDescSetAttribute: attribute %d is not emulated\n", (int)a);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
}
extern "C" cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t, uint64_t rows,
                                                     uint64_t cols, int64_t ld) {
    if (!type_ok(t)) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (ld < (int64_t)(rows > 1 ? rows : 1)) return CUBLAS_STATUS_INVALID_VALUE;
    *l = (cublasLtMatrixLayout_t)calloc(1, sizeof(cublasLtMatrixLayoutOpaque_t));
    *LAY(*l) = lt_layout{t, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    free(l);
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    *p = (cublasLtMatmulPreference_t)calloc(1, sizeof(cublasLtMatmulPreferenceOpaque_t));
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    free(p);
    return CUBLAS_STATUS_SUCCESS;
}
/* The preferences steer the algorithm's choice: no effect on the result, only checked. */
extern "C" cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t a,
                                                               const void *, size_t) {
    switch (a) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return CUBLAS_STATUS_SUCCESS;
    default:
        fprintf(stderr, "emulated CUDA: cublasLtMatmulPreferenceSetAttribute: attribute %d is not emulated\n", (int)a);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
}

/* The problem the descriptors state, or a status: op(A) m x k, op(B) k x n, C and D m x n. */
static cublasStatus_t lt_problem(const char *call, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t A,
                                 cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D, gemm *g) {
    const lt_op *o = OP(d);
    const lt_layout *a = LAY(A), *b = LAY(B), *c = LAY(C), *dd = LAY(D);
    const uint64_t m = dd->rows, n = dd->cols, k = o->ta ? a->rows : a->cols;
    if ((o->ta ? a->cols : a->rows) != m || (o->tb ? b->cols : b->rows) != k || (o->tb ? b->rows : b->cols) != n ||
        c->rows != m || c->cols != n || a->t != b->t || c->t != dd->t || m > 0x7fffffff || n > 0x7fffffff ||
        k > 0x7fffffff) {
        fprintf(stderr, "emulated CUDA: %s: the layouts do not make one GEMM (A %llu x %llu%s, B %llu x %llu%s, C %llu x "
                "%llu, D %llu x %llu)\n", call, (unsigned long long)a->rows, (unsigned long long)a->cols,
                o->ta ? " transposed" : "", (unsigned long long)b->rows, (unsigned long long)b->cols,
                o->tb ? " transposed" : "", (unsigned long long)c->rows, (unsigned long long)c->cols,
                (unsigned long long)dd->rows, (unsigned long long)dd->cols);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if ((o->epi & CUBLASLT_EPILOGUE_BIAS) && a->t == CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    g->call = call;
    g->ta = o->ta, g->tb = o->tb, g->m = (int)m, g->n = (int)n, g->k = (int)k;
    g->at = a->t, g->bt = b->t, g->ct = c->t, g->dt = dd->t;
    g->lda = (int)a->ld, g->ldb = (int)b->ld, g->ldc = (int)c->ld, g->ldd = (int)dd->ld;
    g->gelu = (o->epi & CUBLASLT_EPILOGUE_GELU) != 0;
    g->bias = (o->epi & CUBLASLT_EPILOGUE_BIAS) ? o->bias : NULL;
    g->biast = o->biast >= 0 ? (cudaDataType)o->biast : dd->t;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t A,
                                                         cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C,
                                                         cublasLtMatrixLayout_t D, cublasLtMatmulPreference_t, int requested,
                                                         cublasLtMatmulHeuristicResult_t *res, int *n_res) {
    gemm g{};
    const cublasStatus_t st = lt_problem("cublasLtMatmulAlgoGetHeuristic", d, A, B, C, D, &g);
    *n_res = 0;
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
    /* TPGEN_EMU_LT_ALGOS=0: no algorithm for any problem, cuBLASLt's answer to one it has no
     * kernel for, so the module's fallback runs (cublasGemmEx, then its bias and GELU kernels) */
    const char *algos = getenv("TPGEN_EMU_LT_ALGOS");
    if (algos && !strcmp(algos, "0")) return CUBLAS_STATUS_NOT_SUPPORTED;
    memset(res, 0, sizeof *res);
    res->state = CUBLAS_STATUS_SUCCESS;
    res->wavesCount = 1.0f;
    *n_res = 1;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                                         cublasLtMatrixLayout_t Al, const void *B, cublasLtMatrixLayout_t Bl,
                                         const void *beta, const void *C, cublasLtMatrixLayout_t Cl, void *D,
                                         cublasLtMatrixLayout_t Dl, const cublasLtMatmulAlgo_t *, void *ws,
                                         size_t ws_bytes, cudaStream_t s) {
    gemm g{};
    const cublasStatus_t st = lt_problem("cublasLtMatmul", d, Al, Bl, Cl, Dl, &g);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if ((OP(d)->epi & CUBLASLT_EPILOGUE_BIAS) && !g.bias) {
        fprintf(stderr, "emulated CUDA: cublasLtMatmul: a BIAS epilogue without CUBLASLT_MATMUL_DESC_BIAS_POINTER\n");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (ws_bytes) emu_check_device("cublasLtMatmul", "the workspace", ws, ws_bytes);
    g.A = A, g.B = B, g.C = C, g.D = D;
    g.alpha = *(const float *)alpha;
    g.beta = *(const float *)beta;
    const cublasStatus_t c = gemm_check(g);
    if (c != CUBLAS_STATUS_SUCCESS) return c;
    emu_submit(s, NULL, [g]() { gemm_run(g); });
    return CUBLAS_STATUS_SUCCESS;
}
