/* The scheduler's plan and update halves driven by hand (scheduler.h), without MPI and without a
 * model: a tp_model holding only the sizes the scheduler reads, and step outputs fabricated here
 * in place of tp_step_run's. Checks what each plan packs (tokens, positions, sequences, logits
 * rows, block tables, admission by KV blocks) and what each update does with the rows
 * (tokens and log-probabilities recorded, EOS -> stop, max_new_tokens -> length, a non-finite
 * row -> error for that request alone, states, the events, every KV block back).
 * Then the block manager (prefix_cache.h: LRU eviction, reference counts, hits confirmed by
 * token ids under forced hash collisions, stale parents) and the scheduler's prefix hits, KV on
 * demand, preemption (order, requeued first, resumed by refeeding, output identical to a run
 * alone) and its bound on passing a waiting request, with a fake model (fake_next). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_test.h"

enum { MAX_SEQS = 4, N_BLOCKS = 6 };

typedef struct {
    int tokens, done, bad;
    const tp_request *ended[16]; /* the first 16 ends, in order */
} counts;

/* the scheduler's events since the last call, counted: each token once, each end once, the
 * tokens in order (event i is r->ids[i], as r->n_ids grew) */
static void drain(tp_sched *s, counts *n) {
    const tp_sched_event *ev;
    int k = tp_sched_events(s, &ev);
    for (int i = 0; i < k; i++) {
        const tp_request *r = ev[i].r;
        if (ev[i].kind == TP_EV_TOKEN) {
            n->tokens++;
            if (ev[i].i >= r->n_ids || r->ids[ev[i].i] != ev[i].id || r->logprobs[ev[i].i] != ev[i].logprob)
                n->bad++;
        }
        if (ev[i].kind == TP_EV_FINISHED) {
            if (n->done < 16) n->ended[n->done] = r;
            n->done++;
            if (r->state != TP_REQ_FINISHED || r->finish != ev[i].finish) n->bad++;
        }
    }
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
    tp_seq_view v = tp_sched_seq_view(r);
    for (int b = 0; b < p->host.max_blocks; b++)
        if (t[b] != (b < v.n_blocks ? v.blocks[b] : -1)) return 0;
    return 1;
}

/* the request's bookkeeping (scheduler.c's), read-only */
#define SEQ(r) tp_sched_seq_view(r)

