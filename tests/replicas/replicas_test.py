"""Replicas behind HAProxy (launcher/tpgen-replicas, launcher/tpgen-haproxy-cfg, `tpgen serve
--trusted-proxy`): 2 replicas of the tiny model on this machine. One mode per ctest:

  affinity  the same client (API key, X-Tpgen-Client header, or the body's "user") lands on the same
            replica every time, and its second request hits that replica's prefix cache; different
            clients spread over both; the replica named by X-Tpgen-Replica is the one whose
            /metrics counted the request; roundrobin (the generator's --balance) alternates; SIGTERM
            and SIGINT to the launcher: every replica drains, exit 0, nothing left running
  failover  a replica killed (SIGKILL): requests of its clients, sent before HAProxy's health check
            notices, are refused at connect and retried on the other (all 200); a stream already
            flowing from the killed replica is cut, not replayed on the other
  drain     a replica that gets SIGTERM answers 503 at once, which HAProxy retries on the other
            (clients see 200), leaves the pool (/balancer-health/all turns 503), and its stream in
            flight finishes through the balancer; the launcher then stops with nothing left
  trusted   --trusted-proxy: from the proxy's address, the client of --max-seqs-per-client is the
            last X-Forwarded-For entry; from any other peer the header is ignored; through HAProxy
            the client is the address HAProxy saw, whatever X-Forwarded-For the client forged

usage: replicas_test.py TPGEN FIXTURE WORKDIR MODE   (exit 77: haproxy is not installed)
"""
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import http.client

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
import serve_harness as sh  # noqa: E402

TPGEN, FIXTURE, WORK, MODE = sys.argv[1:5]
LAUNCHER = os.path.join(ROOT, "launcher", "tpgen-replicas")
SERVE_FLAGS = ["--model", FIXTURE, "--backend", "cpu", "--threads", "1"]
# 16 prompts x n 16 = 256 sequences of 120 tokens at --max-batch 1: seconds of steps, so a stream
# is still flowing when the test acts on its first event (it is cut or cancelled after)
LONG = {"prompt": [[1, 2, 3, 4 + i] for i in range(16)], "max_tokens": 120, "n": 16, "ignore_eos": True,
        "stream": True}


# a probe of 128 sequences: over --max-seqs-per-client 256 while LONG's client still holds more than
# 128 of its 256 (they finish one by one at --max-batch 1: over 15000 steps)
PROBE = {"prompt": [[1]] * 8, "n": 16, "max_tokens": 1}


def free_ports(n):
    """A base port with n free consecutive ports (the replicas' --first-port)."""
    for _ in range(200):
        base = random.randint(20000, 60000 - n)
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            pass
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no %d free consecutive ports" % n)


