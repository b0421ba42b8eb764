/* The scheduler's plan and update halves driven by hand (scheduler.h), without MPI and without a
 * model: a tp_model holding only the sizes the scheduler reads, and step outputs fabricated here
 * in place of tp_step_run's. Checks what each plan packs (tokens, positions, sequences, logits
 * rows, block tables, admission by KV blocks) and what each update does with the rows
 * (tokens and log-probabilities recorded, EOS -> "stop", max_new_tokens -> "length", a
 * non-finite row -> "error" for that request alone, states, hooks, every KV block back).
 * Then the block manager (prefix_cache.h: LRU eviction, reference counts, hits confirmed by
 * token ids under forced hash collisions, stale parents) and the scheduler's prefix hits, KV on
 * demand, preemption (order, requeued first, resumed by refeeding, output identical to a run
 * alone) and its bound on passing a waiting request, with a fake model (fake_next). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/scheduler.h"

static int g_fail, g_checks;
#define CHECK(cond, ...)                                                             \
    do {                                                                             \
        g_checks++;                                                                  \
        if (!(cond)) {                                                               \
            g_fail++;                                                                \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
        }                                                                            \
    } while (0)

enum { V = 16, EOS = 15, N_POS = 32, MAX_TOKENS = 16, MAX_ROWS = 16, MAX_SEQS = 4, MAX_BLOCKS = 8, N_BLOCKS = 6,
       BS = 4 };

typedef struct {
    int tokens, done;
} counts;

static int on_token(void *ctx, tp_request *r) {
    (void)r;
    ((counts *)ctx)->tokens++;
    return 0;
}
static void on_done(void *ctx, tp_request *r) {
    (void)r;
    ((counts *)ctx)->done++;
}

static void make(tp_request *r, int index, const int32_t *ids, int n, int max_new) {
    tp_request_params p = tp_request_params_default();
    p.max_new_tokens = max_new;
    p.sampling.temperature = 0; /* greedy: one candidate per row */
    int32_t *prompt = malloc(n * sizeof(int32_t));
    memcpy(prompt, ids, n * sizeof(int32_t));
    tp_request_init(r, index, prompt, n, &p);
}

/* row i of out: one candidate (id, logit) and the row's log-sum-exp */
static void row(tp_step_output *out, int i, int32_t id, float logit, float lse) {
    out->rows[i] = (tp_row_result){.lse = lse, .target_logit = NAN, .n = 1};
    out->rows[i].c[0] = (tp_cand){.id = id, .logit = logit};
}

/* the block table row of slot sl holds r's blocks, then -1 */
static int table_row_ok(const tp_step_plan *p, int sl, const tp_request *r) {
    const int32_t *t = p->host.block_table + (size_t)sl * p->host.max_blocks;
    for (int b = 0; b < p->host.max_blocks; b++)
        if (t[b] != (b < r->n_blocks ? r->blocks[b] : -1)) return 0;
    return 1;
}

