#include "args.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/log.h"
#include "util/threads.h"
#include "checkpoint/hub.h"
#include "checkpoint/remote_code.h" /* TP_MAX_QKV_GROUPS */
#include "kernels/common/tp_quant4.h" /* TP_Q4_GROUP_ALIGN */
#include "sched/sampler.h"
#include "sched/speculate.h"

/* The usage of every subcommand; generate's and score's request flags from the table of request
 * fields (engine/sched/request_params.h), so a new knob shows here without an edit. */
static const char *usage(void) {
    static char buf[6144];
    if (buf[0]) return buf;
    char gen[2048], score[512];
    tp_fields_usage(TP_FRONT_GENERATE, 9, 104, gen, sizeof gen);
    tp_fields_usage(TP_FRONT_SCORE, 9, 104, score, sizeof score);
    snprintf(buf, sizeof buf,
    "usage:\n"
    "  tpgen generate --model DIR (--prompt TEXT | --prompt-ids 5,17,9 | --prompts-file F)\n"
    "         %s\n"
    "         [--json] [--speculate ngram:K[:N]] [--no-prefix-cache]\n"
    "         [--fim FILE] (with --suffix: fill in the middle, --prompt is the prefix)\n"
    "  tpgen score --model DIR --ids 5,17,9,... %s [--json]\n"
    "  tpgen help-params [--markdown server|generate]   (every request field: key, flag, range, default)\n"
    "  tpgen bench (--model DIR | --config FILE --random-weights) [--batch 1,8,32] [--context C] [--steps N]\n"
    "         (defaults: --steps min(32, n_positions - 4), --context min(512, n_positions - steps - 4))\n"
    "         [--prefill 128,512,2048 | --prefill 0] [--prefill-runs N] [--json]\n"
    "  --model DIR may be ORG/NAME, looked up offline in the Hugging Face cache [--revision R]\n"
    "  tpgen serve (--model DIR | --config FILE --random-weights) [--host 127.0.0.1] [--port 8000]\n"
    "         [--served-model-name NAME] [--api-key KEY]... [--max-queue 256] [--max-body-bytes 8388608]\n"
    "         [--drain-timeout 30] [--conn-timeout 30] [--max-connections 512]\n"
    "         [--max-connections-per-client N (default: half of --max-connections)] [--speculate ngram:K[:N]]\n"
    "         [--max-seqs-per-client 1024] [--trusted-proxy ADDR]... [--request-timeout SECONDS (0: none)]\n"
    "         [--scheduling-policy fcfs|priority] [--no-prefix-cache] [--prefix-cache-scope key|shared|request]\n"
    "         [--fim FILE] [--ignore-suffix]\n"
    "         (docs/SERVING.md)\n"
    "  common: [--backend cpu|cuda] [--dtype f32|f16|bf16] [--comm mpi|nccl] [--threads N]\n"
    "          [--kv-cache-tokens N | --kv-cache-mem FRAC] [--max-batch N] [--max-batch-tokens N]\n"
    "          [--block-size N] [--no-cuda-graphs] [--stats] [--weights int8|int4 [--group-size 128]]\n"
    "          [--lm-head int8|int4 (under 4-bit weights; default int8)]\n"
    "          [--int4-activations int16|int8 (under 4-bit weights on the CPU; default int16)]\n"
    "          [--kv-cache-dtype auto|bf16 (bf16: the CPU with f32 activations; default auto)]\n"
    "          [--verbose] [--comm-timeout SECONDS (default 300, 0: none)]\n"
    "          [--qkv-groups G (qkv_proj's mp_num: 8 for CodeGen2; default: from the checkpoint)]\n"
    "  run under mpirun -np N for N-way tensor parallelism; see README.md", gen, score);
    return buf;
}

long tp_parse_long(const char *flag, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        tp_die_all("%s expects an integer in [%ld, %ld], got \"%s\"", flag, lo, hi, v);
    return x;
}

static double parse_double(const char *flag, const char *v, double lo, double hi) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi))
        tp_die_all("%s expects a number in [%g, %g], got \"%s\"", flag, lo, hi, v);
    return x;
}

