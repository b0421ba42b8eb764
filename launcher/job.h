/* Setting up an MPI job: backend and communicator per rank, the model shard, the KV budget. */
#ifndef TPGEN_JOB_H
#define TPGEN_JOB_H

#include "args.h"
#include "comm/comm.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    tp_comm *mpi;  /* host collectives, always */
    tp_comm *comm; /* activation all-reduce: mpi or nccl */
    tp_backend *b;
    tp_model m;
} tp_job;

/* Config and shard plan only (no backend, no weights): what requests are checked against, so a
 * bad request is reported before a checkpoint is read. Every rank; errors end the job. */
void tp_job_config(tp_job *j, tp_comm *mpi, const tp_args *a);
/* After tp_job_config: backend, communicator, weights. Refuses before reading any weight what
 * cannot fit with kv_tokens_needed tokens of KV cache (0: the least the job can run with). */
void tp_job_load(tp_job *j, const tp_args *a, long kv_tokens_needed);
/* tp_job_config + tp_job_load. */
void tp_job_open(tp_job *j, tp_comm *mpi, const tp_args *a);
/* KV cache and activations. kv_tokens_needed: what rank 0's requests need (rank 0's value
 * counts); the budget is --kv-cache-tokens, else --kv-cache-mem of free memory, capped at the
 * need; every rank agrees on the smallest. */
void tp_job_alloc(tp_job *j, const tp_args *a, long kv_tokens_needed);
void tp_job_close(tp_job *j);

/* The compute backend --backend/--dtype/--threads ask for (cuda when a GPU is visible), with
 * this rank's device or its share of the node's cores. Used by tp_job_open and bench-comm. */
tp_backend *tp_job_backend(const tp_args *a, tp_comm *mpi);

/* Every rank passes whether it is fine; if any is not, every rank exits with status 1 (the
 * failing rank has printed why). */
void tp_job_agree(tp_comm *c, int ok);

/* Logits rows a step may ask for (--max-batch, more with --speculate). */
int tp_job_max_rows(const tp_args *a);
/* Rank 0, its tokenizer loaded: the id that ends a sequence is the tokenizer's eos token when it
 * has one (vLLM's choice), config.json's eos_token_id otherwise. They agree for CodeGen 1 and 2;
 * a CodeGen2.5 config.json may carry LLaMA's default eos_token_id 2, which in its vocabulary is
 * "#" (a comment would end every completion). Says so once when the two differ. */
void tp_job_use_tokenizer_eos(tp_model *m, const tp_tokenizer *tok);

#endif