int main(void) {
    tp_model m;
    memset(&m, 0, sizeof m);
    m.cfg.vocab_size = V;
    m.cfg.n_positions = N_POS;
    m.cfg.eos_token_id = EOS;
    m.a.max_tokens = MAX_TOKENS;
    m.a.max_rows = MAX_ROWS;
    m.a.max_seqs = MAX_SEQS;
    m.a.max_blocks = MAX_BLOCKS;
    m.kv.n_blocks = N_BLOCKS;
    m.kv.block_size = BS;
    counts n = {0};
    tp_request_hooks hooks = {.on_token = on_token, .on_done = on_done, .ctx = &n};
    tp_sched *s = tp_sched_new(&m, &hooks);
    tp_step_output out;
    tp_step_output_init(&out, &m);

    /* KV on demand: admitted with blocks for their prompts, A (3 tokens) 1 block, B (5) 2, C (13)
     * 4: C waits while A and B hold 3 of the 6 blocks */
    static const int32_t pa[] = {1, 2, 3}, pb[] = {4, 5, 6, 7, 8}, pc[] = {1, 1, 2, 3, 5, 8, 13, 2, 3, 4, 5, 6, 7};
    tp_request r[3];
    make(&r[0], 0, pa, 3, 3);
    make(&r[1], 1, pb, 5, 2);
    make(&r[2], 2, pc, 13, 4);
    for (int i = 0; i < 3; i++) CHECK(tp_sched_submit(s, &r[i]) == 0, "submit %d", i);
    CHECK(r[0].state == TP_REQ_WAITING && tp_sched_waiting(s) == 3, "queued: %s, %d waiting",
          tp_req_state_name(r[0].state), tp_sched_waiting(s));

    /* step 1: prefill of A and B in one step, C left waiting */
    tp_step_plan p;
    CHECK(tp_sched_plan(s, &p) == 1, "step 1 planned");
    CHECK(tp_sched_running(s) == 2 && tp_sched_waiting(s) == 1 && tp_sched_kv_free(s) == N_BLOCKS - 3,
          "step 1: %d running, %d waiting, %d blocks free", tp_sched_running(s), tp_sched_waiting(s),
          tp_sched_kv_free(s));
    CHECK(r[0].state == TP_REQ_RUNNING && r[2].state == TP_REQ_WAITING, "step 1 states: %s, %s",
          tp_req_state_name(r[0].state), tp_req_state_name(r[2].state));
    static const int32_t ids1[] = {1, 2, 3, 4, 5, 6, 7, 8}, pos1[] = {0, 1, 2, 0, 1, 2, 3, 4},
                         seq1[] = {0, 0, 0, 1, 1, 1, 1, 1};
    CHECK(p.host.n_tokens == 8, "step 1: %d tokens, want 8", p.host.n_tokens);
    for (int t = 0; t < 8 && p.host.n_tokens == 8; t++)
        CHECK(p.host.ids[t] == ids1[t] && p.host.pos[t] == pos1[t] && p.host.seq[t] == seq1[t],
              "step 1 token %d: id %d pos %d seq %d, want %d %d %d", t, p.host.ids[t], p.host.pos[t], p.host.seq[t],
              ids1[t], pos1[t], seq1[t]);
    CHECK(p.host.n_rows == 2 && p.host.rows[0] == 2 && p.host.rows[1] == 7, "step 1 rows: %d (%d, %d), want 2 (2, 7)",
          p.host.n_rows, p.host.rows[0], p.host.rows[1]);
    CHECK(p.host.n_seqs == 2 && p.host.max_blocks == MAX_BLOCKS && r[0].n_blocks == 1 && r[1].n_blocks == 2,
          "step 1: %d seqs, blocks %d and %d", p.host.n_seqs, r[0].n_blocks, r[1].n_blocks);
    CHECK(table_row_ok(&p, 0, &r[0]) && table_row_ok(&p, 1, &r[1]), "step 1 block tables");
    CHECK(p.logits.mode == TP_LOGITS_CANDIDATES && p.logits.k == 1 && !p.logits.targets, "step 1 logits: mode %d k %d",
          p.logits.mode, p.logits.k);
    row(&out, 0, 10, 2.0f, 2.5f);
    row(&out, 1, 11, 1.0f, 1.25f);
    tp_sched_update(s, &p, &out);
    CHECK(r[0].n_ids == 1 && r[0].ids[0] == 10 && r[0].logprobs[0] == -0.5f && r[0].n_cached == 3,
          "A after step 1: %d ids, [0] = %d, logprob %g, %d cached", r[0].n_ids, r[0].ids[0], r[0].logprobs[0],
          r[0].n_cached);
    CHECK(r[1].n_ids == 1 && r[1].ids[0] == 11 && r[1].logprobs[0] == -0.25f && r[1].n_cached == 5,
          "B after step 1: %d ids, [0] = %d, %d cached", r[1].n_ids, r[1].ids[0], r[1].n_cached);
    CHECK(n.tokens == 2 && n.done == 0 && tp_sched_steps(s) == 1, "hooks after step 1: %d tokens, %d done",
          n.tokens, n.done);

    /* step 2: one decode token each; A draws EOS ("stop"), B reaches max_new_tokens ("length") */
    CHECK(tp_sched_plan(s, &p) == 1, "step 2 planned");
    CHECK(p.host.n_tokens == 2 && p.host.ids[0] == 10 && p.host.pos[0] == 3 && p.host.ids[1] == 11 &&
              p.host.pos[1] == 5 && p.host.n_rows == 2 && p.host.rows[0] == 0 && p.host.rows[1] == 1,
          "step 2: %d tokens (%d@%d, %d@%d), %d rows", p.host.n_tokens, p.host.ids[0], p.host.pos[0], p.host.ids[1],
          p.host.pos[1], p.host.n_rows);
    CHECK(tp_sched_waiting(s) == 1, "C still waits for blocks in step 2");
    row(&out, 0, EOS, 3.0f, 3.0f);
    row(&out, 1, 12, 0.0f, 0.0f);
    tp_sched_update(s, &p, &out);
    CHECK(r[0].state == TP_REQ_FINISHED && r[0].finish_reason && !strcmp(r[0].finish_reason, "stop") &&
              r[0].n_ids == 2 && r[0].ids[1] == EOS,
          "A: %s, %s, %d ids", tp_req_state_name(r[0].state), r[0].finish_reason ? r[0].finish_reason : "-", r[0].n_ids);
    CHECK(r[1].state == TP_REQ_FINISHED && r[1].finish_reason && !strcmp(r[1].finish_reason, "length") &&
              r[1].n_ids == 2 && r[1].ids[1] == 12,
          "B: %s, %s, %d ids", tp_req_state_name(r[1].state), r[1].finish_reason ? r[1].finish_reason : "-", r[1].n_ids);
    /* A's block 0 (positions 0-3) and B's block 0 are full: cached; the others free */
    CHECK(n.done == 2 && tp_sched_running(s) == 0 && tp_sched_kv_free(s) == N_BLOCKS - 2 && tp_sched_kv_cached(s) == 2,
          "after step 2: %d done, %d running, %d blocks free, %d cached", n.done, tp_sched_running(s),
          tp_sched_kv_free(s), tp_sched_kv_cached(s));

    /* step 3: C is admitted; its row is not finite: it alone ends in "error", nothing drawn */
    CHECK(tp_sched_plan(s, &p) == 1, "step 3 planned");
    CHECK(r[2].state == TP_REQ_RUNNING && p.host.n_tokens == 13 && p.host.n_rows == 1 && p.host.rows[0] == 12 &&
              r[2].n_blocks == 4 && table_row_ok(&p, r[2].slot, &r[2]),
          "step 3: %s, %d tokens, %d rows, %d blocks", tp_req_state_name(r[2].state), p.host.n_tokens, p.host.n_rows,
          r[2].n_blocks);
    row(&out, 0, 3, NAN, NAN);
    tp_sched_update(s, &p, &out);
    CHECK(r[2].state == TP_REQ_FINISHED && r[2].finish_reason && !strcmp(r[2].finish_reason, "error") &&
              r[2].n_ids == 0 && strstr(r[2].error, "non-finite"),
          "C: %s, %s, %d ids, \"%s\"", tp_req_state_name(r[2].state), r[2].finish_reason ? r[2].finish_reason : "-",
          r[2].n_ids, r[2].error);
    CHECK(tp_sched_plan(s, &p) == 0 && tp_sched_steps(s) == 3 && n.done == 3 &&
              tp_sched_kv_free(s) + tp_sched_kv_cached(s) == N_BLOCKS,
          "idle: %ld steps, %d blocks free + %d cached, %d done", tp_sched_steps(s), tp_sched_kv_free(s),
          tp_sched_kv_cached(s), n.done);

    for (int i = 0; i < 3; i++) tp_request_free(&r[i]);
    tp_step_output_free(&out);
    tp_sched_free(s);
    if (g_fail) {
        fprintf(stderr, "sched_unit: %d of %d checks FAILED\n", g_fail, g_checks);
        return 1;
    }
    printf("sched_unit: all %d checks passed\n", g_checks);
    return 0;
}
