#include "scheduler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prefix_cache.h"
#include "speculate.h"
#include "model/step.h"
#include "util/log.h"

/* A submitted request's bookkeeping: what the scheduler knows of it and its caller does not
 * set. Lives from tp_sched_submit until the request finishes (r->seq). */
struct tp_seq {
    tp_request *r;
    int n_cached;         /* tokens already in the KV cache */
    int32_t *blocks;      /* [max_blocks] its block table */
    int n_blocks;
    int slot;             /* row of the step's block table */
    tp_rng rng;
    int32_t *history;     /* [n_prompt + max_new_tokens] prompt + generated: repetition penalty, drafts, refeeding */
    int32_t *drafts;      /* [speculate_k] this step's drafts */
    int n_drafts;         /* fed in this step (0: a plain decode or prefill row) */
    long arrival;         /* submit order: the admission order's last key (kept through preemptions) */
    int n_reg;            /* leading blocks offered to the prefix cache (registered or not) */
    long admitted_at;     /* admission order (the latest admission, resumes included) */
    int n_passed;         /* waiting: times a request after it was admitted first */
    long tried;           /* admission round in which it was tried and did not fit */
    tp_seq *prev, *next;  /* the waiting list (unordered: admission picks by policy) */
};

struct tp_sched {
    tp_model *m;
    tp_prefix_cache pool;              /* the KV blocks: held, cached, free (prefix_cache.h) */
    tp_seq *wait_head;                 /* waiting sequences, in no order (admit_next picks) */
    int n_waiting, n_running;
    long n_submitted;                  /* the next request's arrival number */
    tp_seq **running;                  /* [n_slots] by slot; NULL = free slot */
    int n_slots;                       /* m->a.max_seqs at tp_sched_new */
    long steps, admissions, preemptions, rounds;
    long query_tokens, hit_tokens;     /* prompt tokens looked up in the prefix cache, and found */
    int kv_short;                      /* the last plan left a running sequence short of blocks: admit no one */
    int32_t *hits;                     /* [max_blocks] a lookup's blocks */
    tp_seq **order;                    /* [max_seqs] running sequences, oldest admission first */
    uint8_t *packed;                   /* [max_seqs] by slot: handled by this plan (never a preemption victim) */
    /* events: appended to ev[cur], handed out by tp_sched_events (which flips cur) */
    tp_sched_event *ev[2];
    int n_ev[2], cap_ev[2], cur;
    /* step scratch */
    int32_t *ids, *pos, *seq;          /* [max_tokens] */
    int32_t *rows;                     /* [max_rows] */
    int32_t *table;                    /* [max_seqs, max_blocks] */
    tp_seq **row_req;                  /* [max_rows] */
    int32_t *score_at;                 /* [max_rows] prompt position a row scores (>= 1), 0: a sample row */
    int32_t *targets;                  /* [max_rows] the scored position's token, -1: none */
    tp_step_output out;
    void *work;                        /* tp_sample_full scratch */
    float *adjusted;                   /* [V] a row's logits after penalties / min_tokens */
    int32_t *counts;                   /* [V] generated-token counts, zero between uses */
};

int tp_request_tokens(const tp_model *m, const tp_request *r) { return tp_request_kv_tokens(r, m->cfg.n_positions); }

int tp_request_blocks(const tp_model *m, const tp_request *r) {
    return tp_request_kv_blocks(r, m->cfg.n_positions, m->kv.block_size);
}

tp_sched *tp_sched_new(tp_model *m) {
    tp_acts *a = &m->a;
    int V = m->cfg.vocab_size;
    tp_sched *s = tp_calloc(1, sizeof *s);
    s->m = m;
    tp_prefix_cache_init(&s->pool, m->kv.n_blocks, m->kv.block_size);
    s->hits = tp_malloc(a->max_blocks * sizeof(int32_t));
    s->order = tp_malloc(a->max_seqs * sizeof *s->order);
    s->packed = tp_malloc(a->max_seqs);
    s->running = tp_calloc(a->max_seqs, sizeof *s->running);
    s->n_slots = a->max_seqs;
    s->ids = tp_malloc(a->max_tokens * sizeof(int32_t));
    s->pos = tp_malloc(a->max_tokens * sizeof(int32_t));
    s->seq = tp_malloc(a->max_tokens * sizeof(int32_t));
    s->rows = tp_malloc(a->max_rows * sizeof(int32_t));
    s->table = tp_malloc((size_t)a->max_seqs * a->max_blocks * sizeof(int32_t));
    s->row_req = tp_malloc(a->max_rows * sizeof *s->row_req);
    s->score_at = tp_malloc(a->max_rows * sizeof(int32_t));
    s->targets = tp_malloc(a->max_rows * sizeof(int32_t));
    tp_step_output_init(&s->out, m);
    s->work = tp_malloc(tp_sample_full_work_bytes(V));
    s->adjusted = tp_malloc((size_t)V * sizeof(float));
    s->counts = tp_calloc(V, sizeof(int32_t));
    return s;
}

