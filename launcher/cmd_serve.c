/* tpgen serve: rank 0 listens (launcher/server/) and schedules; every other rank follows its steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "model/step.h"
#include "job.h"
#include "launcher/server/serve.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"

/* The model directory's base name ("codegen-350M-mono/" -> "codegen-350M-mono"). */
static void base_name(const char *path, char *out, size_t n) {
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && path[start - 1] != '/') start--;
    snprintf(out, n, "%.*s", (int)(len - start), path + start);
}

int tp_cmd_serve(int argc, char **argv) {
    tp_comm *mpi = tp_comm_mpi_init(&argc, &argv);
    tp_args a;
    tp_args_parse(&a, "serve", argc, argv);
    /* every rank: a SIGTERM (scancel, or kill of rank 0) drains instead of killing; rank 0 then
     * stops the workers */
    tp_serve_install_signals();
    char name[512];
    if (a.served_name) snprintf(name, sizeof name, "%s", a.served_name);
    else base_name(a.model ? a.model : a.config, name, sizeof name);

    tp_server *srv = NULL;
    tp_tokenizer *tok = NULL;
    int ok = 1;
    if (mpi->rank == 0) {
        char err[1024];
        if (a.model && tp_tokenizer_present(a.model)) {
            tok = tp_tokenizer_load(a.model, err, sizeof err);
            if (!tok) { fprintf(stderr, "tpgen: error: %s\n", err); ok = 0; }
        }
        tp_serve_opts o = {.host = a.host, .port = a.port, .name = name, .api_keys = a.api_keys,
                           .n_api_keys = a.n_api_keys, .max_queue = a.max_queue, .max_body_bytes = a.max_body_bytes,
                           .drain_timeout = a.drain_timeout, .conn_timeout = a.conn_timeout,
                           .max_connections = a.max_connections, .speculate_k = a.speculate_k,
                           .speculate_n = a.speculate_n, .max_seqs_per_client = a.max_seqs_per_client,
                           .request_timeout = a.request_timeout, .priority_policy = a.priority_policy,
                           .prefix_scope = a.prefix_scope};
        static tp_fim fim; /* read by the server until it stops */
        int has_fim = ok ? tp_fim_load(a.fim, a.model, tok, &fim, err, sizeof err) : 0;
        if (has_fim < 0) { fprintf(stderr, "tpgen: error: %s\n", err); ok = 0; }
        o.fim = has_fim > 0 ? &fim : NULL;
        o.ignore_suffix = a.ignore_suffix;
        o.max_connections_per_client = a.max_connections_per_client;
        for (int i = 0; i < a.n_trusted_proxies; i++) o.trusted_proxies[i] = a.trusted_proxies[i];
        o.n_trusted_proxies = a.n_trusted_proxies;
        if (ok && !(srv = tp_server_start(&o, tok, err, sizeof err))) {
            fprintf(stderr, "tpgen: error: %s\n", err);
            ok = 0;
        }
    }
    tp_job_agree(mpi, ok);

    tp_job job;
    tp_job_open(&job, mpi, &a);
    tp_model *m = &job.m;
    /* room for --max-batch sequences of full length, unless --kv-cache-* says otherwise */
    tp_job_alloc(&job, &a, (long)a.max_batch * m->cfg.n_positions);
    if (mpi->rank == 0) {
        tp_job_use_tokenizer_eos(m, tok);
        tp_server_run(srv, m);
        tp_step_stop(m);
        tp_server_free(srv);
        if (tok) tp_tokenizer_free(tok);
        fprintf(stderr, "tpgen: server stopped\n");
    } else {
        tp_step_worker_loop(m);
    }
    tp_job_close(&job);
    tp_comm_finalize(mpi);
    return 0;
}
