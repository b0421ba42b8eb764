#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void tp_rng_seed(tp_rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix(&x);
}

double tp_rng_uniform(tp_rng *r) {
    uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45);
    return (res >> 11) * (1.0 / 9007199254740992.0);
}

int tp_penalties_active(const tp_penalties *p, int n_generated) {
    return p->presence_penalty != 0 || p->frequency_penalty != 0 || n_generated < p->min_tokens;
}

void tp_penalties_apply(const tp_penalties *p, const int32_t *generated, int n, const float *logits, int V,
                        int32_t *counts, float *out) {
    memcpy(out, logits, (size_t)V * sizeof(float));
    for (int i = 0; i < n; i++) counts[generated[i]]++;
    for (int i = 0; i < n; i++) { /* each id once: its count then back to 0 */
        int32_t id = generated[i];
        if (!counts[id]) continue;
        out[id] -= counts[id] * p->frequency_penalty + p->presence_penalty;
        counts[id] = 0;
    }
    if (n < p->min_tokens && p->eos >= 0 && p->eos < V) out[p->eos] = -1e30f;
}

int tp_sampling_candidates(const tp_sampling *s) {
    if (s->repetition_penalty != 1.0f) return 0;
    int k = s->logprobs > 1 ? s->logprobs : 1;
    if (s->temperature > 0) {
        if (s->top_k <= 0 || s->top_k > TP_MAX_CANDIDATES) return 0;
        if (s->top_k > k) k = s->top_k;
    }
    return k <= TP_MAX_CANDIDATES ? k : 0;
}

static int cand_cmp(const void *pa, const void *pb) {
    const tp_cand *a = pa, *b = pb;
    return tp_cand_before(a, b) ? -1 : tp_cand_before(b, a) ? 1 : 0;
}

/* The kept set of a best-first prefix c[0..m) of n processed logits whose weights exp(l / T - mx)
 * sum to total (over all n): top-p keeps tokens while the mass before them is < top_p (HF TopP),
 * and always the first: a top_p of 0, negative or NaN (1e-300 narrowed to float is 0) keeps the
 * best token alone, never none (none made decide() return -1: draw() read c[-1], the full-row
 * loop never ended). Without top-p all m are kept and their mass is total. Fills prob[0..keep)
 * with the weights and *kept with the kept mass. Returns keep (>= 1 for m >= 1), or -1 when
 * m < n is too short to tell where the nucleus ends. */
static int nucleus(const tp_sampling *s, const tp_cand *c, int m, int n, double mx, double total, double *prob,
                   double *kept) {
    const double T = s->temperature;
    if (s->top_p >= 1.0f) {
        for (int i = 0; i < m; i++) prob[i] = exp(c[i].logit / T - mx);
        *kept = total;
        return m;
    }
    double before = 0;
    int keep = 0;
    while (keep < m && (keep == 0 || before / total < s->top_p))
        before += (prob[keep] = exp(c[keep].logit / T - mx)), keep++;
    if (keep == m && m < n && before / total < s->top_p) return -1; /* the nucleus goes on */
    *kept = before;
    return keep;
}

/* The draw, decided on a best-first prefix c[0..m) of n processed logits (nucleus() says which are
 * kept): it lands where the cumulative weight passes u times the kept mass. Returns the index, or
 * -1 when m < n is too short to decide. */
static int decide(const tp_sampling *s, double u, const tp_cand *c, int m, int n, double mx, double total,
                  double *prob) {
    double kept;
    const int limit = nucleus(s, c, m, n, mx, total, prob, &kept);
    if (limit < 0) return -1;
    double target = u * kept, acc = 0;
    for (int i = 0; i < limit; i++) {
        acc += prob[i];
        if (target < acc) return i;
    }
    return limit < n && s->top_p >= 1.0f ? -1 : limit - 1;
}

/* Greedy unless the temperature is > 0: a NaN temperature is greedy too, not a draw over NaN weights. */
static int greedy(const tp_sampling *s) { return !(s->temperature > 0); }

