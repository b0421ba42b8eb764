/* The scheduler's waiting queue under priorities, and ending a request early with a reason
 * (scheduler.h: the admission order, tp_sched_end, the events), without MPI or a model:
 * a tp_model holding only the sizes the scheduler reads, one batch slot, so each tp_sched_plan
 * admits exactly the queue's head. Checks that admission follows (priority, arrival) (lower
 * priority first, arrival order among equals, plain FIFO when every priority is 0), that a waiting
 * request ended from the middle or the tail of the queue leaves it consistent, that a running one
 * ended with TP_FINISH_TIMEOUT keeps its tokens and gives every KV block back at once, and the
 * events that say so; and that between clients the one with the fewest sequences running goes first
 * (clients_case). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_test.h"

enum { MAX_SEQS = 1, N_BLOCKS = 8, N_REQ = 8 };

static int n_done; /* TP_EV_FINISHED events taken (drain) */
static void drain(tp_sched *s) {
    const tp_sched_event *ev;
    int n = tp_sched_events(s, &ev);
    for (int i = 0; i < n; i++) n_done += ev[i].kind == TP_EV_FINISHED;
}

static void make(tp_request *r, int index, int priority) {
    static const int32_t ids[] = {1, 2, 3};
    tp_request_params p = tp_request_params_default();
    p.max_new_tokens = 4;
    p.sampling.temperature = 0;
    p.priority = priority;
    int32_t *prompt = malloc(sizeof ids);
    memcpy(prompt, ids, sizeof ids);
    tp_request_init(r, index, prompt, 3, &p);
}

/* The running request (one slot: at most one), NULL if none. */
static tp_request *running(tp_request *r, int n) {
    for (int i = 0; i < n; i++)
        if (r[i].state == TP_REQ_RUNNING) return &r[i];
    return NULL;
}

/* Submits n requests with these priorities, then admits them one by one (plan, then end the
 * running one with "timeout"), and checks the admission order against want (request indexes). */
static void order_case(tp_model *m, const char *name, const int *prio, int n, const int *want) {
    tp_sched *s = tp_sched_new(m);
    tp_request r[N_REQ];
    for (int i = 0; i < n; i++) {
        make(&r[i], i, prio[i]);
        CHECK(tp_sched_submit(s, &r[i]) == 0, "%s: submit %d", name, i);
    }
    CHECK(tp_sched_waiting(s) == n, "%s: %d waiting, want %d", name, tp_sched_waiting(s), n);
    for (int k = 0; k < n; k++) {
        tp_step_plan p;
        CHECK(tp_sched_plan(s, &p) == 1, "%s: step %d planned", name, k);
        tp_request *x = running(r, n);
        CHECK(x && x->index == want[k], "%s: admitted #%d is request %d (priority %d), want %d (priority %d)", name,
              k, x ? x->index : -1, x ? x->params.priority : 0, want[k], prio[want[k]]);
        if (!x) break;
        CHECK(tp_sched_kv_free(s) < N_BLOCKS, "%s: #%d holds blocks", name, k);
        tp_sched_end(s, x, TP_FINISH_TIMEOUT);
        CHECK(x->state == TP_REQ_FINISHED && x->finish == TP_FINISH_TIMEOUT && tp_sched_kv_free(s) == N_BLOCKS &&
                  tp_sched_running(s) == 0,
              "%s: #%d ended: %s, finish %d, %d blocks free", name, k, tp_req_state_name(x->state), (int)x->finish,
              tp_sched_kv_free(s));
    }
    tp_step_plan p;
    CHECK(tp_sched_plan(s, &p) == 0 && tp_sched_waiting(s) == 0, "%s: idle at the end, %d waiting", name,
          tp_sched_waiting(s));
    for (int i = 0; i < n; i++) tp_request_free(&r[i]);
    tp_sched_free(s);
}

/* Fair admission between clients (scheduler.h: the client with the fewest sequences running
 * first): two batch slots; a hog (client 1) sends 4 separate requests (4 groups, as 4 HTTP
 * requests are: one sequence each, so "fewest running for its request" cannot tell them apart),
 * then a newcomer (client 2) sends one. The first free slot goes to the newcomer, not to the hog's
 * backlog that arrived before it; then the backlog in arrival order. */
static void clients_case(void) {
    tp_model m;
    sched_test_model(&m, 2, N_BLOCKS);
    tp_sched *s = tp_sched_new(&m);
    tp_request r[5]; /* 0-3: the hog's, 4: the newcomer's */
    tp_step_plan p;
    for (int i = 0; i < 5; i++) {
        make(&r[i], i, 0);
        r[i].client = i < 4 ? 1 : 2;
        r[i].group = (uint64_t)i;
        if (i == 4) { /* the newcomer arrives while the hog's first two run */
            tp_sched_plan(s, &p);
            CHECK(r[0].state == TP_REQ_RUNNING && r[1].state == TP_REQ_RUNNING && tp_sched_waiting(s) == 2,
                  "clients: the hog's first two run, two wait (%s, %s, %d waiting)", tp_req_state_name(r[0].state),
                  tp_req_state_name(r[1].state), tp_sched_waiting(s));
        }
        CHECK(tp_sched_submit(s, &r[i]) == 0, "clients: submit %d", i);
    }
    /* slots free one at a time: who takes each (the newcomer, then the hog's backlog by arrival) */
    static const int ends[] = {0, 1, 4}, want[] = {4, 2, 3};
    for (int k = 0; k < 3; k++) {
        tp_sched_end(s, &r[ends[k]], TP_FINISH_TIMEOUT);
        int waited[5];
        for (int i = 0; i < 5; i++) waited[i] = r[i].state == TP_REQ_WAITING;
        tp_sched_plan(s, &p);
        int got = -1; /* the one admitted by this plan */
        for (int i = 0; i < 5; i++)
            if (waited[i] && r[i].state == TP_REQ_RUNNING) got = got < 0 ? i : -2;
        CHECK(got == want[k] && tp_sched_running(s) == 2,
              "clients: slot %d freed by request %d goes to request %d (client %d), want %d (client %d): the "
              "client with the fewest running first", k, ends[k], got, got >= 0 ? (int)r[got].client : -1, want[k],
              (int)r[want[k]].client);
    }
    for (int i = 0; i < 5; i++) tp_request_free(&r[i]);
    tp_sched_free(s);
}

