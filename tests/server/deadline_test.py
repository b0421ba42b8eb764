"""Deadlines and priority in `tpgen serve` (docs/SERVING.md, "Deadlines and priority"), TP 1, on
models/codegen-tiny-py (a trained tiny model with its tokenizer: real text, and a few ms per token
on a CPU, so a budget of tens of tokens cuts a 480-token generation). The budgets are sized from a
timed warm-up request, so the checks hold on a fast or a loaded machine.

timeout:
  - a request's "timeout" ends a long generation with finish_reason "timeout" and the text so far
    (non-streaming: 200, 0 < tokens < max_tokens, the text the tokens decode to; streaming: the last
    chunk carries "timeout", then [DONE]); every KV block is back (free == total at idle);
  - a request that waits (--max-batch 1, a long one running) past its budget ends without running:
    200, empty text, no tokens, streamed or not, while the long one still runs;
  - tpgen_requests_timed_out_total counts them;
  - bad budgets are 400s naming "timeout": negative, zero, inf (1e999), a string, "NaN", a bool;
  - --request-timeout D is the default (a request without "timeout" ends "timeout"), and a larger
    "timeout" is a 400; a smaller one is kept.
priority:
  - --scheduling-policy priority: with one batch slot, a long priority-10 request running and five
    more queued with priorities 5, 1, 3, 1, -2, they finish in (priority, arrival) order after the
    long one (which is not preempted);
  - bad priorities are 400s naming "priority" (a float, a string, beyond 32 bits);
  - fcfs (the default) refuses a non-zero priority with a 400 and takes priority 0.
preempt (issue 34 item 5: priority under preemption):
  - --scheduling-policy priority --kv-cache-tokens 256: five priority-10 requests of 200 tokens
    outgrow the pool and preempt one another; a priority -10 request of as many tokens, sent
    once they have (each of them ahead of it by tens of tokens), finishes first: the preempted
    ones wait behind it, and it is never the victim (the least urgent is). Before the fix it was
    the victim, as the most recently admitted, and finished last.

    deadline_test.py TPGEN MODEL_DIR timeout|priority|preempt
"""
import contextlib
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import serve_harness as sh  # noqa: E402

tpgen, model, part = sys.argv[1:4]
LONG = 480  # tokens of the long generation (n_positions 512)
PROMPT = "def fibonacci(n):"
BASE = ["--model", model, "--backend", "cpu", "--threads", "1", "--max-batch", "1"]


def long_body(**kw):
    return dict({"prompt": PROMPT, "max_tokens": LONG, "ignore_eos": True, "temperature": 0,
                 "return_token_ids": True}, **kw)


def seconds_per_token(srv):
    """A timed 32-token request (prefill and HTTP included: an overestimate per token)."""
    t0 = time.time()
    st, js, text = srv.complete(long_body(max_tokens=32))
    sh.check(st == 200 and js["choices"][0]["finish_reason"] == "length", "warm-up: %s %s" % (st, text[:200]))
    return (time.time() - t0) / 32


def check_cut(what, st, js, text, budget):
    """A 200 whose one choice ended at its budget with some but not all of its tokens."""
    if not sh.check(st == 200 and js, "%s: status %s %s" % (what, st, text[:300])):
        return
    c = js["choices"][0]
    n = len(c["token_ids"])
    sh.check_ok(c["finish_reason"] == "timeout" and 0 < n < LONG and c["text"] and
                js["usage"]["completion_tokens"] == n,
                "%s: budget %.2f s ends it with finish_reason timeout (got %s) and its partial text (%d of %d "
                "tokens, %d chars)" % (what, budget, c["finish_reason"], n, LONG, len(c["text"])))


def check_stream_cut(what, st, events, done, budget, want_tokens):
    chunks = [ch for e in events for ch in e.get("choices", [])]
    text = "".join(ch.get("text", "") for ch in chunks)
    ids = [i for ch in chunks for i in ch.get("token_ids", [])]
    last = chunks[-1].get("finish_reason") if chunks else None
    early = [ch.get("finish_reason") for ch in chunks[:-1] if ch.get("finish_reason")]
    sh.check_ok(st == 200 and done and last == "timeout" and not early,
                "%s: budget %.2f s: the last chunk says timeout (got %r, earlier %r), then [DONE] (%s)" %
                (what, budget, last, early, done))
    if want_tokens:
        sh.check_ok(0 < len(ids) < LONG and text, "%s: partial text streamed (%d of %d tokens, %d chars)" %
                    (what, len(ids), LONG, len(text)))
    else:
        sh.check_ok(not ids and text == "", "%s: no tokens, empty text (%d tokens, %r)" % (what, len(ids), text[:40]))