static void seq_free(tp_seq *q) {
    q->r->seq = NULL;
    free(q->blocks);
    free(q->history);
    free(q->drafts);
    free(q);
}

void tp_sched_free(tp_sched *s) {
    if (!s) return;
    for (tp_seq *q = s->wait_head, *next; q; q = next) {
        next = q->next;
        seq_free(q);
    }
    for (int sl = 0; sl < s->n_slots; sl++)
        if (s->running[sl]) seq_free(s->running[sl]);
    tp_step_output_free(&s->out);
    free(s->work); free(s->ids); free(s->pos); free(s->seq); free(s->rows); free(s->table); free(s->row_req);
    free(s->score_at); free(s->targets);
    free(s->running); free(s->adjusted); free(s->counts);
    free(s->hits); free(s->order); free(s->packed);
    free(s->ev[0]); free(s->ev[1]);
    tp_prefix_cache_free(&s->pool);
    free(s);
}

int tp_sched_running(const tp_sched *s) { return s->n_running; }
int tp_sched_waiting(const tp_sched *s) { return s->n_waiting; }
int tp_sched_kv_free(const tp_sched *s) { return s->pool.n_free; }
int tp_sched_kv_cached(const tp_sched *s) { return s->pool.n_cached; }
int tp_sched_kv_available(const tp_sched *s) { return tp_prefix_cache_available(&s->pool); }
int tp_sched_kv_total(const tp_sched *s) { return s->pool.n_blocks; }
long tp_sched_steps(const tp_sched *s) { return s->steps; }
long tp_sched_preemptions(const tp_sched *s) { return s->preemptions; }
long tp_sched_prefix_query_tokens(const tp_sched *s) { return s->query_tokens; }
long tp_sched_prefix_hit_tokens(const tp_sched *s) { return s->hit_tokens; }
tp_prefix_cache *tp_sched_prefix_cache(tp_sched *s) { return &s->pool; }

tp_seq_view tp_sched_seq_view(const tp_request *r) {
    const tp_seq *q = r->seq;
    if (!q) return (tp_seq_view){0};
    return (tp_seq_view){.n_cached = q->n_cached, .blocks = q->blocks, .n_blocks = q->n_blocks, .slot = q->slot,
                         .history = q->history, .arrival = q->arrival, .admitted_at = q->admitted_at,
                         .n_passed = q->n_passed};
}

/* ---- events ---- */

static tp_sched_event *event(tp_sched *s, tp_event_kind kind, tp_request *r) {
    int c = s->cur;
    if (s->n_ev[c] == s->cap_ev[c]) {
        s->cap_ev[c] = s->cap_ev[c] ? 2 * s->cap_ev[c] : 64;
        s->ev[c] = tp_realloc(s->ev[c], (size_t)s->cap_ev[c] * sizeof *s->ev[c]);
    }
    tp_sched_event *e = &s->ev[c][s->n_ev[c]++];
    *e = (tp_sched_event){.kind = kind, .r = r};
    return e;
}

int tp_sched_events(tp_sched *s, const tp_sched_event **ev) {
    int c = s->cur, n = s->n_ev[c];
    *ev = s->ev[c];
    s->cur = !c;
    s->n_ev[s->cur] = 0;
    return n;
}

/* ---- the waiting list ---- */

static void wait_push(tp_sched *s, tp_seq *q) {
    q->prev = NULL;
    q->next = s->wait_head;
    if (s->wait_head) s->wait_head->prev = q;
    s->wait_head = q;
    s->n_waiting++;
}

static void wait_unlink(tp_sched *s, tp_seq *q) {
    if (q->prev) q->prev->next = q->next;
    else s->wait_head = q->next;
    if (q->next) q->next->prev = q->prev;
    q->prev = q->next = NULL;
    s->n_waiting--;
}

/* A waiting sequence's place in the admission order (scheduler.h), as of now: compared field by
 * field, lower first. */
typedef struct {
    int priority;
    int client, group;   /* sequences running for its client, and for its request (group) */
    long arrival;
} admit_key;

static admit_key key_of(const tp_sched *s, const tp_seq *q) {
    const tp_request *r = q->r;
    admit_key k = {r->params.priority, 0, 0, q->arrival};
    for (int sl = 0; sl < s->m->a.max_seqs; sl++) {
        const tp_seq *w = s->running[sl];
        if (!w || w->r->client != r->client) continue;
        k.client++;
        k.group += w->r->group == r->group;
    }
    return k;
}

static int key_before(const admit_key *a, const admit_key *b) {
    if (a->priority != b->priority) return a->priority < b->priority;
    if (a->client != b->client) return a->client < b->client;
    if (a->group != b->group) return a->group < b->group;
    return a->arrival < b->arrival;
}

