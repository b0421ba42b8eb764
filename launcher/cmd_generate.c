/* tpgen generate: rank 0 reads and tokenizes the prompts, schedules, samples and prints; every
 * other rank follows its steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "sched/generate.h"
#include "util/log.h"
#include "model/step.h"
#include "tokenizer/tokenizer.h"
#include "job.h"
#include "json_out.h"
#include "prompts.h"
#include "tokenizer/fim.h"

/* Rank 0's view of one request, from the scheduler's events. */
typedef struct {
    tp_text_stream *ts;
    char *text;   /* final text so far (stop strings never in it) */
    size_t text_len;
    int n_ids;    /* tokens taken: r->ids up to a stop string's token (the scheduler may have more) */
    int stopped;  /* a stop string matched: later tokens are not taken */
    tp_finish finish;
    int done;
} req_text;

typedef struct {
    const tp_args *a;
    tp_tokenizer *tok;
    tp_request *reqs;
    req_text *texts;
    int n, next_print;
    int stream; /* plain output of one prompt: print text as it becomes final */
    size_t streamed;
    const tp_prompt *ps; /* where each prompt came from, for messages */
    int n_failed;        /* requests that ended in "error" */
} gen_ctx;

/* finish_reason as `tpgen generate --json` writes it */
static const char *finish_name(tp_finish f) {
    switch (f) {
    case TP_FINISH_LENGTH: return "length";
    case TP_FINISH_STOP: return "stop";
    case TP_FINISH_CANCELLED: return "cancelled";
    case TP_FINISH_TIMEOUT: return "timeout";
    case TP_FINISH_ERROR: return "error";
    case TP_FINISH_NONE: break;
    }
    return "none";
}

static void stream_out(gen_ctx *g, req_text *t) {
    if (!g->stream || t->text_len == g->streamed) return;
    fwrite(t->text + g->streamed, 1, t->text_len - g->streamed, stdout);
    fflush(stdout);
    g->streamed = t->text_len;
}

static void print_result(gen_ctx *g, tp_request *r) {
    const tp_args *a = g->a;
    req_text *t = &g->texts[r->index];
    int failed = t->finish == TP_FINISH_ERROR;
    if (failed) { /* on stderr, naming the prompt; JSON output keeps a line for it */
        char where[4200];
        fprintf(stderr, "tpgen: error: %s: %s\n", tp_prompt_where(a, &g->ps[r->index], where, sizeof where), r->error);
        fflush(stderr);
        if (!a->json) return;
    }
    if (!a->json) {
        if (g->tok) {
            if (!g->stream) fwrite(t->text, 1, t->text_len, stdout);
            fputc('\n', stdout);
        } else {
            tp_json_ids(stdout, r->ids, t->n_ids);
            fputc('\n', stdout);
        }
        fflush(stdout);
        return;
    }
    int k = r->params.sampling.logprobs;
    printf("{\"prompt_ids\": ");
    tp_json_ids(stdout, r->prompt, r->n_prompt);
    printf(", \"ids\": ");
    tp_json_ids(stdout, r->ids, t->n_ids);
    printf(", \"logprobs\": [");
    for (int i = 0; i < t->n_ids; i++) {
        if (i) printf(", ");
        tp_json_float(stdout, r->logprobs[i]);
    }
    printf("], \"top_logprobs\": [");
    for (int i = 0; i < t->n_ids; i++) {
        if (i) printf(", ");
        tp_json_top(stdout, r->top_ids + (size_t)i * k, r->top_lps + (size_t)i * k, k);
    }
    printf("], \"finish_reason\": \"%s\"", finish_name(t->finish));
    if (failed) {
        printf(", \"error\": ");
        tp_json_string(stdout, r->error, strlen(r->error));
    }
    if (a->speculate) printf(", \"speculative\": {\"drafted\": %ld, \"accepted\": %ld}", r->spec_drafted, r->spec_accepted);
    if (g->tok) {
        printf(", \"text\": ");
        tp_json_string(stdout, t->text, t->text_len);
    }
    printf("}\n");
    fflush(stdout);
}

