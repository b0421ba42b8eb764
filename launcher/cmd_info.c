/* tpgen info: what this build has and what it sees (no MPI job); with --model, the "will it fit"
 * answer for a model: its config, parameter count, checkpoint files and format, and per rank at
 * TP 1, 2, 4, 8 the weight bytes, KV-cache bytes per token and the tokens of KV cache that fit
 * in a given memory; with --weights int8 or int4 [--group-size G] [--lm-head int4], for the GEMM
 * weights in that form (int4: the TP sizes that cut a group of a row-parallel matrix are not valid). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "checkpoint/checkpoint.h"
#include "model/config.h"
#include "checkpoint/hub.h"
#include "checkpoint/remote_code.h"
#include "model/shard.h"
#include "kernels/backend.h"
#include "kernels/common/tp_quant4.h"
#include "kernels/cuda_module.h"
#include "util/json.h"
#include "util/log.h"
#include "util/threads.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static int info_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int info_error(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tpgen: error: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return status;
}

/* The same for one rank's shard: the replicated embedding and norms, its heads' and MLP rows'
 * matrices and biases (engine/model/arch.h counts the matrices), and its padded vocab slice. */
static int64_t rank_elements(const tp_config *c, const tp_shard *s) {
    const tp_arch *a = c->arch;
    int64_t V = c->vocab_size, E = c->n_embd, D = c->head_dim, L = c->n_layer;
    int64_t Hl = s->n_heads, Hkl = s->n_kv_heads, Il = s->n_inner, Vl = s->n_vocab;
    int64_t norms = (a->residual == TP_RESIDUAL_SEQUENTIAL ? 2 : 1) * E * (a->norm_bias ? 2 : 1);
    int64_t in_rows = a->mlp == TP_MLP_SILU_GATED ? 2 * Il : Il;
    int64_t biases = (c->qkv_bias ? (Hl + 2 * Hkl) * D : 0) + (c->o_bias ? E : 0) + (c->mlp_in_bias ? in_rows : 0) +
                     (c->mlp_out_bias ? E : 0);
    return V * E + L * (tp_arch_layer_matrix_elems(c, (int)Hl, (int)Hkl, (int)Il, NULL) + norms + biases) +
           E * (a->norm_bias ? 2 : 1) + Vl * E + (c->lm_head_bias ? Vl : 0);
}

/* The GEMM matrices of one rank's shard: elements and rows (q/k/v, o, the MLP's of every layer,
 * lm_head). A decode step reads each once, so their bytes are the weight bytes per token at
 * batch 1. */
static void rank_matrices(const tp_config *c, const tp_shard *s, int64_t *elements, int64_t *rows) {
    long long lr = 0;
    const int64_t le = tp_arch_layer_matrix_elems(c, s->n_heads, s->n_kv_heads, s->n_inner, &lr);
    *elements = c->n_layer * le + (int64_t)s->n_vocab * c->n_embd;
    *rows = c->n_layer * (int64_t)lr + s->n_vocab;
}

/* --weights int4 (kernels/common/tp_quant4.h): the bytes a decode step reads of one rank's GEMM
 * weights, every layer's q/k/v, o and MLP matrices in groups of G along K (--group-size)
 * (tp_q4_read_bytes: nibbles, an f32 scale and a one-byte zero per group) and lm_head in int8 with
 * an f32 scale per row, as --weights int4 keeps it (lm4, --lm-head int4: lm_head in groups of G too). 0 with why filled when this shard cannot be
 * grouped: a K of a matrix (E for the column-parallel ones, the rank's Hl * D of o and its Il of
 * the MLP's output matrix for the row-parallel ones) not a multiple of the group. */
static double rank_int4_bytes(const tp_config *c, const tp_shard *s, int64_t G, int lm4, char *why, size_t why_size) {
    const int64_t E = c->n_embd, D = c->head_dim;
    const int64_t Hl = s->n_heads, Hkl = s->n_kv_heads, Il = s->n_inner, Vl = s->n_vocab;
    const int64_t in_rows = c->arch->mlp == TP_MLP_SILU_GATED ? 2 * Il : Il;
    struct { const char *what; int64_t N, K; } m[] = {
        {"q/k/v", (Hl + 2 * Hkl) * D, E}, {"the attention output matrix", E, Hl * D},
        {"the MLP's input", in_rows, E}, {"the MLP's output matrix", E, Il}};
    double bytes = 0;
    for (size_t i = 0; i < sizeof m / sizeof *m; i++) {
        if (m[i].K % G) {
            snprintf(why, why_size, "%s: K = %" PRId64 " a rank, not a multiple of the %" PRId64 "-wide groups",
                     m[i].what, m[i].K, G);
            return 0;
        }
        bytes += (double)tp_q4_read_bytes(m[i].N, m[i].K, G);
    }
    const double lm = lm4 ? (double)tp_q4_read_bytes(Vl, E, G)      /* --lm-head int4: groups along E too */
                          : (double)Vl * (double)E + 4.0 * (double)Vl; /* int8 + f32 row scales */
    return c->n_layer * bytes + lm;
}