int main(void) {
    clients_case();
    tp_model m;
    sched_test_model(&m, MAX_SEQS, N_BLOCKS);

    /* fcfs: every priority 0, arrival order */
    static const int fcfs[] = {0, 0, 0, 0, 0}, fcfs_want[] = {0, 1, 2, 3, 4};
    order_case(&m, "fcfs", fcfs, 5, fcfs_want);
    /* mixed: lower first, arrival among equals (the 5s, the -1s and the 0s each in arrival
     * order), a new lowest at the head, a new highest at the tail */
    static const int mixed[] = {5, 0, -1, 5, 0, -1, 7, -3}, mixed_want[] = {7, 2, 5, 1, 4, 0, 3, 6};
    order_case(&m, "mixed", mixed, 8, mixed_want);
    /* descending: each new one goes to the head */
    static const int desc[] = {4, 3, 2, 1}, desc_want[] = {3, 2, 1, 0};
    order_case(&m, "descending", desc, 4, desc_want);

    /* ending waiting requests: from the middle and the tail of the queue (its tail pointer must
     * follow, or the next submit is lost), then a running one with tokens ("timeout" keeps them) */
    tp_sched *s = tp_sched_new(&m);
    tp_request r[5];
    static const int prio[] = {0, 1, 2, 3, 2};
    for (int i = 0; i < 4; i++) {
        make(&r[i], i, prio[i]);
        tp_sched_submit(s, &r[i]);
    }
    drain(s);
    int before = n_done;
    tp_sched_end(s, &r[1], TP_FINISH_TIMEOUT); /* middle */
    tp_sched_end(s, &r[3], TP_FINISH_TIMEOUT); /* tail */
    drain(s);
    CHECK(n_done == before + 2 && tp_sched_waiting(s) == 2 && r[1].state == TP_REQ_FINISHED && r[1].n_ids == 0 &&
              r[1].finish == TP_FINISH_TIMEOUT && tp_sched_kv_free(s) == N_BLOCKS,
          "waiting ones ended: %d done, %d waiting, %d blocks free", n_done - before, tp_sched_waiting(s),
          tp_sched_kv_free(s));
    make(&r[4], 4, prio[4]); /* after the new tail (r[2], equal priority) */
    tp_sched_submit(s, &r[4]);
    tp_step_plan p;
    tp_step_output out;
    tp_step_output_init(&out, &m);
    tp_sched_plan(s, &p); /* r[0]: its prefill, one sampling row */
    CHECK(r[0].state == TP_REQ_RUNNING && p.host.n_rows == 1, "r0 runs first: %s, %d rows",
          tp_req_state_name(r[0].state), p.host.n_rows);
    out.rows[0] = (tp_row_result){.lse = 0, .n = 1};
    out.rows[0].c[0] = (tp_cand){.id = 9, .logit = 0};
    tp_sched_update(s, &p, &out);
    tp_sched_end(s, &r[0], TP_FINISH_TIMEOUT);
    CHECK(r[0].n_ids == 1 && r[0].ids[0] == 9 && r[0].finish == TP_FINISH_TIMEOUT && tp_sched_kv_free(s) == N_BLOCKS,
          "r0 timed out running: %d ids, finish %d, %d blocks free", r[0].n_ids, (int)r[0].finish, tp_sched_kv_free(s));
    /* its events: the token (id and log-probability), then the end with its reason */
    const tp_sched_event *ev;
    int n_ev = tp_sched_events(s, &ev);
    CHECK(n_ev == 2 && ev[0].kind == TP_EV_TOKEN && ev[0].r == &r[0] && ev[0].i == 0 && ev[0].id == 9 &&
              ev[0].logprob == 0 && ev[1].kind == TP_EV_FINISHED && ev[1].r == &r[0] && ev[1].finish == TP_FINISH_TIMEOUT,
          "r0's events: %d (token, finished)", n_ev);
    tp_sched_plan(s, &p);
    CHECK(r[2].state == TP_REQ_RUNNING, "r2 next (%s)", tp_req_state_name(r[2].state));
    tp_sched_cancel(s, &r[2]);
    CHECK(r[2].finish == TP_FINISH_CANCELLED, "tp_sched_cancel says cancelled: %d", (int)r[2].finish);
    tp_sched_plan(s, &p);
    CHECK(r[4].state == TP_REQ_RUNNING && tp_sched_waiting(s) == 0, "r4 last, after the tail end: %s, %d waiting",
          tp_req_state_name(r[4].state), tp_sched_waiting(s));
    tp_sched_end(s, &r[4], TP_FINISH_TIMEOUT);
    drain(s);
    tp_sched_end(s, &r[4], TP_FINISH_CANCELLED); /* a finished request: no-op, no event */
    CHECK(r[4].finish == TP_FINISH_TIMEOUT && tp_sched_kv_free(s) == N_BLOCKS && tp_sched_events(s, &ev) == 0,
          "ending a finished request changes nothing: %d", (int)r[4].finish);

    for (int i = 0; i < 5; i++) tp_request_free(&r[i]);
    tp_step_output_free(&out);
    tp_sched_free(s);
    return check_verdict("sched_order");
}