/* r's last event: its text's held-back end, then the results in input order */
static void finished(gen_ctx *g, tp_request *r, tp_finish finish) {
    req_text *t = &g->texts[r->index];
    if (g->tok) { /* ended without a stop string: releases what was held back (else a no-op) */
        tp_text_stream_finish(t->ts, &t->text, &t->text_len, NULL);
        stream_out(g, t);
    }
    t->finish = t->stopped ? TP_FINISH_STOP : finish; /* a stop string on its last token says "stop" */
    t->done = 1;
    g->n_failed += t->finish == TP_FINISH_ERROR;
    while (g->next_print < g->n && g->texts[g->next_print].done) print_result(g, &g->reqs[g->next_print++]);
}

/* The scheduler's events since the last call: tokens to text (a stop string ends the request),
 * ends printed. */
static void take_events(gen_ctx *g, tp_sched *s) {
    const tp_sched_event *ev;
    int n;
    while ((n = tp_sched_events(s, &ev)) > 0) /* tp_sched_end below adds the next batch */
        for (int i = 0; i < n; i++) {
            tp_request *r = ev[i].r;
            req_text *t = &g->texts[r->index];
            if (ev[i].kind == TP_EV_FINISHED) finished(g, r, ev[i].finish);
            if (ev[i].kind != TP_EV_TOKEN || t->stopped) continue;
            t->n_ids = ev[i].i + 1;
            if (!g->tok || tp_request_stop_id(&r->params, ev[i].id)) continue; /* FIM's <eom>: no text */
            t->stopped = tp_text_stream_push(t->ts, ev[i].id, &t->text, &t->text_len, NULL);
            stream_out(g, t);
            if (t->stopped) tp_sched_end(s, r, TP_FINISH_STOP);
        }
}

/* Every prompt's request params, from the flags, checked by the rules the server shares
 * (tp_request_params_validate) and worded with the flag; on every rank, before anything is read. */
static tp_request_params request_params(const tp_args *a) {
    tp_request_params p = a->req.params; /* the table's fields, each flag checked as it was read */
    p.speculate_k = a->speculate_k;
    p.speculate_n = a->speculate_n;
    tp_request_param bad = tp_request_params_validate(&p);
    if (bad == TP_REQ_PARAM_MIN_TOKENS && p.min_tokens > p.max_new_tokens) /* the server's message, with flags */
        tp_die_all("--min-tokens %d exceeds --max-new-tokens %d", p.min_tokens, p.max_new_tokens);
    for (int i = 0; i < tp_n_fields; i++)
        if (bad != TP_REQ_PARAM_OK && tp_fields[i].id == bad && tp_fields[i].flag)
            tp_die_all("%s is out of the range tpgen applies", tp_fields[i].flag);
    return p;
}

static int check_requests(const tp_args *a, const tp_model *m, tp_request *reqs, const tp_prompt *ps, int n) {
    char where[4200];
    for (int i = 0; i < n; i++) {
        tp_request *r = &reqs[i];
        tp_prompt_where(a, &ps[i], where, sizeof where);
        if (r->n_prompt == 0) {
            fprintf(stderr, "tpgen: error: %s is an empty prompt (tpgen adds no BOS token)\n", where);
            return -1;
        }
        if (r->n_prompt > m->cfg.n_positions) {
            fprintf(stderr, "tpgen: error: %s has %d tokens, longer than the model's n_positions=%d\n", where,
                    r->n_prompt, m->cfg.n_positions);
            return -1;
        }
        for (int j = 0; j < r->n_prompt; j++)
            if (r->prompt[j] < 0 || r->prompt[j] >= m->cfg.vocab_size) { /* ids from the tokenizer */
                fprintf(stderr, "tpgen: error: token id %d at position %d of %s is >= vocab_size %d\n", r->prompt[j], j,
                        where, m->cfg.vocab_size);
                return -1;
            }
        /* an explicit KV budget is known before the weights are read (--kv-cache-mem is checked
         * after tp_job_alloc) */
        if (a->kv_cache_tokens) {
            long bs = a->block_size, need = (tp_request_tokens(m, r) + bs - 1) / bs,
                 have = (a->kv_cache_tokens + bs - 1) / bs;
            if (need > have) {
                fprintf(stderr, "tpgen: error: %s needs %ld tokens of KV cache (prompt + --max-new-tokens - 1, in blocks "
                                "of %ld) but the budget is %ld tokens; raise --kv-cache-tokens or --kv-cache-mem, or "
                                "lower --max-new-tokens\n", where, need * bs, bs, have * bs);
                return -1;
            }
        }
    }
    return 0;
}

