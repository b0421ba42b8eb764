/* Unit test of engine/sched/sampler.c against plain double-precision references written here.
 *
 * The sampler follows HF generate: repetition penalty -> temperature -> top-k -> top-p -> draw,
 * with reported log-probabilities from the raw logits. Each check builds logits with a known
 * answer (a planted tie, probabilities chosen so that a top-p boundary falls exactly between
 * two tokens, a penalty that flips the argmax only when applied the wrong number of times) or
 * compares observed frequencies with the reference distribution (chi-square with fixed seeds:
 * deterministic, and with bounds far from the observed values, see chi2_bound).
 *
 * usage: test_sampler        (exit 0: all checks passed; 1: some failed, each printed)
 */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sched/sampler.h"
#include "tests/common/check.h"


/* ---- test inputs ---- */

static float nrand(void) { /* roughly normal */
    double s = 0;
    for (int i = 0; i < 6; i++) s += urand();
    return (float)((s - 3.0) * 1.41421356);
}

/* ---- independent references (double precision) ---- */

static double ref_lse(const float *l, int V) {
    double mx = -INFINITY, s = 0;
    for (int i = 0; i < V; i++) mx = l[i] > mx ? l[i] : mx;
    for (int i = 0; i < V; i++) s += exp((double)l[i] - mx);
    return mx + log(s);
}

