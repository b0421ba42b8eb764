/* Unit tests of prompt-lookup speculation (label speculate):
 *  1. tp_speculate_parse: the forms accepted and every kind of bad value refused;
 *  2. tp_speculate_propose: the last n-gram's most recent earlier occurrence, the fallback to
 *     shorter n-grams, the cap on drafts, the periodic continuation past the end;
 *  3. the acceptance rule (tp_sample_verify_full / _candidates) against an independent double
 *     reference of the processed distribution p (temperature, top-k, top-p, repetition penalty):
 *     with many seeded draws per draft, the output tokens pass a chi-square test against p, the
 *     acceptance rate matches p(draft), no token outside p's support ever comes out, a rejected
 *     draft is never the output, and greedy accepts exactly the argmax;
 *  4. a chain of drafts as the scheduler verifies it (stop at the first rejection), on a toy
 *     "model" whose next-token distribution depends on the previous token: the joint law of the
 *     first three tokens passes a chi-square test against the exact product law, and matches
 *     plain sampling's histogram from the same seeds' streams (a two-sample chi-square).
 * The seeds are fixed: the test is deterministic. The thresholds are chi-square critical values
 * at p = 1e-4, so a correct rule fails with probability ~1e-4 per check on fresh seeds, and a
 * rule off by a few percent of probability fails with certainty at these draw counts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sampler.h"
#include "sched/speculate.h"
#include "tests/common/check.h"


/* chi-square critical value at p = 1e-4 for df degrees of freedom (Wilson-Hilferty, accurate to
 * a few percent for df >= 1; z = 3.719 for 1e-4 upper tail) */
static double chi2_crit(int df) {
    double z = 3.719, a = 2.0 / (9.0 * df);
    double x = 1 - a + z * sqrt(a);
    return df * x * x * x;
}

static void test_parse(void) {
    char err[512];
    int k = 0, n = 0;
    CHECK(tp_speculate_parse("ngram:4", &k, &n, err, sizeof err) == 0 && k == 4 && n == 3, "ngram:4 -> %d %d", k, n);
    CHECK(tp_speculate_parse("ngram:8:2", &k, &n, err, sizeof err) == 0 && k == 8 && n == 2, "ngram:8:2 -> %d %d", k, n);
    CHECK(tp_speculate_parse("ngram:64:16", &k, &n, err, sizeof err) == 0 && k == 64 && n == 16, "ngram:64:16");
    const char *bad[] = {"", "ngram", "ngram:", "ngram:0", "ngram:-1", "ngram:65", "ngram:4:0", "ngram:4:17",
                         "ngram:4:", "ngram:4:3:2", "ngram:x", "ngram:4x", "draft:4", "NGRAM:4", "ngram: 4",
                         "ngram:+4", "ngram:99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        int rc = tp_speculate_parse(bad[i], &k, &n, err, sizeof err);
        CHECK(rc == -1 && strstr(err, "--speculate") && strstr(err, "ngram:K"), "\"%s\" accepted or unclear: %s", bad[i],
              err);
    }
}

