#include "step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

enum { CMD_STEP = 1, CMD_STOP = 2 };

/* Broadcast header; the payload follows as int32: ids, pos, seq [T], block_table [S*MB],
 * rows [n_rows], targets [n_rows] (if has_targets). */
typedef struct {
    int32_t cmd, n_tokens, n_seqs, max_blocks, n_rows, mode, k, has_targets;
} step_header;

/* Per row, per rank: what the rank's vocab slice says (candidate mode): this head, then the
 * step's k candidates, so a row crosses in 16 + 8k bytes. */
typedef struct {
    float mx, se, tgt;
    int32_t n;
} slice_stats;

static size_t slice_bytes(int k) { return sizeof(slice_stats) + (size_t)k * sizeof(tp_cand); }
static slice_stats *slice_at(uint8_t *base, size_t i, int k) { return (slice_stats *)(base + i * slice_bytes(k)); }
static tp_cand *slice_cands(slice_stats *st) { return (tp_cand *)(st + 1); }

typedef struct {
    int32_t *payload;
    size_t payload_cap;
    uint8_t *mine, *all;  /* [max_rows] and [size * max_rows] slice records (rank 0), k per step */
    float *topv, *mx, *se, *tgt;
    int32_t *topi, *local_targets;
    float *full_mine, *full_all; /* [rows, Vloc], [size, rows, Vloc] (rank 0) */
} step_scratch;

static step_scratch g_scratch; /* one model per process */

static void scratch_init(const tp_model *m) {
    step_scratch *s = &g_scratch;
    if (s->mine) return;
    int R = m->a.max_rows, P = m->comm->size, Vl = m->sh.n_vocab;
    s->mine = tp_calloc(R, slice_bytes(TP_MAX_CANDIDATES));
    s->all = tp_calloc((size_t)R * P, slice_bytes(TP_MAX_CANDIDATES));
    s->topv = tp_malloc((size_t)R * TP_MAX_CANDIDATES * sizeof(float));
    s->topi = tp_malloc((size_t)R * TP_MAX_CANDIDATES * sizeof(int32_t));
    s->mx = tp_malloc(R * sizeof(float));
    s->se = tp_malloc(R * sizeof(float));
    s->tgt = tp_malloc(R * sizeof(float));
    s->local_targets = tp_malloc(R * sizeof(int32_t));
    s->full_mine = tp_malloc((size_t)R * Vl * sizeof(float));
    if (m->comm->rank == 0) s->full_all = tp_malloc((size_t)R * Vl * P * sizeof(float));
}

/* After the last step (rank 0: tp_step_stop; workers: the end of their loop). */
static void scratch_free(void) {
    step_scratch *s = &g_scratch;
    free(s->payload); free(s->mine); free(s->all); free(s->topv); free(s->topi); free(s->mx); free(s->se);
    free(s->tgt); free(s->local_targets); free(s->full_mine); free(s->full_all);
    memset(s, 0, sizeof *s);
}

void tp_step_output_init(tp_step_output *o, const tp_model *m) {
    o->rows = tp_calloc(m->a.max_rows, sizeof *o->rows);
    o->full = tp_malloc((size_t)m->a.max_rows * m->cfg.vocab_size * sizeof(float));
}

void tp_step_output_free(tp_step_output *o) {
    free(o->rows);
    free(o->full);
}