/* ids ordered by logit descending, ties by lower id (the argmax rule HF's greedy follows). */
typedef struct { int32_t id; float logit; } ref_pair;
static int ref_pair_cmp(const void *pa, const void *pb) {
    const ref_pair *a = pa, *b = pb;
    if (a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}
static void ref_order(const float *l, int V, int32_t *order) {
    ref_pair *t = malloc(V * sizeof *t);
    for (int i = 0; i < V; i++) t[i] = (ref_pair){i, l[i]};
    qsort(t, V, sizeof *t, ref_pair_cmp);
    for (int i = 0; i < V; i++) order[i] = t[i].id;
    free(t);
}

/* ---- calling the sampler ---- */

static void *g_work;
static int g_work_V;

static tp_sample sample_full(const tp_sampling *s, tp_rng *rng, const float *l, int V, const int32_t *hist, int nh) {
    if (g_work_V < V) {
        free(g_work);
        g_work = malloc(tp_sample_full_work_bytes(V));
        g_work_V = V;
    }
    tp_sample out;
    memset(&out, 0, sizeof out);
    tp_sample_full(s, rng, l, V, hist, nh, g_work, &out);
    return out;
}

/* Candidate mode as the step gathers it: the k best raw logits, sorted, and the exact lse. */
static int cands_make(const float *l, int V, int k, tp_cand *c, float *lse) {
    int32_t *order = malloc(V * sizeof *order);
    ref_order(l, V, order);
    if (k > V) k = V;
    for (int i = 0; i < k; i++) c[i] = (tp_cand){order[i], l[order[i]]};
    free(order);
    *lse = (float)ref_lse(l, V);
    return k;
}

static tp_sample sample_cand(const tp_sampling *s, tp_rng *rng, const float *l, int V, int k) {
    tp_cand c[TP_MAX_CANDIDATES];
    float lse;
    k = cands_make(l, V, k, c, &lse);
    tp_sample out;
    memset(&out, 0, sizeof out);
    tp_sample_candidates(s, rng, c, k, lse, &out);
    return out;
}

/* Mode 0: full logits; mode 1: candidates (k = what tp_sampling_candidates asks for). */
static tp_sample sample_mode(int mode, const tp_sampling *s, tp_rng *rng, const float *l, int V) {
    if (mode == 0) return sample_full(s, rng, l, V, NULL, 0);
    int k = tp_sampling_candidates(s);
    if (k == 0) {
        fprintf(stderr, "internal: candidate mode asked for settings that need full logits\n");
        exit(1);
    }
    return sample_cand(s, rng, l, V, k);
}

static const char *MODE_NAME[2] = {"full", "candidates"};

/* Draws n samples into counts[V]. */
static void draw_counts(int mode, const tp_sampling *s, uint64_t seed, const float *l, int V, int n, long *counts) {
    tp_rng rng;
    tp_rng_seed(&rng, seed, 0);
    memset(counts, 0, V * sizeof *counts);
    tp_cand c[TP_MAX_CANDIDATES];
    float lse = 0;
    int k = 0;
    if (mode == 1) k = cands_make(l, V, tp_sampling_candidates(s), c, &lse);
    for (int i = 0; i < n; i++) {
        tp_sample o;
        if (mode == 0) o = sample_full(s, &rng, l, V, NULL, 0);
        else tp_sample_candidates(s, &rng, c, k, lse, &o);
        if (o.id < 0 || o.id >= V) {
            CHECK(0, "%s: id %d out of range [0, %d)", MODE_NAME[mode], o.id, V);
            return;
        }
        counts[o.id]++;
    }
}

/* Pearson chi-square of counts against probabilities p (which sum to 1); tokens with p = 0
 * must have count 0 (reported separately: returns +inf if not). */
static double chi2(const long *counts, const double *p, int V, int n, int *df) {
    double x = 0;
    *df = -1;
    for (int i = 0; i < V; i++) {
        if (p[i] == 0) {
            if (counts[i]) return INFINITY;
            continue;
        }
        double e = p[i] * n;
        x += (counts[i] - e) * (counts[i] - e) / e;
        (*df)++;
    }
    return x;
}

/* Far in the tail: mean df, sd sqrt(2 df); 6 sd plus slack. A fixed seed makes the outcome
 * deterministic; the bound only has to separate right from wrong distributions, which the
 * tests show by also checking a wrong one lands far above it. */
static double chi2_bound(int df) { return df + 6.0 * sqrt(2.0 * df) + 10.0; }

/* Reference distribution after temperature, top-k, top-p (HF semantics) over processed logits. */
static void ref_probs(const float *l, int V, double T, int top_k, double top_p, double *p) {
    int32_t *order = malloc(V * sizeof *order);
    ref_order(l, V, order);
    int n = top_k > 0 && top_k < V ? top_k : V;
    double mx = l[order[0]] / T, s = 0;
    for (int i = 0; i < V; i++) p[i] = 0;
    for (int i = 0; i < n; i++) s += (p[order[i]] = exp(l[order[i]] / T - mx));
    for (int i = 0; i < n; i++) p[order[i]] /= s;
    if (top_p < 1) { /* HF TopP: drop a token (and all after it) once the mass before it is >= top_p */
        double before = 0;
        int keep = 0;
        while (keep < n && (keep == 0 || before < top_p)) before += p[order[keep++]];
        for (int i = keep; i < n; i++) p[order[i]] = 0;
        for (int i = 0; i < keep; i++) p[order[i]] /= before;
    }
    free(order);
}

/* ---- the checks ---- */

static void test_candidates_needed(void) {
    tp_sampling greedy = {0, 0, 1, 1, 0}, greedy_lp = {0, 0, 1, 1, 7};
    CHECK(tp_sampling_candidates(&greedy) == 1, "greedy needs 1 candidate, got %d", tp_sampling_candidates(&greedy));
    CHECK(tp_sampling_candidates(&greedy_lp) == 7, "greedy with --logprobs 7 needs 7");
    tp_sampling topk = {0.8f, 20, 1, 1, 0}, topk_lp = {0.8f, 20, 1, 1, 30}, topk_p = {0.8f, 20, 0.9f, 1, 0};
    CHECK(tp_sampling_candidates(&topk) >= 20, "top-k 20 needs >= 20 candidates");
    CHECK(tp_sampling_candidates(&topk_lp) >= 30, "top-k 20 with --logprobs 30 needs >= 30");
    CHECK(tp_sampling_candidates(&topk_p) >= 20, "top-k 20 + top-p needs >= 20 (top-p acts inside top-k)");
    tp_sampling nok = {1, 0, 0.9f, 1, 0}, bigk = {1, TP_MAX_CANDIDATES + 1, 1, 1, 0}, pen = {0, 0, 1, 1.3f, 0};
    CHECK(tp_sampling_candidates(&nok) == 0, "top-p without top-k needs full logits");
    CHECK(tp_sampling_candidates(&bigk) == 0, "top-k above TP_MAX_CANDIDATES needs full logits");
    CHECK(tp_sampling_candidates(&pen) == 0, "repetition penalty needs full logits (even greedy)");
}

static void test_greedy(void) {
    enum { V = 500 };
    float l[V];
    for (int i = 0; i < V; i++) l[i] = nrand();
    l[211] = 9.5f; /* a tie at the top: the lowest id wins */
    l[37] = 9.5f;
    l[400] = 9.5f;
    for (int mode = 0; mode < 2; mode++)
        for (uint64_t seed = 0; seed < 3; seed++) {
            tp_sampling s = {0, 0, 1, 1, 0};
            tp_rng rng;
            tp_rng_seed(&rng, seed, 0);
            tp_sample o = sample_mode(mode, &s, &rng, l, V);
            CHECK(o.id == 37, "%s greedy: argmax with ties {37, 211, 400} must be 37, got %d", MODE_NAME[mode], o.id);
            /* top-k and top-p do not change greedy */
            tp_sampling s2 = {0, 5, 0.3f, 1, 0};
            o = sample_mode(mode, &s2, &rng, l, V);
            CHECK(o.id == 37, "%s greedy with top-k/top-p set: got %d", MODE_NAME[mode], o.id);
        }
    /* a unique max anywhere, many rows */
    for (int row = 0; row < 50; row++) {
        for (int i = 0; i < V; i++) l[i] = nrand();
        int best = (int)(urand() * V);
        l[best] = 12.0f + (float)urand();
        tp_sampling s = {0, 0, 1, 1, 0};
        tp_rng rng;
        tp_rng_seed(&rng, 1, 0);
        for (int mode = 0; mode < 2; mode++) {
            tp_sample o = sample_mode(mode, &s, &rng, l, V);
            CHECK(o.id == best, "%s greedy row %d: expected %d, got %d", MODE_NAME[mode], row, best, o.id);
        }
    }
}

/* Reported log-probabilities are log_softmax of the raw logits, whatever the settings. */
static void test_logprobs(void) {
    enum { V = 1000, K = 8 };
    float l[V];
    int32_t order[V];
    const tp_sampling settings[] = {
        {0, 0, 1, 1, K}, {0.7f, 10, 1, 1, K}, {1.5f, 0, 0.8f, 1, K}, {1, 40, 0.5f, 1, K}, {1, 0, 1, 1.3f, K},
    };
    for (int row = 0; row < 20; row++) {
        for (int i = 0; i < V; i++) l[i] = 3.0f * nrand();
        l[5] = l[6] = l[7]; /* ties inside the top list sometimes */
        ref_order(l, V, order);
        double lse = ref_lse(l, V);
        int32_t hist[3] = {order[0], order[1], 5};
        for (size_t si = 0; si < sizeof settings / sizeof settings[0]; si++)
            for (int mode = 0; mode < 2; mode++) {
                const tp_sampling *s = &settings[si];
                if (mode == 1 && tp_sampling_candidates(s) == 0) continue;
                tp_rng rng;
                tp_rng_seed(&rng, (uint64_t)row, 3);
                tp_sample o = mode == 0 ? sample_full(s, &rng, l, V, hist, 3) : sample_mode(1, s, &rng, l, V);
                double want = l[o.id] - lse;
                CHECK(fabs(o.logprob - want) < 1e-4, "%s setting %zu: logprob of %d is %g, log_softmax %g",
                      MODE_NAME[mode], si, o.id, o.logprob, want);
                CHECK(o.n_top == K, "%s setting %zu: n_top %d, expected %d", MODE_NAME[mode], si, o.n_top, K);
                for (int k = 0; k < K && k < o.n_top; k++) {
                    CHECK(o.top_ids[k] == order[k], "%s setting %zu row %d: top %d is id %d, expected %d",
                          MODE_NAME[mode], si, row, k, o.top_ids[k], order[k]);
                    CHECK(fabs(o.top_lps[k] - (l[order[k]] - lse)) < 1e-4, "%s setting %zu: top %d logprob %g vs %g",
                          MODE_NAME[mode], si, k, o.top_lps[k], l[order[k]] - lse);
                }
            }
    }
}

/* top-k: every draw among the k best; with those k nearly flat, every one of them is drawn. */
static void test_top_k(void) {
    enum { V = 300, N = 20000 };
    float l[V];
    long counts[V];
    double p[V];
    for (int i = 0; i < V; i++) l[i] = 4.0f + 0.5f * (float)urand(); /* close below: would be drawn often */
    int members[][2] = {{1, 0}, {10, 0}, {20, 0}, {64, 0}};
    for (size_t t = 0; t < sizeof members / sizeof members[0]; t++) {
        int k = members[t][0];
        /* the k best at scattered ids, nearly flat, distinct */
        int32_t best[64];
        for (int i = 0; i < k; i++) {
            best[i] = (int32_t)((i * 97 + 13) % V);
            l[best[i]] = 6.0f + 0.001f * i;
        }
        for (int mode = 0; mode < 2; mode++) {
            tp_sampling s = {1.0f, k, 1, 1, 0};
            draw_counts(mode, &s, 1234 + t, l, V, N, counts);
            long inside = 0, min_member = N;
            for (int i = 0; i < k; i++) {
                inside += counts[best[i]];
                if (counts[best[i]] < min_member) min_member = counts[best[i]];
            }
            CHECK(inside == N, "%s top-k %d: %ld of %d draws outside the k best", MODE_NAME[mode], k, N - inside, N);
            CHECK(min_member > 0, "%s top-k %d: a member of the k best was never drawn in %d draws", MODE_NAME[mode],
                  k, N);
            ref_probs(l, V, 1.0, k, 1.0, p);
            int df;
            double x = chi2(counts, p, V, N, &df);
            CHECK(df < 1 || x < chi2_bound(df), "%s top-k %d: chi2 %g over bound %g (df %d)", MODE_NAME[mode], k, x,
                  chi2_bound(df), df);
        }
        for (int i = 0; i < k; i++) l[best[i]] = 4.0f + 0.5f * (float)urand();
    }
}

/* top-p on exactly known probabilities. 4 tokens at logit 0 and the rest at -200 (exp(-200)
 * vanishes next to 4 in double): probabilities exactly 1/4, masses before each 0, 1/4, 1/2, 3/4.
 * HF TopP drops a token when the mass before it reaches top_p, so top_p = 0.5 keeps exactly 2,
 * top_p = 0.5 + eps keeps 3, 0.25 keeps 1, 1e-6 keeps 1. */
static void test_top_p_exact(void) {
    enum { V = 200, N = 4000 };
    float l[V];
    long counts[V];
    for (int i = 0; i < V; i++) l[i] = -200.0f;
    const int32_t four[4] = {150, 3, 77, 120}; /* ties at 0: kept in id order 3, 77, 120, 150 */
    for (int i = 0; i < 4; i++) l[four[i]] = 0.0f;
    const struct { float p; int keep; } cases[] = {
        {1e-6f, 1}, {0.25f, 1}, {0.2500001f, 2}, {0.5f, 2}, {0.5000001f, 3}, {0.75f, 3}, {0.7500001f, 4}, {0.99f, 4},
    };
    const int32_t by_id[4] = {3, 77, 120, 150};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        tp_sampling s = {1.0f, 0, cases[t].p, 1, 0};
        draw_counts(0, &s, 99 + t, l, V, N, counts);
        int distinct = 0;
        long in_first = 0;
        for (int i = 0; i < V; i++) distinct += counts[i] > 0;
        for (int i = 0; i < cases[t].keep; i++) in_first += counts[by_id[i]];
        CHECK(distinct == cases[t].keep, "top-p %.7g over 4 equal tokens: %d distinct ids drawn, expected %d",
              cases[t].p, distinct, cases[t].keep);
        CHECK(in_first == N, "top-p %.7g: draws outside the %d lowest-id tied tokens", cases[t].p, cases[t].keep);
    }
}

