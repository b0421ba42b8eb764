#include "generate.h"

#include <stdlib.h>
#include <string.h>

#include "util/log.h"

tp_sched *tp_generate_start(tp_model *m, tp_request *reqs, int n) {
    tp_sched *s = tp_sched_new(m);
    for (int i = 0; i < n; i++)
        if (tp_sched_submit(s, &reqs[i]))
            tp_die("internal: request %d needs %d KV blocks, the cache has %d", i, tp_request_blocks(m, &reqs[i]),
                   m->kv.n_blocks);
    return s;
}

long tp_generate_end(tp_sched *s) {
    /* every request is done: every KV block is back, free or cached (speculation's rejected
     * drafts and preempted sequences included) */
    int back = tp_sched_kv_free(s) + tp_sched_kv_cached(s);
    if (back != tp_sched_kv_total(s))
        tp_die("internal: %d of %d KV blocks not given back after the last request", tp_sched_kv_total(s) - back,
               tp_sched_kv_total(s));
    long steps = tp_sched_steps(s);
    tp_sched_free(s);
    return steps;
}

long tp_generate(tp_model *m, tp_request *reqs, int n) {
    tp_sched *s = tp_generate_start(m, reqs, n);
    const tp_sched_event *ev;
    do tp_sched_events(s, &ev); /* unread: the results are in the requests */
    while (tp_sched_step(s));
    return tp_generate_end(s);
}

int tp_score(tp_model *m, const int32_t *ids, int n, int k, float *logprobs, int32_t *top_ids, float *top_lps) {
    tp_request_params p = tp_request_params_default();
    p.max_new_tokens = 0; /* scoring only */
    p.sampling.logprobs = k;
    p.score_prompt = 1;
    int32_t *prompt = tp_malloc((n > 0 ? n : 1) * sizeof(int32_t));
    memcpy(prompt, ids, n * sizeof(int32_t));
    tp_request r;
    tp_request_init(&r, 0, prompt, n, &p);
    tp_generate(m, &r, 1);
    memcpy(logprobs, r.prompt_lps, n * sizeof(float));
    memcpy(top_ids, r.prompt_top_ids, (size_t)n * k * sizeof(int32_t));
    memcpy(top_lps, r.prompt_top_lps, (size_t)n * k * sizeof(float));
    int bad = r.score_bad;
    tp_request_free(&r);
    return bad;
}