class Replicas:
    """launcher/tpgen-replicas with 2 replicas; .pids (the replicas'), .port (the balancer's)."""

    def __init__(self, serve_extra=(), cfg_flags=(), n=2):
        self.port, self.first = sh.free_port(), free_ports(n)
        cmd = [LAUNCHER, "-n", str(n), "--bind", "127.0.0.1:%d" % self.port, "--first-port", str(self.first)]
        for f in cfg_flags:
            cmd += ["--cfg-flag", f]
        cmd += ["--"] + SERVE_FLAGS + list(serve_extra)
        env = dict(os.environ, TPGEN_BIN=TPGEN)
        self.p = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env,
                                  start_new_session=True)
        self.lines, self.ready = [], threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(60):
            self.p.kill()
            raise sh.ServerError("tpgen-replicas not ready in 60 s:\n" + "\n".join(self.lines))
        first = next(l for l in self.lines if "replicas (pids" in l)
        self.pids = [int(x) for x in first.split("(pids ")[1].split(")")[0].split()]
        self.hpid = int(first.split("haproxy (pid ")[1].split(")")[0])

    def _read(self):
        for raw in self.p.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            if line.startswith("tpgen-replicas: serving"):
                self.ready.set()
        self.ready.set()

    def post(self, body, headers=None, source=None, path="/v1/completions"):
        """-> (status, JSON or text, replica name from X-Tpgen-Replica)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60,
                                       source_address=(source, 0) if source else None)
        try:
            h = {"Content-Type": "application/json"}
            h.update(headers or {})
            c.request("POST", path, body=json.dumps(body), headers=h)
            r = c.getresponse()
            text = r.read().decode()
            try:
                text = json.loads(text)
            except ValueError:
                pass
            return r.status, text, r.getheader("X-Tpgen-Replica")
        finally:
            c.close()

    def balancer_all_up(self):
        return sh.http_request("127.0.0.1", self.port, "GET", "/balancer-health/all")[0] == 200

    def replica_metrics(self, i):
        st, text, _ = sh.http_request("127.0.0.1", self.first + i, "GET", "/metrics")
        return sh.parse_metrics(text)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """-> the launcher's exit status; every replica and haproxy gone (checked)."""
        self.p.send_signal(sig)
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
            rc = self.p.wait()
            sh.check(False, "tpgen-replicas stopped within %d s" % timeout)
        left = [p for p in self.pids + [self.hpid] if sh.alive(p)]
        sh.check_ok(not left, "nothing left running after the launcher exited (left: %s)" % left)
        for p in left:
            os.kill(p, signal.SIGKILL)
        return rc


def open_stream(rep, body, headers=None):
    """A streaming completion through the balancer, read up to its first event -> (conn, response, replica)."""
    c = http.client.HTTPConnection("127.0.0.1", rep.port, timeout=60)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c.request("POST", "/v1/completions", body=json.dumps(body), headers=h)
    r = c.getresponse()
    sh.check(r.status == 200, "the long stream starts (status %d)" % r.status)
    it = sh.sse_data(r)
    first = next(it, None)
    sh.check(first is not None and first != "[DONE]", "the long stream's first event came")
    return c, r, it, r.getheader("X-Tpgen-Replica")


def finish_stream(it, timeout=60):
    """Reads the rest of a stream -> (events, saw [DONE], cut: the connection ended without it)."""
    events, done = 0, False
    try:
        for d in it:
            if d == "[DONE]":
                done = True
                break
            events += 1
    except (http.client.IncompleteRead, ConnectionError, socket.timeout, ValueError):
        pass
    return events, done


def clients_of(rep, replica, n, header="X-Tpgen-Client"):
    """n header values the balancer sends to `replica` (r0, r1)."""
    found = []
    for k in range(200):
        v = "client-%d" % k
        st, _, who = rep.post({"prompt": [1, 2], "max_tokens": 1}, headers={header: v})
        if st == 200 and who == replica:
            found.append(v)
            if len(found) == n:
                break
    sh.check(len(found) == n, "found %d clients of %s (of %d wanted)" % (len(found), replica, n))
    return found