/* top-p on distinct probabilities 0.5, 0.3, 0.15, 0.05 (logits = their logs), and top-p inside
 * top-k: HF applies top-p to the distribution renormalized over the top-k set. */
static void test_top_p_distinct(void) {
    enum { V = 64, N = 20000 };
    float l[V];
    long counts[V];
    double p[V];
    const double probs[4] = {0.5, 0.3, 0.15, 0.05};
    const int32_t ids[4] = {40, 2, 63, 17};
    for (int i = 0; i < V; i++) l[i] = -300.0f;
    for (int i = 0; i < 4; i++) l[ids[i]] = (float)log(probs[i]);
    const struct { float top_p; int top_k; int keep; } cases[] = {
        {0.49f, 0, 1}, {0.51f, 0, 2}, {0.79f, 0, 2}, {0.81f, 0, 3}, {0.94f, 0, 3}, {0.96f, 0, 4},
        /* top-k 2 renormalizes to 0.625, 0.375: top-p 0.6 now keeps 1, 0.63 keeps 2 */
        {0.6f, 2, 1}, {0.63f, 2, 2}, {0.6f, 0, 2},
        /* top-k 3: 0.5263, 0.3158, 0.1579: top-p 0.84 keeps 2, 0.85 keeps 3 */
        {0.84f, 3, 2}, {0.85f, 3, 3},
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++)
        for (int mode = 0; mode < 2; mode++) {
            tp_sampling s = {1.0f, cases[t].top_k, cases[t].top_p, 1, 0};
            if (mode == 1 && tp_sampling_candidates(&s) == 0) continue;
            draw_counts(mode, &s, 7 + t, l, V, N, counts);
            int distinct = 0;
            long kept = 0;
            for (int i = 0; i < V; i++) distinct += counts[i] > 0;
            for (int i = 0; i < cases[t].keep; i++) kept += counts[ids[i]];
            CHECK(distinct == cases[t].keep && kept == N,
                  "%s top-p %g top-k %d: %d distinct ids (%ld draws in the expected set of %d), expected %d",
                  MODE_NAME[mode], cases[t].top_p, cases[t].top_k, distinct, kept, N, cases[t].keep);
            ref_probs(l, V, 1.0, cases[t].top_k, cases[t].top_p, p);
            int df;
            double x = chi2(counts, p, V, N, &df);
            CHECK(df < 1 || x < chi2_bound(df), "%s top-p %g top-k %d: renormalized frequencies off, chi2 %g (df %d)",
                  MODE_NAME[mode], cases[t].top_p, cases[t].top_k, x, df);
        }
}

