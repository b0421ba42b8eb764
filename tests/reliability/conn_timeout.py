#!/usr/bin/env python3
"""`tpgen serve --conn-timeout`: the client's silence counts, the server's own waits do not.

usage: conn_timeout.py TPGEN MODEL
One server (one rank, --conn-timeout 1, --max-batch 1 so that requests queue):
  1. 32 requests at once (n=16, 120 tokens each; half streamed), so most wait in the queue for
     longer than the timeout: every one answered in full (the last after more than 2 s, else
     the check proves nothing and fails);
  2. a connection that sends half a request line and nothing more is closed within 1 + 4 s.
(A client that stops reading a stream is dropped by the same timer once the kernel's socket
buffers are full; on loopback they hold a whole tiny-model answer, so that is not tested here.)
Only 127.0.0.1, port 0.
"""
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import serve_harness as sh  # noqa: E402

TPGEN, MODEL = sys.argv[1:3]
check, FAILS = sh.check_ok, sh.FAILS


def main():
    srv = sh.Server(TPGEN, ["--model", MODEL, "--backend", "cpu", "--threads", "1", "--conn-timeout", "1",
                            "--max-batch", "1"])
    try:
        run(srv.port)
    finally:
        srv.kill()
    if FAILS:
        print("--- server stderr\n" + srv.stderr(20))
    return 1 if FAILS else 0


def run(port):
    body = {"prompt": [1, 2, 3], "max_tokens": 120, "n": 16, "ignore_eos": True, "temperature": 0}
    res = [None] * 32

    def req(i):
        t0 = time.time()
        try:
            if i % 2:
                st, events, done = sh.post_sse("127.0.0.1", port, "/v1/completions", dict(body, stream=True), 120)
                fins = [c["finish_reason"] for e in events for c in e["choices"] if c["finish_reason"]]
                full = done and fins == ["length"] * 16
            else:
                st, text, _ = sh.http_request("127.0.0.1", port, "POST", "/v1/completions", dict(body, stream=False),
                                              timeout=120)
                full = json.loads(text)["usage"]["completion_tokens"] == 1920
            res[i] = (st == 200 and full, time.time() - t0)
        except Exception as e:  # noqa: BLE001 (a failure of the server under test)
            res[i] = (False, repr(e))
    th = [threading.Thread(target=req, args=(i,)) for i in range(32)]
    for t in th:
        t.start()
    for t in th:
        t.join(150)
    good = [r for r in res if r and r[0]]
    slowest = max((r[1] for r in good), default=0)
    check(len(good) == 32, "32 queued requests (16 streamed) answered in full with --conn-timeout 1: %d; failed: %s"
          % (len(good), [r for r in res if not (r and r[0])][:4]))
    check(slowest > 2, "the last waited %.1f s, over twice the timeout" % slowest)

    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /v1/compl")
    closed, dt = sh.await_close(s)
    s.close()
    check(closed and 0.5 < dt < 5, "a silent connection is closed after the 1 s timeout (%s after %.1f s)"
          % ("closed" if closed else "still open", dt))


if __name__ == "__main__":
    sys.exit(main())