/* ---- the block manager alone (prefix_cache.h) ---- */
static void test_block_manager(void) {
    tp_prefix_cache c;
    tp_prefix_cache_init(&c, 4, 2);
    c.hash_mask = 0; /* every hash collides: blocks are told apart by their ids and parents alone */
    int32_t b[4], hit[4];
    for (int i = 0; i < 4; i++) b[i] = tp_prefix_cache_take(&c);
    CHECK(b[0] == 0 && b[3] == 3 && tp_prefix_cache_take(&c) == -1 && tp_prefix_cache_available(&c) == 0,
          "4 blocks taken (%d..%d), none left", b[0], b[3]);
    static const int32_t ids[] = {1, 2, 3, 4}, other[] = {1, 2, 3, 5}, seven[] = {7, 7, 3, 4};
    CHECK(tp_prefix_cache_register(&c, 0, -1, NULL, ids) == 1 && tp_prefix_cache_register(&c, 1, 0, NULL, ids + 2) == 1,
          "blocks 0 and 1 registered");
    CHECK(tp_prefix_cache_register(&c, 2, -1, NULL, ids) == 0, "the same tokens registered twice: the second stays private");
    CHECK(tp_prefix_cache_register(&c, 3, 2, NULL, ids + 2) == 0, "a block after an unregistered parent stays private");
    tp_prefix_cache_release(&c, 1); /* the child first: it is evicted before its parent */
    tp_prefix_cache_release(&c, 0);
    tp_prefix_cache_release(&c, 2);
    tp_prefix_cache_release(&c, 3);
    CHECK(c.n_free == 2 && c.n_cached == 2 && tp_prefix_cache_available(&c) == 4, "released: %d free, %d cached",
          c.n_free, c.n_cached);
    CHECK(tp_prefix_cache_lookup(&c, NULL, ids, 2, hit) == 2 && hit[0] == 0 && hit[1] == 1, "lookup 1 2 3 4: 2 hits");
    CHECK(tp_prefix_cache_lookup(&c, NULL, other, 2, hit) == 1 && hit[0] == 0, "lookup 1 2 3 5: 1 hit");
    CHECK(tp_prefix_cache_lookup(&c, NULL, ids + 2, 1, hit) == 0, "3 4 as a first block: no hit (its parent differs)");
    /* refcounts: a shared block leaves the LRU while held, comes back when the last holder goes */
    tp_prefix_cache_acquire(&c, 0);
    tp_prefix_cache_acquire(&c, 0);
    CHECK(c.ref[0] == 2 && c.n_cached == 1, "block 0 held twice: ref %d, %d cached", c.ref[0], c.n_cached);
    tp_prefix_cache_release(&c, 0);
    CHECK(c.ref[0] == 1 && c.n_cached == 1, "one holder left: ref %d, %d cached", c.ref[0], c.n_cached);
    tp_prefix_cache_release(&c, 0);
    CHECK(c.ref[0] == 0 && c.n_cached == 2, "no holder: cached again (%d)", c.n_cached);
    /* LRU: free blocks first, then the least recently used cached one (block 1: block 0 was used
     * after it) */
    int t1 = tp_prefix_cache_take(&c), t2 = tp_prefix_cache_take(&c), t3 = tp_prefix_cache_take(&c);
    CHECK(t1 >= 2 && t2 >= 2 && t3 == 1 && c.n_cached == 1 && !c.registered[1], "takes %d %d then evicts %d (want 1)",
          t1, t2, t3);
    CHECK(tp_prefix_cache_lookup(&c, NULL, ids, 2, hit) == 1, "after evicting block 1 the chain stops at block 0");
    /* a child of an evicted parent never matches through a new block in its parent's place */
    CHECK(tp_prefix_cache_register(&c, 1, 0, NULL, ids + 2) == 1, "block 1 registered again after 0");
    tp_prefix_cache_release(&c, 1);                                 /* LRU: 0, 1 */
    tp_prefix_cache_release(&c, t1);
    int t4 = tp_prefix_cache_take(&c), t5 = tp_prefix_cache_take(&c); /* t1 (free), then evicts 0 */
    CHECK(t4 == t1 && t5 == 0, "takes %d, evicts %d (want 0)", t4, t5);
    CHECK(tp_prefix_cache_register(&c, 0, -1, NULL, seven) == 1, "block 0 reused for 7 7");
    CHECK(tp_prefix_cache_lookup(&c, NULL, seven, 2, hit) == 1, "7 7 3 4: the old child of block 0 is no hit");
    tp_prefix_cache_free(&c);

    /* every hash equal: hits are told apart by their token ids alone */
    tp_prefix_cache_init(&c, 4, 2);
    c.hash_mask = 0;
    static const int32_t x[] = {1, 2}, y[] = {5, 6}, z[] = {8, 8}, xy[] = {1, 2, 5, 6};
    for (int i = 0; i < 3; i++) b[i] = tp_prefix_cache_take(&c);
    tp_prefix_cache_register(&c, b[0], -1, NULL, x);
    tp_prefix_cache_register(&c, b[1], -1, NULL, y);
    tp_prefix_cache_register(&c, b[2], b[0], NULL, y);
    CHECK(tp_prefix_cache_lookup(&c, NULL, y, 1, hit) == 1 && hit[0] == b[1], "collision: 5 6 -> block %d, want %d", hit[0],
          b[1]);
    CHECK(tp_prefix_cache_lookup(&c, NULL, x, 1, hit) == 1 && hit[0] == b[0], "collision: 1 2 -> block %d", hit[0]);
    CHECK(tp_prefix_cache_lookup(&c, NULL, z, 1, hit) == 0, "collision: 8 8 is no hit");
    CHECK(tp_prefix_cache_lookup(&c, NULL, xy, 2, hit) == 2 && hit[1] == b[2], "collision: 1 2 5 6 -> %d blocks", 2);
    for (int i = 2; i >= 0; i--) tp_prefix_cache_release(&c, b[i]);
    for (int i = 0; i < 4; i++) tp_prefix_cache_take(&c); /* evicts all three: the table empties */
    CHECK(c.n_cached == 0 && tp_prefix_cache_lookup(&c, NULL, x, 1, hit) == 0 && tp_prefix_cache_lookup(&c, NULL, y, 1, hit) == 0,
          "all evicted: no hits");
    tp_prefix_cache_free(&c);

    /* salts (the request's cache_salt): a first block is found only under its own salt, even
     * when every hash collides; the blocks after it follow their parent */
    tp_prefix_cache_init(&c, 4, 2);
    c.hash_mask = 0;
    /* scopes that differ in one byte only, past the 8 the table's hash starts from */
    tp_cache_scope sc7 = {{0}}, sc9 = {{0}}, sc8 = {{0}};
    sc7.b[31] = 7, sc9.b[31] = 9, sc8.b[31] = 8;
    for (int i = 0; i < 3; i++) b[i] = tp_prefix_cache_take(&c);
    CHECK(tp_prefix_cache_register(&c, b[0], -1, &sc7, x) == 1 && tp_prefix_cache_register(&c, b[1], b[0], &sc7, y) == 1,
          "1 2 | 5 6 registered under salt 7");
    CHECK(tp_prefix_cache_register(&c, b[2], -1, &sc9, x) == 1, "1 2 under salt 9: a block of its own, not a duplicate");
    CHECK(tp_prefix_cache_lookup(&c, &sc7, xy, 2, hit) == 2 && hit[0] == b[0] && hit[1] == b[1], "salt 7: 2 hits");
    CHECK(tp_prefix_cache_lookup(&c, &sc9, xy, 2, hit) == 1 && hit[0] == b[2], "salt 9: its own first block, no more");
    CHECK(tp_prefix_cache_lookup(&c, NULL, xy, 2, hit) == 0 && tp_prefix_cache_lookup(&c, &sc8, xy, 2, hit) == 0,
          "no salt, or another: no hit");
    tp_prefix_cache_free(&c);
}