/* Temperature: observed frequencies fit softmax(l / T), and not softmax(l) when T != 1; the
 * best token's share rises as T falls. */
static void test_temperature(void) {
    enum { V = 50, N = 20000 };
    float l[V];
    long counts[V];
    double p[V], p1[V];
    for (int i = 0; i < V; i++) l[i] = -0.08f * i + 0.3f * (float)urand();
    const double temps[] = {0.25, 0.5, 1.0, 2.0, 4.0};
    double prev_top_share = 2;
    int32_t order[V];
    ref_order(l, V, order);
    ref_probs(l, V, 1.0, 0, 1.0, p1);
    for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++)
        for (int mode = 0; mode < 2; mode++) {
            tp_sampling s = {(float)temps[t], mode == 0 ? 0 : V, 1, 1, 0}; /* top-k = V is no-op */
            if (mode == 1 && V > TP_MAX_CANDIDATES) continue;
            draw_counts(mode, &s, 555, l, V, N, counts);
            ref_probs(l, V, temps[t], 0, 1.0, p);
            int df;
            double x = chi2(counts, p, V, N, &df);
            CHECK(x < chi2_bound(df), "%s T=%g: chi2 %g against softmax(l/T) over bound %g", MODE_NAME[mode], temps[t],
                  x, chi2_bound(df));
            if (temps[t] != 1.0) {
                double x1 = chi2(counts, p1, V, N, &df);
                CHECK(x1 > 4 * chi2_bound(df), "%s T=%g: frequencies also fit T=1 (chi2 %g): temperature ignored?",
                      MODE_NAME[mode], temps[t], x1);
            }
            double share = (double)counts[order[0]] / N;
            if (mode == 0) {
                CHECK(share < prev_top_share, "T=%g: best token's share %g did not fall below %g at the lower T",
                      temps[t], share, prev_top_share);
                prev_top_share = share;
            }
        }
}

