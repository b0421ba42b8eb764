#include "job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/model_plan.h"
#include "kernels/cuda_module.h"
#include "checkpoint/remote_code.h"
#include "sched/sampler.h" /* TP_MAX_CANDIDATES: the top-k of logits_stats */
#include "util/log.h"
#include "util/threads.h"

void tp_job_agree(tp_comm *c, int ok) {
    if (c->allreduce_max_int(c, !ok)) {
        tp_comm_finalize(c);
        exit(1);
    }
}

/* weights ("int8", "int4" or NULL) on the backend just made; the same answer on every rank. */
static tp_backend *with_weights(tp_backend *b, const char *weights, int verbose) {
    if (!weights) return b;
    char err[512];
    if (strcmp(weights, "int4") == 0 ? tp_backend_use_int4(b, verbose, err, sizeof err)
                                     : tp_backend_use_int8(b, verbose, err, sizeof err))
        tp_die_all("%s", err);
    return b;
}

/* The backend with weights: a->weights, or "int4" for a 4-bit checkpoint (named `why` in messages). */
static tp_backend *job_backend(const tp_args *a, tp_comm *mpi);
static tp_backend *backend_with(const tp_args *a, tp_comm *mpi, const char *weights, const char *why) {
    const int cpu = a->backend ? strcmp(a->backend, "cpu") == 0 : tp_backend_cuda_device_count() == 0;
    if (weights && cpu && a->dtype && strcmp(a->dtype, "f32") != 0) /* before the bf16 backend's own checks */
        tp_die_all("%s on the CPU runs with f32 activations: it cannot be combined with --dtype %s (drop --dtype, or "
                   "use --dtype f32)", why, a->dtype);
    return with_weights(job_backend(a, mpi), weights, a->verbose);
}

tp_backend *tp_job_backend(const tp_args *a, tp_comm *mpi) {
    char why[64];
    snprintf(why, sizeof why, "--weights %s", a->weights ? a->weights : "");
    return backend_with(a, mpi, a->weights, why);
}

static tp_backend *job_backend(const tp_args *a, tp_comm *mpi) {
    const char *name = a->backend;
    if (!name) name = tp_backend_cuda_device_count() > 0 ? "cuda" : "cpu";
    if (strcmp(name, "cpu") == 0) {
        if (a->dtype && strcmp(a->dtype, "f32") != 0 && strcmp(a->dtype, "bf16") != 0)
            tp_die_all("--dtype %s: the CPU backend computes in f32 (default) or bf16", a->dtype);
        const char *why;
        int threads = tp_threads_for_rank(a->threads, mpi->local_size, &why); /* util/threads.h's rule */
        if (a->verbose) {
            char line[512];
            tp_threads_describe(line, sizeof line, threads, why);
            tp_log0("%s\n", line);
        }
        if (a->dtype && strcmp(a->dtype, "bf16") == 0) {
            char err[512];
            tp_backend *b = tp_backend_cpu_bf16_create(threads, a->verbose, err, sizeof err);
            if (!b) tp_die_all("%s", err);
            return b;
        }
        return tp_backend_cpu_create(threads);
    }
    char err[2048];
    if (tp_cuda_module_load(err, sizeof err)) tp_die_all("--backend cuda: %s", err); /* not built, not found */
    if (a->verbose) tp_log0("cuda module: %s\n", tp_cuda_module_path());
    int n_dev = tp_backend_cuda_device_count();
    if (n_dev == 0) tp_die_all("--backend cuda: no CUDA GPU is visible on this node");
    /* With --comm mpi several ranks may share a GPU (that is how TP > 1 is tested on one GPU). */
    int sharing = a->comm && strcmp(a->comm, "mpi") == 0;
    if (mpi->local_size > n_dev && !sharing)
        tp_die_all("%d ranks on this node but only %d GPUs are visible; start at most %d ranks per node, or use "
                   "--comm mpi to share GPUs", mpi->local_size, n_dev, n_dev);
    tp_dtype dt = a->dtype && strcmp(a->dtype, "bf16") == 0 ? TP_BF16 : TP_F16;
    if (a->dtype && strcmp(a->dtype, "f32") == 0) tp_die_all("--dtype f32 is for the CPU backend; use f16 or bf16");
    tp_backend *b = tp_backend_cuda_create(mpi->local_rank % n_dev, dt, err, sizeof err);
    if (!b) tp_die("%s", err);
    return b;
}

/* Logits rows per step: one per sequence, and with --speculate one per draft too (the
 * scheduler never packs more than the step's tokens). */
int tp_job_max_rows(const tp_args *a) {
    long r = (long)a->max_batch * (1 + a->speculate_k);
    return r < a->max_batch_tokens ? (int)r : a->max_batch_tokens;
}

/* The memory plan (engine/model/model_plan.h) for the job's limits, agreed by every rank: when it does
 * not fit on some rank, that rank prints why with the plan's table and every rank exits 1.
 * Returns the KV blocks this rank can hold; prints the plan with --verbose when `print`. */