/* The first waiting sequence in admission order not tried in round `round` (NULL: none). */
static tp_seq *admit_next(const tp_sched *s, long round) {
    tp_seq *best = NULL;
    admit_key bk = {0};
    for (tp_seq *q = s->wait_head; q; q = q->next) {
        if (q->tried == round) continue;
        admit_key k = key_of(s, q);
        if (!best || key_before(&k, &bk)) { best = q; bk = k; }
    }
    return best;
}

int tp_sched_queue(tp_sched *s, tp_request **out, int max) {
    long round = ++s->rounds;
    for (int n = 0; n < max; n++) {
        tp_seq *q = admit_next(s, round);
        if (!q) break;
        q->tried = round;
        out[n] = q->r;
    }
    return s->n_waiting;
}

/* Automatic prefix caching on: m->no_prefix_cache is read at each lookup and registration, so
 * that a caller may turn it off between requests (tests/fuzz/fuzz_request.c's reference runs). */
static int prefix_on(const tp_sched *s) { return !s->m->no_prefix_cache; }

/* Offers q's full blocks wholly below n_cached (their tokens are in, accepted) to the prefix
 * cache, each once; a block whose tokens another sequence registered first stays q's alone. */
static void register_full(tp_sched *s, tp_seq *q) {
    if (!prefix_on(s)) return;
    int bs = s->pool.block_size, full = q->n_cached / bs;
    if (full > q->n_blocks) full = q->n_blocks;
    for (; q->n_reg < full; q->n_reg++) {
        int i = q->n_reg;
        tp_prefix_cache_register(&s->pool, q->blocks[i], i ? q->blocks[i - 1] : -1, q->r->cache_salt,
                                 q->history + (size_t)i * bs);
    }
}

/* q's blocks go back, the last first: a sequence's later blocks are then evicted before its
 * earlier ones (a later block is useless without those before it). */
static void release_blocks(tp_sched *s, tp_seq *q) {
    for (int i = q->n_blocks - 1; i >= 0; i--) tp_prefix_cache_release(&s->pool, q->blocks[i]);
    q->n_blocks = 0;
    q->n_reg = 0;
}

/* q leaves its running slot */
static void unslot(tp_sched *s, tp_seq *q) {
    s->running[q->slot] = NULL;
    s->n_running--;
}

/* r ends (not waiting, not running any more): blocks back, its seq freed, the event added */
static void done(tp_sched *s, tp_request *r, tp_finish reason) {
    tp_seq *q = r->seq;
    r->finish = reason;
    r->state = TP_REQ_FINISHED;
    if (q) {
        /* KV written from non-finite logits is never offered for reuse */
        if (reason != TP_FINISH_ERROR && !r->score_bad) register_full(s, q);
        release_blocks(s, q);
        seq_free(q);
    }
    event(s, TP_EV_FINISHED, r)->finish = reason;
}

/* r generates tokens (else it only scores its prompt) */
static int generates(const tp_model *m, const tp_request *r) {
    return r->params.max_new_tokens > 0 && r->n_prompt < m->cfg.n_positions;
}

/* Prompt positions r still has to score: one logits row each, fed in its prefill. */
static int to_score(const tp_request *r) { return r->params.score_prompt ? r->n_prompt - r->n_scored : 0; }

int tp_sched_submit(tp_sched *s, tp_request *r) {
    tp_model *m = s->m;
    int need = tp_request_blocks(m, r);
    if (need < 0 || need > s->pool.n_blocks) return -1;
    int k = r->params.sampling.logprobs;
    size_t cap = r->params.max_new_tokens > 0 ? r->params.max_new_tokens : 1;
    r->ids = tp_malloc(cap * sizeof(int32_t));
    r->logprobs = tp_malloc(cap * sizeof(float));
    r->top_ids = tp_malloc(cap * (k ? k : 1) * sizeof(int32_t));
    r->top_lps = tp_malloc(cap * (k ? k : 1) * sizeof(float));
    if (r->params.speculate_k > TP_SPEC_MAX_K) r->params.speculate_k = TP_SPEC_MAX_K;
    r->spec_drafted = r->spec_accepted = 0;
    r->n_ids = 0;
    r->n_prompt_cached = 0;
    r->n_preempted = 0;
    r->finish = TP_FINISH_NONE;
    tp_seq *q = tp_calloc(1, sizeof *q);
    q->r = r;
    r->seq = q;
    q->blocks = tp_malloc(m->a.max_blocks * sizeof(int32_t));
    q->history = tp_malloc((r->n_prompt + cap) * sizeof(int32_t));
    q->drafts = r->params.speculate_k > 0 ? tp_malloc(r->params.speculate_k * sizeof(int32_t)) : NULL;
    memcpy(q->history, r->prompt, r->n_prompt * sizeof(int32_t));
    tp_rng_seed(&q->rng, r->params.seed, (uint64_t)r->index);
    if (r->params.score_prompt) { /* position 0 predicts nothing: no log-probability */
        int n = r->n_prompt > 0 ? r->n_prompt : 1;
        r->prompt_lps = tp_malloc(n * sizeof(float));
        r->prompt_top_ids = tp_malloc((size_t)n * (k ? k : 1) * sizeof(int32_t));
        r->prompt_top_lps = tp_malloc((size_t)n * (k ? k : 1) * sizeof(float));
        r->prompt_lps[0] = NAN;
        for (int j = 0; j < k; j++) { r->prompt_top_ids[j] = -1; r->prompt_top_lps[j] = NAN; }
        r->n_scored = 1;
        r->score_bad = 0;
        if (to_score(r) <= 0) event(s, TP_EV_SCORED, r);
    }
    /* nothing to generate, or the prompt already fills n_positions (one more token would make
     * the sequence longer than the model allows), and no prompt to score */
    if (!generates(m, r) && to_score(r) <= 0) {
        done(s, r, TP_FINISH_LENGTH);
        return 0;
    }
    r->state = TP_REQ_WAITING;
    q->arrival = s->n_submitted++;
    wait_push(s, q);
    return 0;
}