def check_idle(srv, what):
    held, m = srv.wait_idle(timeout=30)
    sh.check_ok(held, "%s: at idle every KV block is back (free %s of %s, running %s, waiting %s)" %
                (what, m.get("tpgen_kv_blocks_free"), m.get("tpgen_kv_blocks_total"),
                 m.get("tpgen_requests_running"), m.get("tpgen_requests_waiting")))


def check_400(srv, what, field, param):
    """field: the JSON of one more member ('"timeout": -1'), sent as written."""
    raw = '{"prompt": %s, "max_tokens": 4, %s}' % (json.dumps(PROMPT), field)
    st, text, _ = srv.request("POST", "/v1/completions", raw=raw)
    try:
        js = json.loads(text)
    except ValueError:
        js = None
    got = js["error"].get("param") if js and "error" in js else None
    sh.check_ok(st == 400 and got == param, "%s: 400 naming %r (got %s, param %r: %s)" % (what, param, st, got,
                                                                                       text[:160]))


@contextlib.contextmanager
def server(flags):
    """A server that must stop cleanly (SIGTERM: drained, every process exits 0)."""
    srv = sh.Server(tpgen, flags)
    try:
        yield srv
    finally:
        stopped = srv.stop()
        sh.check(stopped.clean, "the server stops cleanly: %r" % (stopped,))


def in_thread(fn):
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", fn()))
    t.start()
    return t, out


def part_timeout():
    with server(BASE) as srv:
        spt = seconds_per_token(srv)
        budget = max(0.25, 60 * spt)  # ~60 tokens of the 480
        print("sizing: %.2f ms per token -> budget %.2f s" % (spt * 1e3, budget), flush=True)
        st, js, text = srv.complete(long_body(timeout=budget))
        check_cut("non-streaming", st, js, text, budget)
        st, events, done = srv.stream(long_body(timeout=budget))
        check_stream_cut("streaming", st, events, done, budget, True)
        check_idle(srv, "after the cut requests")

        # one waits behind a long request (one batch slot) past its budget: it never runs
        lt, lo = in_thread(lambda: srv.complete(long_body()))
        held, _ = srv.wait_for_metric("tpgen_requests_running", lambda v: v == 1, timeout=30)
        sh.check(held, "the long request runs")
        wait_budget = max(0.3, 20 * spt)
        st, js, text = srv.complete(long_body(timeout=wait_budget))
        c = js["choices"][0] if st == 200 and js else {}
        sh.check_ok(st == 200 and c.get("finish_reason") == "timeout" and c.get("text") == "" and
                    c.get("token_ids") == [] and js["usage"]["completion_tokens"] == 0,
                    "waiting past its budget (%.2f s): 200, finish_reason timeout, no text, no tokens (got %s %r %r)" %
                    (wait_budget, st, c.get("finish_reason"), c.get("text", text[:100])))
        st, events, done = srv.stream(long_body(timeout=wait_budget))
        check_stream_cut("waiting past its budget, streamed", st, events, done, wait_budget, False)
        sh.check_ok(lt.is_alive(), "the waiting ones ended while the long request still ran")
        lt.join(120)
        st, js, text = lo.get("r", (None, None, ""))
        sh.check_ok(st == 200 and js["choices"][0]["finish_reason"] == "length" and
                    len(js["choices"][0]["token_ids"]) == LONG,
                    "the long request (no budget) ends at its length: %s %s" % (st, text[-120:]))
        check_idle(srv, "after the waiting ones")
        m = srv.metrics()
        sh.check_ok(m.get("tpgen_requests_timed_out_total") == 4,
                    "tpgen_requests_timed_out_total counts the 4 (got %s)" % m.get("tpgen_requests_timed_out_total"))

        # raw JSON: 1e999 (inf once parsed) is no Python literal
        for what, value in (("negative", "-1"), ("zero", "0"), ("inf (1e999)", "1e999"), ("a string", '"5"'),
                            ("NaN as a string", '"NaN"'), ("a bool", "true"), ("a list", "[1]")):
            check_400(srv, "timeout %s" % what, '"timeout": %s' % value, "timeout")
        check_400(srv, "priority 1 under fcfs", '"priority": 1', "priority")
        st, js, text = srv.complete({"prompt": PROMPT, "max_tokens": 2, "priority": 0})
        sh.check_ok(st == 200, "priority 0 under fcfs is taken (%s)" % st)

    default = round(max(0.25, 60 * spt), 3)
    with server(BASE + ["--request-timeout", str(default)]) as srv:
        st, js, text = srv.complete(long_body())
        check_cut("--request-timeout %g as the default" % default, st, js, text, default)
        check_400(srv, "timeout over --request-timeout", '"timeout": %r' % (default * 2), "timeout")
        st, js, text = srv.complete(long_body(timeout=default / 2))
        check_cut("a timeout under --request-timeout", st, js, text, default / 2)
        check_idle(srv, "--request-timeout")