static long job_plan(tp_job *j, const tp_args *a, long kv_tokens_needed, int print) {
    tp_model *m = &j->m;
    tp_backend *b = j->b;
    /* ranks that share this memory (the node's RAM, or a GPU under --comm mpi) split it */
    int n_dev = strcmp(b->name, "cpu") == 0 ? 1 : tp_backend_cuda_device_count();
    int sharing = (j->mpi->local_size + n_dev - 1) / (n_dev > 0 ? n_dev : 1);
    tp_plan_args pa = {.max_tokens = a->max_batch_tokens, .max_rows = tp_job_max_rows(a), .max_seqs = a->max_batch,
                       .block_size = a->block_size, .max_k = TP_MAX_CANDIDATES, .kv_tokens = a->kv_cache_tokens,
                       .kv_mem = a->kv_cache_mem, .kv_tokens_needed = kv_tokens_needed, .sharing = sharing};
    static char err[8192];
    tp_mem_plan plan;
    long blocks = tp_model_plan(m, &pa, b->mem_available(b), &plan, err, sizeof err);
    const int bad = blocks < 1, size = j->mpi->size;
    const int first_bad = size - j->mpi->allreduce_max_int(j->mpi, bad ? size - j->mpi->rank : 0);
    if (first_bad < size) { /* reported once, by the lowest rank that does not fit */
        if (j->mpi->rank == first_bad) {
            fprintf(stderr, "tpgen: error: %s", err);
            fflush(stderr);
        }
        tp_comm_finalize(j->mpi);
        exit(1);
    }
    if (print && a->verbose) {
        tp_mem_plan_format(&plan, err, sizeof err);
        tp_log0("memory plan, rank 0 (%s, %.1f MiB free%s):\n%s", b->name, b->mem_available(b) / 1048576.0,
                sharing > 1 ? ", shared by several ranks" : "", err);
    }
    return blocks;
}

/* 4-bit layers: a checkpoint's quantization_config (AWQ, GPTQ: no --weights needed, int8 refused), or
 * --weights int4 in groups of --group-size (default TP_Q4_DEFAULT_GROUP). */
static void job_q4(tp_config *c, const tp_args *a, const char *path) {
    const int lm4 = a->lm_head && strcmp(a->lm_head, "int4") == 0;
    if (a->int4_act && c->quant.method == TP_QUANT_NONE && !(a->weights && strcmp(a->weights, "int4") == 0))
        tp_die_all("--int4-activations %s is for 4-bit weights (--weights int4, or an AWQ / GPTQ checkpoint)",
                   a->int4_act);
    if (a->lm_head && c->quant.method == TP_QUANT_NONE && !(a->weights && strcmp(a->weights, "int4") == 0))
        tp_die_all("--lm-head %s is for 4-bit weights (--weights int4, or an AWQ / GPTQ checkpoint); %s", a->lm_head,
                   a->weights ? "--weights int8 stores lm_head in int8" : "without them lm_head has the layers' dtype");
    if (c->quant.method != TP_QUANT_NONE) {
        c->q4_lm_head = lm4;
        if (a->weights && strcmp(a->weights, "int4"))
            tp_die_all("--weights %s: %s is a 4-bit checkpoint (config.json quantization_config: %s); its weights "
                       "load as they are: leave --weights out", a->weights, path, tp_quant_describe(&c->quant));
        if (a->group_size)
            tp_die_all("--group-size: %s is a 4-bit checkpoint with its own group_size (config.json "
                       "quantization_config: %s)", path, tp_quant_describe(&c->quant));
        return;
    }
    if (!a->weights || strcmp(a->weights, "int4")) return;
    c->q4_group = a->group_size ? a->group_size : TP_Q4_DEFAULT_GROUP;
    c->q4_from_flag = 1;
    c->q4_lm_head = lm4;
}

void tp_job_config(tp_job *j, tp_comm *mpi, const tp_args *a) {
    memset(j, 0, sizeof *j);
    j->mpi = mpi;
    tp_model *m = &j->m;
    char err[4096];
    const char *path = a->model ? a->model : a->config;
    if (tp_config_load(path, &m->cfg, err, sizeof err)) tp_die_all("%s", err);
    if (m->cfg.arch->names.qkv) { /* a fused qkv_proj in mp_num groups (CodeGen) */
        if (tp_checkpoint_qkv_groups(path, m->cfg.n_head, a->qkv_groups, &m->cfg.qkv_groups, err, sizeof err))
            tp_die_all("%s", err);
    } else if (a->qkv_groups > 0)
        tp_die_all("--qkv-groups is for CodeGen's fused qkv_proj; %s has separate q/k/v projections",
                   m->cfg.arch->hf_class);
    job_q4(&m->cfg, a, path);
    if (tp_shard_plan(&m->cfg, mpi->size, mpi->rank, &m->sh, err, sizeof err)) tp_die_all("%s", err);
}

void tp_job_open(tp_job *j, tp_comm *mpi, const tp_args *a) {
    tp_job_config(j, mpi, a);
    tp_job_load(j, a, 0);
}