/* Top log-probabilities to report: s->logprobs within [0, TP_MAX_CANDIDATES] (the arrays' size)
 * and at most the n tokens there are. */
static int n_top(const tp_sampling *s, int n) {
    int k = s->logprobs < 0 ? 0 : s->logprobs > TP_MAX_CANDIDATES ? TP_MAX_CANDIDATES : s->logprobs;
    return k < n ? k : n;
}

/* s with logprobs within [0, TP_MAX_CANDIDATES], for the full-row samplers. */
static tp_sampling with_top_clamped(const tp_sampling *s) {
    tp_sampling c = *s;
    c.logprobs = n_top(s, TP_MAX_CANDIDATES);
    return c;
}

/* Draws from n processed logits sorted best-first: temperature, top-k, top-p, then the draw.
 * Returns the index into c. */
static int draw(const tp_sampling *s, tp_rng *rng, const tp_cand *c, int n, double *prob) {
    if (greedy(s)) return 0;
    if (s->top_k > 0 && s->top_k < n) n = s->top_k;
    double T = s->temperature, mx = c[0].logit / T, total = 0; /* in double: a tiny T must not overflow */
    for (int i = 0; i < n; i++) total += exp(c[i].logit / T - mx);
    return decide(s, tp_rng_uniform(rng), c, n, n, mx, total, prob);
}

