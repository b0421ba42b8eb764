"""The keystroke benchmark of tools/bench/bench_serving.py: `--dataset completion-trace[:KEY=VALUE,...]`.

N editors type through real source files, as a code-completion plugin (Copilot, llama.vim,
FauxPilot clients) drives a server: at every pause in typing the editor sends the file up to the
cursor as the prompt (streamed, `max_tokens` --max-tokens (default 500 here), `stop: ["\\n"]`) and
cancels its previous request if that one is still in flight, by closing its connection.

Spec keys (all optional; the files value cannot hold a comma):
  editors=N    editors typing at once, one file each (default 4)
  pauses=N     requests per editor (default 20)
  context=N    prompt tokens kept, at most (default 1500); must be > step
  step=N       left truncation in steps of N tokens (default 256), so that the kept prefix stays the
               same from one keystroke to the next (and the prefix cache can hit)
  typed=N      tokens typed between two pauses: uniform in [1, N] (default 4)
  think=MS     time between two pauses of one editor: exponential, mean MS ms (default 400)
  files=GLOB   the source files (default: *.py in the standard library of this Python,
               sysconfig's "stdlib" path)
The seed is the tool's --seed: it picks each editor's file and start, the tokens typed and the
think times. The same seed gives the same trace (its sha256 is in the JSON: trace_sha256).

The cursor moves over token boundaries of the file's tokenization (the server's /tokenize):
editor e starts at a cursor drawn in [context, n - pauses * typed] of a file that has at least
context + pauses * typed tokens, then moves typed tokens per pause. Prompt of a cursor at token n
(prompt_window): the tokens [d, n), d = ceil((n - context) / step) * step when n > context, else
0; so a prompt has at most `context` tokens and more than context - step, and d only moves when n
crosses context + k * step. The prompt is sent as token ids.
"""
import glob
import hashlib
import math
import os
import random
import re
import socket
import sysconfig
import threading
import time

DEFAULTS = {"editors": 4, "pauses": 20, "context": 1500, "step": 256, "typed": 4, "think": 400.0, "files": None}
MAX_TOKENS = 500  # what editor plugins commonly send; the newline stop ends most answers far sooner
STOP = ["\n"]


class SpecError(ValueError):
    pass


def default_files():
    return os.path.join(sysconfig.get_paths()["stdlib"], "*.py")


def parse_spec(spec):
    """'completion-trace[:k=v,...]' -> {key: value} with DEFAULTS filled; SpecError names the key."""
    if spec != "completion-trace" and not spec.startswith("completion-trace:"):
        raise SpecError(f"{spec!r} is not completion-trace[:KEY=VALUE,...]")
    out = dict(DEFAULTS)
    body = spec[len("completion-trace:"):] if ":" in spec else ""
    for part in filter(None, body.split(",")):
        k, eq, v = part.partition("=")
        if not eq or k not in DEFAULTS:
            raise SpecError(f"{part!r}: write KEY=VALUE with KEY one of {', '.join(DEFAULTS)}")
        if k == "files":
            if not v:
                raise SpecError("files= needs a path or a glob")
            out[k] = v
            continue
        try:
            x = float(v) if k == "think" else int(v)
        except ValueError:
            raise SpecError(f"{k}={v!r} is not {'a number' if k == 'think' else 'an integer'}")
        if not (x >= 0 if k == "think" else x >= 1) or (k == "think" and math.isinf(x)):
            raise SpecError(f"{k}={v}: must be {'>= 0 ms' if k == 'think' else '>= 1'}")
        out[k] = x
    if out["context"] <= out["step"]:
        raise SpecError(f"context={out['context']} must be > step={out['step']} (a prompt keeps more than "
                        "context - step tokens)")
    out["files"] = out["files"] or default_files()
    list_files(out["files"])  # none: an error now, before any server starts
    return out