/* --suffix: the prompt becomes the model's FIM prompt of --prompt and --suffix (engine/tokenizer/fim.h), ending
 * at its stop token. 0, or -1 after printing the error. */
static int fim_prompt(const tp_args *a, tp_tokenizer *tok, tp_prompt *p, tp_request_params *rp) {
    char err[4400];
    tp_fim fim;
    int has = tp_fim_load(a->fim, a->model, tok, &fim, err, sizeof err);
    if (has == 0) snprintf(err, sizeof err, "--suffix: %s has no fill-in-the-middle format (its tokenizer lacks "
                           "CodeGen2's <mask_1>, <sep>, <eom>: give fim.json in the model directory, or --fim FILE; "
                           "docs/SERVING.md)", a->model);
    size_t n = 0;
    int32_t *ids = NULL;
    if (has > 0 && tp_fim_encode(&fim, tok, a->prompt, strlen(a->prompt), a->req.suffix.s, a->req.suffix.n, &ids, &n, err,
                                 sizeof err) == 0) {
        free(p->ids);
        p->ids = ids;
        p->n = (int)n;
        rp->stop_ids[0] = fim.stop_id;
        rp->n_stop_ids = 1;
        return 0;
    }
    fprintf(stderr, "tpgen: error: %s\n", err);
    return -1;
}

