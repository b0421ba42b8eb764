"""Prefix cache and KV on demand, end to end (tests/prefix.cmake; docs/SERVING.md, "Prefix cache
and KV on demand").

usage: prefix_test.py TPGEN MPIEXEC NP MODEL MODE
  exact:    `tpgen generate` greedy on prompts that share prefixes (and repeat), at TP NP: the ids
            of every run equal the baseline's (TP 1, --no-prefix-cache, a roomy KV pool): the
            cache on (a roomy pool), a pool so small that there are at least as many
            preemptions as requests (a storm) with the cache on and off, and the storm with
            --speculate. --stats: prompt tokens served from the cache > 0 with it on, 0 off.
  serve:    `tpgen serve` at TP NP with the storm's pool: concurrent greedy completions equal
            the baseline's ids; /metrics tpgen_preemptions_total >= the requests; a repeated
            prompt reports usage.prompt_tokens_details.cached_tokens > 0 (0 with
            --no-prefix-cache, where the query counter stays 0); at idle free + cached ==
            total blocks.
  hits:     `tpgen serve` at TP NP, one slot, 6 blocks of 4: exact usage cached_tokens and
            prefix-cache counters for scripted sequences (issue 34): X (12 ids) then Z (16 other
            ids, one eviction) then X + 1 id: 8 cached (X's last block was evicted, its first two
            stay; 0 if a finished sequence's blocks went back first to last); then, two slots, W
            (8 ids) and one request of A (4 ids) and B (W + 1 id) that outgrow the pool: B is
            preempted and resumes with more hits, yet reports its first admission's 8, and the
            counters grow by the prompts once (a resume is not a query).
  scope:    the prefix cache as a side channel (issue 34 item 6), `tpgen serve` at TP NP: with two
            --api-key, a prompt sent twice with one key gets cached_tokens 12 the second time, the
            same prompt with the other key 0 (and 12 on its own second try); cache_salt separates
            requests of one key and never joins two keys; a bad cache_salt is a 400; the token
            route answers each caller its own key; two salts, and two keys, with one 64-bit FNV-1a
            digest share nothing (issue 41: scopes are compared whole, by SHA-256);
            --prefix-cache-scope shared shares across keys,
            request shares nothing; without keys every request shares (as before); a bad
            --prefix-cache-scope ends the server with the flag named.
  ondemand: MODEL with a tokenizer: 24 code prompts with max_tokens 500 and stop "\\n" in a
            1,024-token pool: reserving prompt + max_tokens (the scheduler before KV on demand)
            would run pool / blocks-per-request of them at once; the peak of
            tpgen_requests_running must be at least 6x that.
"""
import json
import os
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import serve_harness as sh  # noqa: E402

TPGEN, MPIEXEC, NP, MODEL, MODE = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
BS = 4            # --block-size: small blocks, so short prompts share several
NEW = 24          # --max-new-tokens / max_tokens
STORM_KV = 64     # tokens of KV in the storm: 16 blocks for 8 sequences growing to 6-10 blocks each
COMMON = ["--backend", "cpu", "--threads", "1", "--block-size", str(BS), "--max-batch", "8"]


def prompts():
    """8 prompts of 9-15 ids: two families sharing 8-token prefixes (2 blocks), and repeats."""
    cfg = json.load(open(os.path.join(MODEL, "config.json")))
    v = cfg["vocab_size"] - 1  # below EOS on the test models
    base = [(i * 37 + 11) % v for i in range(8)]
    other = [(i * 53 + 7) % v for i in range(8)]
    ps = [base + [(i * 5 + k) % v for i in range(1 + 2 * k)] for k in range(4)]
    ps += [other + [(i * 3 + k) % v for i in range(3 + 2 * k)] for k in range(2)]
    ps += [ps[0], ps[4]]  # exact repeats
    return ps