void tp_sched_cancel(tp_sched *s, tp_request *r) { tp_sched_end(s, r, TP_FINISH_CANCELLED); }

void tp_sched_end(tp_sched *s, tp_request *r, tp_finish reason) {
    if (r->state == TP_REQ_FINISHED || !r->seq) return;
    if (r->state == TP_REQ_WAITING) wait_unlink(s, r->seq);
    else unslot(s, r->seq);
    done(s, r, reason);
}

/* the sampled token goes into r's results and q's history; its event */
static void record(tp_sched *s, tp_seq *q, const tp_sample *smp) {
    tp_request *r = q->r;
    int k = r->params.sampling.logprobs, i = r->n_ids;
    r->ids[i] = smp->id;
    r->logprobs[i] = smp->logprob;
    for (int j = 0; j < k; j++) {
        r->top_ids[i * k + j] = j < smp->n_top ? smp->top_ids[j] : -1;
        r->top_lps[i * k + j] = j < smp->n_top ? smp->top_lps[j] : NAN;
    }
    q->history[r->n_prompt + i] = smp->id;
    r->n_ids++;
    tp_sched_event *e = event(s, TP_EV_TOKEN, r);
    e->i = i;
    e->id = smp->id;
    e->logprob = smp->logprob;
}
/* The request's penalties (sampler.h, steps 1-2 of its order) */
static tp_penalties penalties(const tp_sched *s, const tp_request *r) {
    return (tp_penalties){.presence_penalty = r->params.presence_penalty,
                          .frequency_penalty = r->params.frequency_penalty,
                          .min_tokens = r->params.min_tokens,
                          .eos = s->m->cfg.eos_token_id};
}

static int needs_adjust(const tp_sched *s, const tp_request *r) {
    tp_penalties p = penalties(s, r);
    return tp_penalties_active(&p, r->n_ids);
}

/* Row i of the step's output can be sampled: no NaN or +inf among its logits (-inf is a masked
 * token), so the log-sum-exp is finite. */
static int row_usable(const tp_sched *s, const tp_logits_request *lr, const tp_step_output *out, int i) {
    if (lr->mode == TP_LOGITS_FULL) {
        int V = s->m->cfg.vocab_size, finite = 0;
        const float *l = out->full + (size_t)i * V;
        for (int v = 0; v < V; v++) {
            if (isnan(l[v]) || l[v] == INFINITY) return 0;
            finite |= l[v] != -INFINITY;
        }
        return finite;
    }
    const tp_row_result *rr = &out->rows[i];
    if (!isfinite(rr->lse) || rr->n < 1) return 0;
    for (int j = 0; j < rr->n; j++)
        if (isnan(rr->c[j].logit) || rr->c[j].logit == INFINITY) return 0;
    return 1;
}

/* Tokens r feeds before it samples or ends: all it knows when it generates, else (it only
 * scores its prompt) all but the last prompt token. */
static int feed_end(const tp_model *m, const tp_request *r) {
    return generates(m, r) ? r->n_prompt + r->n_ids : r->n_prompt - 1;
}

/* Row i scored prompt position p = score_at[i] (its token is p's predecessor): log p(prompt[p])
 * and the top alternatives, from the gathered candidates (as the sampling rows get theirs) or,
 * in a step that fetched full logits for another row, from the row's V logits. A non-finite row
 * is recorded as it is (score_bad says where); the request goes on. */
