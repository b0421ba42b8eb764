/* tpgen bench: decode-step time at several batch sizes against the memory-bandwidth floor, and
 * prefill throughput at several prompt lengths against the GEMM rate, both measured in the
 * same run.
 *
 * Decode at batch B reads every weight matrix once per step plus the KV cache of B sequences,
 * so a step cannot beat (weight bytes + KV bytes) / memory bandwidth. The weight bytes are what
 * this rank's matrices hold in their stored dtype (f32, bf16, or int8 + f32 row scales:
 * tp_matrix_read_bytes), the KV bytes B (context + 1) positions in the KV dtype. Each batch size
 * runs --steps decode steps at positions --context.. (the cache content is zeros: the timing does
 * not depend on it), after 3 warm-up steps; the median step time is reported, per rank bytes.
 * Unless given, --steps is min(32, n_positions - 4) and --context min(512, n_positions - steps -
 * 4), so the defaults fit any model; a --context given that does not fit is an error. The
 * floor is the read-only bandwidth (tp_bench_read_gbs); the copy bandwidth stays beside it (a
 * copy under-reports a read stream on a CPU, so batch 1 could show more than 100% of it).
 *
 * Prefill of an L-token prompt (--prefill, capped at n_positions) runs the way generate runs it:
 * chunks of --max-batch-tokens, logits for the last token only; median of --prefill-runs. Its
 * FLOPs per rank are the layers' GEMMs (2 T times their elements, tp_arch_layer_matrix_elems:
 * CodeGen E (4 Hl D + 2 Il), LLaMA E (2 (Hl + Hkl) D + 3 Il)), the causal attention
 * (4 Hl D per token and attended position) and one lm_head row, against the backend's GEMM rate
 * on this rank's fc_in shape at the chunk size. On the CPU backends (whose ops run on the calling
 * thread) prefill rows also give attention's share: rank 0's attention op is wrapped to add up
 * its wall time, "attention_ms" (median over the runs) and "pct_attention" = attention_ms / ms.
 *
 * Every JSON row names the kernels that made it (the backend's kernel_name, the decision its ops
 * take): "kernels": {"matmul", "logits", "attention"} at the row's step shape -- decode: B tokens,
 * B logits rows, one query per sequence; prefill: the chunk's tokens (and "matmul_last_chunk"
 * when a shorter last chunk takes another path), one logits row, the chunk's queries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "bench_probes.h"
#include "commands.h"
#include "util/log.h"
#include "util/threads.h"
#include "model/step.h"
#include "job.h"

#define WARMUP 3

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* --prefill lengths capped at n_positions, sorted, without repeats; "0": none. */
static int32_t *prefill_lengths(const char *list, int n_positions, int *n) {
    int32_t *v = tp_parse_id_list(list, n, "--prefill");
    if (*n == 1 && v[0] == 0) {
        *n = 0;
        return v;
    }
    for (int i = 0; i < *n; i++) {
        if (v[i] < 1) tp_die_all("--prefill lengths must be >= 1 (or --prefill 0 for none)");
        if (v[i] > n_positions) v[i] = n_positions;
    }
    qsort(v, *n, sizeof *v, cmp_int);
    int k = 0;
    for (int i = 0; i < *n; i++)
        if (!k || v[i] != v[k - 1]) v[k++] = v[i];
    *n = k;
    return v;
}

/* --steps and --context as given, or fitted to n_positions (the file comment). */
static void fit_context(tp_args *a, int n_positions) {
    const int room = n_positions - WARMUP - 1; /* positions for the context plus the timed steps */
    if (a->steps < 0) a->steps = room < 32 ? room : 32;
    if (a->steps < 1 || a->steps > room)
        tp_die_all("--steps %d + %d warm-up steps + 1 exceeds n_positions=%d (at most %d steps fit)", a->steps, WARMUP,
                   n_positions, room > 0 ? room : 0);
    if (a->context < 0) {
        a->context = room - a->steps < 512 ? room - a->steps : 512;
        return;
    }
    if (a->context + a->steps > room)
        tp_die_all("--context %d + %d steps (%d timed + %d warm-up) exceeds n_positions=%d (at most --context %d "
                   "with --steps %d; leave --context out to fit it)",
                   a->context, a->steps + WARMUP, a->steps, WARMUP, n_positions, room - a->steps, a->steps);
}

