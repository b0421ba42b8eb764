/* tpgen bench: decode-step time at several batch sizes, with achieved memory bandwidth.
 *
 * Decode at batch B reads every weight matrix once per step plus the KV cache of B sequences,
 * so a step cannot beat (weight bytes + KV bytes) / memory bandwidth. Each batch size runs
 * --steps decode steps at positions --context.. (the cache content is zeros: the timing does not
 * depend on it), after 3 warm-up steps; the median step time is reported, per rank bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "util/log.h"
#include "engine/step.h"
#include "job.h"

#define WARMUP 3

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void zero_device(tp_backend *b, void *dst, size_t bytes) {
    size_t chunk = bytes < (64u << 20) ? bytes : (64u << 20);
    void *z = b->host_alloc(b, chunk, "bench zero buffer");
    memset(z, 0, chunk);
    for (size_t off = 0; off < bytes; off += chunk)
        b->to_device(b, (char *)dst + off, z, bytes - off < chunk ? bytes - off : chunk);
    b->sync(b);
    b->host_free(b, z);
}

/* Copy bandwidth of the backend's memory in GB/s, STREAM convention (bytes read + written),
 * median of 7 copies of 256 MiB. */
static double copy_bandwidth(tp_backend *b) {
    size_t bytes = 256u << 20;
    void *x = b->alloc(b, bytes, "bandwidth probe"), *y = b->alloc(b, bytes, "bandwidth probe");
    zero_device(b, x, bytes);
    zero_device(b, y, bytes);
    double t[7];
    for (int i = 0; i < 8; i++) {
        double t0 = tp_now_seconds();
        b->copy(b, y, x, bytes);
        b->sync(b);
        if (i) t[i - 1] = tp_now_seconds() - t0; /* the first copy warms up */
    }
    qsort(t, 7, sizeof *t, cmp_double);
    b->free(b, x);
    b->free(b, y);
    return 2.0 * bytes / t[3] / 1e9;
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
    tp_job_open(&job, mpi, &a);
    tp_model *m = &job.m;
    int len = a.context + WARMUP + a.steps + 1;
    if (len > m->cfg.n_positions)
        tp_die_all("--context %d + %d steps (%d timed + %d warm-up) exceeds n_positions=%d", a.context, a.steps + WARMUP,
                   a.steps, WARMUP, m->cfg.n_positions);
    tp_args sized = a;
    sized.max_batch = bmax;
    if (sized.max_batch_tokens < bmax) sized.max_batch_tokens = bmax;
    int per_seq = (len + a.block_size - 1) / a.block_size;
    sized.kv_cache_tokens = (long)bmax * per_seq * a.block_size;
    tp_job_alloc(&job, &sized, sized.kv_cache_tokens);
    zero_device(job.b, m->kv.arena, m->kv.bytes_per_token * (size_t)m->kv.n_blocks * m->kv.block_size);

    double copy_gbs = copy_bandwidth(job.b); /* every rank at once: they share the node's memory */
    if (mpi->rank == 0) {
        int MB = m->a.max_blocks;
        if (!a.json) printf("copy bandwidth (read + write): %.1f GB/s per rank\n", copy_gbs);
        int32_t *ids = tp_malloc(bmax * sizeof(int32_t)), *pos = tp_malloc(bmax * sizeof(int32_t));
        int32_t *seq = tp_malloc(bmax * sizeof(int32_t)), *rows = tp_malloc(bmax * sizeof(int32_t));
        int32_t *table = tp_malloc((size_t)bmax * MB * sizeof(int32_t));
        double *times = tp_malloc(a.steps * sizeof(double));
        tp_step_output out;
        tp_step_output_init(&out, m);
        if (!a.json)
            printf("%6s %8s %10s %12s %12s %10s %9s\n", "batch", "context", "ms/step", "tokens/s", "MB/rank/step",
                   "GB/s/rank", "%copy-bw");
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
            double wbytes = (double)m->w.matrix_bytes;
            double kvbytes = (double)B * (a.context + 1) * m->kv.bytes_per_token;
            double gbs = (wbytes + kvbytes) / t / 1e9;
            double pct = 100.0 * gbs / copy_gbs;
            if (a.json)
                printf("{\"batch\": %d, \"context\": %d, \"tp\": %d, \"backend\": \"%s\", \"dtype\": \"%s\", "
                       "\"ms_per_step\": %.4f, \"tokens_per_s\": %.2f, \"weight_bytes\": %.0f, \"kv_bytes\": %.0f, "
                       "\"gb_per_s\": %.3f, \"copy_gb_per_s\": %.3f, \"floor_ms\": %.4f, \"steps\": %d}\n",
                       B, a.context, mpi->size, job.b->name, tp_dtype_name(job.b->act), t * 1e3, B / t, wbytes,
                       kvbytes, gbs, copy_gbs, (wbytes + kvbytes) / (copy_gbs * 1e9) * 1e3,
                       a.steps);
            else
                printf("%6d %8d %10.3f %12.1f %12.1f %10.2f %8.1f%%\n", B, a.context, t * 1e3, B / t,
                       (wbytes + kvbytes) / 1e6, gbs, pct);
            fflush(stdout);
        }
        tp_step_stop(m);
        tp_step_output_free(&out);
        free(ids); free(pos); free(seq); free(rows); free(table); free(times);
    } else {
        tp_step_worker_loop(m);
    }
    free(batches);
    tp_job_close(&job);
    tp_comm_finalize(mpi);
    return 0;
}