/* 1 when name is a weight weights.c loads for this architecture (the rest, like CodeGen's
 * attn.causal_mask or LLaMA's rotary_emb.inv_freq, is not counted). */
static int model_tensor(const tp_config *c, const char *name) {
    const tp_arch_names *N = &c->arch->names;
    const char *top[] = {N->embed, N->norm_f, N->lm_head};
    const char *layer[] = {N->norm1, N->norm2, N->qkv, N->q, N->k, N->v, N->o, N->mlp_in, N->mlp_up, N->mlp_out};
    const char *sfx[] = {".weight", ".bias"};
    char buf[160];
    for (int j = 0; j < 2; j++) {
        for (size_t i = 0; i < sizeof top / sizeof *top; i++) {
            tp_arch_tensor(buf, sizeof buf, top[i], -1, sfx[j]);
            if (!strcmp(name, buf)) return 1;
        }
        for (int l = 0; l < c->n_layer && l < 100000; l++)
            for (size_t i = 0; i < sizeof layer / sizeof *layer; i++) {
                if (!layer[i]) continue;
                tp_arch_tensor(buf, sizeof buf, layer[i], l, sfx[j]);
                if (!strcmp(name, buf)) return 1;
            }
    }
    return 0;
}

static const char *human(double bytes, char *buf, size_t size) {
    if (bytes >= GIB) snprintf(buf, size, "%.2f GiB", bytes / GIB);
    else if (bytes >= 1048576.0) snprintf(buf, size, "%.1f MiB", bytes / 1048576.0);
    else snprintf(buf, size, "%.1f KiB", bytes / 1024.0);
    return buf;
}

/* "torch_dtype" of config.json, for a config without a checkpoint. */
static const char *config_dtype(const char *path) {
    static char out[32];
    char file[4200];
    snprintf(file, sizeof file, "%s", path);
    if (!strstr(path, ".json")) snprintf(file, sizeof file, "%s/config.json", path);
    size_t len;
    char *text = tp_read_file(file, &len);
    if (!text) return NULL;
    json_value *root = json_parse(text, len, NULL, 0);
    free(text);
    const json_value *v = root && root->type == JSON_OBJECT ? json_get(root, "torch_dtype") : NULL;
    const char *r = NULL;
    if (v && v->type == JSON_STRING) {
        snprintf(out, sizeof out, "%s",
                 !strcmp(v->str, "float16")    ? "F16"
                 : !strcmp(v->str, "bfloat16") ? "BF16"
                 : !strcmp(v->str, "float32")  ? "F32"
                                               : "?");
        r = out;
    }
    json_free(root);
    return r;
}

/* Bytes of memory per rank when --memory is not given: the GPU's free memory with the CUDA
 * backend and a GPU, else this machine's physical memory. */