static void test_propose(void) {
    int32_t d[16];
    /* 1 2 3 4 5 1 2 3 -> last 3-gram "1 2 3" at 0: drafts 4 5 1 2 3 (capped) */
    int32_t h1[] = {1, 2, 3, 4, 5, 1, 2, 3};
    int n = tp_speculate_propose(h1, 8, 4, 3, d);
    CHECK(n == 4 && d[0] == 4 && d[1] == 5 && d[2] == 1 && d[3] == 2, "h1: %d drafts", n);
    n = tp_speculate_propose(h1, 8, 10, 3, d);
    CHECK(n == 10 && d[4] == 3 && d[5] == 4 && d[9] == 3, "h1 k=10: %d drafts (the copy goes on periodically)", n);
    /* the most recent occurrence wins: 7 8 a ... 7 8 b ... 7 8 -> b */
    int32_t h2[] = {7, 8, 10, 0, 7, 8, 11, 0, 7, 8};
    n = tp_speculate_propose(h2, 10, 2, 2, d);
    CHECK(n == 2 && d[0] == 11 && d[1] == 0, "h2: most recent: %d %d", d[0], d[1]);
    /* fallback: 3-gram "9 5 6" absent, 2-gram "5 6" absent, 1-gram "6" at 1 -> 2 3 */
    int32_t h3[] = {1, 6, 2, 3, 9, 5, 6};
    n = tp_speculate_propose(h3, 7, 2, 3, d);
    CHECK(n == 2 && d[0] == 2 && d[1] == 3, "h3: fallback to 1-gram: n=%d", n);
    /* nothing repeats: no drafts */
    int32_t h4[] = {1, 2, 3, 4, 5};
    CHECK(tp_speculate_propose(h4, 5, 4, 3, d) == 0, "h4: drafts from a sequence that never repeats");
    /* a run of one token: the pattern overlaps its occurrence; the run goes on */
    int32_t h5[] = {4, 4, 4, 4};
    n = tp_speculate_propose(h5, 4, 8, 3, d);
    CHECK(n == 8 && d[0] == 4 && d[7] == 4, "h5: n=%d", n);
    /* occurrences at the very first position of the context (i = 0), and only there: a 1-gram
     * (the last token is the first one), and a 3-gram whose shorter suffix occurs later with a
     * different continuation (so a search that skips position 0 drafts other tokens) */
    int32_t h6[] = {5, 9, 8, 5};
    n = tp_speculate_propose(h6, 4, 3, 3, d);
    CHECK(n == 3 && d[0] == 9 && d[1] == 8 && d[2] == 5, "h6: 1-gram at position 0: n=%d d=%d %d %d", n, d[0], d[1],
          d[2]);
    int32_t h7[] = {1, 2, 3, 7, 2, 3, 8, 1, 2, 3};
    n = tp_speculate_propose(h7, 10, 4, 3, d);
    CHECK(n == 4 && d[0] == 7 && d[1] == 2 && d[2] == 3 && d[3] == 8, "h7: 3-gram at position 0: n=%d d=%d %d %d %d",
          n, d[0], d[1], d[2], d[3]);
    int32_t h8[] = {6, 6}; /* the shortest context that can draft: 2 tokens, the match at 0 */
    n = tp_speculate_propose(h8, 2, 2, 3, d);
    CHECK(n == 2 && d[0] == 6 && d[1] == 6, "h8: len 2: n=%d", n);
    CHECK(tp_speculate_propose(h1, 8, 0, 3, d) == 0, "k=0 drafts");
    CHECK(tp_speculate_propose(h1, 1, 4, 3, d) == 0, "len 1 drafts");
}

/* The processed distribution, computed from its definition in double: penalty (HF: divide a
 * positive logit, multiply a negative one, once per distinct id), /T, top-k (ties by lower id),
 * top-p (keep best-first while the mass before is < top_p), renormalize. */
static void reference(const tp_sampling *s, const float *l, int V, const int32_t *hist, int nh, double *p) {
    double x[64];
    int ord[64];
    for (int v = 0; v < V; v++) x[v] = l[v];
    for (int v = 0; v < V; v++) {
        int seen = 0;
        for (int i = 0; i < nh; i++) seen |= hist[i] == v;
        if (seen && s->repetition_penalty != 1.0f) x[v] = x[v] < 0 ? x[v] * s->repetition_penalty : x[v] / s->repetition_penalty;
    }
    for (int v = 0; v < V; v++) ord[v] = v;
    for (int i = 0; i < V; i++) /* best first, lower id on ties */
        for (int j = i + 1; j < V; j++)
            if (x[ord[j]] > x[ord[i]] || (x[ord[j]] == x[ord[i]] && ord[j] < ord[i])) { int t = ord[i]; ord[i] = ord[j]; ord[j] = t; }
    int keep = s->top_k > 0 && s->top_k < V ? s->top_k : V;
    double w[64], tot = 0;
    for (int i = 0; i < keep; i++) tot += (w[i] = exp((x[ord[i]] - x[ord[0]]) / s->temperature));
    if (s->top_p < 1) {
        double before = 0;
        int k = 0;
        while (k < keep && before / tot < s->top_p) before += w[k++];
        keep = k;
        tot = before;
    }
    for (int v = 0; v < V; v++) p[v] = 0;
    for (int i = 0; i < keep; i++) p[ord[i]] = w[i] / tot;
}

/* Chi-square of counts against probabilities p (support: p > 0); tokens outside counted in
 * *outside. Returns the statistic; *df the degrees of freedom. */
static double chi2(const long *cnt, const double *p, int V, long N, int *df, long *outside) {
    double c2 = 0;
    int k = 0;
    *outside = 0;
    for (int v = 0; v < V; v++) {
        if (p[v] <= 0) { *outside += cnt[v]; continue; }
        double e = p[v] * N;
        c2 += (cnt[v] - e) * (cnt[v] - e) / e;
        k++;
    }
    *df = k - 1;
    return c2;
}

typedef struct {
    const char *name;
    tp_sampling s;
} setup;

