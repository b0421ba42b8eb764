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
    jb_printf(b, "# HELP tpgen_requests_cancelled_total Requests cancelled: the client went away, or the drain "
                 "timed out.\n# TYPE tpgen_requests_cancelled_total counter\ntpgen_requests_cancelled_total %ld\n",
              m->cancelled);
    jb_printf(b, "# HELP tpgen_requests_timed_out_total Requests ended at their time budget (--request-timeout, or "
                 "the request's timeout).\n# TYPE tpgen_requests_timed_out_total counter\n"
                 "tpgen_requests_timed_out_total %ld\n", m->timed_out);
    jb_printf(b, "# HELP tpgen_requests_running Sequences in the running batch.\n# TYPE tpgen_requests_running gauge\n"
                 "tpgen_requests_running %d\n", m->running);
    jb_printf(b, "# HELP tpgen_requests_waiting Sequences waiting for KV blocks or a batch slot.\n"
                 "# TYPE tpgen_requests_waiting gauge\ntpgen_requests_waiting %d\n", m->waiting);
    jb_printf(b, "# HELP tpgen_prompt_tokens_total Prompt tokens of admitted requests.\n"
                 "# TYPE tpgen_prompt_tokens_total counter\ntpgen_prompt_tokens_total %ld\n", m->prompt_tokens);
    jb_printf(b, "# HELP tpgen_generation_tokens_total Tokens generated.\n"
                 "# TYPE tpgen_generation_tokens_total counter\ntpgen_generation_tokens_total %ld\n",
              m->generation_tokens);
    jb_printf(b, "# HELP tpgen_spec_draft_tokens_total Draft tokens fed by --speculate.\n"
                 "# TYPE tpgen_spec_draft_tokens_total counter\ntpgen_spec_draft_tokens_total %ld\n", m->spec_drafted);
    jb_printf(b, "# HELP tpgen_spec_accepted_tokens_total Draft tokens the model accepted.\n"
                 "# TYPE tpgen_spec_accepted_tokens_total counter\ntpgen_spec_accepted_tokens_total %ld\n",
              m->spec_accepted);
    jb_printf(b, "# HELP tpgen_kv_blocks_total KV cache blocks.\n# TYPE tpgen_kv_blocks_total gauge\n"
                 "tpgen_kv_blocks_total %d\n", m->kv_total);
    jb_printf(b, "# HELP tpgen_kv_blocks_free Free KV cache blocks (neither used nor cached).\n"
                 "# TYPE tpgen_kv_blocks_free gauge\ntpgen_kv_blocks_free %d\n", m->kv_free);
    jb_printf(b, "# HELP tpgen_kv_blocks_cached Unused KV cache blocks kept for prefix-cache hits (evictable).\n"
                 "# TYPE tpgen_kv_blocks_cached gauge\ntpgen_kv_blocks_cached %d\n", m->kv_cached);
    jb_printf(b, "# HELP tpgen_prefix_cache_query_tokens_total Prompt tokens looked up in the prefix cache.\n"
                 "# TYPE tpgen_prefix_cache_query_tokens_total counter\ntpgen_prefix_cache_query_tokens_total %ld\n",
              m->prefix_query_tokens);
    jb_printf(b, "# HELP tpgen_prefix_cache_hit_tokens_total Prompt tokens served from the prefix cache.\n"
                 "# TYPE tpgen_prefix_cache_hit_tokens_total counter\ntpgen_prefix_cache_hit_tokens_total %ld\n",
              m->prefix_hit_tokens);
    jb_printf(b, "# HELP tpgen_preemptions_total Sequences preempted when the KV cache ran out (they resume).\n"
                 "# TYPE tpgen_preemptions_total counter\ntpgen_preemptions_total %ld\n", m->preemptions);
    hist(b, "tpgen_time_to_first_token_seconds", "From arrival to the first generated token.", &m->ttft);
    hist(b, "tpgen_time_per_output_token_seconds", "Mean time between output tokens of a request.", &m->tpot);
    hist(b, "tpgen_e2e_request_latency_seconds", "From arrival to the last token.", &m->e2e);
}