/* Repetition penalty (HF): each id seen in the history once, however often it appears:
 * positive logits divided by the penalty, negative ones multiplied. Greedy flips show the
 * count and the sign rule; sampling shows the whole processed distribution. */
static void test_repetition_penalty(void) {
    enum { V = 60, N = 20000 };
    float l[V];
    for (int i = 0; i < V; i++) l[i] = -5.0f - 0.01f * i;
    struct { float a, b, pen; int expect_a; const char *why; } flips[] = {
        {2.0f, 1.5f, 1.2f, 1, "positive: 2.0/1.2 = 1.67 > 1.5 (applied twice, 1.39, would flip)"},
        {2.0f, 1.5f, 1.5f, 0, "positive: 2.0/1.5 = 1.33 < 1.5"},
        {-1.0f, -1.1f, 1.05f, 1, "negative: -1.0*1.05 = -1.05 > -1.1 (applied twice, -1.1025, would flip)"},
        {-1.0f, -1.1f, 1.2f, 0, "negative: -1.0*1.2 = -1.2 < -1.1 (dividing would give -0.83)"},
        {2.0f, 1.5f, 0.5f, 1, "penalty < 1 boosts: 2.0/0.5 = 4"},
    };
    const int A = 31, B = 7;
    for (size_t t = 0; t < sizeof flips / sizeof flips[0]; t++) {
        l[A] = flips[t].a;
        l[B] = flips[t].b;
        int32_t hist[] = {A, 3, A, 50, A, 3};
        tp_sampling s = {0, 0, 1, flips[t].pen, 2};
        tp_rng rng;
        tp_rng_seed(&rng, 0, 0);
        tp_sample o = sample_full(&s, &rng, l, V, hist, 6);
        int want = flips[t].expect_a ? A : B;
        CHECK(o.id == want, "repetition penalty %g, A=%g B=%g, A seen 3 times: got %d, expected %d (%s)",
              flips[t].pen, flips[t].a, flips[t].b, o.id, want, flips[t].why);
        /* reported log-probabilities stay those of the raw logits */
        double lse = ref_lse(l, V);
        CHECK(fabs(o.logprob - (l[o.id] - lse)) < 1e-5, "penalty: logprob %g is not raw log_softmax %g", o.logprob,
              l[o.id] - lse);
        CHECK(o.top_ids[0] == (flips[t].a > flips[t].b ? A : B), "penalty: top_logprobs must rank raw logits");
        /* no history, no penalty */
        o = sample_full(&s, &rng, l, V, NULL, 0);
        CHECK(o.id == A, "penalty with empty history changed greedy: got %d", o.id);
    }
    /* the whole processed distribution, by sampling at T = 1 */
    for (int i = 0; i < V; i++) l[i] = 1.5f * nrand();
    int32_t hist[] = {4, 4, 9, 17, 9, 33, 4, 58, 0};
    const float pen = 1.7f;
    float proc[V];
    memcpy(proc, l, sizeof proc);
    int seen[V] = {0};
    for (size_t i = 0; i < sizeof hist / sizeof hist[0]; i++) seen[hist[i]] = 1;
    for (int i = 0; i < V; i++)
        if (seen[i]) proc[i] = l[i] < 0 ? l[i] * pen : l[i] / pen;
    double p[V], praw[V];
    ref_probs(proc, V, 1.0, 0, 1.0, p);
    ref_probs(l, V, 1.0, 0, 1.0, praw);
    long counts[V] = {0};
    tp_sampling s = {1.0f, 0, 1, pen, 0};
    tp_rng rng;
    tp_rng_seed(&rng, 2024, 0);
    for (int i = 0; i < N; i++) counts[sample_full(&s, &rng, l, V, hist, sizeof hist / sizeof hist[0]).id]++;
    int df;
    double x = chi2(counts, p, V, N, &df), xraw = chi2(counts, praw, V, N, &df);
    CHECK(x < chi2_bound(df), "penalty %g: frequencies do not fit the penalized softmax (chi2 %g, bound %g)", pen, x,
          chi2_bound(df));
    CHECK(xraw > 4 * chi2_bound(df), "penalty %g: frequencies also fit the raw softmax (chi2 %g): penalty ignored?",
          pen, xraw);
}