static void score_row(tp_sched *s, const tp_logits_request *lr, const tp_step_output *out, int i, tp_request *r) {
    int p = s->score_at[i], k = r->params.sampling.logprobs, V = s->m->cfg.vocab_size, n = 0;
    const tp_row_result *rr = &out->rows[i];
    int32_t *ti = r->prompt_top_ids + (size_t)p * k;
    float *tl = r->prompt_top_lps + (size_t)p * k;
    r->prompt_lps[p] = rr->target_logit - rr->lse;
    if (!r->score_bad && (!isfinite(rr->lse) || isnan(rr->target_logit) || rr->target_logit == INFINITY))
        r->score_bad = p;
    if (lr->mode == TP_LOGITS_FULL) n = tp_top_logprobs(out->full + (size_t)i * V, V, rr->lse, k, ti, tl);
    else
        for (; n < k && n < rr->n; n++) {
            ti[n] = rr->c[n].id;
            tl[n] = rr->c[n].logit - rr->lse;
        }
    for (; n < k; n++) { ti[n] = -1; tl[n] = NAN; }
    r->n_scored = p + 1;
}

/* Admission (KV on demand). A request is admitted with blocks for the tokens it has to feed now
 * (its prompt; its whole history when it resumes after a preemption), its longest cached prefix
 * of full blocks shared from the prefix cache: at most feed_end - 1 tokens, whole blocks, so
 * that its last token is fed and gives the row it samples from. A request that scores its
 * prompt needs every position's row: it takes no hit (its blocks are still offered to the
 * cache). Blocks for what it generates are taken as it grows (pack). */
static int lookup(tp_sched *s, const tp_seq *q, int32_t *hits) {
    int n = feed_end(s->m, q->r);
    if (!prefix_on(s) || q->r->params.score_prompt || n < 1) return 0;
    return tp_prefix_cache_lookup(&s->pool, q->r->cache_salt, q->history, (n - 1) / s->pool.block_size, hits);
}

/* Admits q into slot if its blocks are there: its uncached tokens' blocks and its hits that sit
 * cached (count 0) come out of tp_prefix_cache_available. Returns 1 when it did. */
static int try_admit(tp_sched *s, tp_seq *q, int slot) {
    tp_request *r = q->r;
    int bs = s->pool.block_size, n_hit = lookup(s, q, s->hits);
    int blocks = (feed_end(s->m, r) + bs - 1) / bs;
    int cost = blocks - n_hit + tp_prefix_cache_count_cached(&s->pool, s->hits, n_hit);
    if (cost > tp_prefix_cache_available(&s->pool)) return 0;
    for (int b = 0; b < n_hit; b++) {
        tp_prefix_cache_acquire(&s->pool, s->hits[b]);
        q->blocks[b] = s->hits[b];
    }
    for (int b = n_hit; b < blocks; b++)
        if ((q->blocks[b] = tp_prefix_cache_take(&s->pool)) < 0) tp_die("internal: KV block count off at admission");
    q->n_blocks = blocks;
    q->n_reg = n_hit;
    q->n_cached = n_hit * bs;
    if (r->n_preempted == 0) { /* its first admission: what usage and the counters report */
        r->n_prompt_cached = q->n_cached;
        if (prefix_on(s) && !r->params.score_prompt) {
            s->query_tokens += r->n_prompt;
            s->hit_tokens += q->n_cached;
        }
    }
    q->slot = slot;
    r->state = TP_REQ_RUNNING;
    q->admitted_at = ++s->admissions;
    q->n_passed = 0;
    s->running[slot] = q;
    s->n_running++;
    return 1;
}

/* Admits waiting sequences in admission order (scheduler.h) while slots last. One that does not
 * fit now may be passed by one after it that does, but a sequence passed max_seqs times is
 * passed no more: admission stops at it until it fits (it does once the running sequences are
 * done: its whole need fits the cache, tp_sched_submit checked). Nobody is admitted while a
 * running sequence is short of blocks (kv_short): they are its first. */
static void admit(tp_sched *s) {
    tp_acts *a = &s->m->a;
    if (s->kv_short) return;
    long round = ++s->rounds;
    int slot = 0;
    for (;;) {
        while (slot < a->max_seqs && s->running[slot]) slot++;
        if (slot == a->max_seqs) break;
        tp_seq *q = admit_next(s, round);
        if (!q) break;
        if (!try_admit(s, q, slot)) {
            q->tried = round;
            if (q->n_passed >= a->max_seqs) break;
            continue;
        }
        for (tp_seq *w = s->wait_head; w; w = w->next) w->n_passed += w->tried == round; /* those it passed */
        wait_unlink(s, q);
    }
}

/* Gives q's blocks back and requeues it: it waits at its place in the admission order (its
 * priority and arrival kept: ahead of later arrivals of its priority, behind more urgent
 * requests), resumes by feeding its history again (mostly prefix-cache hits: its full blocks are
 * registered first), then samples the next token with its own generator, as if never
 * interrupted. */