/* Reorders c[0..n) so that c[0..m) are its m best (tp_cand_before), in any order (quickselect). */
static void select_best(tp_cand *c, int n, int m) {
    int lo = 0, hi = n - 1, k = m - 1;
    while (lo < hi) {
        tp_cand pivot = c[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (tp_cand_before(&c[i], &pivot)) i++;
            while (tp_cand_before(&pivot, &c[j])) j--;
            if (i <= j) {
                tp_cand t = c[i]; c[i] = c[j]; c[j] = t;
                i++;
                j--;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else break;
    }
}

/* The best m of c[0..n), sorted best-first, in c[0..m). */
static void sort_best(tp_cand *c, int n, int m) {
    if (m < n) select_best(c, n, m);
    qsort(c, m, sizeof *c, cand_cmp);
}

/* +inf or NaN: what no distribution can be drawn from (-inf is a token of probability 0). */
static int bad_logit(float x) { return isnan(x) || x == INFINITY; }

int tp_sample_candidates(const tp_sampling *s, tp_rng *rng, const tp_cand *c, int n, float lse, tp_sample *out) {
    double prob[TP_MAX_CANDIDATES];
    if (n < 1 || !isfinite(lse)) return -1;
    for (int k = 0; k < n; k++)
        if (bad_logit(c[k].logit)) return -1;
    int i = draw(s, rng, c, n, prob);
    out->id = c[i].id;
    out->logprob = c[i].logit - lse;
    out->n_top = n_top(s, n);
    for (int k = 0; k < out->n_top; k++) {
        out->top_ids[k] = c[k].id;
        out->top_lps[k] = c[k].logit - lse;
    }
    return 0;
}

size_t tp_sample_full_work_bytes(int V) { return (size_t)V * (sizeof(float) + sizeof(double) + sizeof(tp_cand)); }

/* The processed candidates of a full row: the repetition penalty applied (HF's, once per
 * distinct id of the history), c[v] = {v, processed logit v}. Returns the raw log-sum-exp (for
 * the reported log-probabilities), or NaN when no distribution is left. */
static float prepare_full(const tp_sampling *s, const float *logits, int V, const int32_t *history, int n_hist,
                          float *proc, tp_cand *c) {
    const float lse = tp_logsumexp(logits, V);
    /* NaN when any logit is NaN or +inf, -inf when all are -inf (tp_logsumexp): nothing to draw */
    if (!isfinite(lse)) return NAN;
    memcpy(proc, logits, (size_t)V * sizeof *proc);
    if (s->repetition_penalty != 1.0f)
        for (int i = 0; i < n_hist; i++) {
            int32_t id = history[i];
            if (id < 0 || id >= V || proc[id] != logits[id]) continue; /* once per distinct id */
            proc[id] = logits[id] < 0 ? logits[id] * s->repetition_penalty : logits[id] / s->repetition_penalty;
            /* a huge finite logit over a penalty below 1 can overflow to inf: no distribution left */
            if (!isfinite(proc[id])) return NAN;
        }
    for (int i = 0; i < V; i++) c[i] = (tp_cand){i, proc[i]};
    return lse;
}

int tp_top_logprobs(const float *logits, int V, float lse, int k, int32_t *ids, float *lps) {
    int n = k < V ? k : V;
    for (int j = 0; j < n; j++) ids[j] = -1;
    for (int v = 0; v < V; v++) { /* insertion into the best n so far (lps holds raw logits until the end) */
        tp_cand x = {v, logits[v]};
        int j = n;
        while (j > 0 && (ids[j - 1] < 0 || tp_cand_before(&x, &(tp_cand){ids[j - 1], lps[j - 1]}))) j--;
        if (j >= n) continue;
        memmove(&ids[j + 1], &ids[j], (n - j - 1) * sizeof(int32_t));
        memmove(&lps[j + 1], &lps[j], (n - j - 1) * sizeof(float));
        ids[j] = v;
        lps[j] = logits[v];
    }
    for (int j = 0; j < n; j++) lps[j] -= lse;
    return n;
}

/* out->id's log-probability and the top log-probabilities of the raw distribution. */
static void report_full(const tp_sampling *s, const float *logits, int V, float lse, tp_sample *out) {
    out->logprob = logits[out->id] - lse;
    out->n_top = tp_top_logprobs(logits, V, lse, s->logprobs, out->top_ids, out->top_lps);
}

static int argmax_cand(const tp_cand *c, int n) {
    int best = 0;
    for (int v = 1; v < n; v++) if (tp_cand_before(&c[v], &c[best])) best = v;
    return best;
}

int tp_sample_full(const tp_sampling *s, tp_rng *rng, const float *logits, int V, const int32_t *history,
                   int n_hist, void *work, tp_sample *out) {
    const tp_sampling clamped = with_top_clamped(s); /* report_full writes s->logprobs entries */
    s = &clamped;
    /* widest alignment first: with an odd V a float array before the doubles misaligns them */
    double *prob = work;                      /* [V] */
    tp_cand *c = (tp_cand *)(prob + V);       /* [V] */
    float *proc = (float *)(c + V);           /* [V] processed logits */
    const float lse = prepare_full(s, logits, V, history, n_hist, proc, c);
    if (isnan(lse)) return -1;

    int i;
    if (greedy(s)) { /* argmax, lowest id on ties */
        i = argmax_cand(c, V);
    } else if (s->top_k > 0 && s->top_k < V) { /* only the top k matter: select, sort, draw */
        sort_best(c, V, s->top_k);
        i = draw(s, rng, c, s->top_k, prob);
    } else {
        /* The draw needs the best-first order only up to where it lands (or the nucleus ends):
         * sort a growing prefix until it decides, instead of all V. */
        double mx = -INFINITY, total = 0, T = s->temperature;
        for (int v = 0; v < V; v++) mx = c[v].logit / T > mx ? c[v].logit / T : mx;
        for (int v = 0; v < V; v++) total += exp(c[v].logit / T - mx);
        double u = tp_rng_uniform(rng);
        for (int m = V < 256 ? V : 256;; m = m * 4 < V ? m * 4 : V) {
            sort_best(c, V, m);
            if ((i = decide(s, u, c, m, V, mx, total, prob)) >= 0) break;
        }
    }
    out->id = c[i].id;
    report_full(s, logits, V, lse, out);
    return 0;
}

/* The verification of a draft on n processed candidates (temperature > 0): p is what draw()
 * samples from (top-k, temperature, top-p over c). Accepts the draft with probability p(draft)
 * (u < p(x)), else draws from p with the draft taken out and renormalized. Returns the index
 * into c of the token, *accepted set. c is reordered (the kept set best-first in front). */
static int verify(const tp_sampling *s, tp_rng *rng, tp_cand *c, int n, int32_t draft, double *prob, int *accepted) {
    if (s->top_k > 0 && s->top_k < n) {
        sort_best(c, n, s->top_k);
        n = s->top_k;
    }
    double T = s->temperature, mx = -INFINITY, total = 0, kept;
    for (int v = 0; v < n; v++) mx = c[v].logit / T > mx ? c[v].logit / T : mx;
    for (int v = 0; v < n; v++) total += exp(c[v].logit / T - mx);
    /* the kept set as decide() sees it; without top-p every token's weight (c unsorted: the walk
     * below needs no order) */
    int keep;
    for (int m = !(s->top_p >= 1.0f) && n > 256 ? 256 : n;; m = m * 4 < n ? m * 4 : n) {
        if (!(s->top_p >= 1.0f)) sort_best(c, n, m); /* top-p on (a NaN top_p too: nucleus() keeps the best) */
        if ((keep = nucleus(s, c, m, n, mx, total, prob, &kept)) >= 0) break;
    }
    int xi = -1;
    for (int v = 0; v < keep && xi < 0; v++) if (c[v].id == draft) xi = v;
    double px = xi >= 0 ? prob[xi] : 0;
    if (tp_rng_uniform(rng) * kept < px) {
        *accepted = 1;
        return xi;
    }
    *accepted = 0;
    double target = tp_rng_uniform(rng) * (kept - px), acc = 0;
    int last = -1;
    for (int v = 0; v < keep; v++) {
        if (v == xi) continue;
        acc += prob[v];
        last = v;
        if (target < acc) return v;
    }
    return last >= 0 ? last : xi; /* rounding at the end of the walk; xi only when nothing else is kept */
}

int tp_sample_verify_candidates(const tp_sampling *s, tp_rng *rng, const tp_cand *c, int n, float lse, int32_t draft,
                                tp_sample *out) {
    double prob[TP_MAX_CANDIDATES];
    tp_cand w[TP_MAX_CANDIDATES];
    if (n < 1 || n > TP_MAX_CANDIDATES || !isfinite(lse)) return -1;
    for (int k = 0; k < n; k++)
        if (bad_logit(c[k].logit)) return -1;
    int accepted;
    if (greedy(s)) {
        out->id = c[0].id;
        accepted = c[0].id == draft;
    } else {
        memcpy(w, c, n * sizeof *c);
        out->id = w[verify(s, rng, w, n, draft, prob, &accepted)].id;
    }
    int i = 0; /* the chosen id's raw logit: among the candidates (it was drawn from them) */
    while (i < n - 1 && c[i].id != out->id) i++;
    out->logprob = c[i].logit - lse;
    out->n_top = n_top(s, n);
    for (int k = 0; k < out->n_top; k++) {
        out->top_ids[k] = c[k].id;
        out->top_lps[k] = c[k].logit - lse;
    }
    return accepted;
}

int tp_sample_verify_full(const tp_sampling *s, tp_rng *rng, const float *logits, int V, const int32_t *history,
                          int n_hist, void *work, int32_t draft, tp_sample *out) {
    const tp_sampling clamped = with_top_clamped(s);
    s = &clamped;
    double *prob = work;                /* [V] */
    tp_cand *c = (tp_cand *)(prob + V); /* [V] */
    float *proc = (float *)(c + V);     /* [V] */
    const float lse = prepare_full(s, logits, V, history, n_hist, proc, c);
    if (isnan(lse)) return -1;
    int accepted;
    if (greedy(s)) {
        out->id = c[argmax_cand(c, V)].id;
        accepted = out->id == draft;
    } else
        out->id = c[verify(s, rng, c, V, draft, prob, &accepted)].id;
    report_full(s, logits, V, lse, out);
    return accepted;
}
