"""A huge text prompt disturbs nobody (issue 41 item 1), through `tpgen serve` on the CodeGen2.5-shaped
checkpoint (n_positions 256), as a user sees it. Stdlib only (tests/common/serve_harness.py).

    huge_prompt.py TPGEN MODEL

  - a completion whose prompt is 8 MB of letters: a 400 naming the prompt and the byte limit, at once
    (before, it was encoded first, seconds under the tokenizer's one lock);
  - the same as a FIM prefix (with `suffix`) and as the second prompt of a list;
  - a prompt just over the byte limit (the context's tokens x the longest token's bytes, less
    max_tokens) is refused the same way, one at the limit is encoded and refused by its tokens;
  - while two /tokenize of 8 MB of letters are being encoded (no context bound there: it counts
    tokens), and two 8 MB completions come in, the median latency of a normal completion and of a
    normal /tokenize stays within 2x of the idle medians measured just before (plus 50 ms for a loaded
    2-core machine's scheduling); before, each waited for the long encodes (seconds).
"""
import os
import re
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import serve_harness as sh  # noqa: E402

tpgen, model = sys.argv[1], sys.argv[2]
BIG = 8 << 20
SLACK = 0.05


def normal(srv):
    """-> (completion seconds, tokenize seconds) of one small request each"""
    t0 = time.monotonic()
    st, js, raw = srv.complete({"prompt": "def f(x):", "max_tokens": 1, "temperature": 0})
    t1 = time.monotonic()
    sh.check(st == 200, "a normal completion: 200 (%s %s)" % (st, raw[:200]))
    st2, raw2, _ = srv.request("POST", "/tokenize", {"prompt": "def f(x):"})
    t2 = time.monotonic()
    sh.check(st2 == 200, "a normal /tokenize: 200 (%s %s)" % (st2, raw2[:200]))
    return t1 - t0, t2 - t1


srv = sh.Server(tpgen, ["--model", model, "--backend", "cpu", "--threads", "1", "--max-body-bytes", str(BIG + 4096)])
try:
    # the byte limit: the context (256) less max_tokens (1), times the longest token's bytes (the 400 says
    # both; a prompt of exactly that many bytes is encoded, one byte more is not)
    t0 = time.monotonic()
    st, js, raw = srv.complete({"prompt": "a" * BIG, "max_tokens": 1})
    secs = time.monotonic() - t0
    err = (js or {}).get("error", {})
    sh.check_ok(st == 400 and err.get("param") == "prompt" and "can never fit" in err.get("message", ""),
                "8 MB prompt: 400 on prompt with the byte limit (%s %s)" % (st, raw[:300]))
    msg = err.get("message", "")
    m = re.search(r"at most (\d+) bytes\).* more than (\d+) bytes can never fit", msg)
    sh.check_ok(m is not None and int(m.group(2)) == 255 * int(m.group(1)),
                "the limit is (256 - max_tokens 1) x the longest token's bytes: %s" % msg)
    sh.check_ok(secs < 5, "8 MB prompt refused in %.2f s (the upload included)" % secs)
    if m:
        limit = int(m.group(2))
        st, js, raw = srv.complete({"prompt": "a" * (limit + 1), "max_tokens": 1})
        sh.check_ok(st == 400 and "can never fit" in raw, "a prompt of limit + 1 bytes: refused by its bytes (%s %s)"
                    % (st, raw[:200]))
        st, js, raw = srv.complete({"prompt": "a" * limit, "max_tokens": 1})
        sh.check_ok(st == 400 and "can never fit" not in raw and "maximum context length" in raw,
                    "a prompt of exactly limit bytes: encoded, then refused by its tokens (%s %s)" % (st, raw[:200]))

    # the same bound for a FIM prefix (with the suffix's and the format's ids) and for any prompt of a list
    st, js, raw = srv.complete({"prompt": "a" * BIG, "suffix": "y", "max_tokens": 1})
    sh.check_ok(st == 400 and "can never fit" in raw and "the suffix with the format's tokens" in raw,
                "8 MB prefix with a suffix: refused by its bytes (%s %s)" % (st, raw[:300]))
    st, js, raw = srv.complete({"prompt": ["def f(x):", "a" * BIG], "max_tokens": 1})
    sh.check_ok(st == 400 and "prompt 1 is %d bytes" % BIG in raw, "8 MB as the second prompt of two: refused "
                "naming prompt 1 (%s %s)" % (st, raw[:300]))
    for _ in range(2):
        normal(srv)  # warm
    idle = [normal(srv) for _ in range(7)]
    idle_c = statistics.median(x[0] for x in idle)
    idle_t = statistics.median(x[1] for x in idle)

    done = []

    def big_tokenize():
        st, raw, _ = srv.request("POST", "/tokenize", {"prompt": "b" * BIG}, timeout=300)
        done.append(("tokenize", st, time.monotonic()))

    def big_complete():
        st, js, raw = srv.complete({"prompt": "c" * BIG, "max_tokens": 1}, timeout=300)
        done.append(("complete", st, time.monotonic()))

    threads = [threading.Thread(target=f) for f in (big_tokenize, big_tokenize, big_complete, big_complete)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # the bodies uploaded, the two encodes under way
    busy = []
    for _ in range(7):
        if sum(1 for d in done if d[0] == "tokenize") > 0:
            break
        busy.append(normal(srv))
    in_flight = sum(1 for d in done if d[0] == "tokenize") == 0
    for t in threads:
        t.join()
    sh.check(all(d[1] == 200 for d in done if d[0] == "tokenize"), "the two 8 MB /tokenize: 200 (%s)" % (done,))
    sh.check(all(d[1] == 400 for d in done if d[0] == "complete"), "the two 8 MB completions: 400 (%s)" % (done,))
    sh.check(len(busy) >= 3 and in_flight, "%d normal requests measured while both 8 MB encodes ran (want >= 3)"
             % len(busy))
    if busy:
        busy_c = statistics.median(x[0] for x in busy)
        busy_t = statistics.median(x[1] for x in busy)
        sh.check_ok(busy_c <= 2 * idle_c + SLACK, "completion while two 8 MB prompts are in flight: median %.3f s, "
                    "idle %.3f s (limit 2x + %.2f)" % (busy_c, idle_c, SLACK))
        sh.check_ok(busy_t <= 2 * idle_t + SLACK, "/tokenize while two 8 MB prompts are in flight: median %.3f s, "
                    "idle %.3f s (limit 2x + %.2f)" % (busy_t, idle_t, SLACK))
finally:
    sh.check(srv.stop().rc == 0, "the server exits 0")
sh.exit_with_checks()
