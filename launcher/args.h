/* Command-line flags of the MPI subcommands. Every rank parses the same argv, so a bad flag is
 * reported once (rank 0) and every rank exits: see tp_die_all. */
#ifndef TPGEN_ARGS_H
#define TPGEN_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "sched/request_params.h"

typedef struct {
    const char *cmd; /* "generate", "score", "bench", "serve" */
    /* model and placement */
    const char *model;       /* --model DIR (an ORG/NAME from the HF cache is resolved to its snapshot) */
    const char *revision;    /* --revision R of a hub name (NULL: main) */
    const char *config;      /* --config FILE (bench) */
    int random_weights;      /* --random-weights (bench) */
    const char *backend;     /* --backend cpu|cuda (NULL: cuda when a GPU is present) */
    const char *dtype;       /* --dtype f16|bf16 (cuda) */
    const char *weights;     /* --weights int8|int4 (NULL: the GEMM weights in the activation dtype, or a 4-bit
                              * checkpoint's own) */
    int group_size;          /* --group-size N of --weights int4 (0: TP_Q4_DEFAULT_GROUP) */
    const char *lm_head;     /* --lm-head int8|int4 under 4-bit layers (NULL: int8) */
    const char *int4_act;    /* --int4-activations int16|int8 under 4-bit layers, CPU (NULL: int16) */
    const char *kv_cache_dtype; /* --kv-cache-dtype auto|bf16 (NULL, auto: the activations' dtype) */
    const char *comm;        /* --comm mpi|nccl */
    int threads;             /* --threads N (cpu; 0: cores / ranks on the node) */
    const char *fim;         /* --fim FILE: the FIM format (engine/tokenizer/fim.h; default: the model dir's fim.json) */
    int ignore_suffix;       /* --ignore-suffix (serve): `suffix` on a model without FIM is ignored, not a 400 */
    int qkv_groups;          /* --qkv-groups G: qkv_proj's mp_num (0: from the checkpoint; engine/checkpoint/remote_code.h) */
    long kv_cache_tokens;    /* --kv-cache-tokens N (0: from --kv-cache-mem) */
    double kv_cache_mem;     /* --kv-cache-mem FRAC of free memory after weights */
    int block_size;          /* --block-size */
    int max_batch_tokens;    /* --max-batch-tokens: tokens per step */
    int max_batch;           /* --max-batch: sequences at once */
    /* requests */
    const char *prompt;      /* --prompt TEXT */
    const char *prompt_ids;  /* --prompt-ids 1,2,3 */
    const char *prompts_file;/* --prompts-file F */
    const char *ids;         /* --ids (score) */
    /* the request's fields, each set by its flag from engine/sched/request_params.h's table
     * (--max-new-tokens, --temperature, ..., --seed, --stop, --logprobs, --suffix: `tpgen
     * help-params`), at the table's CLI defaults */
    tp_request_fields req;
    uint64_t seed;           /* --seed of serve and bench: the random weights' (generate's is req.params.seed) */
    int json;
    int stats;
    int no_cuda_graphs;      /* --no-cuda-graphs */
    int verbose;             /* --verbose: print the memory plan at start */
    double comm_timeout;     /* --comm-timeout S: a collective not done in S seconds ends the job (NCCL; MPI: the all-reduce) */
    /* bench */
    const char *batches;     /* --batch 1,8,32 */
    int context, steps;      /* --context C, --steps N; -1 when not given (bench fits them to n_positions) */
    const char *prefill;     /* --prefill 128,512,2048 (prompt lengths; "0": none) */
    int prefill_runs;        /* --prefill-runs N: timed runs per length (median) */
    /* serve */
    const char *host;        /* --host (127.0.0.1) */
    int port;                /* --port (8000; 0: a free port) */
    const char *served_name; /* --served-model-name (the model dir's base name) */
    const char *api_keys[16]; /* --api-key (repeatable: each one accepted), else $TPGEN_API_KEY */
    int n_api_keys;
    int prefix_scope;        /* --prefix-cache-scope key|shared|request (TP_PREFIX_SCOPE_*, launcher/server/serve.h) */
    int max_queue;           /* --max-queue */
    long max_body_bytes;     /* --max-body-bytes */
    double drain_timeout;    /* --drain-timeout seconds */
    int conn_timeout;        /* --conn-timeout seconds of client inactivity (0: none) */
    int max_connections;     /* --max-connections open at once */
    int max_connections_per_client; /* --max-connections-per-client (0: half of --max-connections) */
    const char *trusted_proxies[8]; /* --trusted-proxy ADDR (repeatable): X-Forwarded-For read from these peers */
    int n_trusted_proxies;
    int max_seqs_per_client; /* --max-seqs-per-client: sequences one peer address holds, queued or running */
    double request_timeout;  /* --request-timeout: seconds a request may take from arrival (0: none) */
    int priority_policy;     /* --scheduling-policy: 0 fcfs, 1 priority */
    /* generate, serve */
    const char *speculate;   /* --speculate ngram:K[:N] (NULL: off) */
    int no_prefix_cache;     /* --no-prefix-cache: automatic prefix caching off */
    int speculate_k, speculate_n; /* parsed from it (0: off) */
} tp_args;

/* Parses argv (after the subcommand). Bad input: tp_die_all with the flag named. */
void tp_args_parse(tp_args *a, const char *cmd, int argc, char **argv);

/* The integer v of flag in [lo, hi]; else tp_die_all "FLAG expects an integer in [LO, HI], got "V"". */
long tp_parse_long(const char *flag, const char *v, long lo, long hi);

/* "5,17,9" -> ids; dies naming `what` on a bad list. */
int32_t *tp_parse_id_list(const char *s, int *n, const char *what);

/* Splits "--name=value" / "--name" (flag gets the name; returns the value or NULL); anything
 * else ends the job with usage. Shared by every subcommand's flag loop. */
char *tp_flag_split(char *arg, char *flag, size_t size, const char *usage);

#endif
