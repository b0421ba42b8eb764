/* tpgen score: log p(ids[i] | ids[:i]) for every position, and the top alternatives. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "commands.h"
#include "sched/generate.h"
#include "util/log.h"
#include "model/step.h"
#include "job.h"
#include "json_out.h"

int tp_cmd_score(int argc, char **argv) {
    tp_comm *mpi = tp_comm_mpi_init(&argc, &argv);
    tp_args a;
    tp_args_parse(&a, "score", argc, argv);
    int n;
    int32_t *ids = tp_parse_id_list(a.ids, &n, "--ids");
    if (n == 0) tp_die_all("--ids is empty");

    tp_job job;
    tp_job_config(&job, mpi, &a);
    tp_model *m = &job.m;
    /* every rank has the ids, so these checks are the same everywhere; before the weights are read */
    if (n > m->cfg.n_positions)
        tp_die_all("--ids has %d tokens, longer than the model's n_positions=%d", n, m->cfg.n_positions);
    for (int i = 0; i < n; i++)
        if (ids[i] >= m->cfg.vocab_size)
            tp_die_all("token id %d at position %d of --ids is >= vocab_size %d", ids[i], i, m->cfg.vocab_size);
    if (a.kv_cache_tokens && (a.kv_cache_tokens + a.block_size - 1) / a.block_size * a.block_size < n)
        tp_die_all("scoring %d tokens needs %d tokens of KV cache but the budget is %ld; raise --kv-cache-tokens", n,
                   n, (a.kv_cache_tokens + a.block_size - 1) / a.block_size * a.block_size);
    tp_job_load(&job, &a, 0);
    tp_job_alloc(&job, &a, n);
    if ((long)m->kv.n_blocks * m->kv.block_size < n)
        tp_die_all("scoring %d tokens needs %d tokens of KV cache but the budget is %d; raise --kv-cache-tokens", n,
                   n, m->kv.n_blocks * m->kv.block_size);

    int failed = 0;
    if (mpi->rank == 0) {
        int k = a.req.params.sampling.logprobs; /* --logprobs: the table's range on the CLI */
        float *lps = tp_malloc(n * sizeof(float));
        int32_t *top_ids = tp_malloc((size_t)n * (k ? k : 1) * sizeof(int32_t));
        float *top_lps = tp_malloc((size_t)n * (k ? k : 1) * sizeof(float));
        int bad = tp_score(m, ids, n, k, lps, top_ids, top_lps);
        tp_step_stop(m);
        if (bad) { /* the workers have left their loop: every rank ends with status 1 */
            fprintf(stderr, "tpgen: error: non-finite logits (inf or NaN) at position %d of --ids (predicting token "
                            "id %d): the model gave no distribution to score against (inf/NaN weights, or a bad "
                            "config)\n", bad, ids[bad]);
            failed = 1;
            goto done;
        }
        if (a.json) {
            printf("{\"ids\": ");
            tp_json_ids(stdout, ids, n);
            printf(", \"logprobs\": [null");
            for (int i = 1; i < n; i++) {
                printf(", ");
                tp_json_float(stdout, lps[i]);
            }
            printf("], \"top_logprobs\": [null");
            for (int i = 1; i < n; i++) {
                printf(", ");
                tp_json_top(stdout, top_ids + (size_t)i * k, top_lps + (size_t)i * k, k);
            }
            printf("]}\n");
        } else {
            double total = 0;
            for (int i = 0; i < n; i++) {
                printf("%6d  %8d", i, ids[i]);
                if (i) {
                    printf("  %10.5f", lps[i]);
                    total += lps[i];
                }
                printf("\n");
            }
            printf("total log-probability %.5f over %d tokens (perplexity %.4f)\n", total, n - 1,
                   n > 1 ? exp(-total / (n - 1)) : NAN);
        }
        fflush(stdout);
    done:
        free(lps);
        free(top_ids);
        free(top_lps);
    } else {
        tp_step_worker_loop(m);
    }
    free(ids);
    tp_job_close(&job);
    failed = mpi->allreduce_max_int(mpi, failed);
    tp_comm_finalize(mpi);
    return failed ? 1 : 0;
}