int tp_cmd_generate(int argc, char **argv) {
    tp_comm *mpi = tp_comm_mpi_init(&argc, &argv);
    tp_args a;
    tp_args_parse(&a, "generate", argc, argv);
    tp_request_params rp = request_params(&a);
    /* rank 0 reads the prompts (a --prompts-file need not exist on other nodes) and tells all */
    int text_line = mpi->rank == 0 ? tp_prompts_need_tokenizer(&a) : 0;
    mpi->bcast(mpi, &text_line, sizeof text_line, 0);
    int have_tok = tp_tokenizer_present(a.model);
    if (!have_tok && a.req.n_stop)
        tp_die_all("--stop needs a tokenizer in %s (vocab.json + merges.txt, or tokenizer.json) to match text",
                   a.model);
    if (!have_tok && text_line && a.prompts_file)
        tp_die_all("%s line %d is text, which needs a tokenizer in %s (vocab.json + merges.txt, or tokenizer.json); "
                   "write token ids instead (1,2,3 or [1, 2, 3])", a.prompts_file, text_line, a.model);
    if (!have_tok && text_line)
        tp_die_all("--prompt is text, which needs a tokenizer in %s (vocab.json + merges.txt, or tokenizer.json); "
                   "give --prompt-ids instead", a.model);
    if (a.req.suffix.s && (!a.prompt || !have_tok))
        tp_die_all("--suffix needs --prompt TEXT (the prefix) and a tokenizer in %s", a.model);

    /* the config is all the requests are checked against: a bad request is reported before the
     * weights are read */
    tp_job job;
    tp_job_config(&job, mpi, &a);
    tp_model *m = &job.m;

    /* rank 0: tokenizer, prompts, requests */
    gen_ctx g = {0};
    g.a = &a;
    int ok = 1;
    long kv_need = 0;
    tp_prompt *ps = NULL; /* rank 0; the ids move to g.reqs, the lines stay for messages */
    if (mpi->rank == 0) {
        char err[1024];
        if (have_tok) {
            g.tok = tp_tokenizer_load(a.model, err, sizeof err);
            if (!g.tok) { fprintf(stderr, "tpgen: error: %s\n", err); ok = 0; }
        }
        int n = ok ? tp_prompts_read(&a, g.tok, m->cfg.vocab_size, &ps) : -1;
        if (n < 0) ok = 0;
        else if (a.req.suffix.s && fim_prompt(&a, g.tok, &ps[0], &rp)) ok = 0;
        else {
            g.n = n;
            g.reqs = tp_calloc(n, sizeof *g.reqs);
            g.texts = tp_calloc(n, sizeof *g.texts);
            const char *stops[TP_MAX_STOP]; /* --stop, from argv */
            for (int i = 0; i < a.req.n_stop; i++) stops[i] = a.req.stop[i].s;
            for (int i = 0; i < n; i++) {
                tp_request_init(&g.reqs[i], i, ps[i].ids, ps[i].n, &rp);
                if (g.tok) g.texts[i].ts = tp_text_stream_new(g.tok, stops, a.req.n_stop, 0);
            }
            g.stream = !a.json && n == 1 && g.tok;
            if (check_requests(&a, m, g.reqs, ps, n)) ok = 0;
        }
        for (int i = 0; ok && i < g.n; i++)
            kv_need += (tp_request_tokens(m, &g.reqs[i]) + a.block_size - 1) / a.block_size * (long)a.block_size;
    }
    tp_job_agree(mpi, ok);
    tp_job_load(&job, &a, 0);
    tp_job_alloc(&job, &a, kv_need);

    if (mpi->rank == 0) {
        tp_job_use_tokenizer_eos(m, g.tok);
        for (int i = 0; i < g.n; i++) {
            int need = tp_request_blocks(m, &g.reqs[i]);
            if (need > m->kv.n_blocks) {
                char where[4200];
                fprintf(stderr, "tpgen: error: %s needs %d tokens of KV cache (prompt + --max-new-tokens - 1, in blocks "
                                "of %d) but the budget is %d tokens; raise --kv-cache-tokens or --kv-cache-mem, or "
                                "lower --max-new-tokens\n",
                        tp_prompt_where(&a, &ps[i], where, sizeof where), need * m->kv.block_size, m->kv.block_size,
                        m->kv.n_blocks * m->kv.block_size);
                ok = 0;
                break;
            }
        }
    }
    tp_job_agree(mpi, ok);
    g.ps = ps;

    double t0 = tp_now_seconds();
    if (mpi->rank == 0) {
        tp_sched *sc = tp_generate_start(m, g.reqs, g.n);
        do take_events(&g, sc);
        while (tp_sched_step(sc));
        long steps = tp_generate_end(sc);
        tp_step_stop(m);
        double dt = tp_now_seconds() - t0;
        long gen = 0, prompt = 0, drafted = 0, accepted = 0, cached = 0, preempted = 0;
        for (int i = 0; i < g.n; i++) {
            cached += g.reqs[i].n_prompt_cached;
            preempted += g.reqs[i].n_preempted;
            gen += g.texts[i].n_ids;
            prompt += g.reqs[i].n_prompt;
            drafted += g.reqs[i].spec_drafted;
            accepted += g.reqs[i].spec_accepted;
        }
        if (a.stats)
            fprintf(stderr, "{\"stats\": {\"steps\": %ld, \"forwarded_tokens\": %lld, \"prompt_tokens\": %ld, "
                            "\"generated_tokens\": %ld, \"seconds\": %.4f, \"tokens_per_s\": %.2f, "
                            "\"drafted_tokens\": %ld, \"accepted_tokens\": %ld, \"cached_prompt_tokens\": %ld, "
                            "\"preemptions\": %ld}}\n",
                    steps, m->forwarded_tokens, prompt, gen, dt, gen / (dt > 0 ? dt : 1), drafted, accepted, cached,
                    preempted);
        if (a.verbose)
            fprintf(stderr, "tpgen: prefix cache%s: %ld of %ld prompt tokens served from it; %ld preemptions\n",
                    m->no_prefix_cache ? " (off)" : "", cached, prompt, preempted);
        for (int i = 0; i < g.n; i++) {
            tp_request_free(&g.reqs[i]);
            tp_text_stream_free(g.texts[i].ts);
            free(g.texts[i].text);
        }
        free(g.reqs);
        free(g.texts);
        free(ps);
        if (g.tok) tp_tokenizer_free(g.tok);
    } else {
        tp_step_worker_loop(m);
    }
    tp_job_close(&job);
    /* a failed request (reported above) makes the job's status non-zero, on every rank */
    int failed = mpi->allreduce_max_int(mpi, g.n_failed > 0);
    tp_comm_finalize(mpi);
    return failed ? 1 : 0;
}