/* ---- the scheduler with a fake model ---- */

/* the fake model's next token after `id` at position `pos` (never EOS) */
static int32_t fake_next(int32_t id, int32_t pos) { return (id * 7 + pos * 3 + 1) % (EOS - 1); }

static counts g_n; /* the events counted by fake_update */

static void fake_update(tp_sched *s, const tp_step_plan *p, tp_step_output *out) {
    for (int i = 0; i < p->host.n_rows; i++) {
        int t = p->host.rows[i];
        row(out, i, fake_next(p->host.ids[t], p->host.pos[t]), 0.0f, 0.0f);
    }
    tp_sched_update(s, p, out);
    drain(s, &g_n);
}

/* plans and fakes steps until idle; returns the steps, -1 past max_steps (a hang) */
static int run_all(tp_sched *s, tp_step_output *out, int max_steps) {
    tp_step_plan p;
    int n = 0;
    while (tp_sched_plan(s, &p)) {
        fake_update(s, &p, out);
        if (++n > max_steps) return -1;
    }
    return n;
}

static int idle_ok(const tp_sched *s) { return tp_sched_kv_free(s) + tp_sched_kv_cached(s) == tp_sched_kv_total(s); }

static tp_model g_m; /* sizes only; tests change kv.n_blocks and a.max_seqs */

static tp_sched *sched(int n_blocks, int max_seqs, int prefix) {
    g_m.kv.n_blocks = n_blocks;
    g_m.a.max_seqs = max_seqs;
    g_m.no_prefix_cache = !prefix;
    return tp_sched_new(&g_m);
}

/* the plan fed r's positions from..to-1 (its history), and samples after the last */
static int fed(const tp_step_plan *p, const tp_request *r, int from, int to) {
    int n = 0, last = -1;
    for (int t = 0; t < p->host.n_tokens; t++) {
        if (p->host.seq[t] != SEQ(r).slot) continue;
        if (p->host.pos[t] != from + n || p->host.ids[t] != SEQ(r).history[from + n]) return 0;
        n++;
        last = t;
    }
    int sampled = 0;
    for (int i = 0; i < p->host.n_rows; i++) sampled |= p->host.rows[i] == last;
    return n == to - from && sampled;
}