static void test_rule(void) {
    enum { V = 12, N = 200000 };
    const float logits[V] = {2.0f, 1.5f, 1.4f, 0.9f, 0.3f, 0.3f, -0.2f, -0.8f, -1.5f, -3.0f, 0.0f, 1.0f};
    const int32_t hist[] = {1, 11, 4, 1};
    setup setups[] = {
        {"T=1", {1.0f, 0, 1.0f, 1.0f, 0}},
        {"T=0.7 top-k 5", {0.7f, 5, 1.0f, 1.0f, 0}},
        {"T=1 top-p 0.8", {1.0f, 0, 0.8f, 1.0f, 0}},
        {"T=1.3 top-k 8 top-p 0.9 penalty 1.4", {1.3f, 8, 0.9f, 1.4f, 3}},
    };
    void *work = malloc(tp_sample_full_work_bytes(V));
    for (size_t si = 0; si < sizeof setups / sizeof *setups; si++) {
        const tp_sampling *s = &setups[si].s;
        int nh = s->repetition_penalty != 1.0f ? 4 : 0;
        double p[V];
        reference(s, logits, V, hist, nh, p);
        for (int draft = 0; draft < V; draft++) {
            for (int mode = 0; mode < 2; mode++) {
                /* candidate mode only where the sampler would use it: no penalty, top-k given */
                if (mode == 1 && (nh || s->top_k == 0)) continue;
                tp_rng rng;
                tp_rng_seed(&rng, 1234 + draft, si * 2 + mode);
                long cnt[V] = {0}, acc = 0, bad = 0;
                tp_cand c[V];
                double lse = 0;
                if (mode == 1) {
                    for (int v = 0; v < V; v++) c[v] = (tp_cand){v, logits[v]};
                    for (int i = 0; i < V; i++) /* sorted best-first, as the step gathers them */
                        for (int j = i + 1; j < V; j++)
                            if (tp_cand_before(&c[j], &c[i])) { tp_cand t = c[i]; c[i] = c[j]; c[j] = t; }
                    lse = tp_logsumexp(logits, V);
                }
                for (long it = 0; it < N; it++) {
                    tp_sample out;
                    int rc = mode == 0 ? tp_sample_verify_full(s, &rng, logits, V, hist, nh, work, draft, &out)
                                       : tp_sample_verify_candidates(s, &rng, c, s->top_k, (float)lse, draft, &out);
                    if (rc < 0 || out.id < 0 || out.id >= V) { bad++; continue; }
                    if (rc == 1) { acc++; bad += out.id != draft; }
                    else bad += out.id == draft;
                    cnt[out.id]++;
                }
                int df;
                long outside;
                double c2 = chi2(cnt, p, V, N, &df, &outside);
                const char *m = mode ? "candidates" : "full";
                CHECK(bad == 0, "%s %s draft %d: %ld inconsistent results", setups[si].name, m, draft, bad);
                CHECK(outside == 0, "%s %s draft %d: %ld tokens outside the support", setups[si].name, m, draft, outside);
                CHECK(c2 < chi2_crit(df), "%s %s draft %d: chi2 %.1f >= %.1f (df %d)", setups[si].name, m, draft, c2,
                      chi2_crit(df), df);
                double ra = (double)acc / N, sd = sqrt(p[draft] * (1 - p[draft]) / N);
                CHECK(fabs(ra - p[draft]) <= 5 * sd + 1e-12, "%s %s draft %d: accepted %.5f, p(draft) %.5f",
                      setups[si].name, m, draft, ra, p[draft]);
            }
        }
    }
    /* greedy: the argmax, accepted iff drafted, no draw made */
    tp_sampling g = {0, 0, 1, 1, 0};
    for (int draft = 0; draft < V; draft++) {
        tp_rng rng, before;
        tp_rng_seed(&rng, 9, 9);
        before = rng;
        tp_sample out;
        int rc = tp_sample_verify_full(&g, &rng, logits, V, NULL, 0, work, draft, &out);
        CHECK(out.id == 0 && rc == (draft == 0), "greedy full draft %d: id %d rc %d", draft, out.id, rc);
        CHECK(memcmp(&rng, &before, sizeof rng) == 0, "greedy drew from the stream");
        tp_cand c[2] = {{0, 2.0f}, {11, 1.0f}};
        rc = tp_sample_verify_candidates(&g, &rng, c, 2, tp_logsumexp(logits, V), draft, &out);
        CHECK(out.id == 0 && rc == (draft == 0), "greedy candidates draft %d: id %d rc %d", draft, out.id, rc);
        CHECK(fabsf(out.logprob - (2.0f - tp_logsumexp(logits, V))) < 1e-6f, "greedy logprob %g", out.logprob);
    }
    /* not a distribution: -1, as the samplers */
    float nanl[V];
    memcpy(nanl, logits, sizeof nanl);
    nanl[3] = NAN;
    tp_rng rng;
    tp_rng_seed(&rng, 1, 1);
    tp_sample out;
    CHECK(tp_sample_verify_full(&setups[0].s, &rng, nanl, V, NULL, 0, work, 3, &out) == -1, "NaN logits verified");
    free(work);
}

