#!/usr/bin/env python3
"""`tpgen serve`: a client that leaves before any byte of its answer is written is noticed between
engine steps, and its request is cancelled before its prefill ends; keep-alive clients are not.

usage: gone_test.py TPGEN MODEL PART
One server (one rank, --max-batch 1 --max-batch-tokens 1: a prompt of 120 tokens is a prefill of
120 steps, a request of n=8 choices is 8 such prefills one after the other).
PART "stream" / "plain": a request (stream true / false) of n=8 x 120 prompt tokens whose client
  sends it and shuts its socket down in the same TCP segment (TCP_CORK, then shutdown: the FIN
  rides on the last data segment), so the server holds the whole request and the end of the
  stream before it runs a step. The request must be cancelled (tpgen_requests_cancelled_total +1)
  with no token generated (tpgen_generation_tokens_total unchanged: no prefill of its 8 choices
  ended), and the server must come back to idle with every KV block free. A check every 100 ms on
  the HTTP thread ran the whole request on the tiny model (it takes less than that).
PART "keepalive": on one connection, two requests sent back to back in one write (pipelined), a
  third after both answers, then a long one (64 prompts) and, once the engine runs it, a fifth
  whose bytes wait in the socket meanwhile (the engine's peek sees them, not an end of stream):
  every answer is a 200 with all its tokens, and nothing is cancelled.
The server must stop cleanly on SIGTERM (exit 0: no sanitizer report under ThreadSanitizer).
Only 127.0.0.1, port 0.
"""
import json
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import serve_harness as sh  # noqa: E402

TPGEN, MODEL, PART = sys.argv[1:4]
check = sh.check_ok
PROMPT = [5] * 120  # the tiny model's n_positions is 128


def raw_post(srv, body):
    data = json.dumps(body).encode()
    return (b"POST /v1/completions HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (srv.host.encode(), srv.port, len(data))) + data


def send_and_leave(srv, body):
    """The request and the end of the client's stream in one segment (Linux tacks the FIN onto
    corked, unsent data), then the socket closed without reading."""
    s = socket.create_connection((srv.host, srv.port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
    s.sendall(raw_post(srv, body))
    s.shutdown(socket.SHUT_WR)
    s.close()


def gone(srv, stream):
    m0 = srv.metrics()
    send_and_leave(srv, {"prompt": PROMPT, "max_tokens": 4, "n": 8, "ignore_eos": True, "stream": stream})
    key = "tpgen_requests_cancelled_total"
    held, m = srv.wait_metrics(lambda m: m[key] > m0[key], timeout=60)
    check(held, "the request of the client that left is cancelled (%s %g -> %g)" % (key, m0[key], m[key]))
    idle, m = srv.wait_idle(timeout=60)
    check(idle, "the server is idle again, every KV block back (free %g, cached %g, of %g)"
          % (m["tpgen_kv_blocks_free"], m.get("tpgen_kv_blocks_cached", 0), m["tpgen_kv_blocks_total"]))
    gen = m["tpgen_generation_tokens_total"] - m0["tpgen_generation_tokens_total"]
    check(gen == 0, "cancelled before any of its 8 prefills ended: %g tokens generated (want 0; 32 if it ran "
          "to its end)" % gen)
    check(m[key] - m0[key] == 1, "exactly one request cancelled (%g)" % (m[key] - m0[key]))
    # the server still answers
    st, j, text = srv.complete({"prompt": [1, 2, 3], "max_tokens": 4, "ignore_eos": True})
    check(st == 200 and j and j["usage"]["completion_tokens"] == 4, "a request after it: %s %s" % (st, text[:200]))


def read_response(f):
    """One HTTP/1.1 response from a socket file (Content-Length framed) -> (status, JSON)."""
    line = f.readline()
    status = int(line.split()[1]) if line.startswith(b"HTTP/1.") else None
    length = 0
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        k, _, v = h.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    body = f.read(length)
    try:
        return status, json.loads(body)
    except ValueError:
        return status, None


def keepalive(srv):
    m0 = srv.metrics()
    body = {"prompt": PROMPT, "max_tokens": 6, "n": 4, "ignore_eos": True}
    # a long one: 64 prompts, each its own first token (no prefix cache hit between them), 64
    # prefills of 120 steps one after the other
    long_body = {"prompt": [[10 + i] + PROMPT[1:] for i in range(64)], "max_tokens": 2, "ignore_eos": True}
    s = socket.create_connection((srv.host, srv.port), timeout=120)
    f = s.makefile("rb")
    try:
        # two requests in one write (libmicrohttpd reads both), then a third after their answers
        s.sendall(raw_post(srv, body) + raw_post(srv, dict(body, max_tokens=5)))
        answers = [read_response(f), read_response(f)]
        s.sendall(raw_post(srv, dict(body, max_tokens=3)))
        answers.append(read_response(f))
        # the long one; once the engine has it, the next request's bytes wait in the socket while
        # it runs (its HTTP thread is waiting for the engine, not reading): the peek sees them
        m1 = srv.metrics()
        s.sendall(raw_post(srv, long_body))
        key = "tpgen_prompt_tokens_total"
        held, _ = srv.wait_metrics(lambda m: m[key] > m1[key], timeout=60, every=0.005)
        check(held, "the engine took the long request")
        s.sendall(raw_post(srv, dict(body, max_tokens=4)))
        m2 = srv.metrics()
        made = m2["tpgen_generation_tokens_total"] - m1["tpgen_generation_tokens_total"]
        check(made < 128, "the long request was still running when the next one was sent (%g of 128 tokens made)"
              % made)
        answers += [read_response(f), read_response(f)]
    finally:
        f.close()
        s.close()
    for i, (want, (st, j)) in enumerate(zip((24, 20, 12, 128, 16), answers)):
        got = j["usage"]["completion_tokens"] if st == 200 and j else None
        check(got == want, "request %d on the one connection: %s, %s tokens (want 200, %d)" % (i + 1, st, got, want))
    idle, m = srv.wait_idle(timeout=60)
    check(idle, "the server is idle again")
    key = "tpgen_requests_cancelled_total"
    check(m[key] == m0[key], "nothing cancelled on a connection that stays (%s %g -> %g)" % (key, m0[key], m[key]))


def main():
    srv = sh.Server(TPGEN, ["--model", MODEL, "--backend", "cpu", "--threads", "1", "--max-batch", "1",
                            "--max-batch-tokens", "1"])
    try:
        if PART in ("stream", "plain"):
            gone(srv, PART == "stream")
        elif PART == "keepalive":
            keepalive(srv)
        else:
            sys.exit("gone_test.py: PART is stream, plain or keepalive, not %r" % PART)
    finally:
        stopped = srv.stop()
    check(stopped.clean, "the server stops cleanly on SIGTERM: %r" % stopped)
    if sh.FAILS:
        print("--- server stderr\n" + srv.stderr(30))
    sh.exit_with_checks()


if __name__ == "__main__":
    main()