static void preempt(tp_sched *s, tp_seq *q) {
    register_full(s, q);
    release_blocks(s, q);
    q->n_cached = 0;
    q->n_drafts = 0;
    unslot(s, q);
    q->r->state = TP_REQ_WAITING;
    q->r->n_preempted++;
    s->preemptions++;
    wait_push(s, q);
}

/* Blocks for q up to `upto` tokens (its table covers positions < upto): free or evicted ones,
 * without preempting anyone. Returns 1 when they are all there. */
static int grow(tp_sched *s, tp_seq *q, int upto) {
    int bs = s->pool.block_size;
    while (q->n_blocks * bs < upto) {
        int b = tp_prefix_cache_take(&s->pool);
        if (b < 0) return 0;
        q->blocks[q->n_blocks++] = b;
    }
    return 1;
}

/* The order in which running sequences are packed, most urgent first: lower priority value, then
 * earlier admission. Its reverse is the preemption order: the victim is the least urgent running
 * sequence, the latest admitted among equals (docs/SERVING.md, "Deadlines and priority"). */
static int runs_before(const tp_seq *a, const tp_seq *b) {
    if (a->r->params.priority != b->r->params.priority) return a->r->params.priority < b->r->params.priority;
    return a->admitted_at < b->admitted_at;
}

/* Blocks for q up to `upto` tokens, preempting for them the least urgent running sequence this
 * plan has not handled yet (never one already packed in the step, all of which run before q);
 * that may be q itself, but while the step already has tokens (T > 0) q waits instead. Returns 1
 * when q has its blocks, 0 when it waits or was preempted. */
static int grow_or_preempt(tp_sched *s, tp_seq *q, int upto, int T) {
    tp_acts *a = &s->m->a;
    while (!grow(s, q, upto)) {
        tp_seq *victim = NULL;
        for (int sl = 0; sl < a->max_seqs; sl++) {
            tp_seq *w = s->running[sl];
            if (w && !s->packed[sl] && (!victim || runs_before(victim, w))) victim = w;
        }
        if (!victim || (victim == q && T > 0)) {
            s->kv_short = 1;
            return 0;
        }
        preempt(s, victim);
        if (victim == q) return 0;
    }
    return 1;
}

/* Logits rows a chunk of q's next `take` tokens gets: one per prompt position it scores (one not
 * scored yet: a resumed request feeds its scored positions again without rows), and the
 * sample row when the chunk ends at its last known token. */
static int chunk_rows(const tp_model *m, const tp_seq *q, int take) {
    const tp_request *r = q->r;
    int first = r->n_scored - 1 > q->n_cached ? r->n_scored - 1 : q->n_cached; /* first scoring token */
    int end = q->n_cached + take < r->n_prompt - 1 ? q->n_cached + take : r->n_prompt - 1;
    int rows = r->params.score_prompt && end > first ? end - first : 0;
    return rows + (generates(m, r) && q->n_cached + take == r->n_prompt + r->n_ids);
}