/* Toy model over V tokens: logits of the next token = table row of the previous token. */
enum { TV = 5, CHAIN = 3 };
static const float TOY[TV][TV] = {{1.0f, 0.2f, -0.5f, 0.7f, 0.0f},
                                  {0.1f, 1.5f, 0.3f, -1.0f, 0.4f},
                                  {-0.3f, 0.2f, 0.9f, 0.9f, 0.1f},
                                  {0.6f, 0.6f, 0.6f, -2.0f, 1.2f},
                                  {0.0f, -0.4f, 0.8f, 0.3f, 0.5f}};

/* What the scheduler does with one row per fed position: row j verified against draft j while
 * drafts 0..j-1 were accepted; the first rejection's replacement ends the step, or after all
 * drafts the last row is sampled plainly. Fills out[CHAIN] (steps run until CHAIN tokens). */
static void spec_chain(const tp_sampling *s, tp_rng *rng, int first, const int32_t *drafts, int D, int32_t *out,
                       void *work) {
    int n = 0, prev = first;
    while (n < CHAIN) {
        for (int j = 0; j <= D && n < CHAIN; j++) {
            tp_sample smp;
            int rc = j < D ? tp_sample_verify_full(s, rng, TOY[prev], TV, NULL, 0, work, drafts[j], &smp)
                           : tp_sample_full(s, rng, TOY[prev], TV, NULL, 0, work, &smp);
            out[n++] = prev = smp.id;
            if (j < D && rc != 1) break;
        }
    }
}

static void test_chain(void) {
    enum { N = 150000, CELLS = TV * TV * TV };
    tp_sampling s = {0.9f, 0, 0.95f, 1.0f, 0};
    void *work = malloc(tp_sample_full_work_bytes(TV));
    double p[TV][TV];
    for (int a = 0; a < TV; a++) reference(&s, TOY[a], TV, NULL, 0, p[a]);
    int first = 2;
    double law[CELLS];
    for (int i = 0; i < CELLS; i++) {
        int x0 = i / (TV * TV), x1 = i / TV % TV, x2 = i % TV;
        law[i] = p[first][x0] * p[x0][x1] * p[x1][x2];
    }
    const int32_t drafts_sets[][2] = {{3, 4}, {2, 2}, {0, 1}};
    long plain[CELLS] = {0};
    tp_rng rng;
    tp_rng_seed(&rng, 77, 0);
    for (long it = 0; it < N; it++) { /* plain sampling, token by token */
        int32_t o[CHAIN];
        spec_chain(&s, &rng, first, NULL, 0, o, work);
        plain[o[0] * TV * TV + o[1] * TV + o[2]]++;
    }
    int df;
    long outside;
    double c2 = chi2(plain, law, CELLS, N, &df, &outside);
    CHECK(c2 < chi2_crit(df) && outside == 0, "plain chain: chi2 %.1f >= %.1f (df %d), %ld outside", c2, chi2_crit(df),
          df, outside);
    for (size_t ds = 0; ds < sizeof drafts_sets / sizeof *drafts_sets; ds++) {
        long cnt[CELLS] = {0};
        tp_rng_seed(&rng, 78 + ds, 1);
        for (long it = 0; it < N; it++) {
            int32_t o[CHAIN];
            spec_chain(&s, &rng, first, drafts_sets[ds], 2, o, work);
            cnt[o[0] * TV * TV + o[1] * TV + o[2]]++;
        }
        c2 = chi2(cnt, law, CELLS, N, &df, &outside);
        CHECK(c2 < chi2_crit(df) && outside == 0, "drafts {%d,%d}: chi2 %.1f >= %.1f (df %d), %ld outside",
              drafts_sets[ds][0], drafts_sets[ds][1], c2, chi2_crit(df), df, outside);
        /* two-sample homogeneity against plain sampling's histogram */
        double h = 0;
        int k = 0;
        for (int i = 0; i < CELLS; i++) {
            if (cnt[i] + plain[i] == 0) continue;
            double d = (double)cnt[i] - plain[i];
            h += d * d / (cnt[i] + plain[i]);
            k++;
        }
        CHECK(h < chi2_crit(k - 1), "drafts {%d,%d} vs plain: two-sample chi2 %.1f >= %.1f", drafts_sets[ds][0],
              drafts_sets[ds][1], h, chi2_crit(k - 1));
    }
    free(work);
}

int main(void) {
    test_parse();
    test_propose();
    test_rule();
    test_chain();
    printf("speculate: %d checks, %d failed\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