def prompt_window(n, context, step):
    """Cursor at token n -> (d, n): the prompt is tokens [d, n), left-truncated in whole steps.
    len <= context, len > context - step when n > context; d % step == 0."""
    if n <= context:
        return 0, n
    d = -(-(n - context) // step) * step
    return d, n


def list_files(pattern):
    files = sorted(f for f in glob.glob(pattern) if os.path.isfile(f))
    if not files:
        raise SpecError(f"files={pattern}: no file matches")
    return files


def build_trace(spec, seed, tokenize):
    """-> [editor: {"file", "start", "client", "pauses": [(think_s, ids)]}]; tokenize(text) -> [id].
    The same spec, seed and tokenizer give the same trace. "client" ("editor-K") is sent with each
    of the editor's requests, as a user's editor identifies itself (a balancer's affinity key)."""
    rng = random.Random(seed)
    files = list_files(spec["files"])
    need = spec["context"] + spec["pauses"] * spec["typed"]
    cache = {}
    editors = []
    order = files[:]
    rng.shuffle(order)
    pos = 0
    for e in range(spec["editors"]):
        ids, path = None, None
        for _ in range(len(order)):  # the next file (cycling) long enough
            path = order[pos % len(order)]
            pos += 1
            if path not in cache:
                try:
                    with open(path, encoding="utf-8", errors="replace") as f:
                        cache[path] = tokenize(f.read())
                except OSError as err:
                    raise SpecError(f"cannot read {path}: {err.strerror}")
            if len(cache[path]) >= need:
                ids = cache[path]
                break
        if ids is None:
            raise SpecError(f"files={spec['files']}: no file has context + pauses * typed = {need} tokens "
                            "(lower context=, pauses= or typed=)")
        start = rng.randint(spec["context"], len(ids) - spec["pauses"] * spec["typed"])
        cur, pauses = start, []
        for _ in range(spec["pauses"]):
            cur += rng.randint(1, spec["typed"])
            d, n = prompt_window(cur, spec["context"], spec["step"])
            pauses.append((rng.expovariate(1000.0 / spec["think"]) if spec["think"] > 0 else 0.0, ids[d:n]))
        editors.append({"file": path, "start": start, "client": f"editor-{e}", "pauses": pauses})
    return editors


def trace_digest(editors):
    h = hashlib.sha256()
    for ed in editors:
        h.update(ed["file"].encode() + b"\0%d\0" % ed["start"])
        for think, ids in ed["pauses"]:
            h.update(repr(round(think, 9)).encode() + b":" + ",".join(map(str, ids)).encode() + b";")
    return h.hexdigest()


class Cancel:
    """A request's handle: cancel() closes its connection (from any thread), as an editor that
    drops a stale suggestion does; attach() is how the request gives it the connection."""

    def __init__(self):
        self.lock, self.conn, self.cancelled = threading.Lock(), None, False

    def attach(self, conn):
        """-> False when already cancelled (the request is then not sent)."""
        with self.lock:
            self.conn = conn
            return not self.cancelled

    def cancel(self):
        with self.lock:
            self.cancelled = True
            sock = self.conn.sock if self.conn is not None else None
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already closed: the request is over


def run_trace(send, editors, max_tokens, failed):
    """Plays the trace: one thread per editor sleeps each think time (the schedule does not wait
    for answers: people type on), cancels its in-flight request and sends the next; its last
    request runs to its end. send(ids, max_tokens, handle, client) -> Result; failed(error) -> a
    failed Result. -> (results, duration_s)."""
    results, lock = [], threading.Lock()
    start = time.perf_counter()

    def editor(ed):
        t, prev, workers = start, None, []
        for think, ids in ed["pauses"]:
            t += think
            delay = t - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            if prev is not None:
                prev.cancel()
            h = Cancel()

            def one(ids=ids, h=h):
                try:
                    r = send(ids, max_tokens, h, ed["client"])
                except Exception as e:  # a harness bug must not lose the request: count it as failed
                    r = failed(f"{type(e).__name__}: {e}")
                with lock:
                    results.append(r)
            w = threading.Thread(target=one, daemon=True)
            w.start()
            workers.append(w)
            prev = h
        for w in workers:
            w.join()
    threads = [threading.Thread(target=editor, args=(ed,), daemon=True) for ed in editors]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return results, time.perf_counter() - start


CACHE_QUERY = "tpgen_prefix_cache_query_tokens_total"
CACHE_HIT = "tpgen_prefix_cache_hit_tokens_total"
SERVER_CANCELLED = "tpgen_requests_cancelled_total"


def counter_delta(before, after, name):
    """A /metrics counter's growth over the run, None when the server does not export it."""
    if before is None or after is None or name not in before or name not in after:
        return None
    return after[name] - before[name]


def report(results, duration, met0, met1, summary, slo, n_sent):
    """The run's JSON fields (without config)."""
    ok = [r for r in results if r.ok]
    cancelled = [r for r in results if r.cancelled]
    failed = [r for r in results if not r.ok and not r.cancelled]
    cached = [r.n_cached for r in ok]
    usage_rate = (sum(cached) / max(1, sum(r.n_in for r in ok))) if ok and all(c is not None for c in cached) else None
    q, h = counter_delta(met0, met1, CACHE_QUERY), counter_delta(met0, met1, CACHE_HIT)
    out = {
        "requests": n_sent,
        "completed": len(ok),
        "cancelled": len(cancelled),
        "cancelled_after_first_token": sum(1 for r in cancelled if r.ttft is not None),
        "failed": len(failed),
        # lost, not cut: no answer had begun (a refused connection, an error status)
        "failed_before_answer": sum(1 for r in failed if not r.answered),
        "duration_s": duration,
        "ttft_ms": summary([r.ttft for r in ok]),
        "e2e_ms": summary([r.e2e for r in ok]),
        "prompt_tokens": {"mean": sum(r.n_in for r in ok) / len(ok) if ok else None,
                          "max": max((r.n_in for r in ok), default=None)},
        "output_tokens_mean": sum(r.n_out for r in ok) / len(ok) if ok else None,
        "prefix_cache": {"hit_rate_usage": usage_rate,
                         "cached_tokens_usage": sum(cached) if usage_rate is not None else None,
                         "prompt_tokens_usage": sum(r.n_in for r in ok),
                         "hit_rate_metrics": (h / q if q else None) if q is not None and h is not None else None,
                         "query_tokens_metrics": q, "hit_tokens_metrics": h},
        "server_cancelled": counter_delta(met0, met1, SERVER_CANCELLED),
        "ttft_samples_ms": sorted(r.ttft * 1e3 for r in ok),
    }
    if slo:
        def within(r):
            v = {"ttft_ms": r.ttft * 1e3, "e2e_ms": r.e2e * 1e3,
                 "tpot_ms": (r.e2e - r.ttft) / (r.n_out - 1) * 1e3 if r.n_out > 1 else 0.0}
            return all(v[k] <= lim for k, lim in slo.items())
        met = sum(1 for r in ok if within(r))
        out["goodput"] = {"slo": slo, "requests_met": met, "share": met / n_sent, "request_goodput": met / duration}
    for r in failed[:3]:
        out.setdefault("errors", []).append(r.error)
    return out


def pct(x):
    return "n/a" if x is None else f"{100 * x:.1f}%"


def ms(x):
    return "n/a" if x is None else f"{x:.0f}"


def markdown(runs):
    """One markdown table row per run (configuration)."""
    lines = ["| configuration | editors | requests | completed | cancelled | TTFT p50 / p90 / p99 (ms) | "
             "E2E p50 / p90 / p99 (ms) | prompt tokens (mean) | prefix-cache hit (usage / metrics) | goodput (req/s) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        t, e, c = r["ttft_ms"], r["e2e_ms"], r["prefix_cache"]
        g = r.get("goodput")
        gp = "n/a" if g is None else f"{g['request_goodput']:.2f} ({', '.join(f'{k[:-3].upper()} <= {v:g} ms' for k, v in g['slo'].items())})"
        pm = r["prompt_tokens"]["mean"]
        lines.append(f"| {r['config']['label']} | {r['config']['trace']['editors']} | {r['requests']} | "
                     f"{r['completed']} | {r['cancelled']} | {ms(t['p50'])} / {ms(t['p90'])} / {ms(t['p99'])} | "
                     f"{ms(e['p50'])} / {ms(e['p90'])} / {ms(e['p99'])} | {ms(pm)} | "
                     f"{pct(c['hit_rate_usage'])} / {pct(c['hit_rate_metrics'])} | {gp} |")
    return "\n".join(lines)


def plot_cdf(path, series, die):
    """series: [(label, run)] -> the CDF of TTFT (completed requests), one line per run."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        die("--plot needs matplotlib: pip install -r tools/bench/requirements-bench.txt")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, run in series:
        xs = run["ttft_samples_ms"]
        if xs:
            ax.step([xs[0]] + xs, [0.0] + [(i + 1) / len(xs) for i in range(len(xs))], where="post",
                    label=f"{label} ({len(xs)} done)")
    ax.set_xscale("log")
    ax.set_xlabel("TTFT (ms), completed requests")
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    tr = series[0][1]["config"]["trace"]
    ax.set_title(f"keystroke trace: {tr['editors']} editors x {tr['pauses']} pauses, context {tr['context']}, "
                 f"think {tr['think']:g} ms", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def check_name(label):
    if not re.fullmatch(r"[^=|\n]+", label):
        raise SpecError(f"label {label!r}: must be non-empty without '=', '|' or a newline")
    return label