int tp_sched_plan(tp_sched *s, tp_step_plan *plan) {
    tp_model *m = s->m;
    tp_acts *a = &m->a;
    int MB = a->max_blocks;
    admit(s);
    if (s->n_running == 0) return 0;
    s->kv_short = 0;
    /* the running sequences, most urgent first (runs_before: priority, then the oldest admission):
     * each takes the blocks it feeds into as it is packed, and one short of blocks preempts the
     * least urgent not yet packed (grow_or_preempt), so the most urgent always advances */
    int n_order = 0;
    for (int sl = 0; sl < a->max_seqs; sl++) {
        s->packed[sl] = 0;
        tp_seq *q = s->running[sl];
        if (!q) continue;
        int i = n_order++;
        for (; i > 0 && runs_before(q, s->order[i - 1]); i--) s->order[i] = s->order[i - 1];
        s->order[i] = q;
    }
    /* pack the step: decode tokens first (with their drafts), then prefill chunks. Drafts take
     * only what the decode tokens and the pending prefill leave of the token and row budgets, so
     * speculation never delays another sequence. */
    int T = 0, R = 0, S = 0, need_tokens = 0, need_rows = 0, any_score = 0, bs = s->pool.block_size;
    for (int i = 0; i < n_order; i++) {
        tp_seq *q = s->order[i];
        need_tokens += feed_end(m, q->r) - q->n_cached;
        need_rows += to_score(q->r) + generates(m, q->r); /* a row per scored position, one to sample */
    }
    int spare_tokens = a->max_tokens - need_tokens, spare_rows = a->max_rows - need_rows;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n_order; i++) {
            tp_seq *q = s->order[i];
            tp_request *r = q->r;
            if (r->state != TP_REQ_RUNNING) continue; /* preempted by an older one in this plan */
            int sl = q->slot;
            int decoding = q->n_cached >= r->n_prompt;
            if (decoding != (pass == 0)) continue;
            int len = r->n_prompt + r->n_ids; /* tokens known so far */
            int take = feed_end(m, r) - q->n_cached;
            if (take > a->max_tokens - T) take = a->max_tokens - T;
            /* a scored prompt chunk takes a row per position it scores (prompt positions not
             * scored yet; a resumed request feeds its scored ones again without rows): as many
             * as the step has left */
            if (r->params.score_prompt)
                while (take > 0 && chunk_rows(m, q, take) > a->max_rows - R) take--;
            q->n_drafts = 0;
            if (take <= 0 || R >= a->max_rows) { s->packed[sl] = 1; continue; }
            /* KV on demand: blocks for its first token, preempting if need be, then for as much
             * of the chunk as blocks are left */
            if (!grow_or_preempt(s, q, q->n_cached + 1, T)) continue;
            if (!grow(s, q, q->n_cached + take)) {
                take = q->n_blocks * bs - q->n_cached;
                s->kv_short = 1;
            }
            s->packed[sl] = 1;
            if (decoding && r->params.speculate_k > 0 && q->n_cached + take == len) {
                /* drafts fed at positions len .. len + D - 1: within what the request may fill
                 * (max_new_tokens, n_positions: tp_request_tokens) and the blocks it can get
                 * without preempting */
                int cap = r->params.speculate_k;
                if (cap > tp_request_tokens(m, r) - len) cap = tp_request_tokens(m, r) - len;
                if (cap > spare_tokens) cap = spare_tokens;
                if (cap > spare_rows) cap = spare_rows;
                if (cap > 0 && !grow(s, q, len + cap)) cap = q->n_blocks * bs - len;
                if (cap > 0) q->n_drafts = tp_speculate_propose(q->history, len, cap, r->params.speculate_n, q->drafts);
                spare_tokens -= q->n_drafts;
                spare_rows -= q->n_drafts;
            }
            for (int j = 0; j < take; j++) {
                int p = q->n_cached + j;
                s->ids[T] = q->history[p];
                s->pos[T] = p;
                s->seq[T] = sl;
                if (r->params.score_prompt && p + 1 < r->n_prompt && p + 1 >= r->n_scored) { /* a prompt token: scores the next one */
                    s->rows[R] = T;
                    s->score_at[R] = p + 1;
                    s->targets[R] = q->history[p + 1];
                    s->row_req[R++] = q;
                    any_score = 1;
                }
                T++;
            }
            q->n_cached += take;
            if (generates(m, r) && q->n_cached == len) { /* its last known token is in: sample the next one */
                s->rows[R] = T - 1;
                s->score_at[R] = 0;
                s->targets[R] = -1;
                s->row_req[R++] = q;
            }
            for (int j = 0; j < q->n_drafts; j++) { /* a row per draft: what follows it */
                s->ids[T] = q->drafts[j];
                s->pos[T] = len + j;
                s->seq[T] = sl;
                s->rows[R] = T;
                s->score_at[R] = 0;
                s->targets[R] = -1;
                s->row_req[R++] = q;
                T++;
            }
        }
    for (int sl = 0; sl < a->max_seqs; sl++) {
        int32_t *row = s->table + (size_t)sl * MB;
        tp_seq *q = s->running[sl];
        for (int b = 0; b < MB; b++) row[b] = q && b < q->n_blocks ? q->blocks[b] : -1;
        if (q) S = sl + 1;
    }
    if (T == 0) tp_die("internal: scheduler made an empty step");
    /* one logits form for the whole step: candidates unless a row needs full logits; the
     * scored positions' target logits too when there are any */
    tp_logits_request lr = {TP_LOGITS_CANDIDATES, 1, any_score ? s->targets : NULL};
    for (int i = 0; i < R; i++) {
        tp_request *r = s->row_req[i]->r;
        if (s->score_at[i]) { /* a scored position: its top alternatives, whatever the form */
            if (r->params.sampling.logprobs > lr.k) lr.k = r->params.sampling.logprobs;
            continue;
        }
        int k = tp_sampling_candidates(&r->params.sampling);
        if (k == 0 || needs_adjust(s, r)) lr.mode = TP_LOGITS_FULL;
        else if (k > lr.k) lr.k = k;
        if (r->params.sampling.logprobs > lr.k) lr.k = r->params.sampling.logprobs;
    }
    plan->host = (tp_step_host){.n_tokens = T, .ids = s->ids, .pos = s->pos, .seq = s->seq, .n_seqs = S,
                                .max_blocks = MB, .block_table = s->table, .n_rows = R, .rows = s->rows};
    plan->logits = lr;
    return 1;
}