/* "kernels" of a JSON row: each op class's kernel_name at the row's step shape (file comment);
 * T_last: the last prefill chunk's tokens (0: none other). null when the backend does not say. */
static void kernels_json(char *buf, size_t size, tp_backend *b, int T, int logit_rows, int q_per_seq, int T_last,
                         int D) {
    if (!b->kernel_name) {
        snprintf(buf, size, "null");
        return;
    }
    const char *mm = b->kernel_name(b, TP_OP_MATMUL, T, D);
    size_t u = (size_t)snprintf(buf, size, "{\"matmul\": \"%s\", \"logits\": \"%s\", \"attention\": \"%s\"", mm,
                                b->kernel_name(b, TP_OP_LOGITS, logit_rows, D),
                                b->kernel_name(b, TP_OP_ATTENTION, q_per_seq, D));
    const char *last = T_last ? b->kernel_name(b, TP_OP_MATMUL, T_last, D) : mm;
    if (u < size && strcmp(last, mm) != 0)
        u += (size_t)snprintf(buf + u, size - u, ", \"matmul_last_chunk\": \"%s\"", last);
    if (u < size) snprintf(buf + u, size - u, "}");
}

/* Attention's share of a prefill (file comment): the backend's op, wrapped to add up its time. */
static void (*g_attention)(tp_backend *b, void *out, const void *qkv, const void *k_cache, const void *v_cache,
                           const tp_step *st, const tp_attn_shape *a);
static double g_attention_s;
static void timed_attention(tp_backend *b, void *out, const void *qkv, const void *k_cache, const void *v_cache,
                            const tp_step *st, const tp_attn_shape *a) {
    const double t0 = tp_now_seconds();
    g_attention(b, out, qkv, k_cache, v_cache, st, a);
    g_attention_s += tp_now_seconds() - t0;
}

/* FLOPs this rank spends on an L-token prefill (see the file comment). */
static double prefill_flops(const tp_model *m, int L) {
    double E = m->cfg.n_embd, HD = (double)m->sh.n_heads * m->cfg.head_dim;
    double gemm = (double)tp_arch_layer_matrix_elems(&m->cfg, m->sh.n_heads, m->sh.n_kv_heads, m->sh.n_inner, NULL);
    double per_layer = 2.0 * L * gemm + 4.0 * HD * ((double)L * (L + 1) / 2);
    return m->cfg.n_layer * per_layer + 2.0 * E * m->sh.n_vocab;
}

/* One L-token prompt through the model in chunks of C tokens; seconds. */
static double prefill_once(tp_model *m, int L, int C, int32_t *ids, int32_t *pos, int32_t *seq, int32_t *table,
                           tp_step_output *out) {
    int MB = m->a.max_blocks;
    for (int j = 0; j < MB; j++) table[j] = j < (L + m->kv.block_size - 1) / m->kv.block_size ? j : -1;
    double t0 = tp_now_seconds();
    for (int p0 = 0; p0 < L; p0 += C) {
        int T = L - p0 < C ? L - p0 : C;
        for (int t = 0; t < T; t++) {
            ids[t] = (int32_t)(((long)(p0 + t) * 7919 + 13) % m->cfg.vocab_size);
            pos[t] = p0 + t;
            seq[t] = 0;
        }
        int32_t last = T - 1;
        int R = p0 + T == L; /* logits of the prompt's last token, as generate asks */
        tp_step_host st = {T, ids, pos, seq, 1, MB, table, R, &last};
        tp_logits_request lr = {TP_LOGITS_CANDIDATES, 1, NULL};
        tp_step_run(m, &st, &lr, out);
    }
    return tp_now_seconds() - t0;
}

