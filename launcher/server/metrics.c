#include "metrics.h"

static const double BOUNDS[SRV_HIST_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                0.5,   1,      2.5,   5,    10,    30,   60,  120};

void srv_metrics_status(srv_metrics *m, int status) {
    for (int i = 0; i < SRV_STATUS_SLOTS; i++) {
        if (m->status[i] == status || m->status[i] == 0) {
            m->status[i] = status;
            m->status_count[i]++;
            return;
        }
    }
}

void srv_hist_add(srv_hist *h, double x) {
    h->sum += x;
    h->count++;
    for (int i = 0; i < SRV_HIST_BUCKETS; i++)
        if (x <= BOUNDS[i]) { h->buckets[i]++; return; }
}

/* one counter or gauge: its HELP and TYPE lines, then its value */
static void metric(jbuf *b, const char *name, const char *type, const char *help, long v) {
    jb_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %ld\n", name, help, name, type, name, v);
}

static void hist(jbuf *b, const char *name, const char *help, const srv_hist *h) {
    jb_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    long cum = 0;
    for (int i = 0; i < SRV_HIST_BUCKETS; i++) {
        cum += h->buckets[i];
        jb_printf(b, "%s_bucket{le=\"%g\"} %ld\n", name, BOUNDS[i], cum);
    }
    jb_printf(b, "%s_bucket{le=\"+Inf\"} %ld\n%s_sum %.6f\n%s_count %ld\n", name, h->count, name, h->sum, name,
              h->count);
}

void srv_metrics_render(const srv_metrics *m, jbuf *b) {
    jb_str(b, "# HELP tpgen_requests_total API requests answered, by HTTP status.\n"
              "# TYPE tpgen_requests_total counter\n");
    for (int i = 0; i < SRV_STATUS_SLOTS && m->status[i]; i++)
        jb_printf(b, "tpgen_requests_total{status=\"%d\"} %ld\n", m->status[i], m->status_count[i]);
    metric(b, "tpgen_requests_cancelled_total", "counter",
           "Requests cancelled: the client went away, or the drain timed out.", m->cancelled);
    metric(b, "tpgen_requests_timed_out_total", "counter",
           "Requests ended at their time budget (--request-timeout, or the request's timeout).", m->timed_out);
    metric(b, "tpgen_requests_running", "gauge", "Sequences in the running batch.", m->running);
    metric(b, "tpgen_requests_waiting", "gauge", "Sequences waiting for KV blocks or a batch slot.", m->waiting);
    metric(b, "tpgen_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.", m->prompt_tokens);
    metric(b, "tpgen_generation_tokens_total", "counter", "Tokens generated.", m->generation_tokens);
    metric(b, "tpgen_spec_draft_tokens_total", "counter", "Draft tokens fed by --speculate.", m->spec_drafted);
    metric(b, "tpgen_spec_accepted_tokens_total", "counter", "Draft tokens the model accepted.", m->spec_accepted);
    metric(b, "tpgen_kv_blocks_total", "gauge", "KV cache blocks.", m->kv_total);
    metric(b, "tpgen_kv_blocks_free", "gauge", "Free KV cache blocks (neither used nor cached).", m->kv_free);
    metric(b, "tpgen_kv_blocks_cached", "gauge",
           "Unused KV cache blocks kept for prefix-cache hits (evictable).", m->kv_cached);
    metric(b, "tpgen_prefix_cache_query_tokens_total", "counter",
           "Prompt tokens looked up in the prefix cache.", m->prefix_query_tokens);
    metric(b, "tpgen_prefix_cache_hit_tokens_total", "counter",
           "Prompt tokens served from the prefix cache.", m->prefix_hit_tokens);
    metric(b, "tpgen_preemptions_total", "counter",
           "Sequences preempted when the KV cache ran out (they resume).", m->preemptions);
    metric(b, "tpgen_detokenize_bytes_held", "gauge",
           "Bytes of the /detokenize memory budget (256 MiB) the requests in flight hold.", m->detok_held);
    hist(b, "tpgen_time_to_first_token_seconds", "From arrival to the first generated token.", &m->ttft);
    hist(b, "tpgen_time_per_output_token_seconds", "Mean time between output tokens of a request.", &m->tpot);
    hist(b, "tpgen_e2e_request_latency_seconds", "From arrival to the last token.", &m->e2e);
}
