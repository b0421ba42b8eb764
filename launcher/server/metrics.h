/* Prometheus metrics of the server: counters and gauges, and histograms of request latencies. */
#ifndef TPGEN_SERVER_METRICS_H
#define TPGEN_SERVER_METRICS_H

#include "jbuf.h"

#define SRV_HIST_BUCKETS 16
typedef struct {
    double sum;
    long count;
    long buckets[SRV_HIST_BUCKETS]; /* counts per upper bound, not cumulative */
} srv_hist;

#define SRV_STATUS_SLOTS 12
typedef struct {
    int status[SRV_STATUS_SLOTS];   /* HTTP statuses seen, in first-seen order */
    long status_count[SRV_STATUS_SLOTS];
    long prompt_tokens, generation_tokens;
    long cancelled;                 /* requests ended early: client gone, or the drain timed out */
    long timed_out;                 /* requests ended at their time budget (finish_reason "timeout") */
    long spec_drafted, spec_accepted; /* --speculate: draft tokens fed, and those accepted */
    long prefix_query_tokens, prefix_hit_tokens; /* prompt tokens looked up in the prefix cache, found */
    long preemptions;               /* sequences preempted for KV blocks (they resume) */
    int running, waiting, kv_total, kv_free, kv_cached; /* KV blocks: all, free, cached (evictable) */
    long detok_held;                /* bytes the /detokenize requests in flight hold of their budget */
    srv_hist ttft, tpot, e2e;
} srv_metrics;

void srv_metrics_status(srv_metrics *m, int status);
void srv_hist_add(srv_hist *h, double seconds);
void srv_metrics_render(const srv_metrics *m, jbuf *b);

#endif