/* q's rows from row i: its last token's (and its drafts', D = q->n_drafts), sampled one by one
 * while the drafts are accepted. Returns 1 when q goes on, 0 when it finished. */
static int sample_rows(tp_sched *s, const tp_logits_request *lr, const tp_step_output *out, int i, tp_seq *q) {
    tp_model *m = s->m;
    tp_request *r = q->r;
    int V = m->cfg.vocab_size, D = q->n_drafts, acc = 0;
    r->spec_drafted += D;
    for (int j = 0; j <= D; j++) {
        int row = i + j, verify = j < D, ok = 0;
        tp_sample smp;
        int bad = !row_usable(s, lr, out, row);
        if (!bad && lr->mode == TP_LOGITS_FULL) {
            const float *l = out->full + (size_t)row * V;
            if (needs_adjust(s, r)) {
                tp_penalties p = penalties(s, r);
                tp_penalties_apply(&p, r->ids, r->n_ids, l, V, s->counts, s->adjusted);
                l = s->adjusted;
            }
            const int32_t *h = q->history;
            int nh = r->n_prompt + r->n_ids;
            ok = verify ? tp_sample_verify_full(&r->params.sampling, &q->rng, l, V, h, nh, s->work, q->drafts[j], &smp)
                        : tp_sample_full(&r->params.sampling, &q->rng, l, V, h, nh, s->work, &smp);
        } else if (!bad) {
            const tp_row_result *rr = &out->rows[row];
            ok = verify ? tp_sample_verify_candidates(&r->params.sampling, &q->rng, rr->c, rr->n, rr->lse, q->drafts[j], &smp)
                        : tp_sample_candidates(&r->params.sampling, &q->rng, rr->c, rr->n, rr->lse, &smp);
        }
        bad |= ok < 0;
        if (bad) { /* no distribution to sample from (NaN or inf, raw or after the penalties): this request
                    * ends, the others go on */
            snprintf(r->error, sizeof r->error,
                     "non-finite logits (inf or NaN) at step %d, position %d: the model gave no distribution to "
                     "sample from (inf/NaN weights, or a bad config)",
                     r->n_ids, r->n_prompt + r->n_ids);
            unslot(s, q);
            done(s, r, TP_FINISH_ERROR);
            return 0;
        }
        record(s, q, &smp);
        int accepted = verify && ok == 1;
        acc += accepted;
        r->spec_accepted += accepted;
        tp_finish reason = TP_FINISH_NONE;
        if ((!r->params.ignore_eos && smp.id == m->cfg.eos_token_id) || tp_request_stop_id(&r->params, smp.id))
            reason = TP_FINISH_STOP;
        else if (r->n_ids >= r->params.max_new_tokens || r->n_prompt + r->n_ids >= m->cfg.n_positions)
            reason = TP_FINISH_LENGTH;
        if (reason) {
            unslot(s, q);
            done(s, r, reason);
            return 0;
        }
        if (!accepted) break;
    }
    /* the KV cache keeps the last token and the accepted drafts; the rejected positions are
     * written again when their tokens are fed */
    q->n_cached += acc;
    q->n_drafts = 0;
    return 1;
}

void tp_sched_update(tp_sched *s, const tp_step_plan *plan, const tp_step_output *out) {
    tp_model *m = s->m;
    int R = plan->host.n_rows;
    const tp_logits_request *lr = &plan->logits;
    s->steps++;

    /* a sequence's rows are consecutive: its scored prompt positions', its last token's, then
     * one per draft. Row j is sampled (verified against draft j) only while drafts 0..j-1 were
     * accepted: tokens come out one by one, as plain decoding makes them (events, stops, lengths
     * per token). */
    for (int i = 0; i < R;) {
        tp_seq *q = s->row_req[i];
        tp_request *r = q->r;
        if (s->score_at[i]) {
            score_row(s, lr, out, i, r);
            i++;
            if (to_score(r) > 0) continue;
            event(s, TP_EV_SCORED, r); /* before its first token, which is sampled from the next row if any */
            if (!generates(m, r)) {
                unslot(s, q);
                done(s, r, TP_FINISH_LENGTH);
            }
            continue;
        }
        int D = q->n_drafts;
        sample_rows(s, lr, out, i, q); /* q is freed when it finished */
        i += D + 1;
    }
    /* the blocks this step filled with accepted tokens, to the prefix cache */
    for (int sl = 0; sl < m->a.max_seqs; sl++)
        if (s->running[sl]) register_full(s, s->running[sl]);
}

int tp_sched_step(tp_sched *s) {
    tp_step_plan plan;
    if (!tp_sched_plan(s, &plan)) return 0;
    tp_step_run(s->m, &plan.host, &plan.logits, &s->out);
    tp_sched_update(s, &plan, &s->out);
    return 1;
}