/* Candidate mode and full mode make the same draws from the same rng whenever the candidates
 * cover top-k (and top-p, which acts inside top-k). */
static void test_modes_agree(void) {
    enum { V = 1000 };
    float l[V];
    const float temps[] = {0.3f, 0.7f, 1.0f, 1.5f};
    const int ks[] = {1, 2, 5, 20, 40, TP_MAX_CANDIDATES};
    const float ps[] = {1.0f, 0.95f, 0.8f, 0.3f};
    long compared = 0, differ = 0;
    for (int row = 0; row < 6; row++) {
        for (int i = 0; i < V; i++) l[i] = 2.0f * nrand();
        for (size_t ti = 0; ti < 4; ti++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
                for (size_t pi = 0; pi < 4; pi++) {
                    tp_sampling s = {temps[ti], ks[ki], ps[pi], 1, 3};
                    tp_rng r1, r2;
                    tp_rng_seed(&r1, 1000 + row, 5);
                    tp_rng_seed(&r2, 1000 + row, 5);
                    for (int d = 0; d < 10; d++) {
                        tp_sample a = sample_full(&s, &r1, l, V, NULL, 0);
                        tp_sample b = sample_mode(1, &s, &r2, l, V);
                        compared++;
                        if (a.id != b.id || fabsf(a.logprob - b.logprob) > 1e-5f) {
                            if (differ++ < 5)
                                fprintf(stderr, "  T=%g k=%d p=%g draw %d: full %d (%g), candidates %d (%g)\n",
                                        temps[ti], ks[ki], ps[pi], d, a.id, a.logprob, b.id, b.logprob);
                        }
                    }
                }
    }
    CHECK(differ == 0, "candidate and full mode disagree on %ld of %ld draws", differ, compared);
}

/* Same seed, same sequence; another seed or stream, another sequence. */
static void test_seeds(void) {
    enum { V = 64, N = 200 };
    float l[V];
    for (int i = 0; i < V; i++) l[i] = 0.2f * nrand();
    tp_sampling s = {1.0f, 0, 0.95f, 1, 0};
    int32_t seq[4][N];
    const uint64_t seeds[4][2] = {{7, 0}, {7, 0}, {8, 0}, {7, 1}};
    for (int r = 0; r < 4; r++) {
        tp_rng rng;
        tp_rng_seed(&rng, seeds[r][0], seeds[r][1]);
        for (int i = 0; i < N; i++) seq[r][i] = sample_full(&s, &rng, l, V, NULL, 0).id;
    }
    CHECK(memcmp(seq[0], seq[1], sizeof seq[0]) == 0, "seed 7 twice gave different sequences");
    int same8 = 0, same_stream = 0;
    for (int i = 0; i < N; i++) {
        same8 += seq[0][i] == seq[2][i];
        same_stream += seq[0][i] == seq[3][i];
    }
    /* ~64 near-equal tokens: two independent sequences agree on ~N/64 draws */
    CHECK(same8 < N / 4, "seeds 7 and 8 agree on %d of %d draws", same8, N);
    CHECK(same_stream < N / 4, "streams 0 and 1 of seed 7 agree on %d of %d draws", same_stream, N);
    /* the rng itself: uniform in [0, 1) */
    tp_rng rng;
    tp_rng_seed(&rng, 0, 0);
    double mn = 1, mx = 0, sum = 0;
    for (int i = 0; i < 100000; i++) {
        double u = tp_rng_uniform(&rng);
        mn = u < mn ? u : mn;
        mx = u > mx ? u : mx;
        sum += u;
    }
    CHECK(mn >= 0 && mx < 1 && mn < 1e-3 && mx > 1 - 1e-3, "rng range [%g, %g]", mn, mx);
    CHECK(fabs(sum / 100000 - 0.5) < 0.01, "rng mean %g", sum / 100000);
}

/* Settings that arrive narrowed from double (the server and the CLI parse doubles, the sampler
 * takes floats): top_p 1e-300 is > 0 as a double but 0 as a float, 1e-45 a float denormal; and
 * what no check upstream should let through (negative, NaN). Every one must give a token: top-p
 * keeps at least the best (HF TopP's min_tokens_to_keep = 1), a temperature that is not > 0 is
 * greedy. Before the fix top_p 0 kept no token: the full-row draw looped forever (the alarm
 * below ends it) and the candidate draw read c[-1]. Verification of a draft likewise. */
static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "FAIL test_degenerate_settings: the sampler did not return in 20 s (a hang)\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(1);
    _exit(1);
}