int32_t *tp_parse_id_list(const char *s, int *n, const char *what) {
    int cap = 16, k = 0;
    int32_t *ids = tp_malloc(cap * sizeof *ids);
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || (errno && errno != ERANGE) || *p == '-' || *p == '+' || *p == ' ' || (*end && *end != ',')) {
            free(ids);
            tp_die_all("%s: \"%s\" is not a comma-separated list of non-negative integers (like 5,17,9)", what, s);
        }
        if (errno == ERANGE || x > INT32_MAX) { /* never wrapped into another number: named as written */
            free(ids);
            tp_die_all("%s: %.*s at position %d is too large (at most %d)", what, (int)(end - p < 40 ? end - p : 40), p,
                       k, INT32_MAX);
        }
        if (k == cap) ids = tp_realloc(ids, (cap *= 2) * sizeof *ids);
        ids[k++] = (int32_t)x;
        p = *end ? end + 1 : end;
        if (*end == ',' && !*p) tp_die_all("%s: trailing comma in \"%s\"", what, s);
    }
    *n = k;
    return ids;
}

/* "--name=value" or "--name": the name into flag, the value (or NULL) returned; anything not
 * starting with "--" ends the job with the usage. */
char *tp_flag_split(char *arg, char *flag, size_t size, const char *usage) {
    if (strncmp(arg, "--", 2) != 0) tp_die_all("unexpected argument \"%s\"\n%s", arg, usage);
    char *eq = strchr(arg, '=');
    snprintf(flag, size, "%.*s", eq ? (int)(eq - arg) : (int)strlen(arg), arg);
    return eq ? eq + 1 : NULL;
}