static double default_memory(char *why, size_t size) {
    if (tp_backend_cuda_compiled() && tp_backend_cuda_device_count() > 0) {
        char err[512];
        tp_backend *b = tp_backend_cuda_create(0, TP_F16, err, sizeof err);
        if (b) {
            double m = (double)b->mem_available(b);
            b->destroy(b);
            snprintf(why, size, "free memory of GPU 0");
            return m;
        }
    }
    snprintf(why, size, "this machine's memory");
    return (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
}

/* --kv-cache-dtype bf16 under 16-bit activations (dt) */
static int kv_bf16_refused(const char *dt) {
    return info_error(2, "--kv-cache-dtype bf16 is for f32 activations on the CPU (here: %s, whose K and V are %s already)",
                      dt, dt);
}

/* weights: 0 (the dtype), 8 (--weights int8) or 4 (--weights int4, in groups of group; lm4: --lm-head int4).
 * kv_bf16: --kv-cache-dtype bf16 (K and V in 2 bytes under f32 activations). */
static int model_info(const char *model, const char *revision, double memory, const char *dtype_flag, int weights,
                      int group, int lm4, int kv_bf16) {
    char err[2048], b1[64], b2[64];
    char *dir = tp_hub_resolve(model, revision, err, sizeof err);
    if (!dir) return info_error(1, "%s", err);
    tp_config c;
    if (tp_config_load(dir, &c, err, sizeof err)) {
        free(dir);
        return info_error(1, "%s", err);
    }
    char gerr[2048];
    const int fused = c.arch->names.qkv != NULL; /* CodeGen's qkv_proj in mp_num groups */
    const int groups_ok = fused && tp_checkpoint_qkv_groups(dir, c.n_head, 0, &c.qkv_groups, gerr, sizeof gerr) == 0;
    printf("\nmodel: %s%s%s\n", model, strcmp(dir, model) ? " -> " : "", strcmp(dir, model) ? dir : "");
    printf("architecture: %s (%s, %s MLP, %s rotary, %s residual)\n", c.arch->hf_class,
           c.arch->norm == TP_NORM_RMSNORM ? "RMSNorm" : "LayerNorm",
           c.arch->mlp == TP_MLP_SILU_GATED ? "SiLU-gated" : "GELU",
           c.arch->rope == TP_ROPE_NEOX ? "rotate-half" : "GPT-J",
           c.arch->residual == TP_RESIDUAL_SEQUENTIAL ? "sequential" : "parallel");
    printf("config: %d layers, n_embd %d, %d heads of %d (%d KV heads, rotary_dim %d, rope_theta %g), MLP width %d, "
           "vocab %d, n_positions %d\n",
           c.n_layer, c.n_embd, c.n_head, c.head_dim, c.n_kv_head, c.rotary_dim, (double)c.rope_theta, c.n_inner,
           c.vocab_size, c.n_positions);
    if (groups_ok) printf("qkv_proj: %d groups (mp_num)\n", c.qkv_groups);
    else if (fused) printf("qkv_proj: unknown layout: %s\n", gerr);
    int64_t params = tp_arch_param_count(&c);
    printf("parameters: %" PRId64 " (%.2f %s)\n", params, params >= 1e9 ? params / 1e9 : params / 1e6,
           params >= 1e9 ? "B" : "M");

    /* The checkpoint, when there is one (a config file alone has none). */
    const char *stored = NULL;
    size_t len = strlen(dir);
    tp_ckpt *ck = NULL;
    if (len > 5 && !strcmp(dir + len - 5, ".json")) {
        stored = config_dtype(dir);
        printf("checkpoint: none (a config file); torch_dtype %s\n", stored ? stored : "not given");
    } else if (!(ck = tp_ckpt_open(dir, err, sizeof err))) {
        if (!strstr(err, ": no checkpoint")) {
            free(dir);
            return info_error(1, "%s", err);
        }
        stored = config_dtype(dir); /* config.json alone still answers "will it fit" */
        printf("checkpoint: none (%s); torch_dtype %s\n", err, stored ? stored : "not given");
    }
    if (ck) {
        size_t count[3] = {0}, n = tp_ckpt_count(ck);
        int64_t elems = 0, used = 0;
        for (size_t i = 0; i < n; i++) {
            const tp_st_tensor *t = tp_ckpt_at(ck, i);
            count[t->dtype]++;
            elems += tp_st_numel(t);
            if (model_tensor(&c, t->name)) used += tp_st_numel(t);
        }
        printf("checkpoint: %s\n", tp_ckpt_describe(ck));
        printf("  %zu file%s, %zu tensors, %" PRId64 " elements, %s stored as", tp_ckpt_file_count(ck),
               tp_ckpt_file_count(ck) == 1 ? "" : "s", n, elems, human((double)tp_ckpt_total_bytes(ck), b1, sizeof b1));
        for (int d = 0; d < 3; d++)
            if (count[d]) {
                printf(" %s%s", tp_dtype_name((tp_dtype)d), count[d] == n ? "" : "(some)");
                if (!stored || count[d] > count[0]) stored = tp_dtype_name((tp_dtype)d);
            }
        printf("\n  %" PRId64 " of the elements are model weights%s\n", used,
               used == params ? " (= the parameters of config.json)"
                              : " (config.json implies other shapes or tensors)");
        tp_ckpt_close(ck);
    }

    /* Serving dtype: --dtype, else what the engine would use here (fp16 on a GPU, fp32 on CPUs). */
    int gpu = tp_backend_cuda_compiled() && tp_backend_cuda_device_count() > 0;
    const char *dt = dtype_flag ? dtype_flag : gpu ? "f16" : "f32";
    double es = strcmp(dt, "f32") == 0 ? 4 : 2, kes = kv_bf16 ? 2 : es;
    if (kv_bf16 && es != 4) return kv_bf16_refused(dt); /* the CUDA backend's default dtype */
    char why[128];
    if (memory > 0) snprintf(why, sizeof why, "--memory");
    else memory = default_memory(why, sizeof why);
    printf("per rank, weights and KV cache in %s (%s), %s per rank (%s):\n", dt,
           dtype_flag ? "--dtype"
           : gpu      ? "the CUDA backend's default"
                      : "the CPU backend",
           human(memory, b1, sizeof b1), why);
    if (kv_bf16) printf("KV cache in bf16 (--kv-cache-dtype bf16)\n");
    if (weights == 8)
        printf("GEMM weights (attention, MLP, lm_head) in int8 with an f32 scale per row "
               "(--weights int8); embedding, norms and biases in %s\n", dt);
    if (weights == 4)
        printf("GEMM weights (attention, MLP%s) in int4, groups of %d along K with an f32 scale and a one-byte zero "
               "each (--weights int4%s); %sembedding, norms and biases in %s\n", lm4 ? ", lm_head" : "", group,
               lm4 ? " --lm-head int4" : "", lm4 ? "" : "lm_head in int8 with an f32 scale per row; ", dt);
    printf("  %-3s %16s %20s %22s\n", "TP", "weights/rank", "KV bytes/token/rank", "KV tokens that fit");
    char gemm_line[256];
    size_t gl = (size_t)snprintf(gemm_line, sizeof gemm_line, "GEMM weight bytes a decode step reads per rank "
                                                               "(= per token at batch 1):");
    for (int tp = 1; tp <= 8; tp *= 2) {
        tp_shard s;
        if (tp_shard_plan(&c, tp, 0, &s, err, sizeof err)) {
            printf("  %-3d %s\n", tp,
                   c.n_head % tp ? "not valid: n_head is not a multiple of it"
                                 : "not valid: it neither divides nor is a multiple of the KV heads");
            continue;
        }
        int64_t most = 0;
        char why4[160] = "";
        for (int r = 0; r < tp; r++) { /* shards differ by a row at most; take the largest */
            tp_shard_plan(&c, tp, r, &s, err, sizeof err);
            int64_t e = rank_elements(&c, &s);
            if (e > most) most = e;
            if (weights == 4 && !why4[0]) rank_int4_bytes(&c, &s, group, lm4, why4, sizeof why4); /* the first rank that fails */
        }
        if (why4[0]) {
            printf("  %-3d not valid for --weights int4: %s\n", tp, why4);
            if (gl < sizeof gemm_line)
                gl += (size_t)snprintf(gemm_line + gl, sizeof gemm_line - gl, "%s TP %d not valid", tp > 1 ? "," : "", tp);
            continue;
        }
        int64_t mel = 0, mrows = 0;
        tp_shard_plan(&c, tp, 0, &s, err, sizeof err); /* rank 0: the most MLP rows and vocab rows */
        rank_matrices(&c, &s, &mel, &mrows);
        const double gemm = weights == 8   ? (double)mel + 4.0 * (double)mrows
                            : weights == 4 ? rank_int4_bytes(&c, &s, group, lm4, why4, sizeof why4)
                                           : (double)mel * es; /* read per decode step */
        double w = (double)most * es - (weights ? (double)mel * es - gemm : 0.0);
        double kv = 2.0 * c.n_layer * (double)s.n_kv_heads * c.head_dim * kes; /* K and V of every layer, its KV heads */
        char b3[64];
        if (gl < sizeof gemm_line)
            gl += (size_t)snprintf(gemm_line + gl, sizeof gemm_line - gl, "%s TP %d %s", tp > 1 ? "," : "", tp,
                                   human(gemm, b3, sizeof b3));
        if (w >= memory)
            printf("  %-3d %16s %20.0f %22s\n", tp, human(w, b1, sizeof b1), kv, "none: weights do not fit");
        else printf("  %-3d %16s %20.0f %22.0f\n", tp, human(w, b2, sizeof b2), kv, floor((memory - w) / kv));
    }
    printf("(KV tokens: memory left after the weights, before activations; summed over every sequence)\n");
    printf("%s\n", gemm_line);
    if (stored) printf("stored dtype: %s\n", stored);
    free(dir);
    return 0;
}

int tp_cmd_info(int argc, char **argv) {
    const char *model = NULL, *revision = NULL, *dtype = NULL;
    /* 8: --weights int8, 4: int4; --group-size, --lm-head (int4); --kv-cache-dtype (bf16 1, auto 0; -1 unset) */
    int weights = 0, group = 0, lm4 = -1, kv_bf16 = -1;
    double memory = 0;
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int is_model = !strcmp(f, "--model") || !strcmp(f, "--config");
        if (is_model || !strcmp(f, "--revision") || !strcmp(f, "--memory") || !strcmp(f, "--dtype") ||
            !strcmp(f, "--weights") || !strcmp(f, "--group-size") || !strcmp(f, "--lm-head") ||
            !strcmp(f, "--kv-cache-dtype")) {
            if (!v) return info_error(2, "%s needs a value", f);
            i++;
            if (is_model) model = v;
            else if (!strcmp(f, "--revision")) revision = v;
            else if (!strcmp(f, "--weights")) {
                if (strcmp(v, "int8") && strcmp(v, "int4"))
                    return info_error(2, "--weights must be int8 or int4, got \"%s\"", v);
                weights = v[3] == '8' ? 8 : 4;
            } else if (!strcmp(f, "--kv-cache-dtype")) {
                if (strcmp(v, "auto") && strcmp(v, "bf16"))
                    return info_error(2, "--kv-cache-dtype must be auto or bf16, got \"%s\"", v);
                kv_bf16 = v[0] == 'b';
            } else if (!strcmp(f, "--lm-head")) {
                if (strcmp(v, "int8") && strcmp(v, "int4"))
                    return info_error(2, "--lm-head must be int8 or int4, got \"%s\"", v);
                lm4 = v[3] == '4';
            } else if (!strcmp(f, "--group-size")) {
                char *end;
                long g = strtol(v, &end, 10);
                if (end == v || *end || g < TP_Q4_GROUP_ALIGN || g > 1 << 20 || g % TP_Q4_GROUP_ALIGN)
                    return info_error(2, "--group-size %s: must be a multiple of %d (the int4 kernels' k step)", v,
                                      TP_Q4_GROUP_ALIGN);
                group = (int)g;
            } else if (!strcmp(f, "--dtype")) {
                if (strcmp(v, "f16") && strcmp(v, "bf16") && strcmp(v, "f32"))
                    return info_error(2, "--dtype must be f16, bf16 or f32, got \"%s\"", v);
                dtype = v;
            } else {
                char *end;
                memory = strtod(v, &end) * GIB;
                if (end == v || *end || !(memory > 0) || memory > 1e6 * GIB)
                    return info_error(2, "--memory expects GiB per rank, a number > 0, got \"%s\"", v);
            }
        } else
            return info_error(
                2,
                "unknown flag %s (`tpgen info` takes no flags other than --model DIR|ORG/NAME|CONFIG.json, "
                "--config FILE, --revision R, --memory GiB, --dtype f16|bf16|f32, --weights int8|int4, --group-size G, --lm-head int8|int4, --kv-cache-dtype auto|bf16)",
                f);
    }
    if (!model && (revision || dtype || weights || group || lm4 >= 0 || kv_bf16 >= 0 || memory > 0))
        return info_error(2, "--revision, --memory, --dtype, --weights, --group-size, --lm-head and --kv-cache-dtype "
                             "need --model");
    if (group && weights != 4) return info_error(2, "--group-size is for --weights int4 (the k of one 4-bit group)");
    if (lm4 >= 0 && weights != 4) return info_error(2, "--lm-head is for --weights int4 (lm_head under 4-bit layers)");
    if (lm4 < 0) lm4 = 0;
    if (kv_bf16 > 0 && dtype && strcmp(dtype, "f32")) return kv_bf16_refused(dtype);
    if (!group) group = TP_Q4_DEFAULT_GROUP;
    printf("backends: cpu%s\n", tp_backend_cuda_compiled() ? ", cuda" : "");
    printf("cpu cores: %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
    const char *why;
    const int ranks = tp_threads_local_ranks_env(), threads = tp_threads_for_rank(0, ranks, &why);
    char line[512];
    tp_threads_describe(line, sizeof line, threads, why);
    printf("cpu %s (%d rank%s on this node)\n", line, ranks, ranks > 1 ? "s" : "");
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("cpu blas: OpenBLAS %s kernels (%s%s%s)\n", tp_cpu_blas_core_name(),
           tp_threads_set_by_tpgen("OPENBLAS_CORETYPE") ? "OPENBLAS_CORETYPE=" : ct && *ct ? "the user's OPENBLAS_CORETYPE=" : "",
           ct && *ct ? ct : "chosen by the library from CPUID",
           tp_threads_set_by_tpgen("OPENBLAS_CORETYPE") ? ", set by tpgen: the library did not know this CPU" : "");
    if (tp_backend_cuda_compiled()) {
        const int n = tp_backend_cuda_device_count();
        printf("cuda devices: %d%s\n", n, tp_cuda_module_emulated() ? " (emulated)" : "");
    }
    return model ? model_info(model, revision, memory, dtype, weights, group, lm4, kv_bf16 > 0) : 0;
}