def up_to_3_tries(run, failed_setup):
    """run(attempt) again while it returns False: its setup failed (on a loaded machine), not the
    server; a wrong result fails at once. After 3 such tries, failed_setup is the failure."""
    for attempt in range(3):
        if run(attempt):
            return
    sh.check_ok(False, failed_setup + " (3 tries)")


def part_priority():
    # The order check needs all five queued while the long request holds the one slot; on a
    # loaded machine the long request may end first.
    up_to_3_tries(priority_order, "the five requests could not all be queued while the long one ran")


def priority_order(attempt):
    with server(BASE + ["--scheduling-policy", "priority"]) as srv:
        for what, value in (("a float", "1.5"), ("a string", '"1"'), ("beyond 32 bits", str(2 ** 31))):
            check_400(srv, "priority %s" % what, '"priority": %s' % value, "priority")
        order, lock = [], threading.Lock()

        def send(name, prio, max_tokens):
            st, js, text = srv.complete(long_body(max_tokens=max_tokens, priority=prio))
            with lock:
                order.append(name)
            sh.check(st == 200 and js["choices"][0]["finish_reason"] == "length",
                     "%s (priority %d): %s %s" % (name, prio, st, text[:200]))

        threads = [threading.Thread(target=send, args=("L", 10, LONG))]
        threads[0].start()
        held, _ = srv.wait_for_metric("tpgen_requests_running", lambda v: v == 1, timeout=30)
        sh.check(held, "the long priority-10 request runs")
        queued = (("A", 5), ("B", 1), ("C", 3), ("D", 1), ("E", -2))
        for k, (name, prio) in enumerate(queued):  # one at a time: the arrival order is theirs
            threads.append(threading.Thread(target=send, args=(name, prio, 8)))
            threads[-1].start()
            held, m = srv.wait_for_metric("tpgen_requests_waiting", lambda v: v == k + 1, timeout=30)
            with lock:
                early = list(order)
            if not held or early:
                print("attempt %d: %s not queued while the long request ran (waiting %s, finished %r): again"
                      % (attempt + 1, name, m.get("tpgen_requests_waiting"), early))
                for t in threads:
                    t.join(120)
                return False
        for t in threads:
            t.join(120)
        want = ["L", "E", "B", "D", "C", "A"]
        sh.check_ok(order == want, "finished in (priority, arrival) order after the running one: %r, want %r" %
                    (order, want))
        check_idle(srv, "priority")
        return True


def part_preempt():
    # The order check needs the urgent request sent while the five run; on a loaded machine one of
    # them may finish first.
    up_to_3_tries(preempt_order, "the urgent request could not be sent while the five ran")


def preempt_order(attempt):
    flags = ["--model", model, "--backend", "cpu", "--threads", "1", "--max-batch", "8", "--block-size", "16",
             "--kv-cache-tokens", "256", "--scheduling-policy", "priority"]
    with server(flags) as srv:
        order, lock = [], threading.Lock()

        def send(name, prio, max_tokens, k):
            body = long_body(max_tokens=max_tokens, priority=prio, prompt="%s # %d" % (PROMPT, k))
            st, js, text = srv.complete(body, timeout=240)
            with lock:
                order.append(name)
            sh.check(st == 200 and js["choices"][0]["finish_reason"] == "length",
                     "%s (priority %d): %s %s" % (name, prio, st, text[:200]))

        threads = [threading.Thread(target=send, args=("P%d" % k, 10, 200, k)) for k in range(5)]
        for t in threads:
            t.start()
        held, m = srv.wait_metrics(lambda m: m["tpgen_requests_running"] + m["tpgen_requests_waiting"] == 5 and
                                   m["tpgen_preemptions_total"] >= 1, timeout=30)
        with lock:
            early = list(order)
        if not held or early:
            print("attempt %d: the five were not all in flight after a preemption (finished %r): again"
                  % (attempt + 1, early))
            for t in threads:
                t.join(240)
            return False
        threads.append(threading.Thread(target=send, args=("U", -10, 200, 5)))
        threads[-1].start()
        for t in threads:
            t.join(240)
        _, m = srv.wait_metrics(lambda m: m.get("tpgen_preemptions_total", 0) > 0, timeout=10)
        sh.check_ok(m.get("tpgen_preemptions_total", 0) > 0, "the five preempted one another (%s preemptions)" %
                    m.get("tpgen_preemptions_total"))
        sh.check_ok(order and order[0] == "U", "the urgent request finished first: %r" % (order,))
        check_idle(srv, "preempt")
        return True


{"timeout": part_timeout, "priority": part_priority, "preempt": part_preempt}[part]()
sh.exit_with_checks()