void tp_job_load(tp_job *j, const tp_args *a, long kv_tokens_needed) {
    tp_comm *mpi = j->mpi;
    tp_model *m = &j->m;
    char err[1024];
    if (m->cfg.q4_group) { /* int4 for a 4-bit checkpoint without --weights */
        j->b = backend_with(a, mpi, "int4", a->weights ? "--weights int4" : "a 4-bit checkpoint (quantization_config)");
        if (a->int4_act && strcmp(a->int4_act, "int8") == 0 && tp_backend_int4_act8(j->b, err, sizeof err))
            tp_die_all("%s", err);
    } else j->b = tp_job_backend(a, mpi);
    const int kv_bf16 = a->kv_cache_dtype && strcmp(a->kv_cache_dtype, "bf16") == 0;
    if (kv_bf16 && tp_backend_kv_dtype(j->b, TP_BF16, err, sizeof err)) tp_die_all("%s", err);
    tp_comm_mpi_set_backend(mpi, j->b);
    j->comm = mpi;
    int want_nccl = a->comm ? strcmp(a->comm, "nccl") == 0 : strcmp(j->b->name, "cuda") == 0 && mpi->size > 1;
    if (want_nccl) {
        if (strcmp(j->b->name, "cuda") != 0) tp_die_all("--comm nccl needs --backend cuda");
        j->comm = tp_comm_nccl_create(mpi, j->b, err, sizeof err);
        if (!j->comm) tp_die("%s", err);
    }
    if (j->comm->set_timeout) j->comm->set_timeout(j->comm, a->comm_timeout);
    m->b = j->b;
    m->comm = j->comm;
    m->use_graphs = !a->no_cuda_graphs;
    m->no_prefix_cache = a->no_prefix_cache;
    char weights_note[80] = "";
    if (j->b->weights) snprintf(weights_note, sizeof weights_note, ", %s weights", j->b->weights);
    if (j->b->kv != j->b->act)
        snprintf(weights_note + strlen(weights_note), sizeof weights_note - strlen(weights_note), ", %s K/V",
                 tp_dtype_flag(j->b->kv));
    tp_log0("tpgen: %s, %s, %d layers, E=%d, H=%d (%d KV), V=%d; TP=%d, backend %s (%s%s), comm %s\n",
            a->model ? a->model : a->config, m->cfg.arch->hf_class, m->cfg.n_layer, m->cfg.n_embd, m->cfg.n_head,
            m->cfg.n_kv_head, m->cfg.vocab_size,
            mpi->size, j->b->name, tp_dtype_name(j->b->act), weights_note, j->comm->name);
    job_plan(j, a, kv_tokens_needed, 0); /* refuse before loading weights what cannot fit */
    tp_model_load_weights(m, a->model, a->random_weights, a->seed + 12345);
}

void tp_job_alloc(tp_job *j, const tp_args *a, long kv_tokens_needed) {
    tp_model *m = &j->m;
    tp_backend *b = j->b;
    j->mpi->bcast(j->mpi, &kv_tokens_needed, sizeof kv_tokens_needed, 0);
    int bs = a->block_size, T = a->max_batch_tokens, S = a->max_batch, R = tp_job_max_rows(a);
    long blocks = job_plan(j, a, kv_tokens_needed, 1);
    /* every rank takes the smallest budget any rank can hold */
    int neg = -(int)(blocks > 2000000000L ? 2000000000L : blocks);
    blocks = -j->mpi->allreduce_max_int(j->mpi, neg);
    if (b->reserve_scratch) { /* the backend's scratch for the longest context: allocated now, never in a step */
        tp_plan_args pa = {.max_tokens = T, .max_rows = R, .max_seqs = S, .block_size = bs, .max_k = TP_MAX_CANDIDATES,
                           .kv_blocks = blocks};
        tp_step_limits lim;
        tp_model_step_limits(m, &pa, &lim);
        b->reserve_scratch(b, &lim);
    }
    if (b->attention_tune) { /* the attention kernel for the model's shape (timed on the CPU), before the KV cache */
        const tp_attn_shape as = tp_model_attn_shape(m);
        b->attention_tune(b, &as, bs, a->verbose);
    }
    tp_model_alloc(m, T, R, S, (int)blocks, bs);
}

void tp_job_close(tp_job *j) {
    tp_model_free(&j->m);
    if (j->comm != j->mpi) j->comm->destroy(j->comm);
    tp_comm_mpi_set_backend(j->mpi, NULL);
    j->b->destroy(j->b);
}

void tp_job_use_tokenizer_eos(tp_model *m, const tp_tokenizer *tok) {
    const int32_t eos = tok ? tp_tokenizer_eos_id(tok) : -1;
    if (eos < 0 || eos >= m->cfg.vocab_size || eos == m->cfg.eos_token_id) return; /* a test model's small vocab */
    tp_log0("tpgen: the tokenizer's eos token (id %d) ends a sequence, not config.json's eos_token_id %d\n", eos,
            m->cfg.eos_token_id);
    m->cfg.eos_token_id = eos;
}