int tp_cmd_bench(int argc, char **argv) {
    tp_comm *mpi = tp_comm_mpi_init(&argc, &argv);
    tp_args a;
    tp_args_parse(&a, "bench", argc, argv);
    int nb;
    int32_t *batches = tp_parse_id_list(a.batches, &nb, "--batch");
    int bmax = 0;
    for (int i = 0; i < nb; i++) {
        if (batches[i] < 1) tp_die_all("--batch sizes must be >= 1");
        bmax = batches[i] > bmax ? batches[i] : bmax;
    }
    tp_job job;
    tp_job_config(&job, mpi, &a);
    tp_model *m = &job.m;
    int np;
    int32_t *plens = prefill_lengths(a.prefill, m->cfg.n_positions, &np);
    fit_context(&a, m->cfg.n_positions);
    int len = a.context + WARMUP + a.steps + 1;
    tp_args sized = a;
    sized.max_batch = bmax;
    if (sized.max_batch_tokens < bmax) sized.max_batch_tokens = bmax;
    int per_seq = (len + a.block_size - 1) / a.block_size;
    int prefill_blocks = np ? (plens[np - 1] + a.block_size - 1) / a.block_size : 0;
    long blocks = (long)bmax * per_seq > prefill_blocks ? (long)bmax * per_seq : prefill_blocks;
    sized.kv_cache_tokens = blocks * a.block_size;
    tp_job_load(&job, &sized, sized.kv_cache_tokens); /* the run's KV cache too is planned before any weight */
    tp_job_alloc(&job, &sized, sized.kv_cache_tokens);
    tp_bench_zero_device(job.b, m->kv.arena, m->kv.bytes_per_token * (size_t)m->kv.n_blocks * m->kv.block_size);

    /* The reference rates, every rank at once: ranks on a node share its memory and cores. */
    int cpu = strcmp(job.b->name, "cpu") == 0;
    int threads = tp_threads_for_rank(a.threads, mpi->local_size, NULL); /* the backend's count */
    mpi->barrier(mpi);
    double copy_gbs = tp_bench_copy_gbs(job.b);
    size_t read_bytes = 0;
    mpi->barrier(mpi);
    /* The read probe streams host memory: the CPU backend's memory. A GPU's has no read-only
     * probe in the backend interface, so its read floor is not reported (n/a, null). */
    double read_gbs = cpu ? tp_bench_read_gbs(job.b, threads, &read_bytes) : 0.0;
    int chunk = sized.max_batch_tokens, gemm_T = np && plens[np - 1] < chunk ? plens[np - 1] : chunk;
    double gemm = 0.0;
    if (np) {
        mpi->barrier(mpi);
        gemm = tp_bench_gemm_gflops(job.b, gemm_T, m->sh.n_inner, m->cfg.n_embd);
    }
    if (mpi->rank == 0) {
        int MB = m->a.max_blocks;
        if (!a.json) {
            printf("copy bandwidth (read + write): %.1f GB/s per rank\n", copy_gbs);
            if (cpu)
                printf("read bandwidth (read-only sum of %zu MiB, %d threads, best of 7): %.1f GB/s per rank\n",
                       read_bytes >> 20, threads, read_gbs);
            else printf("read bandwidth: n/a (no read-only probe for the %s backend)\n", job.b->name);
        }
        int T0 = chunk > bmax ? chunk : bmax;
        int32_t *ids = tp_malloc(T0 * sizeof(int32_t)), *pos = tp_malloc(T0 * sizeof(int32_t));
        int32_t *seq = tp_malloc(T0 * sizeof(int32_t)), *rows = tp_malloc(bmax * sizeof(int32_t));
        int32_t *table = tp_malloc((size_t)bmax * MB * sizeof(int32_t));
        int n_times = a.steps > a.prefill_runs ? a.steps : a.prefill_runs;
        double *times = tp_malloc(n_times * sizeof(double));
        tp_step_output out;
        tp_step_output_init(&out, m);
        if (!a.json) {
            printf("GEMM weights: %s, %.1f MB per rank read by every decode step (%.1f MB per token at batch 1)",
                   !job.b->weights                 ? tp_dtype_name(job.b->act)
                   : strcmp(job.b->weights, "int4") ? "int8 + f32 row scales (--weights int8)"
                   : m->cfg.q4_lm_head              ? "int4 in groups with f32 scales and zero points, lm_head too"
                                                     : "int4 in groups with f32 scales and zero points, lm_head int8",
                   m->w.matrix_read_bytes / 1e6, m->w.matrix_read_bytes / 1e6);
            if (m->w.matrix_bytes > m->w.matrix_read_bytes * 1.01) /* a second layout beside the plain one */
                printf("; they occupy %.1f MB (a step reads one layout)", m->w.matrix_bytes / 1e6);
            printf("\ndecode: --context %d, --steps %d timed after %d warm-up (n_positions %d)\n", a.context, a.steps,
                   WARMUP, m->cfg.n_positions);
        }
        if (!a.json)
            printf("%6s %8s %10s %12s %12s %10s %9s %9s\n", "batch", "context", "ms/step", "tokens/s", "MB/rank/step",
                   "GB/s/rank", "%read-bw", "%copy-bw");
        for (int bi = 0; bi < nb; bi++) {
            int B = batches[bi];
            for (int s = 0; s < B; s++)
                for (int j = 0; j < MB; j++) table[s * MB + j] = j < per_seq ? s * per_seq + j : -1;
            for (int it = 0; it < WARMUP + a.steps; it++) {
                for (int s = 0; s < B; s++) {
                    ids[s] = (s * 7919 + it * 104729) % m->cfg.vocab_size;
                    pos[s] = a.context + it;
                    seq[s] = s;
                    rows[s] = s;
                }
                tp_step_host st = {B, ids, pos, seq, B, MB, table, B, rows};
                tp_logits_request lr = {TP_LOGITS_CANDIDATES, 1, NULL};
                double t0 = tp_now_seconds();
                tp_step_run(m, &st, &lr, &out);
                if (it >= WARMUP) times[it - WARMUP] = tp_now_seconds() - t0;
            }
            qsort(times, a.steps, sizeof *times, cmp_double);
            double t = times[a.steps / 2];
            double wbytes = (double)m->w.matrix_read_bytes;
            double kvbytes = (double)B * (a.context + 1) * m->kv.bytes_per_token;
            double gbs = (wbytes + kvbytes) / t / 1e9;
            double pct = 100.0 * gbs / copy_gbs, pct_read = cpu ? 100.0 * gbs / read_gbs : 0.0;
            if (a.json) {
                char rd[160], kn[512];
                kernels_json(kn, sizeof kn, job.b, B, B, 1, 0, m->cfg.head_dim);
                if (cpu)
                    snprintf(rd, sizeof rd, "\"read_gb_per_s\": %.3f, \"pct_read\": %.2f, \"read_floor_ms\": %.4f",
                             read_gbs, pct_read, (wbytes + kvbytes) / (read_gbs * 1e9) * 1e3);
                else snprintf(rd, sizeof rd, "\"read_gb_per_s\": null, \"pct_read\": null, \"read_floor_ms\": null");
                printf("{\"batch\": %d, \"context\": %d, \"tp\": %d, \"backend\": \"%s\", \"dtype\": \"%s\", "
                       "\"ms_per_step\": %.4f, \"tokens_per_s\": %.2f, \"weight_bytes\": %.0f, \"kv_bytes\": %.0f, "
                       "\"gb_per_s\": %.3f, \"copy_gb_per_s\": %.3f, \"floor_ms\": %.4f, \"steps\": %d, "
                       "\"kind\": \"decode\", \"pct_copy\": %.2f, %s, \"weights\": \"%s\", "
                       "\"weight_bytes_per_token\": %.0f, \"kernels\": %s}\n",
                       B, a.context, mpi->size, job.b->name, tp_dtype_name(job.b->act), t * 1e3, B / t, wbytes,
                       kvbytes, gbs, copy_gbs, (wbytes + kvbytes) / (copy_gbs * 1e9) * 1e3, a.steps, pct, rd,
                       job.b->weights ? job.b->weights : tp_dtype_name(job.b->act), wbytes / B, kn);
            } else {
                char rd[16];
                if (cpu) snprintf(rd, sizeof rd, "%8.1f%%", pct_read);
                else snprintf(rd, sizeof rd, "%9s", "n/a");
                printf("%6d %8d %10.3f %12.1f %12.1f %10.2f %s %8.1f%%\n", B, a.context, t * 1e3, B / t,
                       (wbytes + kvbytes) / 1e6, gbs, rd, pct);
            }
            fflush(stdout);
        }

        if (np && !a.json)
            printf("GEMM (backend matmul, T=%d N=%d K=%d, median of 5): %.1f GFLOP/s per rank\n"
                   "%7s %6s %10s %10s %10s %12s %7s %10s\n",
                   gemm_T, m->sh.n_inner, m->cfg.n_embd, gemm, "prefill", "chunk", "ms", "tokens/s", "GFLOP/rank",
                   "GFLOP/s/rank", "%gemm", "%attention");
        if (np) prefill_once(m, plens[0], chunk, ids, pos, seq, table, &out); /* warm-up */
        double *att_times = tp_malloc((a.prefill_runs > 0 ? a.prefill_runs : 1) * sizeof(double));
        if (cpu) { /* attention's share (file comment) */
            g_attention = job.b->attention;
            job.b->attention = timed_attention;
        }
        for (int pi = 0; pi < np; pi++) {
            int L = plens[pi];
            for (int r = 0; r < a.prefill_runs; r++) {
                g_attention_s = 0.0;
                times[r] = prefill_once(m, L, chunk, ids, pos, seq, table, &out);
                att_times[r] = g_attention_s;
            }
            qsort(times, a.prefill_runs, sizeof *times, cmp_double);
            qsort(att_times, a.prefill_runs, sizeof *att_times, cmp_double);
            double t = times[a.prefill_runs / 2], gf = prefill_flops(m, L) / 1e9, ta = att_times[a.prefill_runs / 2];
            char att_json[96] = "", att_col[16] = "       n/a";
            if (cpu) {
                snprintf(att_json, sizeof att_json, ", \"attention_ms\": %.4f, \"pct_attention\": %.2f", ta * 1e3,
                         100.0 * ta / t);
                snprintf(att_col, sizeof att_col, " %9.1f%%", 100.0 * ta / t);
            }
            char kn[512];
            const int T1 = L < chunk ? L : chunk, Tl = L > chunk && L % chunk ? L % chunk : 0;
            kernels_json(kn, sizeof kn, job.b, T1, 1, T1, Tl, m->cfg.head_dim);
            /* the GEMM probe's path (its rate is the %gemm reference) */
            const char *gk = job.b->kernel_name ? job.b->kernel_name(job.b, TP_OP_MATMUL, gemm_T, 0) : NULL;
            if (a.json)
                printf("{\"prefill_tokens\": %d, \"chunk\": %d, \"tp\": %d, \"backend\": \"%s\", \"dtype\": \"%s\", "
                       "\"ms\": %.4f, \"tokens_per_s\": %.2f, \"gflop_per_rank\": %.4f, \"gflop_per_s\": %.3f, "
                       "\"gemm_gflop_per_s\": %.3f, \"gemm_shape\": [%d, %d, %d], \"pct_gemm\": %.2f, "
                       "\"runs\": %d, \"kind\": \"prefill\", \"weights\": \"%s\", \"kernels\": %s, "
                       "\"gemm_kernel\": %s%s%s%s}\n",
                       L, chunk, mpi->size, job.b->name, tp_dtype_name(job.b->act), t * 1e3, L / t, gf, gf / t, gemm,
                       gemm_T, m->sh.n_inner, m->cfg.n_embd, 100.0 * gf / t / gemm, a.prefill_runs,
                       job.b->weights ? job.b->weights : tp_dtype_name(job.b->act), kn, gk ? "\"" : "",
                       gk ? gk : "null", gk ? "\"" : "", att_json);
            else
                printf("%7d %6d %10.2f %10.1f %10.2f %12.1f %6.1f%%%s\n", L, chunk, t * 1e3, L / t, gf, gf / t,
                       100.0 * gf / t / gemm, att_col);
            fflush(stdout);
        }
        if (cpu) job.b->attention = g_attention;
        free(att_times);
        tp_step_stop(m);
        tp_step_output_free(&out);
        free(ids); free(pos); free(seq); free(rows); free(table); free(times);
    } else {
        tp_step_worker_loop(m);
    }
    free(batches);
    free(plens);
    tp_job_close(&job);
    tp_comm_finalize(mpi);
    return 0;
}