def generate(np, flags, tmp):
    """`tpgen generate --json --stats` at TP np -> ([ids per prompt], stats dict)."""
    pf = os.path.join(tmp, "prompts.txt")
    with open(pf, "w") as f:
        f.write("".join(",".join(map(str, p)) + "\n" for p in prompts()))
    cmd = ([TPGEN] if np == 1 else [MPIEXEC, "--oversubscribe", "--allow-run-as-root", "-np", str(np), TPGEN])
    cmd += ["generate", "--model", MODEL, "--prompts-file", pf, "--max-new-tokens", str(NEW), "--json", "--stats"]
    cmd += COMMON + flags
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if not sh.check(p.returncode == 0, "exit 0 from %s (got %d): %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:])):
        return None, {}
    ids = [json.loads(line)["ids"] for line in p.stdout.splitlines() if line.startswith("{")]
    stats = {}
    for line in p.stderr.splitlines():
        if line.startswith('{"stats"'):
            stats = json.loads(line)["stats"]
    return ids, stats


def baseline(tmp):
    ids, _ = generate(1, ["--no-prefix-cache", "--kv-cache-tokens", "4096"], tmp)
    return ids


def exact(tmp):
    want = baseline(tmp)
    n = len(prompts())
    runs = [("cache on, roomy pool, 2 at once", ["--kv-cache-tokens", "4096", "--max-batch", "2"], 0, True),
            ("cache on, storm", ["--kv-cache-tokens", str(STORM_KV)], n, True),
            ("cache off, storm", ["--kv-cache-tokens", str(STORM_KV), "--no-prefix-cache"], n, False),
            ("cache on, storm, --speculate", ["--kv-cache-tokens", str(STORM_KV), "--speculate", "ngram:4"], n, True)]
    for name, flags, min_preempt, cache in runs:
        ids, st = generate(NP, flags, tmp)
        if ids is None:
            continue
        sh.check_ok(ids == want, "TP %d, %s: greedy ids as the baseline's" % (NP, name))
        if ids != want:
            for i, (a, b) in enumerate(zip(ids, want)):
                if a != b:
                    print("  prompt %d: %s\n   baseline: %s" % (i, a, b))
        sh.check_ok(st.get("preemptions", -1) >= min_preempt,
                    "TP %d, %s: %s preemptions (want >= %d)" % (NP, name, st.get("preemptions"), min_preempt))
        cached = st.get("cached_prompt_tokens", -1)
        sh.check_ok(cached > 0 if cache else cached == 0,
                    "TP %d, %s: %s prompt tokens from the cache" % (NP, name, cached))


def post_all(srv, bodies):
    """the bodies posted at once -> [(status, json)]"""
    out = [None] * len(bodies)

    def one(i):
        st, js, _ = srv.complete(bodies[i], timeout=240)
        out[i] = (st, js)
    ts = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def idle_blocks_ok(srv, what):
    held, m = srv.wait_metrics(lambda m: m.get("tpgen_requests_running") == 0 and m.get("tpgen_requests_waiting") == 0,
                               timeout=30)
    free, cached, total = (m.get("tpgen_kv_blocks_" + k) for k in ("free", "cached", "total"))
    sh.check_ok(held and free is not None and cached is not None and free + cached == total,
                "%s: at idle %s free + %s cached == %s total blocks" % (what, free, cached, total))


def serve(tmp):
    want = baseline(tmp)
    ps = prompts()
    flags = ["--model", MODEL, "--kv-cache-tokens", str(STORM_KV)] + COMMON
    body = lambda p: {"prompt": p, "max_tokens": NEW, "temperature": 0, "return_token_ids": True}
    srv = sh.Server(TPGEN, flags, np=NP, mpiexec=MPIEXEC if NP > 1 else None)
    try:
        # the prompts in one request, so that they arrive together whatever the machine's load
        st, js, _ = srv.complete(dict(body(ps), prompt=ps), timeout=240)
        ch = sorted((js or {}).get("choices", []), key=lambda c: c["index"])
        got = [c.get("token_ids") for c in ch]
        sh.check_ok(st == 200 and got == want, "serve TP %d, storm: greedy completions as the baseline's ids" % NP)
        pre = srv.metrics().get("tpgen_preemptions_total", -1)
        sh.check_ok(pre >= len(ps), "serve TP %d: tpgen_preemptions_total %s >= %d sequences of the storm"
                    % (NP, pre, len(ps)))
        res = post_all(srv, [body(p) for p in ps])  # and as concurrent requests
        got = [js["choices"][0]["token_ids"] if st == 200 and js else None for st, js in res]
        sh.check_ok(got == want, "serve TP %d, concurrent requests: greedy completions as the baseline's ids" % NP)
        m = srv.metrics()
        q, h = m.get("tpgen_prefix_cache_query_tokens_total", 0), m.get("tpgen_prefix_cache_hit_tokens_total", -1)
        sh.check_ok(0 < h <= q, "serve TP %d: prefix cache counters: %s of %s prompt tokens hit" % (NP, h, q))
        for _ in range(2):  # alone, twice: the second finds the first's blocks
            st, js, _ = srv.complete(body(ps[0]))
        c = (js or {}).get("usage", {}).get("prompt_tokens_details", {}).get("cached_tokens", -1)
        sh.check_ok(st == 200 and c > 0 and c % BS == 0 and c < len(ps[0]),
                    "serve: a repeated prompt of %d tokens: cached_tokens %s" % (len(ps[0]), c))
        idle_blocks_ok(srv, "serve, cache on")
    finally:
        sh.check(srv.stop().rc == 0, "serve (cache on) exits 0")
    srv = sh.Server(TPGEN, flags + ["--no-prefix-cache"], np=NP, mpiexec=MPIEXEC if NP > 1 else None)
    try:
        for _ in range(2):
            st, js, _ = srv.complete(body(ps[0]))
        c = (js or {}).get("usage", {}).get("prompt_tokens_details", {}).get("cached_tokens", -1)
        sh.check_ok(st == 200 and c == 0, "serve --no-prefix-cache: a repeated prompt: cached_tokens %s" % c)
        m = srv.metrics()
        sh.check_ok(m.get("tpgen_prefix_cache_query_tokens_total") == 0 and m.get("tpgen_kv_blocks_cached") == 0,
                    "serve --no-prefix-cache: nothing queried or cached")
        idle_blocks_ok(srv, "serve, cache off")
    finally:
        sh.check(srv.stop().rc == 0, "serve (cache off) exits 0")


def ondemand(tmp):
    kv, bs, n, max_tokens = 1024, 16, 24, 500
    cfg = json.load(open(os.path.join(MODEL, "config.json")))
    srv = sh.Server(TPGEN, ["--model", MODEL, "--backend", "cpu", "--threads", "1", "--kv-cache-tokens", str(kv),
                            "--block-size", str(bs), "--max-batch", "32"], np=NP, mpiexec=MPIEXEC if NP > 1 else None)
    heads = ["def add(a, b):\n", "import os\n", "class Point:\n", "for i in range(10):\n", "def main():\n",
             "x = [1, 2, 3]\n", "while True:\n", "if x > 0:\n"]
    bodies = [{"prompt": heads[i % len(heads)] + "    " * (i // len(heads)), "max_tokens": max_tokens,
               "stop": ["\n"], "temperature": 0} for i in range(n)]
    peak = [0]
    done = threading.Event()

    def poll():
        while not done.is_set():
            try:
                peak[0] = max(peak[0], srv.metrics().get("tpgen_requests_running", 0))
            except Exception:
                pass
    try:
        t = threading.Thread(target=poll)
        t.start()
        res = post_all(srv, bodies)
        done.set()
        t.join()
        sh.check(all(st == 200 for st, _ in res), "ondemand: every request answered 200")
        finish = [js["choices"][0]["finish_reason"] for st, js in res if js]
        prompt_len = max(js["usage"]["prompt_tokens"] for st, js in res if js)
        # what admission reserved before KV on demand: prompt + max_tokens - 1 (at most n_positions - 1)
        per = (min(prompt_len + max_tokens - 1, cfg["n_positions"] - 1) + bs - 1) // bs
        before = (kv // bs) // per
        sh.check_ok(finish.count("stop") >= n // 2, "ondemand: %d of %d answers stopped at a newline"
                    % (finish.count("stop"), n))
        sh.check_ok(peak[0] >= 6 * before, "ondemand: %d sequences running at once at the peak; reserving "
                    "%d blocks each would run %d (want >= 6x)" % (peak[0], per, before))
        idle_blocks_ok(srv, "ondemand")
    finally:
        done.set()
        sh.check(srv.stop().rc == 0, "ondemand server exits 0")


def hits(tmp):
    flags = ["--model", MODEL, "--kv-cache-tokens", "24", "--backend", "cpu", "--threads", "1", "--block-size", "4"]
    v = json.load(open(os.path.join(MODEL, "config.json")))["vocab_size"] - 1
    x = [(i * 37 + 11) % v for i in range(13)]
    z = [(i * 53 + 7) % v for i in range(16)]

    def cached(js):
        return (js or {}).get("usage", {}).get("prompt_tokens_details", {}).get("cached_tokens", -1)

    def counters(srv, queried):
        """the counters once the query counter reached `queried` (the engine updates /metrics after
        the step that answered the last request; a wrong count shows after 10 s)"""
        _, m = srv.wait_metrics(lambda m: m.get("tpgen_prefix_cache_query_tokens_total") == queried, timeout=10)
        return m.get("tpgen_prefix_cache_query_tokens_total"), m.get("tpgen_prefix_cache_hit_tokens_total")

    srv = sh.Server(TPGEN, flags + ["--max-batch", "1"], np=NP, mpiexec=MPIEXEC if NP > 1 else None)
    try:
        got = []
        for p in (x[:12], z, x):
            st, js, _ = srv.complete({"prompt": p, "max_tokens": 1, "temperature": 0})
            got.append(cached(js) if st == 200 else "status %d" % st)
        sh.check_ok(got == [0, 0, 8], "hits: X, Z (one eviction), X + 1: cached_tokens %r, want [0, 0, 8]" % (got,))
        q, h = counters(srv, 12 + 16 + 13)
        sh.check_ok((q, h) == (12 + 16 + 13, 8), "hits: counters %s queried, %s hit, want 41, 8" % (q, h))
        idle_blocks_ok(srv, "hits, eviction")
    finally:
        sh.check(srv.stop().rc == 0, "hits (eviction) exits 0")
    srv = sh.Server(TPGEN, flags + ["--max-batch", "2"], np=NP, mpiexec=MPIEXEC if NP > 1 else None)
    try:
        w, a = x[:8], z[:4]
        st, js, _ = srv.complete({"prompt": w, "max_tokens": 1, "temperature": 0})
        sh.check(st == 200 and cached(js) == 0, "hits: W answered, cached_tokens %s" % cached(js))
        # A and B in one request (they arrive together): A 4 + 9 tokens (3 blocks), B 9 + 14 (6
        # blocks) in 6: B, the newest, is preempted once A needs its third block
        body = {"prompt": [a, x[:9]], "max_tokens": 14, "temperature": 0, "ignore_eos": True}
        st, js, _ = srv.complete(body, timeout=240)
        _, m = srv.wait_metrics(lambda m: m.get("tpgen_preemptions_total", 0) >= 1, timeout=10)
        pre = m.get("tpgen_preemptions_total", 0)
        sh.check_ok(st == 200 and pre >= 1, "hits: A and B answered (%s), %s preemptions (want >= 1)" % (st, pre))
        sh.check_ok(cached(js) == 8, "hits: A and B after a resume: cached_tokens %s, want 8 (B's first admission)"
                    % cached(js))
        q, h = counters(srv, 8 + 4 + 9)
        sh.check_ok((q, h) == (8 + 4 + 9, 8), "hits: counters after a resume %s queried, %s hit, want 21, 8" % (q, h))
        idle_blocks_ok(srv, "hits, resume")
    finally:
        sh.check(srv.stop().rc == 0, "hits (resume) exits 0")


def scope(tmp):
    flags = ["--model", MODEL, "--kv-cache-tokens", "512", "--backend", "cpu", "--threads", "1", "--block-size", "4",
             "--max-batch", "1"]
    v = json.load(open(os.path.join(MODEL, "config.json")))["vocab_size"] - 1
    p = [(i * 41 + 3) % v for i in range(13)]  # 12 of its 13 tokens can be hits (3 blocks of 4)
    k1, k2 = "key-one", "key-two"
    q = [(i * 37 + 5) % v for i in range(13)]  # another prompt, for the colliding salts and keys
    # an FNV-1a 64 collision (Pollard's rho over 16 hex digits, issue 41): held here, checked below
    C1, C2 = "bf13eaba83dea434", "b3b828bb3655e2a7"

    def fnv1a64(t):
        h = 0xcbf29ce484222325
        for ch in t.encode():
            h = ((h ^ ch) * 0x100000001b3) & (2 ** 64 - 1)
        return h

    sh.check(C1 != C2 and fnv1a64(C1) == fnv1a64(C2), "%s and %s have one FNV-1a 64 digest" % (C1, C2))

    def cached(key, salt=None, prompt=p):
        body = {"prompt": prompt, "max_tokens": 1, "temperature": 0}
        if salt is not None:
            body["cache_salt"] = salt
        st, js, text = srv.complete(body, headers={"Authorization": "Bearer " + key} if key else None)
        if st != 200:
            return "status %d %s" % (st, text[:120])
        return js["usage"]["prompt_tokens_details"]["cached_tokens"]

    def start(extra):
        return sh.Server(TPGEN, flags + extra, np=NP, mpiexec=MPIEXEC if NP > 1 else None)

    srv = start(["--api-key", k1, "--api-key", k2])
    try:
        got = [cached(k1), cached(k1), cached(k2), cached(k2)]
        sh.check_ok(got == [0, 12, 0, 12], "scope key: key 1 twice, then key 2 twice: cached_tokens %r, want "
                    "[0, 12, 0, 12]" % (got,))
        got = [cached(k1, "a"), cached(k1, "a"), cached(k1, "b"), cached(k2, "a"), cached(k1)]
        sh.check_ok(got == [0, 12, 0, 0, 12], "scope key: cache_salt a, a, b with key 1, a with key 2, none with "
                    "key 1: %r, want [0, 12, 0, 0, 12]" % (got,))
        for what, raw in (("an empty string", '""'), ("a number", "5")):
            st, text, _ = srv.request("POST", "/v1/completions", headers={"Authorization": "Bearer " + k1},
                                      raw='{"prompt": [1, 2], "max_tokens": 1, "cache_salt": %s}' % raw)
            js = json.loads(text) if text.startswith("{") else {}
            sh.check_ok(st == 400 and js.get("error", {}).get("param") == "cache_salt",
                        "cache_salt %s: 400 naming cache_salt (%s %s)" % (what, st, text[:160]))
        st, text, _ = srv.request("GET", "/copilot_internal/v2/token", headers={"Authorization": "Bearer " + k2})
        sh.check_ok(st == 200 and json.loads(text).get("token") == k2, "token route with key 2: %s %s" % (st, text))
        st, _, _ = srv.request("POST", "/v1/completions", {"prompt": p, "max_tokens": 1},
                               headers={"Authorization": "Bearer key-three"})
        sh.check_ok(st == 401, "a third key: 401 (got %s)" % st)
    finally:
        sh.check(srv.stop().rc == 0, "scope key exits 0")
    srv = start(["--api-key", k1, "--api-key", k2, "--prefix-cache-scope", "shared"])
    try:
        got = [cached(k1), cached(k2), cached(k2, "a")]
        sh.check_ok(got == [0, 12, 0], "scope shared: key 1, key 2, key 2 with a salt: %r, want [0, 12, 0]" % (got,))
    finally:
        sh.check(srv.stop().rc == 0, "scope shared exits 0")
    srv = start(["--prefix-cache-scope", "request"])
    try:
        got = [cached(None), cached(None), cached(None, "a"), cached(None, "a")]
        sh.check_ok(got == [0, 0, 0, 0], "scope request: the same prompt four times: %r, want no hit" % (got,))
    finally:
        sh.check(srv.stop().rc == 0, "scope request exits 0")
    srv = start([])
    try:
        got = [cached(None), cached(None), cached(None, "a"), cached(None, "a")]
        sh.check_ok(got == [0, 12, 0, 12], "no keys: shared as before, a salt apart: %r, want [0, 12, 0, 12]" % (got,))
        # two salts with one 64-bit FNV-1a digest (the scope was that digest before issue 41): apart
        got = [cached(None, C1, q), cached(None, C1, q), cached(None, C2, q), cached(None, C2, q)]
        sh.check_ok(got == [0, 12, 0, 12], "no keys: cache_salt %s, %s (equal FNV-1a 64 digests) twice each: %r, "
                    "want [0, 12, 0, 12]" % (C1, C2, got))
        idle_blocks_ok(srv, "scope")
    finally:
        sh.check(srv.stop().rc == 0, "scope (no keys) exits 0")
    srv = start(["--api-key", C1, "--api-key", C2])
    try:
        got = [cached(C1, None, q), cached(C1, None, q), cached(C2, None, q), cached(C2, None, q)]
        sh.check_ok(got == [0, 12, 0, 12], "scope key: API keys %s, %s (equal FNV-1a 64 digests) twice each: %r, "
                    "want [0, 12, 0, 12]" % (C1, C2, got))
    finally:
        sh.check(srv.stop().rc == 0, "scope key (colliding keys) exits 0")
    bad = subprocess.run([TPGEN, "serve"] + flags + ["--prefix-cache-scope", "client"], capture_output=True,
                         text=True, timeout=60)
    sh.check_ok(bad.returncode != 0 and "--prefix-cache-scope must be key, shared or request" in bad.stderr,
                "a bad --prefix-cache-scope: exit %d, %s" % (bad.returncode, bad.stderr[-300:]))


with tempfile.TemporaryDirectory() as tmp:
    {"exact": exact, "serve": serve, "ondemand": ondemand, "hits": hits, "scope": scope}[MODE](tmp)
sh.exit_with_checks()