static void test_degenerate_settings(void) {
    enum { V = 700 };
    float l[V];
    for (int i = 0; i < V; i++) l[i] = nrand();
    l[123] = 7.0f; /* the best token, by a margin */
    l[5] = 6.5f;
    const double tiny_p[] = {1e-300, 4.9406564584124654e-324, 1e-46, -0.0, -1.0, NAN};
    const float temps[] = {1.0f, 0.7f, (float)1e-300, (float)1e-45, NAN, -1.0f};
    signal(SIGALRM, on_alarm);
    alarm(20);
    for (size_t a = 0; a < sizeof tiny_p / sizeof *tiny_p; a++)
        for (int top_k = 0; top_k <= 50; top_k += 50)
            for (int mode = 0; mode < 2; mode++) {
                /* as the server builds it: (float) of the validated double */
                tp_sampling s = {1.0f, top_k, (float)tiny_p[a], 1, 2};
                tp_rng rng;
                tp_rng_seed(&rng, a, 0);
                tp_sample o;
                memset(&o, 0, sizeof o);
                int rc, k = tp_sampling_candidates(&s);
                if (mode == 1 && k == 0) continue; /* top-p without top-k needs the full row */
                if (mode == 0) {
                    if (g_work_V < V) { free(g_work); g_work = malloc(tp_sample_full_work_bytes(V)); g_work_V = V; }
                    rc = tp_sample_full(&s, &rng, l, V, NULL, 0, g_work, &o);
                } else {
                    tp_cand c[TP_MAX_CANDIDATES];
                    float lse;
                    k = cands_make(l, V, k, c, &lse);
                    rc = tp_sample_candidates(&s, &rng, c, k, lse, &o);
                }
                CHECK(rc == 0 && o.id == 123, "%s top_p %g (float %g) top_k %d: rc %d id %d, want the best (123)",
                      MODE_NAME[mode], tiny_p[a], (double)s.top_p, top_k, rc, o.id);
                CHECK(o.n_top == 2 && o.top_ids[0] == 123 && o.top_ids[1] == 5, "%s top_p %g: top ids %d %d",
                      MODE_NAME[mode], tiny_p[a], o.top_ids[0], o.top_ids[1]);
                /* a draft: the best is accepted, any other replaced by the best */
                for (int32_t draft = 5; draft <= 123; draft += 118) {
                    tp_rng_seed(&rng, a, 1);
                    if (mode == 0) rc = tp_sample_verify_full(&s, &rng, l, V, NULL, 0, g_work, draft, &o);
                    else {
                        tp_cand c[TP_MAX_CANDIDATES];
                        float lse;
                        k = cands_make(l, V, tp_sampling_candidates(&s), c, &lse);
                        rc = tp_sample_verify_candidates(&s, &rng, c, k, lse, draft, &o);
                    }
                    CHECK(rc == (draft == 123) && o.id == 123, "%s verify top_p %g draft %d: rc %d id %d",
                          MODE_NAME[mode], tiny_p[a], draft, rc, o.id);
                }
            }
    /* temperatures: a denormal or 0 after narrowing, NaN, negative -> greedy or a valid draw */
    for (size_t t = 0; t < sizeof temps / sizeof *temps; t++)
        for (int mode = 0; mode < 4; mode++) { /* bit 0: candidates; bit 1: top_p 1 (a NaN T drew the worst) */
            tp_sampling s = {temps[t], mode & 1 ? 20 : 0, mode & 2 ? 1.0f : 0.5f, 1, 0};
            tp_rng rng;
            tp_rng_seed(&rng, t, 0);
            tp_sample o;
            memset(&o, 0, sizeof o);
            int rc;
            if (!(mode & 1)) rc = tp_sample_full(&s, &rng, l, V, NULL, 0, g_work, &o);
            else {
                tp_cand c[TP_MAX_CANDIDATES];
                float lse;
                int k = cands_make(l, V, 20, c, &lse);
                rc = tp_sample_candidates(&s, &rng, c, k, lse, &o);
            }
            /* a temperature that is not > 0 (or tiny) gives the best; top_p 0.5 with the best two
             * 0.5 apart keeps {123, 5} at most; top_p 1 any id */
            int drawn = temps[t] >= 0.5f && (o.id == 5 || ((mode & 2) && o.id >= 0 && o.id < V));
            CHECK(rc == 0 && (o.id == 123 || drawn), "%s top_p %g temperature %g: rc %d id %d", MODE_NAME[mode & 1],
                  (double)s.top_p, (double)temps[t], rc, o.id);
        }
    /* logprobs past the arrays' size: at most TP_MAX_CANDIDATES reported, never written past */
    tp_sampling s = {0, 0, 1, 1, TP_MAX_CANDIDATES + 1000};
    tp_rng rng;
    tp_rng_seed(&rng, 0, 0);
    tp_sample o;
    int rc = tp_sample_full(&s, &rng, l, V, NULL, 0, g_work, &o);
    CHECK(rc == 0 && o.id == 123 && o.n_top == TP_MAX_CANDIDATES, "logprobs %d: rc %d n_top %d", s.logprobs, rc,
          o.n_top);
    alarm(0);
}