static void test_hits(int prefix) {
    tp_sched *s = sched(16, MAX_SEQS, prefix);
    tp_step_output out;
    tp_step_output_init(&out, &g_m);
    static const int32_t px[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, py[] = {1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13};
    tp_request x, y, z, sc;
    make(&x, 0, px, 10, 3);
    CHECK(tp_sched_submit(s, &x) == 0 && run_all(s, &out, 50) > 0 && x.n_ids == 3, "X ran");
    CHECK(x.n_prompt_cached == 0 && idle_ok(s), "X: %d cached", x.n_prompt_cached);
    /* Y shares X's first 8 tokens (2 blocks), Z is X's first 8 tokens (capped to 4: its last
     * token is fed), the scorer takes no hit */
    make(&y, 1, py, 11, 2);
    make(&z, 2, px, 8, 2);
    make(&sc, 3, px, 10, 0);
    sc.params.score_prompt = 1;
    tp_sched_submit(s, &y);
    tp_sched_submit(s, &z);
    tp_sched_submit(s, &sc);
    tp_step_plan p;
    CHECK(tp_sched_plan(s, &p) == 1, "planned");
    int want_y = prefix ? 8 : 0, want_z = prefix ? 4 : 0;
    CHECK(y.n_prompt_cached == want_y && z.n_prompt_cached == want_z && sc.n_prompt_cached == 0,
          "prefix %d: cached Y %d (want %d), Z %d (want %d), scorer %d", prefix, y.n_prompt_cached, want_y,
          z.n_prompt_cached, want_z, sc.n_prompt_cached);
    if (prefix) { /* (without the cache the three prompts do not fit one step's 16 tokens) */
        CHECK(fed(&p, &y, want_y, 11) && fed(&p, &z, want_z, 8), "Y fed from %d, Z from %d", want_y, want_z);
        tp_prefix_cache *c = tp_sched_prefix_cache(s);
        const int32_t *yb = SEQ(&y).blocks, *zb = SEQ(&z).blocks;
        CHECK(yb[0] == zb[0] && c->ref[yb[0]] == 2 && c->ref[yb[1]] == 1, "shared block 0: ref %d, block 1 ref %d",
              c->ref[yb[0]], c->ref[yb[1]]);
        CHECK(tp_sched_prefix_query_tokens(s) == 10 + 11 + 8 && tp_sched_prefix_hit_tokens(s) == 12,
              "counters: %ld queried, %ld hit", tp_sched_prefix_query_tokens(s), tp_sched_prefix_hit_tokens(s));
    } else
        CHECK(tp_sched_prefix_query_tokens(s) == 0 && tp_sched_kv_cached(s) == 0, "cache off: nothing queried or cached");
    fake_update(s, &p, &out);
    CHECK(run_all(s, &out, 50) >= 0 && idle_ok(s), "idle: %d free + %d cached of %d", tp_sched_kv_free(s),
          tp_sched_kv_cached(s), tp_sched_kv_total(s));
    tp_request *all[] = {&x, &y, &z, &sc};
    for (int i = 0; i < 4; i++) tp_request_free(all[i]);
    tp_step_output_free(&out);
    tp_sched_free(s);
}

/* r run alone in a large pool: its ids */
static void run_alone(const int32_t *prompt, int n, int max_new, int32_t *ids) {
    tp_sched *s = sched(32, MAX_SEQS, 1);
    tp_step_output out;
    tp_step_output_init(&out, &g_m);
    tp_request r;
    make(&r, 0, prompt, n, max_new);
    tp_sched_submit(s, &r);
    run_all(s, &out, 100);
    memcpy(ids, r.ids, r.n_ids * sizeof *ids);
    tp_request_free(&r);
    tp_step_output_free(&out);
    tp_sched_free(s);
}

static void test_preemption(void) {
    /* 5 blocks of 4: A and B need 4 blocks each at their longest (4 + 12 - 1 tokens), so the
     * newest (B) is preempted when A grows, requeued first (ahead of C, which waits for a slot),
     * resumes by refeeding its history and ends as it does alone */
    tp_sched *s = sched(5, 2, 1);
    g_n = (counts){0};
    tp_step_output out;
    tp_step_output_init(&out, &g_m);
    static const int32_t pa[] = {1, 2, 3, 4}, pb[] = {5, 6, 7, 8}, pc[] = {9, 10};
    tp_request a, b, c;
    make(&a, 0, pa, 4, 12);
    make(&b, 1, pb, 4, 12);
    make(&c, 2, pc, 2, 3);
    tp_sched_submit(s, &a);
    tp_sched_submit(s, &b);
    tp_sched_submit(s, &c);
    tp_step_plan p;
    int steps = 0, seen_preempt = 0, resumed_ok = 0, b_ids_at_preempt = 0;
    while (tp_sched_plan(s, &p) && steps++ < 100) {
        if (!seen_preempt && tp_sched_preemptions(s) == 1) {
            seen_preempt = 1;
            b_ids_at_preempt = b.n_ids;
            tp_request *queue[3];
            int nq = tp_sched_queue(s, queue, 3);
            CHECK(b.state == TP_REQ_WAITING && SEQ(&b).n_blocks == 0 && SEQ(&b).n_cached == 0 &&
                      a.state == TP_REQ_RUNNING && c.state == TP_REQ_WAITING && b.n_preempted == 1 && nq == 2 &&
                      queue[0] == &b && queue[1] == &c,
                  "preempted: B %s with %d blocks, A %s, C %s, %d waiting", tp_req_state_name(b.state),
                  SEQ(&b).n_blocks, tp_req_state_name(a.state), tp_req_state_name(c.state), nq);
        }
        if (seen_preempt && !resumed_ok && b.state == TP_REQ_RUNNING) {
            /* resumed: its history from the first position not cached (a block boundary) to
             * its last token, sampled after it */
            int len = b.n_prompt + b.n_ids, from = len;
            for (int t = 0; t < p.host.n_tokens; t++) from -= p.host.seq[t] == SEQ(&b).slot;
            resumed_ok = 1;
            CHECK(b.n_ids == b_ids_at_preempt && SEQ(&b).n_cached == len && from % 4 == 0 && fed(&p, &b, from, len) &&
                      b.n_prompt_cached == 0,
                  "B resumed: %d ids (had %d), %d cached of %d, fed from %d", b.n_ids, b_ids_at_preempt,
                  SEQ(&b).n_cached, len, from);
        }
        fake_update(s, &p, &out);
    }
    CHECK(seen_preempt && resumed_ok && steps < 100, "preempted %d, resumed %d, %d steps", seen_preempt, resumed_ok,
          steps);
    CHECK(g_n.tokens == a.n_ids + b.n_ids + c.n_ids && g_n.done == 3 && g_n.bad == 0,
          "events: %d tokens for %d ids (none twice), %d ends, %d wrong", g_n.tokens, a.n_ids + b.n_ids + c.n_ids,
          g_n.done, g_n.bad);
    int32_t alone[16];
    run_alone(pa, 4, 12, alone);
    CHECK(a.n_ids == 12 && !memcmp(a.ids, alone, 12 * sizeof *alone), "A's ids as alone");
    run_alone(pb, 4, 12, alone);
    CHECK(b.n_ids == 12 && !memcmp(b.ids, alone, 12 * sizeof *alone), "B's ids as alone (preempted %d)", b.n_preempted);
    run_alone(pc, 2, 3, alone);
    CHECK(c.n_ids == 3 && !memcmp(c.ids, alone, 3 * sizeof *alone), "C's ids as alone");
    CHECK(idle_ok(s), "idle: %d free + %d cached", tp_sched_kv_free(s), tp_sched_kv_cached(s));
    tp_request_free(&a);
    tp_request_free(&b);
    tp_request_free(&c);
    tp_step_output_free(&out);
    tp_sched_free(s);
}

static void test_storm(void) {
    /* 6 requests in 4 blocks, 3 slots, each needing 3 blocks at its longest: they all finish
     * (no deadlock), as they do alone, and the pool is whole at the end */
    tp_sched *s = sched(4, 3, 1);
    tp_step_output out;
    tp_step_output_init(&out, &g_m);
    tp_request r[6];
    int32_t prompts[6][3];
    for (int i = 0; i < 6; i++) {
        for (int j = 0; j < 3; j++) prompts[i][j] = (i * 3 + j) % 13;
        make(&r[i], i, prompts[i], 3, 9);
        tp_sched_submit(s, &r[i]);
    }
    CHECK(run_all(s, &out, 300) > 0 && tp_sched_preemptions(s) > 0, "storm: %ld preemptions", tp_sched_preemptions(s));
    for (int i = 0; i < 6; i++) {
        int32_t alone[9];
        run_alone(prompts[i], 3, 9, alone);
        CHECK(r[i].n_ids == 9 && !memcmp(r[i].ids, alone, sizeof alone), "storm: request %d as alone", i);
        tp_request_free(&r[i]);
    }
    CHECK(idle_ok(s), "storm idle: %d free + %d cached", tp_sched_kv_free(s), tp_sched_kv_cached(s));
    tp_step_output_free(&out);
    tp_sched_free(s);
}

static void test_passing_bound(void) {
    /* 6 blocks, 2 slots (the bound N = max_seqs = 2). R holds 3 blocks and grows to 5; H needs
     * 4 blocks to start: it waits, and the small S1, S2 (1 block) pass it, but not S3 */
    tp_sched *s = sched(6, 2, 1);
    tp_step_output out;
    tp_step_output_init(&out, &g_m);
    int32_t pr[16], ph[16], ps[3] = {1, 2, 3};
    for (int i = 0; i < 16; i++) { pr[i] = i % 13; ph[i] = (i + 5) % 11; }
    tp_request R, H, S[3];
    make(&R, 0, pr, 12, 9);
    make(&H, 1, ph, 16, 1);
    tp_sched_submit(s, &R);
    tp_sched_submit(s, &H);
    for (int i = 0; i < 3; i++) {
        make(&S[i], 2 + i, ps, 3, 1);
        tp_sched_submit(s, &S[i]);
    }
    tp_step_plan p;
    tp_sched_plan(s, &p);
    CHECK(R.state == TP_REQ_RUNNING && H.state == TP_REQ_WAITING && S[0].state == TP_REQ_RUNNING &&
              SEQ(&H).n_passed == 1,
          "plan 1: H %s passed %d, S1 %s", tp_req_state_name(H.state), SEQ(&H).n_passed, tp_req_state_name(S[0].state));
    fake_update(s, &p, &out); /* S1 done */
    tp_sched_plan(s, &p);
    CHECK(S[0].state == TP_REQ_FINISHED && S[1].state == TP_REQ_RUNNING && SEQ(&H).n_passed == 2,
          "plan 2: S2 %s, H passed %d", tp_req_state_name(S[1].state), SEQ(&H).n_passed);
    fake_update(s, &p, &out); /* S2 done */
    tp_sched_plan(s, &p);
    CHECK(S[1].state == TP_REQ_FINISHED && S[2].state == TP_REQ_WAITING && H.state == TP_REQ_WAITING,
          "plan 3: H passed %d times: S3 %s must wait behind it", SEQ(&H).n_passed, tp_req_state_name(S[2].state));
    fake_update(s, &p, &out);
    long h_at = 0, s3_at = 0; /* their admission numbers, read while they run */
    while (tp_sched_plan(s, &p)) {
        if (H.state == TP_REQ_RUNNING && !h_at) h_at = SEQ(&H).admitted_at;
        if (S[2].state == TP_REQ_RUNNING && !s3_at) s3_at = SEQ(&S[2]).admitted_at;
        fake_update(s, &p, &out);
    }
    CHECK(h_at && s3_at && h_at < s3_at && H.n_ids == 1 && S[2].n_ids == 1, "H admitted (%ld) before S3 (%ld)", h_at,
          s3_at);
    CHECK(idle_ok(s), "passing idle");
    tp_request_free(&R);
    tp_request_free(&H);
    for (int i = 0; i < 3; i++) tp_request_free(&S[i]);
    tp_step_output_free(&out);
    tp_sched_free(s);
}

/* Exact prefix-cache hits for a scripted sequence (issue 34's mutants): a finished sequence's
 * blocks go back last first, so the LRU evicts a prefix from its end and the blocks before stay
 * useful; the counters and cached_tokens (n_prompt_cached) count first admissions only. */
static void test_exact_hits(void) {
    tp_sched *s = sched(6, 1, 1); /* 6 blocks of 4, one slot: one request at a time */
    tp_step_output out;
    tp_step_output_init(&out, &g_m);
    int32_t px[13], pz[16];
    for (int i = 0; i < 13; i++) px[i] = 1 + i % 13;
    for (int i = 0; i < 16; i++) pz[i] = 14 - i % 13;
    tp_request x, z, y;
    /* X: 12 tokens + 1 generated: its 3 full blocks cached (12 fed), 3 free */
    make(&x, 0, px, 12, 1);
    tp_sched_submit(s, &x);
    run_all(s, &out, 20);
    CHECK(x.n_prompt_cached == 0 && tp_sched_kv_cached(s) == 3 && tp_sched_kv_free(s) == 3,
          "X: %d cached tokens, %d blocks cached, %d free", x.n_prompt_cached, tp_sched_kv_cached(s), tp_sched_kv_free(s));
    /* Z: 16 other tokens take the 3 free blocks and evict one: X's last block, not its first */
    make(&z, 1, pz, 16, 1);
    tp_sched_submit(s, &z);
    run_all(s, &out, 20);
    CHECK(z.n_prompt_cached == 0, "Z: %d cached tokens, want 0", z.n_prompt_cached);
    /* Y: X's 12 tokens and one more: hits X's first two blocks, exactly 8 tokens (its third was
     * evicted; releasing X's blocks first to last would have evicted the first, and the others
     * are useless without it: 0) */
    make(&y, 2, px, 13, 1);
    tp_sched_submit(s, &y);
    run_all(s, &out, 20);
    CHECK(y.n_prompt_cached == 8, "Y after one eviction: %d cached tokens, want 8 (X's blocks 0 and 1)",
          y.n_prompt_cached);
    CHECK(tp_sched_prefix_query_tokens(s) == 12 + 16 + 13 && tp_sched_prefix_hit_tokens(s) == 8,
          "counters: %ld queried (want 41), %ld hit (want 8)", tp_sched_prefix_query_tokens(s),
          tp_sched_prefix_hit_tokens(s));
    CHECK(idle_ok(s), "exact hits idle");
    tp_request_free(&x);
    tp_request_free(&z);
    tp_request_free(&y);
    tp_step_output_free(&out);
    tp_sched_free(s);

    /* a resume after a preemption: W leaves [1..8] cached; A (4 tokens + 9, 3 blocks at most) and
     * B ([1..8] + 9: a hit of 8 at its first admission; + 14, 6 blocks) outgrow the 6 blocks, B
     * (the newest) is preempted and resumes with hits that include its generated tokens (12).
     * B's cached_tokens stays 8 and the counters count its first admission only. */
    s = sched(6, 2, 1);
    tp_step_output_init(&out, &g_m);
    static const int32_t pa[] = {20 % 15, 21 % 15, 22 % 15, 23 % 15};
    int32_t pb[9];
    for (int i = 0; i < 9; i++) pb[i] = 1 + i;
    tp_request w, a, b;
    make(&w, 0, pb, 8, 1);
    tp_sched_submit(s, &w);
    run_all(s, &out, 20);
    make(&a, 1, pa, 4, 9);
    make(&b, 2, pb, 9, 14);
    tp_sched_submit(s, &a);
    tp_sched_submit(s, &b);
    tp_step_plan p;
    int steps = 0, b_first = -1, b_resume_from = -1;
    while (tp_sched_plan(s, &p) && steps++ < 100) {
        if (b.state == TP_REQ_RUNNING && b_first < 0) b_first = b.n_prompt_cached;
        if (b.n_preempted == 1 && b.state == TP_REQ_RUNNING && b_resume_from < 0) {
            int len = b.n_prompt + b.n_ids, from = len;
            for (int t = 0; t < p.host.n_tokens; t++) from -= p.host.seq[t] == SEQ(&b).slot;
            b_resume_from = from;
        }
        fake_update(s, &p, &out);
    }
    CHECK(b.n_preempted == 1 && b_resume_from > 8,
          "B preempted %d times, resumed with %d tokens from the cache (want > 8: its generated ones too)",
          b.n_preempted, b_resume_from);
    CHECK(b_first == 8 && b.n_prompt_cached == 8 && a.n_prompt_cached == 0,
          "cached tokens: B %d at its first admission, %d at the end (want 8, 8), A %d (want 0)", b_first,
          b.n_prompt_cached, a.n_prompt_cached);
    CHECK(tp_sched_prefix_query_tokens(s) == 8 + 4 + 9 && tp_sched_prefix_hit_tokens(s) == 8,
          "counters after a resume: %ld queried (want 21), %ld hit (want 8)", tp_sched_prefix_query_tokens(s),
          tp_sched_prefix_hit_tokens(s));
    CHECK(idle_ok(s), "resume idle");
    tp_request_free(&w);
    tp_request_free(&a);
    tp_request_free(&b);
    tp_step_output_free(&out);
    tp_sched_free(s);
}

/* cache_salt scopes hits (issue 34 item 6): the same prompt under another salt finds nothing,
 * under the same salt its blocks; a preempted request resumes under its own salt. */
static void test_salt(void) {
    tp_sched *s = sched(16, 1, 1);
    tp_step_output out;
    tp_step_output_init(&out, &g_m);
    int32_t px[13];
    for (int i = 0; i < 13; i++) px[i] = 1 + i;
    static const uint8_t salts[] = {0, 11, 22, 11, 0}; /* a scope's last byte */
    static const int want[] = {0, 0, 0, 12, 12}; /* cached tokens of each, run one after another */
    tp_request r[5];
    for (int i = 0; i < 5; i++) {
        make(&r[i], i, px, 13, 1);
        r[i].cache_scope.b[31] = salts[i];
        tp_sched_submit(s, &r[i]);
        run_all(s, &out, 20);
        CHECK(r[i].n_prompt_cached == want[i], "salt %llu (request %d): %d cached tokens, want %d",
              (unsigned long long)salts[i], i, r[i].n_prompt_cached, want[i]);
        tp_request_free(&r[i]);
    }
    CHECK(tp_sched_prefix_hit_tokens(s) == 24 && idle_ok(s), "salts: %ld hit tokens", tp_sched_prefix_hit_tokens(s));
    tp_step_output_free(&out);
    tp_sched_free(s);
}

/* Priority under preemption (issue 34 item 5): three priority-10 sequences outgrow a pool of 6
 * blocks; an urgent one (priority -10) arrives while they run. With 3 slots it waits for one:
 * the preempted ones wait behind it (not first in line), so it takes the first slot that frees.
 * With 4 slots it is admitted at once, the latest admitted: it is packed first and never the
 * victim (the least urgent is, the latest admitted among equals). Either way, once running it
 * advances a token every step, uninterrupted, and does not finish last. */
static void test_priority_preemption(int slots) {
    tp_sched *s = sched(6, slots, 1);
    g_n = (counts){0};
    tp_step_output out;
    tp_step_output_init(&out, &g_m);
    static const int32_t pp[4][3] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}};
    tp_request r[4]; /* r[0..2] priority 10, r[3] the urgent one */
    for (int i = 0; i < 4; i++) {
        make(&r[i], i, pp[i], 3, 12);
        r[i].params.priority = i < 3 ? 10 : -10;
    }
    tp_request *u = &r[3];
    for (int i = 0; i < 3; i++) tp_sched_submit(s, &r[i]);
    tp_step_plan p;
    CHECK(tp_sched_plan(s, &p) == 1 && tp_sched_running(s) == 3, "%d slots: the three priority-10 ones run", slots);
    fake_update(s, &p, &out);
    tp_sched_submit(s, u);
    int steps = 0, u_steps = 0, overtaken = 0, queued_behind = 0;
    for (;;) {
        tp_req_state was[4];
        for (int i = 0; i < 4; i++) was[i] = r[i].state;
        if (u->state == TP_REQ_WAITING && tp_sched_preemptions(s) > 0) { /* preempted ones wait behind it */
            tp_request *queue[4];
            int nq = tp_sched_queue(s, queue, 4);
            queued_behind += nq >= 2 && queue[0] == u;
        }
        if (!tp_sched_plan(s, &p) || steps++ > 200) break;
        for (int i = 0; i < 3; i++) /* a preempted one resumed while the urgent one still waits */
            overtaken += was[i] == TP_REQ_WAITING && r[i].state == TP_REQ_RUNNING && u->state == TP_REQ_WAITING;
        if (u->state == TP_REQ_RUNNING) u_steps++;
        int before = u->n_ids;
        fake_update(s, &p, &out);
        if (u->state != TP_REQ_WAITING && before < 12)
            CHECK(u->n_ids == before + 1, "the urgent request advances every step: %d -> %d ids", before, u->n_ids);
    }
    CHECK(tp_sched_preemptions(s) > 0 && (slots == 4 || queued_behind > 0) && overtaken == 0,
          "%d slots: %ld preemptions; the urgent request first in the queue in %d plans, overtaken by a preempted "
          "one %d times", slots, tp_sched_preemptions(s), queued_behind, overtaken);
    CHECK(u->n_preempted == 0 && u->n_ids == 12 && u_steps == 12,
          "%d slots: urgent: preempted %d times, %d ids in %d steps", slots, u->n_preempted, u->n_ids, u_steps);
    int u_place = -1;
    for (int i = 0; i < g_n.done && i < 16; i++)
        if (g_n.ended[i] == u) u_place = i;
    CHECK(g_n.done == 4 && u_place >= 0 && u_place < 3, "%d slots: the urgent request ended %d of %d (last is 3)", slots,
          u_place, g_n.done);
    int32_t alone[12];
    for (int i = 0; i < 4; i++) {
        run_alone(pp[i], 3, 12, alone);
        CHECK(r[i].n_ids == 12 && !memcmp(r[i].ids, alone, sizeof alone), "request %d (preempted %d) as alone", i,
              r[i].n_preempted);
    }
    CHECK(idle_ok(s), "idle");
    for (int i = 0; i < 4; i++) tp_request_free(&r[i]);
    tp_step_output_free(&out);
    tp_sched_free(s);
}