void tp_args_parse(tp_args *a, const char *cmd, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    a->kv_cache_mem = 0.9;
    a->comm_timeout = 300;
    a->block_size = 16;
    a->max_batch_tokens = 512;
    a->max_batch = 32;
    a->req = tp_request_fields_default(TP_FRONT_GENERATE);
    a->batches = "1,8,32";
    a->context = -1; /* -1: fitted to n_positions by tpgen bench (cmd_bench.c) */
    a->steps = -1;
    a->prefill = "128,512,2048";
    a->prefill_runs = 3;
    a->host = "127.0.0.1";
    a->port = 8000;
    a->max_queue = 256;
    a->max_body_bytes = 8388608;
    a->drain_timeout = 30;
    a->conn_timeout = 30;
    a->max_connections = 512;
    a->max_seqs_per_client = 1024; /* SRV_MAX_N x SRV_MAX_PROMPTS: the largest request */
    int gen = strcmp(cmd, "generate") == 0, score = strcmp(cmd, "score") == 0, bench = strcmp(cmd, "bench") == 0;
    int serve = strcmp(cmd, "serve") == 0;
    for (int i = 0; i < argc; i++) {
        char flag[64], *v = tp_flag_split(argv[i], flag, sizeof flag, usage());
#define IS(name) (strcmp(flag, name) == 0)
#define VAL() (v ? v : (i + 1 < argc ? argv[++i] : (tp_die_all("%s needs a value", flag), (char *)NULL)))
        int ok = 1;
        const tp_field *field = tp_field_by_flag(flag, gen ? TP_FRONT_GENERATE : score ? TP_FRONT_SCORE : 0);
        if (IS("--help") || IS("-h")) tp_die_all("%s", usage());
        else if (IS("--model")) a->model = VAL();
        else if (IS("--revision")) a->revision = VAL();
        else if (IS("--backend")) a->backend = VAL();
        else if (IS("--dtype")) a->dtype = VAL();
        else if (IS("--weights")) a->weights = VAL();
        else if (IS("--group-size")) a->group_size = (int)tp_parse_long(flag, VAL(), 1, 1 << 20);
        else if (IS("--lm-head")) a->lm_head = VAL();
        else if (IS("--int4-activations")) a->int4_act = VAL();
        else if (IS("--kv-cache-dtype")) a->kv_cache_dtype = VAL();
        else if (IS("--comm")) a->comm = VAL();
        else if (IS("--threads")) a->threads = (int)tp_parse_long(flag, VAL(), 0, TP_THREADS_MAX);
        else if (IS("--fim") && (gen || serve)) a->fim = VAL();
        else if (IS("--ignore-suffix") && serve) a->ignore_suffix = 1;
        else if (IS("--qkv-groups")) a->qkv_groups = (int)tp_parse_long(flag, VAL(), 1, TP_MAX_QKV_GROUPS);
        else if (IS("--kv-cache-tokens")) a->kv_cache_tokens = tp_parse_long(flag, VAL(), 1, 1L << 40);
        else if (IS("--kv-cache-mem")) a->kv_cache_mem = parse_double(flag, VAL(), 0.01, 1.0);
        else if (IS("--block-size")) a->block_size = (int)tp_parse_long(flag, VAL(), 1, 1024);
        else if (IS("--max-batch-tokens")) a->max_batch_tokens = (int)tp_parse_long(flag, VAL(), 1, 1 << 20);
        else if (IS("--max-batch")) a->max_batch = (int)tp_parse_long(flag, VAL(), 1, 4096);
        else if (IS("--stats")) a->stats = 1;
        else if (IS("--no-cuda-graphs")) a->no_cuda_graphs = 1;
        else if (IS("--verbose")) a->verbose = 1;
        else if (IS("--comm-timeout")) a->comm_timeout = parse_double(flag, VAL(), 0, 1e6);
        else if (IS("--json")) a->json = 1;
        else if (IS("--prompt") && gen) a->prompt = VAL();
        else if (IS("--prompt-ids") && gen) a->prompt_ids = VAL();
        else if (IS("--prompts-file") && gen) a->prompts_file = VAL();
        else if (field) { /* a request field (engine/sched/request_params.h): its range and message are the server's */
            char err[512];
            if (tp_field_from_text(field, field->type == TP_FIELD_BOOL ? NULL : VAL(), &a->req, err, sizeof err))
                tp_die_all("%s", err);
        } else if (IS("--ids") && score) a->ids = VAL();
        else if (IS("--config") && (bench || serve)) a->config = VAL();
        else if (IS("--random-weights") && (bench || serve)) a->random_weights = 1;
        else if (IS("--seed") && serve) a->seed = (uint64_t)tp_parse_long(flag, VAL(), 0, LONG_MAX);
        else if (IS("--host") && serve) a->host = VAL();
        else if (IS("--port") && serve) a->port = (int)tp_parse_long(flag, VAL(), 0, 65535);
        else if (IS("--served-model-name") && serve) a->served_name = VAL();
        else if (IS("--api-key") && serve) {
            if (a->n_api_keys == (int)(sizeof a->api_keys / sizeof *a->api_keys))
                tp_die_all("at most %d --api-key", (int)(sizeof a->api_keys / sizeof *a->api_keys));
            a->api_keys[a->n_api_keys] = VAL();
            if (!*a->api_keys[a->n_api_keys]) tp_die_all("--api-key needs a non-empty key");
            a->n_api_keys++;
        } else if (IS("--prefix-cache-scope") && serve) {
            const char *p = VAL();
            if (!strcmp(p, "key")) a->prefix_scope = 0;
            else if (!strcmp(p, "shared")) a->prefix_scope = 1;
            else if (!strcmp(p, "request")) a->prefix_scope = 2;
            else tp_die_all("--prefix-cache-scope must be key, shared or request, got \"%s\"", p);
        }
        else if (IS("--max-queue") && serve) a->max_queue = (int)tp_parse_long(flag, VAL(), 1, 1 << 20);
        else if (IS("--max-body-bytes") && serve) a->max_body_bytes = tp_parse_long(flag, VAL(), 64, 1L << 32);
        else if (IS("--drain-timeout") && serve) a->drain_timeout = parse_double(flag, VAL(), 0, 86400);
        else if (IS("--conn-timeout") && serve) a->conn_timeout = (int)tp_parse_long(flag, VAL(), 0, 86400);
        else if (IS("--max-connections") && serve) a->max_connections = (int)tp_parse_long(flag, VAL(), 1, 65536);
        else if (IS("--max-connections-per-client") && serve)
            a->max_connections_per_client = (int)tp_parse_long(flag, VAL(), 1, 65536);
        else if (IS("--trusted-proxy") && serve) {
            if (a->n_trusted_proxies == (int)(sizeof a->trusted_proxies / sizeof *a->trusted_proxies))
                tp_die_all("at most %d --trusted-proxy", (int)(sizeof a->trusted_proxies / sizeof *a->trusted_proxies));
            a->trusted_proxies[a->n_trusted_proxies++] = VAL();
        } else if (IS("--max-seqs-per-client") && serve)
            a->max_seqs_per_client = (int)tp_parse_long(flag, VAL(), 1, 1 << 20);
        else if (IS("--request-timeout") && serve) a->request_timeout = parse_double(flag, VAL(), 0, 1e9);
        else if (IS("--scheduling-policy") && serve) {
            const char *p = VAL();
            if (strcmp(p, "fcfs") && strcmp(p, "priority"))
                tp_die_all("--scheduling-policy must be fcfs or priority, got \"%s\"", p);
            a->priority_policy = strcmp(p, "priority") == 0;
        } else if (IS("--no-prefix-cache") && (gen || serve)) a->no_prefix_cache = 1;
        else if (IS("--speculate") && (gen || serve)) {
            char err[512];
            a->speculate = VAL();
            if (tp_speculate_parse(a->speculate, &a->speculate_k, &a->speculate_n, err, sizeof err))
                tp_die_all("%s", err);
        } else if (IS("--batch") && bench) a->batches = VAL();
        else if (IS("--context") && bench) a->context = (int)tp_parse_long(flag, VAL(), 0, 1 << 20);
        else if (IS("--steps") && bench) a->steps = (int)tp_parse_long(flag, VAL(), 1, 100000);
        else if (IS("--prefill") && bench) a->prefill = VAL();
        else if (IS("--prefill-runs") && bench) a->prefill_runs = (int)tp_parse_long(flag, VAL(), 1, 1000);
        else ok = 0;
        if (!ok) tp_die_all("unknown flag %s for `tpgen %s`\n%s", flag, cmd, usage());
#undef IS
#undef VAL
    }
    if (!a->model && !((bench || serve) && a->config && a->random_weights))
        tp_die_all("--model DIR is required%s", bench || serve ? " (or --config FILE --random-weights)" : "");
    if (serve && !a->n_api_keys) {
        const char *k = getenv("TPGEN_API_KEY");
        if (k && *k) a->api_keys[a->n_api_keys++] = k;
    }
    /* --min-tokens against --max-new-tokens: tp_request_params_validate (cmd_generate.c) */
    if (gen && !!a->prompt + !!a->prompt_ids + !!a->prompts_file != 1)
        tp_die_all("give exactly one of --prompt, --prompt-ids, --prompts-file");
    if (score && !a->ids) tp_die_all("`tpgen score` needs --ids 5,17,9,...");
    if (a->backend && strcmp(a->backend, "cpu") && strcmp(a->backend, "cuda"))
        tp_die_all("--backend must be cpu or cuda, got \"%s\"", a->backend);
    if (a->dtype && strcmp(a->dtype, "f16") && strcmp(a->dtype, "bf16") && strcmp(a->dtype, "f32"))
        tp_die_all("--dtype must be f16 or bf16 (cuda) or f32|bf16 (cpu), got \"%s\"", a->dtype);
    if (a->weights && strcmp(a->weights, "int8") && strcmp(a->weights, "int4"))
        tp_die_all("--weights must be int8 or int4 (GEMM weights quantized at load: int8 per output row, int4 in "
                   "groups of --group-size k; leave it out for the checkpoint's precision), got \"%s\"", a->weights);
    if (a->group_size && !(a->weights && !strcmp(a->weights, "int4")))
        tp_die_all("--group-size is for --weights int4 (the k of one 4-bit group; a 4-bit checkpoint has its own)");
    if (a->group_size % TP_Q4_GROUP_ALIGN)
        tp_die_all("--group-size %d: must be a multiple of %d (the int4 kernels' k step)", a->group_size,
                   TP_Q4_GROUP_ALIGN);
    if (a->lm_head && strcmp(a->lm_head, "int8") && strcmp(a->lm_head, "int4"))
        tp_die_all("--lm-head must be int8 or int4 (lm_head's weights under 4-bit layers), got \"%s\"", a->lm_head);
    if (a->int4_act && strcmp(a->int4_act, "int16") && strcmp(a->int4_act, "int8"))
        tp_die_all("--int4-activations must be int16 (exact to the int8 family's grid; default) or int8 (faster, "
                   "within a wider bound: docs/KERNELS.md), got \"%s\"", a->int4_act);
    if (a->kv_cache_dtype && strcmp(a->kv_cache_dtype, "auto") && strcmp(a->kv_cache_dtype, "bf16"))
        tp_die_all("--kv-cache-dtype must be auto (K and V in the activations' dtype: exact; default) or bf16 (half "
                   "the KV cache's memory and reads, on the CPU with f32 activations: docs/USAGE.md), got \"%s\"",
                   a->kv_cache_dtype);
    if (a->comm && strcmp(a->comm, "mpi") && strcmp(a->comm, "nccl"))
        tp_die_all("--comm must be mpi or nccl, got \"%s\"", a->comm);
    if (a->max_batch > a->max_batch_tokens)
        tp_die_all("--max-batch %d exceeds --max-batch-tokens %d", a->max_batch, a->max_batch_tokens);
    if (a->model) { /* an ORG/NAME that is not a local path: its snapshot in the HF cache */
        char err[2048];
        char *dir = tp_hub_resolve(a->model, a->revision, err, sizeof err);
        if (!dir) tp_die_all("%s", err);
        struct stat st; /* said first: later checks (a text prompt needs a tokenizer) would blame the wrong thing */
        if (stat(dir, &st) != 0) tp_die_all("--model %s: %s", dir, strerror(errno));
        static char *resolved; /* lives as long as the process (a global: reachable, not a leak) */
        free(resolved);
        a->model = resolved = dir;
    } else if (a->revision) tp_die_all("--revision needs --model ORG/NAME");
}