/* Every rank: forward, then this rank's share of the logits rows to rank 0. */
static void run_local(tp_model *m, const tp_step_host *s, int mode, int k, const int32_t *targets,
                      tp_step_output *out) {
    step_scratch *sc = &g_scratch;
    tp_backend *b = m->b;
    tp_comm *c = m->comm;
    tp_model_forward(m, s);
    int R = s->n_rows, Vl = m->sh.n_vocab, V = m->cfg.vocab_size;
    if (R == 0) return;
    if (mode == TP_LOGITS_FULL) {
        b->to_host(b, sc->full_mine, m->a.logits, (size_t)R * Vl * sizeof(float));
        c->gather(c, sc->full_mine, sc->full_all, (size_t)R * Vl * sizeof(float), 0);
        if (c->rank != 0) return;
        for (int p = 0; p < c->size; p++) { /* rank p holds columns [p*Vl, p*Vl + valid) */
            int v0 = p * Vl, valid = V - v0 < Vl ? V - v0 : Vl;
            for (int r = 0; r < R && valid > 0; r++)
                memcpy(out->full + (size_t)r * V + v0, sc->full_all + ((size_t)p * R + r) * Vl, valid * sizeof(float));
        }
        /* the sampler reads the full rows itself; a full pass over V per row only when asked */
        for (int r = 0; r < R && targets; r++) {
            const float *l = out->full + (size_t)r * V;
            out->rows[r].lse = tp_logsumexp(l, V);
            out->rows[r].target_logit = targets[r] >= 0 && targets[r] < V ? l[targets[r]] : NAN;
            out->rows[r].n = 0;
        }
        return;
    }
    int32_t *lt = NULL;
    if (targets) {
        lt = sc->local_targets;
        for (int r = 0; r < R; r++) {
            int32_t col = targets[r] - m->sh.vocab0;
            lt[r] = col >= 0 && col < m->sh.n_vocab_valid ? col : -1;
        }
    }
    int kk = k < m->sh.n_vocab_valid ? k : m->sh.n_vocab_valid;
    if (m->sh.n_vocab_valid > 0)
        b->logits_stats(b, m->a.logits, R, Vl, m->sh.n_vocab_valid, kk, lt, sc->mx, sc->se, sc->topv, sc->topi, sc->tgt);
    for (int r = 0; r < R; r++) {
        slice_stats *st = slice_at(sc->mine, r, k);
        if (m->sh.n_vocab_valid == 0) { st->mx = -INFINITY; st->se = 0; st->tgt = NAN; st->n = 0; continue; }
        st->mx = sc->mx[r];
        st->se = sc->se[r];
        st->tgt = lt ? sc->tgt[r] : NAN;
        st->n = kk;
        for (int j = 0; j < kk; j++)
            slice_cands(st)[j] = (tp_cand){sc->topi[r * kk + j] + m->sh.vocab0, sc->topv[r * kk + j]};
    }
    c->gather(c, sc->mine, sc->all, (size_t)R * slice_bytes(k), 0);
    if (c->rank != 0) return;
    for (int r = 0; r < R; r++) {
        tp_row_result *o = &out->rows[r];
        float M = -INFINITY;
        int bad = 0; /* a NaN or +inf logit in some slice: fmaxf and "se > 0" below would skip it */
        for (int p = 0; p < c->size; p++) {
            const slice_stats *st = slice_at(sc->all, (size_t)p * R + r, k);
            M = fmaxf(M, st->mx);
            bad |= isnan(st->mx) || st->mx == INFINITY || isnan(st->se) || st->se == INFINITY;
        }
        double S = 0;
        o->target_logit = NAN;
        o->n = 0;
        for (int p = 0; p < c->size; p++) {
            slice_stats *st = slice_at(sc->all, (size_t)p * R + r, k);
            const tp_cand *sc_c = slice_cands(st);
            if (st->se > 0) S += st->se * exp((double)st->mx - M);
            if (!isnan(st->tgt)) o->target_logit = st->tgt;
            /* merge st's sorted candidates into o's sorted list, keeping k */
            tp_cand merged[TP_MAX_CANDIDATES];
            int i = 0, j = 0, n = 0;
            while (n < k && (i < o->n || j < st->n)) {
                if (j >= st->n || (i < o->n && tp_cand_before(&o->c[i], &sc_c[j]))) merged[n++] = o->c[i++];
                else merged[n++] = sc_c[j++];
            }
            memcpy(o->c, merged, n * sizeof *merged);
            o->n = n;
        }
        o->lse = bad ? NAN : M + (float)log(S);
    }
}

static void bcast_step(tp_comm *c, step_header *h, const tp_step_host *s, const int32_t *targets) {
    step_scratch *sc = &g_scratch;
    /* the header may be long in coming (a server waiting for requests): the workers wait for it
     * without spinning */
    c->bcast_idle(c, h, sizeof *h, 0);
    if (h->cmd != CMD_STEP) return;
    size_t n = 3 * (size_t)h->n_tokens + (size_t)h->n_seqs * h->max_blocks + (size_t)h->n_rows * (1 + h->has_targets);
    if (n > sc->payload_cap) sc->payload = tp_realloc(sc->payload, (sc->payload_cap = n) * sizeof(int32_t));
    int32_t *p = sc->payload;
    if (c->rank == 0) {
        memcpy(p, s->ids, h->n_tokens * 4); p += h->n_tokens;
        memcpy(p, s->pos, h->n_tokens * 4); p += h->n_tokens;
        memcpy(p, s->seq, h->n_tokens * 4); p += h->n_tokens;
        memcpy(p, s->block_table, (size_t)h->n_seqs * h->max_blocks * 4); p += (size_t)h->n_seqs * h->max_blocks;
        memcpy(p, s->rows, h->n_rows * 4); p += h->n_rows;
        if (h->has_targets) memcpy(p, targets, h->n_rows * 4);
    }
    c->bcast(c, sc->payload, n * sizeof(int32_t), 0);
}

void tp_step_run(tp_model *m, const tp_step_host *s, const tp_logits_request *req, tp_step_output *out) {
    scratch_init(m);
    step_header h = {CMD_STEP, s->n_tokens, s->n_seqs, s->max_blocks, s->n_rows, req->mode, req->k,
                     req->targets != NULL};
    if (h.k > TP_MAX_CANDIDATES) h.k = TP_MAX_CANDIDATES;
    if (h.k < 1) h.k = 1;
    bcast_step(m->comm, &h, s, req->targets);
    run_local(m, s, h.mode, h.k, req->targets, out);
}

void tp_step_stop(tp_model *m) {
    step_header h = {CMD_STOP, 0, 0, 0, 0, 0, 0, 0};
    m->comm->bcast_idle(m->comm, &h, sizeof h, 0);
    scratch_free();
}

void tp_step_worker_loop(tp_model *m) {
    scratch_init(m);
    step_scratch *sc = &g_scratch;
    for (;;) {
        step_header h;
        bcast_step(m->comm, &h, NULL, NULL);
        if (h.cmd != CMD_STEP) break;
        const int32_t *p = sc->payload;
        tp_step_host s;
        s.n_tokens = h.n_tokens;
        s.ids = p; p += h.n_tokens;
        s.pos = p; p += h.n_tokens;
        s.seq = p; p += h.n_tokens;
        s.n_seqs = h.n_seqs;
        s.max_blocks = h.max_blocks;
        s.block_table = p; p += (size_t)h.n_seqs * h.max_blocks;
        s.n_rows = h.n_rows;
        s.rows = p; p += h.n_rows;
        run_local(m, &s, h.mode, h.k, h.has_targets ? p : NULL, NULL);
    }
    scratch_free();
}