int main(void) {
    tp_model m;
    sched_test_model(&m, MAX_SEQS, N_BLOCKS);
    counts n = {0};
    tp_sched *s = tp_sched_new(&m);
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
    CHECK(p.host.n_seqs == 2 && p.host.max_blocks == MAX_BLOCKS && SEQ(&r[0]).n_blocks == 1 &&
              SEQ(&r[1]).n_blocks == 2,
          "step 1: %d seqs, blocks %d and %d", p.host.n_seqs, SEQ(&r[0]).n_blocks, SEQ(&r[1]).n_blocks);
    CHECK(table_row_ok(&p, 0, &r[0]) && table_row_ok(&p, 1, &r[1]), "step 1 block tables");
    CHECK(p.logits.mode == TP_LOGITS_CANDIDATES && p.logits.k == 1 && !p.logits.targets, "step 1 logits: mode %d k %d",
          p.logits.mode, p.logits.k);
    row(&out, 0, 10, 2.0f, 2.5f);
    row(&out, 1, 11, 1.0f, 1.25f);
    tp_sched_update(s, &p, &out);
    drain(s, &n);
    CHECK(r[0].n_ids == 1 && r[0].ids[0] == 10 && r[0].logprobs[0] == -0.5f && SEQ(&r[0]).n_cached == 3,
          "A after step 1: %d ids, [0] = %d, logprob %g, %d cached", r[0].n_ids, r[0].ids[0], r[0].logprobs[0],
          SEQ(&r[0]).n_cached);
    CHECK(r[1].n_ids == 1 && r[1].ids[0] == 11 && r[1].logprobs[0] == -0.25f && SEQ(&r[1]).n_cached == 5,
          "B after step 1: %d ids, [0] = %d, %d cached", r[1].n_ids, r[1].ids[0], SEQ(&r[1]).n_cached);
    CHECK(n.tokens == 2 && n.done == 0 && n.bad == 0 && tp_sched_steps(s) == 1,
          "events after step 1: %d tokens, %d done, %d wrong", n.tokens, n.done, n.bad);

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
    drain(s, &n);
    CHECK(r[0].state == TP_REQ_FINISHED && r[0].finish == TP_FINISH_STOP && r[0].n_ids == 2 && r[0].ids[1] == EOS,
          "A: %s, finish %d, %d ids", tp_req_state_name(r[0].state), (int)r[0].finish, r[0].n_ids);
    CHECK(r[1].state == TP_REQ_FINISHED && r[1].finish == TP_FINISH_LENGTH && r[1].n_ids == 2 && r[1].ids[1] == 12,
          "B: %s, finish %d, %d ids", tp_req_state_name(r[1].state), (int)r[1].finish, r[1].n_ids);
    /* A's block 0 (positions 0-3) and B's block 0 are full: cached; the others free */
    CHECK(n.done == 2 && tp_sched_running(s) == 0 && tp_sched_kv_free(s) == N_BLOCKS - 2 && tp_sched_kv_cached(s) == 2,
          "after step 2: %d done, %d running, %d blocks free, %d cached", n.done, tp_sched_running(s),
          tp_sched_kv_free(s), tp_sched_kv_cached(s));

    /* step 3: C is admitted; its row is not finite: it alone ends in "error", nothing drawn */
    CHECK(tp_sched_plan(s, &p) == 1, "step 3 planned");
    CHECK(r[2].state == TP_REQ_RUNNING && p.host.n_tokens == 13 && p.host.n_rows == 1 && p.host.rows[0] == 12 &&
              SEQ(&r[2]).n_blocks == 4 && table_row_ok(&p, SEQ(&r[2]).slot, &r[2]),
          "step 3: %s, %d tokens, %d rows, %d blocks", tp_req_state_name(r[2].state), p.host.n_tokens, p.host.n_rows,
          SEQ(&r[2]).n_blocks);
    row(&out, 0, 3, NAN, NAN);
    tp_sched_update(s, &p, &out);
    drain(s, &n);
    CHECK(r[2].state == TP_REQ_FINISHED && r[2].finish == TP_FINISH_ERROR && r[2].n_ids == 0 &&
              strstr(r[2].error, "non-finite") && !r[2].seq,
          "C: %s, finish %d, %d ids, \"%s\"", tp_req_state_name(r[2].state), (int)r[2].finish, r[2].n_ids, r[2].error);
    CHECK(tp_sched_plan(s, &p) == 0 && tp_sched_steps(s) == 3 && n.done == 3 && n.bad == 0 &&
              tp_sched_kv_free(s) + tp_sched_kv_cached(s) == N_BLOCKS,
          "idle: %ld steps, %d blocks free + %d cached, %d done", tp_sched_steps(s), tp_sched_kv_free(s),
          tp_sched_kv_cached(s), n.done);

    for (int i = 0; i < 3; i++) tp_request_free(&r[i]);
    tp_step_output_free(&out);
    tp_sched_free(s);

    g_m = m;
    test_block_manager();
    test_hits(1);
    test_hits(0);
    test_preemption();
    test_storm();
    test_passing_bound();
    test_exact_hits();
    test_salt();
    test_priority_preemption(3);
    test_priority_preemption(4);
    return check_verdict("sched_unit");
}