/* Steps 1-2 of the sampler's order (tp_penalties_apply): the frequency penalty once per
 * occurrence, the presence penalty once per id, EOS masked only while fewer than min_tokens are
 * out; the input row untouched, the counts scratch zero again. Values exact in binary floats. */
static void test_penalties(void) {
    enum { V = 8, EOS = 7 };
    float l[V], out[V];
    int32_t counts[V] = {0};
    for (int i = 0; i < V; i++) l[i] = 0.5f * i;
    const int32_t gen[] = {2, 5, 2, 2}; /* id 2 three times, id 5 once */
    tp_penalties p = {.presence_penalty = 0.25f, .frequency_penalty = 0.5f, .min_tokens = 5, .eos = EOS};
    CHECK(tp_penalties_active(&p, 4), "penalties on: active");
    tp_penalties_apply(&p, gen, 4, l, V, counts, out);
    for (int i = 0; i < V; i++) {
        float want = 0.5f * i;
        if (i == 2) want -= 3 * 0.5f + 0.25f;
        if (i == 5) want -= 1 * 0.5f + 0.25f;
        if (i == EOS) want = -1e30f;
        CHECK(out[i] == want, "penalties: id %d got %g, expected %g", i, out[i], want);
        CHECK(counts[i] == 0, "penalties: counts[%d] = %d after the call, expected 0", i, counts[i]);
        CHECK(l[i] == 0.5f * i, "penalties: input logit %d changed", i);
    }
    tp_penalties_apply(&p, gen, 4, l, V, counts, out); /* the same again: counts were reset */
    CHECK(out[2] == 0.5f * 2 - 1.75f, "penalties, second call: id 2 got %g, expected %g", out[2], 0.5f * 2 - 1.75f);
    p.min_tokens = 4; /* 4 tokens out: EOS free */
    tp_penalties_apply(&p, gen, 4, l, V, counts, out);
    CHECK(out[EOS] == 0.5f * EOS, "min_tokens 4 with 4 out: EOS got %g, expected %g", out[EOS], 0.5f * EOS);
    tp_penalties off = {.eos = EOS, .min_tokens = 4};
    CHECK(!tp_penalties_active(&off, 4) && tp_penalties_active(&off, 3),
          "no penalties: active only while fewer than min_tokens are out");
}

int main(void) {
    test_candidates_needed();
    test_greedy();
    test_logprobs();
    test_top_k();
    test_top_p_exact();
    test_top_p_distinct();
    test_temperature();
    test_repetition_penalty();
    test_modes_agree();
    test_seeds();
    test_degenerate_settings();
    test_penalties();
    free(g_work);
    return check_verdict("test_sampler");
}