def affinity():
    rep = Replicas()
    try:
        base = [rep.replica_metrics(i).get('tpgen_requests_total{status="200"}', 0) for i in range(2)]
        seen = {"r0": 0, "r1": 0}
        spread = {}
        # each way of naming the client: 12 clients, 3 requests each
        ways = {"auth": lambda k: ({"Authorization": "Bearer key-%d" % k}, {}),
                "header": lambda k: ({"X-Tpgen-Client": "dev-%d" % k}, {}),
                "user": lambda k: ({}, {"user": "user-%d" % k})}
        for way, make in ways.items():
            homes = {}
            stable = True
            for k in range(12):
                h, extra = make(k)
                got = set()
                for _ in range(3):
                    body = dict({"prompt": [5, 6, 7, 8] * 8 + [k], "max_tokens": 2}, **extra)
                    st, j, who = rep.post(body, headers=h)
                    sh.check(st == 200, "%s client %d: status %d (%s)" % (way, k, st, j))
                    got.add(who)
                    seen[who] = seen.get(who, 0) + 1
                stable &= len(got) == 1
                homes[k] = got.pop()
            sh.check_ok(stable, "by %s: each client's 3 requests went to one replica" % way)
            spread[way] = sorted(set(homes.values()))
            sh.check_ok(spread[way] == ["r0", "r1"],
                        "by %s: 12 clients spread over both replicas (%s)" % (way, sorted(homes.values())))
        # the API key wins over the header: one key, many header values -> one replica
        got = {rep.post({"prompt": [1], "max_tokens": 1}, headers={"Authorization": "Bearer one-key",
                                                                  "X-Tpgen-Client": "h%d" % k})[2]
               for k in range(12)}
        alone_list = [rep.post({"prompt": [1], "max_tokens": 1}, headers={"X-Tpgen-Client": "h%d" % k})[2]
                      for k in range(12)]
        alone = set(alone_list)
        sh.check_ok(len(got) == 1 and len(alone) == 2, "the API key decides before the header (with the key: "
                    "%s; the same headers alone: %s)" % (sorted(got), sorted(alone)))
        # the second request of a client hits its replica's prefix cache (the whole shared prompt)
        prompt = list(range(10, 74))
        st, j1, w1 = rep.post({"prompt": prompt, "max_tokens": 1}, headers={"X-Tpgen-Client": "cache-me"})
        st2, j2, w2 = rep.post({"prompt": prompt + [80], "max_tokens": 1}, headers={"X-Tpgen-Client": "cache-me"})
        cached = j2["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0) if st2 == 200 else 0
        sh.check_ok(w1 == w2 and cached >= 48,
                    "a client's next request hits the prefix cache of its replica (%s then %s, %d cached)"
                    % (w1, w2, cached))
        # X-Tpgen-Replica names the replica that counted the request
        after = [rep.replica_metrics(i).get('tpgen_requests_total{status="200"}', 0) for i in range(2)]
        counted = {"r%d" % i: after[i] - base[i] for i in range(2)}
        want = dict(seen)
        want[list(got)[0]] += 12
        for w in alone_list:
            want[w] += 1
        want[w1] += 1
        want[w2] += 1
        sh.check_ok(counted == want, "each replica's /metrics counted the requests its X-Tpgen-Replica "
                    "header named (metrics %s, headers %s)" % (counted, want))
    finally:
        rc = rep.stop()
    sh.check_ok(rc == 0, "SIGTERM: the replicas drained and the launcher exited 0 (got %d)" % rc)
    # round robin, for comparison: the same client alternates
    rr = Replicas(cfg_flags=["--balance", "roundrobin"])
    try:
        got = [rr.post({"prompt": [1], "max_tokens": 1}, headers={"X-Tpgen-Client": "same"})[2] for _ in range(4)]
        sh.check_ok(sorted(set(got)) == ["r0", "r1"], "--balance roundrobin: one client's requests alternate (%s)"
                    % got)
    finally:
        rc = rr.stop(signal.SIGINT)
    sh.check_ok(rc == 0, "SIGINT (Ctrl-C) stops the launcher the same way: exit 0 (got %d)" % rc)


def failover():
    rep = Replicas(serve_extra=["--max-batch", "1"])
    try:
        victims = clients_of(rep, "r0", 4)
        # a stream flowing from r0 when r0 dies
        c, r, it, who = open_stream(rep, LONG, headers={"X-Tpgen-Client": victims[0]})
        sh.check(who == "r0", "the long stream is on r0 (%s)" % who)
        before = rep.replica_metrics(1)["tpgen_prompt_tokens_total"]
        os.kill(rep.pids[0], signal.SIGKILL)
        events, done = finish_stream(it)
        c.close()
        sh.check_ok(not done, "the stream from the killed replica is cut, not completed elsewhere "
                    "(%d more events, [DONE] %s)" % (events, done))
        # r0's clients at once: HAProxy still has r0 in its pool (2 checks of 1 s to notice), its
        # connection is refused, and the request is retried on r1
        t0 = time.time()
        res = [rep.post({"prompt": [1, 2, 3], "max_tokens": 2}, headers={"X-Tpgen-Client": v}) for v in victims]
        sh.check_ok(all(st == 200 and w == "r1" for st, _, w in res),
                    "requests of the killed replica's clients, refused at connect, answered by r1 "
                    "(%s, %.1f s after the kill)" % ([(st, w) for st, _, w in res], time.time() - t0))
        after = rep.replica_metrics(1)["tpgen_prompt_tokens_total"]
        # r1 admitted only the 4 small requests (3 tokens each), never the killed stream's prompts
        sh.check_ok(after - before == 4 * 3, "the cut stream was not replayed on r1 (r1 took %d prompt tokens, "
                    "the 4 retried requests' 12)" % (after - before))
        sh.check_ok(sh.wait_until(lambda: not rep.balancer_all_up(), 10),
                    "HAProxy's health check took the killed replica out of the pool")
    finally:
        rc = rep.stop()
    sh.check_ok(rc == 1, "the launcher exits 1 after a replica died (got %d)" % rc)
    sh.check_ok(any("replica 0" in l and "status 137" in l for l in rep.lines),
                "the launcher reported the killed replica")


def drain():
    rep = Replicas(serve_extra=["--max-batch", "1", "--drain-timeout", "3"])
    try:
        victims = clients_of(rep, "r0", 4)
        c, r, it, who = open_stream(rep, LONG, headers={"X-Tpgen-Client": victims[0]})
        sh.check(who == "r0", "the long stream is on r0 (%s)" % who)
        os.kill(rep.pids[0], signal.SIGTERM)
        sh.wait_until(lambda: sh.http_request("127.0.0.1", rep.first, "GET", "/health")[0] == 503, 5)
        res = [rep.post({"prompt": [1, 2, 3], "max_tokens": 2}, headers={"X-Tpgen-Client": v}) for v in victims]
        sh.check_ok(all(st == 200 and w == "r1" for st, _, w in res),
                    "requests of the draining replica's clients answered by r1 (%s)" % [(st, w) for st, _, w in res])
        m0 = rep.replica_metrics(0)
        sh.check_ok(m0.get('tpgen_requests_total{status="503"}', 0) >= 1,
                    "the draining replica refused some of them with 503 before the health check (%d), and "
                    "HAProxy retried those" % m0.get('tpgen_requests_total{status="503"}', 0))
        sh.check_ok(sh.wait_until(lambda: not rep.balancer_all_up(), 10),
                    "the draining replica left HAProxy's pool")
        events, done = finish_stream(it)
        c.close()
        sh.check_ok(done and events > 0, "the stream in flight on the draining replica ended with [DONE] "
                    "through the balancer (%d more events)" % events)
        sh.check_ok(sh.wait_until(lambda: not sh.alive(rep.pids[0]), 15), "the drained replica exited")
        st, _, w = rep.post({"prompt": [1], "max_tokens": 1}, headers={"X-Tpgen-Client": victims[1]})
        sh.check_ok(st == 200 and w == "r1", "after the drain, its clients are served by r1 (%d, %s)" % (st, w))
    finally:
        rc = rep.stop()
    sh.check_ok(rc == 0, "every replica exited 0 (drained), so does the launcher (got %d)" % rc)


def trusted():
    # directly: tpgen serve with --trusted-proxy; a long request of client A holds every sequence
    # --max-seqs-per-client allows (256 of them); A's next request gets 429 naming A, B's gets 200
    def hold_and_probe(srv, a_headers, probes):
        c = http.client.HTTPConnection(srv.host, srv.port, timeout=60)
        c.request("POST", "/v1/completions", body=json.dumps(LONG),
                  headers=dict({"Content-Type": "application/json"}, **a_headers))
        r = c.getresponse()
        next(sh.sse_data(r), None)
        out = []
        for h in probes:
            st, text, _ = sh.http_request(srv.host, srv.port, "POST", "/v1/completions", PROBE,
                                          headers=dict({"Content-Type": "application/json"}, **h))
            out.append((st, text))
        c.close()
        return out

    flags = SERVE_FLAGS + ["--max-batch", "1", "--max-seqs-per-client", "256"]
    with sh.Server(TPGEN, flags + ["--trusted-proxy", "127.0.0.1"]) as srv:
        (s1, t1), (s2, t2) = hold_and_probe(srv, {"X-Forwarded-For": "10.0.0.1"},
                                            [{"X-Forwarded-For": "10.0.0.1"}, {"X-Forwarded-For": "10.0.0.2"}])
        sh.check_ok(s1 == 429 and "client 10.0.0.1 " in t1,
                    "from the trusted proxy: X-Forwarded-For 10.0.0.1 is the client that holds the sequences "
                    "(%d %s)" % (s1, t1[:120]))
        sh.check_ok(s2 == 200, "from the trusted proxy: another X-Forwarded-For is another client (%d)" % s2)
        # the last entry counts: what the client wrote before it is not trusted
        (s3, t3), = hold_and_probe(srv, {"X-Forwarded-For": "1.1.1.1, 10.0.0.7"},
                                   [{"X-Forwarded-For": "10.0.0.7"}])
        sh.check_ok(s3 == 429 and "client 10.0.0.7 " in t3,
                    "the last X-Forwarded-For entry is the client (%d %s)" % (s3, t3[:120]))
    with sh.Server(TPGEN, flags + ["--trusted-proxy", "127.0.0.9"]) as srv:
        (s1, t1), (s2, t2) = hold_and_probe(srv, {"X-Forwarded-For": "10.0.0.1"},
                                            [{"X-Forwarded-For": "10.0.0.1"}, {"X-Forwarded-For": "10.0.0.2"}])
        sh.check_ok(s2 == 429 and "client 127.0.0.1 " in t2,
                    "from a peer that is not the trusted proxy, X-Forwarded-For is ignored: the peer address "
                    "is the client (%d %s)" % (s2, t2[:120]))
    # through HAProxy: the client connects from 127.0.0.2 with a forged header; the replica sees
    # HAProxy (127.0.0.1, trusted by the launcher) and takes 127.0.0.2 from the entry HAProxy added
    rep = Replicas(serve_extra=["--max-batch", "1", "--max-seqs-per-client", "256"])
    try:
        key = {"X-Tpgen-Client": "one-home", "X-Forwarded-For": "10.9.9.9"}
        c = http.client.HTTPConnection("127.0.0.1", rep.port, timeout=60, source_address=("127.0.0.2", 0))
        c.request("POST", "/v1/completions", body=json.dumps(LONG),
                  headers=dict({"Content-Type": "application/json"}, **key))
        r = c.getresponse()
        next(sh.sse_data(r), None)
        s1, t1, w1 = rep.post(PROBE, headers=key, source="127.0.0.2")
        s2, t2, w2 = rep.post(PROBE, headers=key, source="127.0.0.3")
        c.close()
        msg = t1["error"]["message"] if isinstance(t1, dict) and "error" in t1 else str(t1)
        sh.check_ok(s1 == 429 and "client 127.0.0.2 " in msg,
                    "through HAProxy the client is the address HAProxy saw, not the forged header (%d %s)"
                    % (s1, msg[:120]))
        sh.check_ok(s2 == 200 and w1 == w2, "another client address on the same replica is another client "
                    "(%d on %s)" % (s2, w2))
    finally:
        rep.stop()


if __name__ == "__main__":
    if not shutil.which("haproxy"):
        print("SKIPPED: haproxy is not installed (bash tools/dev/install-deps.sh)")
        sys.exit(77)
    os.makedirs(WORK, exist_ok=True)
    {"affinity": affinity, "failover": failover, "drain": drain, "trusted": trusted}[MODE]()
    sh.exit_with_checks()
