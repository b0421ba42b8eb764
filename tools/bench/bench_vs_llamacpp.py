#!/usr/bin/env python3
"""tpgen vs llama.cpp on the CPU, in one run, on the same LLaMA (CodeGen2.5) shape with random weights.

    python3 tools/bench/bench_vs_llamacpp.py [--config configs/codegen25-350M-q4-shape.json] [--threads N]
        [--types int4,int4a8,int8,bf16,f32] [--llama-types Q4_0,Q8_0,BF16] [--group-size G] [--lm-head int8|int4]
        [--kv-cache-dtype auto|bf16]
        [--batch 1,8,32] [--context 512]
        [--short-context 100] [--long-context 1900] [--steps 32] [--prefill 512] [--runs 3] [--smoke]
        [--llamacpp DIR] [--models-dir DIR] [--out FILE.json] [--record docs/bench/cpu-llamacpp.jsonl]

Needs llama.cpp built by tools/bench/build_llamacpp.sh (--llamacpp, default $TPGEN_LLAMACPP_DIR or
~/.cache/tpgen/llamacpp: its bin/llama-bench, llama-batched-bench, llama-quantize and gguf-py) and
numpy (tools/bench/llamacpp_model.py writes the GGUF files, once, into --models-dir, default
LLAMACPP/models). Exit 77 when llama.cpp is not built (the ctest smoke test skips on it).

The default shape, configs/codegen25-350M-q4-shape.json, is CodeGen-350M's size with an MLP width
(2688) that splits into 4-bit groups of 128 and Q4_0's blocks of 32 (configs/codegen25-350M-shape.json's
2736 does neither). Rows (--types for tpgen, --llama-types for llama.cpp; ratios pair them as written):
    tpgen `--weights int4` ~ llama.cpp Q4_0    tpgen `--weights int8` ~ llama.cpp Q8_0
    tpgen int4a8 (`--weights int4 --int4-activations int8`: x in 8 bits as Q4_0's dot with Q8
    activations) ~ llama.cpp Q4_0
    tpgen `--dtype bf16`   ~ llama.cpp BF16    tpgen f32 ~ llama.cpp F32 (F16 has no tpgen peer on the CPU)
tpgen draws its weights (`bench --config --random-weights`: Gaussian, std 0.02, norms mean 1), llama.cpp
reads a GGUF with the same statistics (not the same values); llama-quantize makes Q4_0/Q8_0/BF16 from
F16 with llama.cpp's default tensor mix (Q4_0 keeps output.weight in Q6_K; tpgen int4 keeps lm_head
int8). Q4_0 is blocks of 32 weights with an f16 scale (4.5 bits a weight); tpgen int4 is groups of
--group-size (tpgen's default 128) with an f32 scale and a byte zero (4.31 bits at 128, 5.25 at
32). A type tpgen refuses (its own error: a tpgen without `--weights int4`, or a shape whose MLP width
no group divides, as configs/codegen25-350M-shape.json's 2736) is a "refused" row, exit status 1;
llama-quantize keeps such matrices in f16 (the table's footer says how many).

Columns, each a median over --runs (figures in ms):
  batch B (decode ms/step at context --context): tpgen `bench --batch 1,8,32 --context C --steps S`
      (the median of S timed steps after 3 warm-up steps, so at positions C+3 ..); llama.cpp: batch 1
      `llama-bench -p 0 -n S -d C` (1000 / tokens/s of S generated tokens after an untimed prefill of
      C), batch B > 1 `llama-batched-bench -npp C -ntg S -npl B -pps` (one prompt of C shared by
      the B sequences, copied into each one's own KV stream, untimed; then S steps of B tokens:
      T_TG / S).
  prefill P tokens (batch 1): tpgen bench's prefill row (chunks of --max-batch-tokens, 512 by
      default), llama-bench `-p P -n 0` (P / tokens/s; one ubatch of 512 by default).
  batch 1, context L (--short-context, --long-context; 0 leaves one out): as batch 1 above at depth L
      (the KV cache read by a step grows with L: at 512 on the default shape, f32 KV, it is half of
      int4's weight bytes, so short contexts show the weights' formats apart).
Both engines get --threads threads (tpgen --threads, llama.cpp -t); llama.cpp runs its defaults
otherwise (repacked weights: the AMX buffer for Q4_0/Q8_0 on a CPU with AMX, flash attention
"auto", f16 KV cache), recorded in --out. The engines alternate (llama.cpp first on even runs,
tpgen first on odd ones) so that drifts in the machine's load hit both alike. Prints a Markdown
table, then the date, CPU and flags; --out writes every run's raw figures and both engines'
versions and settings; --record appends the table to docs/bench/ (tools/bench/perf_record.py,
section cpu-llamacpp, table decode-prefill; a tpgen cell's ratio is its speed against its llama.cpp
peer).

--smoke: tiny settings for checking the harness, not for figures (--runs 1 --steps 4 --batch 1,4
--context 64 --short-context 32 --long-context 192 --prefill 64, unless given).
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
import llamacpp_model  # noqa: E402  (the GGUF files)
import perf_record  # noqa: E402  (--record, the CPU's flags)

PROG = "bench_vs_llamacpp.py"
# tpgen type: (bench flags, row name, llama.cpp peer)
TPGEN_TYPES = {"int4": (["--weights", "int4"], "tpgen `--weights int4`", "Q4_0"),
               "int4a8": (["--weights", "int4", "--int4-activations", "int8"],
                          "tpgen `--weights int4 --int4-activations int8`", "Q4_0"),
               "int8": (["--weights", "int8"], "tpgen `--weights int8`", "Q8_0"),
               "bf16": (["--dtype", "bf16"], "tpgen `--dtype bf16`", "BF16"),
               "f32": ([], "tpgen f32", "F32")}
LLAMA_TYPES = ("Q4_0", "Q8_0", "BF16", "F16", "F32")
SMOKE = {"runs": 1, "steps": 4, "batch": "1,4", "context": 64, "short_context": 32, "long_context": 192, "prefill": 64}
DEFAULTS = {"runs": 3, "steps": 32, "batch": "1,8,32", "context": 512, "short_context": 100, "long_context": 1900,
            "prefill": 512}


class Failed(Exception):
    """One engine's command failed: the message has the command and its output's tail."""


def die(msg, rc=2):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(rc)


def int_list(flag, s):
    try:
        v = [int(x) for x in s.split(",")]
    except ValueError:
        die(f"{flag}: {s!r} is not a comma-separated list of integers")
    if not v or min(v) < 1 or len(set(v)) != len(v):
        die(f"{flag}: every value must be >= 1 and appear once, got {s!r}")
    return v


def run(cmd, what):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        out = p.stderr.strip() or p.stdout.strip()
        mine = [x for x in out.splitlines() if x.startswith("tpgen:")]  # not mpirun's banner about it
        tail = "\n".join(mine) if mine else out[-1500:]
        raise Failed(f"{what}: {shlex.join(cmd)} exited {p.returncode}: {tail}")
    return p


def columns(a):
    cols = [f"batch {B}" for B in a.batches]
    if a.prefill:
        cols.append(f"prefill {a.prefill} tokens")
    cols += [f"batch 1, context {L}" for L in b1_contexts(a)]
    return cols


def b1_contexts(a):
    """The contexts of the extra batch-1 columns (--short-context, --long-context; 0: none)."""
    return [L for L in (a.short_context, a.long_context) if L]


# ---- tpgen ----

def tpgen_bench(a, flags, batches, context, prefill):
    cmd = [a.mpirun, "-np", "1", "bench", "--config", a.config, "--random-weights", "--backend", "cpu",
           "--threads", str(a.threads), "--batch", ",".join(map(str, batches)), "--context", str(context),
           "--steps", str(a.steps), "--prefill", str(prefill), "--json", *flags]
    if prefill:
        cmd += ["--prefill-runs", "1"]
    p = run(cmd, "tpgen bench")
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    return rows, cmd


def tpgen_flags(a, t):
    """tpgen bench's flags for type t: int4 with --group-size and --lm-head when given; every type with
    --kv-cache-dtype when given (bf16: K/V in 16 bits as llama.cpp's f16 cache; under --dtype bf16 the
    cache is bf16 anyway)."""
    extra = []
    if t.startswith("int4") and a.group_size:
        extra += ["--group-size", str(a.group_size)]
    if t.startswith("int4") and a.lm_head:
        extra += ["--lm-head", a.lm_head]
    if a.kv_cache_dtype:
        extra += ["--kv-cache-dtype", a.kv_cache_dtype]
    return TPGEN_TYPES[t][0] + extra


def tpgen_row(a, t):
    """The row's name: the flags, when they are more than the type's own."""
    flags = tpgen_flags(a, t)
    return TPGEN_TYPES[t][1] if flags == TPGEN_TYPES[t][0] else f"tpgen `{' '.join(flags)}`"


def tpgen_run(a, t):
    """{column: ms} and the kernels tpgen named, for tpgen type t."""
    flags = tpgen_flags(a, t)
    rows, cmd = tpgen_bench(a, flags, a.batches, a.context, a.prefill)
    out, kern = {}, {}
    for r in rows:
        if r.get("kind") == "decode":
            out[f"batch {r['batch']}"] = r["ms_per_step"]
            kern[f"batch {r['batch']}"] = r.get("kernels")
        elif r.get("kind") == "prefill":
            out[f"prefill {r['prefill_tokens']} tokens"] = r["ms"]
            kern[f"prefill {r['prefill_tokens']} tokens"] = r.get("kernels")
    for L in b1_contexts(a):
        rows, _ = tpgen_bench(a, flags, [1], L, 0)
        for r in rows:
            if r.get("kind") == "decode" and r["batch"] == 1:
                out[f"batch 1, context {L}"] = r["ms_per_step"]
                kern[f"batch 1, context {L}"] = r.get("kernels")
    missing = [c for c in columns(a) if c not in out]
    if missing:
        raise Failed(f"tpgen bench gave no row for {missing}: {shlex.join(cmd)}")
    return {"ms": out, "kernels": kern}


# ---- llama.cpp ----

def llama_bench(a, gguf, extra):
    cmd = [a.bin["llama-bench"], "-m", gguf, "-t", str(a.threads), "-r", "1", "-o", "json", *extra]
    p = run(cmd, "llama-bench")
    try:
        recs = json.loads(p.stdout)
    except json.JSONDecodeError as e:
        raise Failed(f"llama-bench printed no JSON ({e}): {p.stdout[-500:]}")
    return recs


def batched_bench(a, gguf, batches):
    need = max(batches) * (a.context + a.steps + 1)
    cmd = [a.bin["llama-batched-bench"], "-m", gguf, "-t", str(a.threads), "-tb", str(a.threads),
           "-c", str(need), "-npp", str(a.context), "-ntg", str(a.steps), "-npl", ",".join(map(str, batches)),
           "-pps", "--output-format", "jsonl"]
    p = run(cmd, "llama-batched-bench")
    recs = [json.loads(line) for line in (p.stdout + "\n" + p.stderr).splitlines() if line.startswith('{"n_kv_max"')]
    return recs, cmd


def llama_run(a, lt):
    """{column: ms} and llama.cpp's own records, for GGUF type lt."""
    gguf = a.gguf[lt]
    out, raw = {}, {}
    depths = ([a.context] if 1 in a.batches else []) + b1_contexts(a)
    if depths:
        recs = llama_bench(a, gguf, ["-p", "0", "-n", str(a.steps), "-d", ",".join(map(str, depths))])
        raw["tg"] = recs
        for r in recs:
            ms = 1000.0 / r["avg_ts"]
            if r["n_depth"] == a.context and 1 in a.batches:
                out["batch 1"] = ms
            if r["n_depth"] in b1_contexts(a):
                out[f"batch 1, context {r['n_depth']}"] = ms
    if a.prefill:
        recs = llama_bench(a, gguf, ["-p", str(a.prefill), "-n", "0"])
        raw["pp"] = recs
        out[f"prefill {a.prefill} tokens"] = a.prefill * 1000.0 / recs[0]["avg_ts"]
    big = [B for B in a.batches if B > 1]
    if big and "llama-batched-bench" in a.bin:
        recs, cmd = batched_bench(a, gguf, big)
        raw["batched"] = recs
        for r in recs:
            out[f"batch {r['pl']}"] = r["t_tg"] * 1000.0 / r["tg"]
        gone = [B for B in big if f"batch {B}" not in out]
        if gone:  # it skips a size whose KV does not fit -c, silently
            raise Failed(f"llama-batched-bench gave no row for batch {gone}: {shlex.join(cmd)}")
    return {"ms": out, "raw": raw}


def llama_versions(a):
    v = {}
    try:
        p = subprocess.run([a.bin["llama-bench"], "--version"], capture_output=True, text=True, timeout=60)
        v["llama_bench_version"] = (p.stdout + p.stderr).strip().splitlines()[:2]
    except (OSError, subprocess.TimeoutExpired) as e:
        v["llama_bench_version"] = f"unavailable: {e}"
    try:
        with open(os.path.join(a.llamacpp, "BUILD_INFO")) as f:
            v["build_info"] = f.read().strip().splitlines()
    except OSError:
        v["build_info"] = None
    return v


def tpgen_version(a):
    g = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True)
    p = subprocess.run([a.tpgen, "info"], capture_output=True, text=True)
    return {"tpgen_git": g.stdout.strip() or None,
            "tpgen_threads": next((x for x in p.stdout.splitlines() if x.startswith("cpu threads:")), None)}


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(v):
    return (v if isinstance(v, str) else "n/a" if v is None else f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100
            else f"{v:.0f}")


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=os.path.join(ROOT, "configs", "codegen25-350M-q4-shape.json"))
    ap.add_argument("--tpgen", default=os.path.join(ROOT, "build", "bin", "tpgen"))
    ap.add_argument("--llamacpp", default=llamacpp_model.DEFAULT_DIR)
    ap.add_argument("--models-dir", help="where the GGUF files are kept (default LLAMACPP/models)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--types", default="int4,int8,bf16,f32", help="tpgen's rows")
    ap.add_argument("--llama-types", default="Q4_0,Q8_0,BF16", help="llama.cpp's rows")
    ap.add_argument("--group-size", type=int, help="tpgen int4's --group-size (default tpgen's, 128; Q4_0's "
                                                      "blocks are 32)")
    ap.add_argument("--lm-head", choices=("int8", "int4"), help="tpgen int4's --lm-head (default tpgen's, int8; "
                                                                  "Q4_0 keeps output.weight in Q6_K)")
    for k in DEFAULTS:
        ap.add_argument("--" + k.replace("_", "-"), type=str if k == "batch" else int, default=None,
                        help=f"default {DEFAULTS[k]} (--smoke: {SMOKE[k]})")
    ap.add_argument("--kv-cache-dtype", choices=("auto", "bf16"),
                    help="every tpgen row's --kv-cache-dtype (default tpgen's, auto: f32 K/V beside f32 activations)")
    ap.add_argument("--smoke", action="store_true", help="tiny settings: the harness works, no figures")
    ap.add_argument("--seed", type=int, default=0, help="the GGUF's weights")
    ap.add_argument("--out")
    perf_record.add_argument(ap, "cpu-llamacpp/decode-prefill")
    a = perf_record.parse_args(ap, PROG)
    for k, d in DEFAULTS.items():
        if getattr(a, k) is None:
            setattr(a, k, SMOKE[k] if a.smoke else d)
    a.batches = int_list("--batch", a.batch)
    a.types = [t for t in a.types.split(",") if t]
    a.llama_types = [t.upper() for t in a.llama_types.split(",") if t]
    bad = [t for t in a.types if t not in TPGEN_TYPES] + [t for t in a.llama_types if t not in LLAMA_TYPES]
    if bad or not (a.types or a.llama_types):
        die(f"--types takes {', '.join(TPGEN_TYPES)} and --llama-types {', '.join(LLAMA_TYPES)}; got "
            f"{','.join(bad) or 'none'}")
    for flag, v, lo in (("--threads", a.threads, 1), ("--runs", a.runs, 1), ("--steps", a.steps, 2),
                        ("--context", a.context, 1), ("--short-context", a.short_context, 0),
                        ("--long-context", a.long_context, 0),
                        ("--prefill", a.prefill, 0)):
        if v < lo:
            die(f"{flag} must be >= {lo}, got {v}")
    return a


def kept_matrices(files):
    """{type: "20 matrices f16"}: the quantized GGUFs in which llama-quantize left matrices in f16
    or bf16 (it does so for a matrix whose row length its block does not divide)."""
    out = {}
    for t, v in files.items():
        tt = v.get("tensor_types") or {}
        if t.startswith("Q"):
            left = {k: n for k, n in tt.items() if k in ("f16", "bf16")}
            if left:
                out[t] = ", ".join(f"{n} matrices {k}" for k, n in left.items())
    return out


def setup(a):
    """The binaries, the config's shape and the GGUF files; exits 77 without llama.cpp."""
    if not os.access(a.tpgen, os.X_OK):
        die(f"--tpgen {a.tpgen} is not an executable (build tpgen first)")
    os.environ["TPGEN_BIN"] = a.tpgen  # launcher/tpgen-mpirun runs this binary
    a.mpirun = os.path.join(ROOT, "launcher", "tpgen-mpirun")
    a.bin = {}
    for name in ("llama-bench", "llama-batched-bench"):
        exe = os.path.join(a.llamacpp, "bin", name)
        if os.access(exe, os.X_OK):
            a.bin[name] = exe
    if a.llama_types and "llama-bench" not in a.bin:
        die(f"no llama.cpp at {a.llamacpp} (bin/llama-bench): build it with tools/bench/build_llamacpp.sh "
            f"[--out DIR] and pass --llamacpp DIR", 77)
    if any(B > 1 for B in a.batches) and a.llama_types and "llama-batched-bench" not in a.bin:
        print(f"{PROG}: note: no llama-batched-bench in {a.llamacpp}/bin: llama.cpp's batch > 1 cells are n/a",
              file=sys.stderr)
    try:  # tpgen alone (--llama-types ""): any shape tpgen runs (CodeGen 1 too); a llama.cpp peer needs LLaMA
        if a.llama_types:
            npos = llamacpp_model.read_config(a.config)["max_position_embeddings"]
        else:
            with open(a.config) as f:
                c = json.load(f)
            npos = c.get("max_position_embeddings") or c.get("n_positions") or 2048
    except (llamacpp_model.Error, OSError, ValueError) as e:
        die(str(e))
    for flag, ctx in (("--context", a.context), ("--short-context", a.short_context),
                      ("--long-context", a.long_context)):
        if ctx and ctx + a.steps + 4 > npos:
            die(f"{flag} {ctx} + --steps {a.steps} + 4 (tpgen bench's warm-up) exceed max_position_embeddings={npos} "
                f"of {a.config}")
    if a.prefill > npos:
        die(f"--prefill {a.prefill} exceeds max_position_embeddings={npos} of {a.config}")
    a.gguf, a.gguf_files, a.kept = {}, {}, {}
    if a.llama_types:
        gguf = llamacpp_model.import_gguf(a.llamacpp)
        m = argparse.Namespace(config=a.config, dir=a.models_dir or os.path.join(a.llamacpp, "models"),
                               types=",".join(a.llama_types), seed=a.seed, llamacpp=a.llamacpp, threads=a.threads)
        try:
            a.gguf = llamacpp_model.make(m, gguf)
        except llamacpp_model.Error as e:
            die(str(e), e.rc)
        stem = os.path.splitext(os.path.basename(a.config))[0]
        with open(os.path.join(m.dir, stem + ".json")) as f:  # make's record: bytes and tensor types per file
            a.gguf_files = {t: v for t, v in json.load(f)["files"].items() if t in a.gguf}
    a.kept = kept_matrices(a.gguf_files)
    for t, n in a.kept.items():
        print(f"{PROG}: note: {t}: llama-quantize kept {n} (their row length is not a multiple of {t}'s block, "
              f"as configs/codegen25-350M-shape.json's MLP width 2736 in ffn_down)", file=sys.stderr)
    return npos


def main():
    a = parse()
    setup(a)
    cols = columns(a)
    cpu = perf_record.cpu_info()
    t_start = time.time()
    load = [os.getloadavg()]
    # rows: (engine, type); every run runs each in turn, llama.cpp first on even runs
    per = {("tpgen", t): [] for t in a.types}
    per.update({("llama.cpp", t): [] for t in a.llama_types})
    failed = {}
    for r in range(a.runs):
        order = ("llama.cpp", "tpgen") if r % 2 == 0 else ("tpgen", "llama.cpp")
        pairs = [(e, t) for e in order for t in (a.types if e == "tpgen" else a.llama_types)]
        for eng, t in pairs:
            if (eng, t) in failed:
                continue
            try:
                res = tpgen_run(a, t) if eng == "tpgen" else llama_run(a, t)
            except Failed as e:
                failed[(eng, t)] = str(e)
                print(f"{PROG}: {eng} {t} failed, its row is left out of later runs: {e}", file=sys.stderr, flush=True)
                continue
            per[(eng, t)].append(res)
            print(f"{PROG}: run {r + 1}/{a.runs} {eng} {t}: " + ", ".join(
                f"{c} {fmt(res['ms'].get(c))}" for c in cols) + f" (load {os.getloadavg()[0]:.1f})",
                  file=sys.stderr, flush=True)
    load.append(os.getloadavg())

    table = []
    for eng, types in (("tpgen", a.types), ("llama.cpp", a.llama_types)):
        for t in types:
            name = tpgen_row(a, t) if eng == "tpgen" else f"llama.cpp {t}"
            if (eng, t) in failed:
                word = "refused" if "tpgen: error:" in failed[(eng, t)] else "failed"  # its own clear error, or a crash
                table.append({"row": name, "engine": eng, "type": t, "values": [word] * len(cols),
                              "error": failed[(eng, t)]})
                continue
            vals = [med([x["ms"][c] for x in per[(eng, t)] if c in x["ms"]]) for c in cols]
            table.append({"row": name, "engine": eng, "type": t, "values": vals})
    lines = ["| | " + " | ".join(cols) + " |", "| --- |" + " ---: |" * len(cols)]
    lines += [f"| {row['row']} | " + " | ".join(fmt(v) for v in row["values"]) + " |" for row in table]
    ver = dict(tpgen_version(a), **(llama_versions(a) if a.llama_types else {}))
    settings = llama_settings(per)
    foot = (f"{time.strftime('%Y-%m-%d', time.gmtime(t_start))}, {cpu['model']} ({os.cpu_count()} CPUs online; flags: "
            f"{' '.join(cpu['flags']) or 'none of ' + ' '.join(perf_record.CPU_FLAGS)}), --threads {a.threads} each, "
            f"{os.path.basename(a.config)}, median of {a.runs} alternating run{'s' if a.runs > 1 else ''}; ms per decode "
            f"step at context {a.context} (tpgen bench --steps {a.steps}; llama-bench -n {a.steps} -d {a.context}, "
            f"llama-batched-bench -npp {a.context} -ntg {a.steps} -pps)"
            + (f", ms per {a.prefill}-token prefill at batch 1" if a.prefill else "") + ". "
            f"tpgen {ver['tpgen_git']}" + (f"; llama.cpp {settings['build']} ({settings['summary']})" if settings else "")
            + ". "
            f"Load average {load[0][0]:.1f} -> {load[-1][0]:.1f}."
            + "".join(f" llama.cpp {t} keeps {n} (llama-quantize)." for t, n in a.kept.items())
            + (" SMOKE settings: not figures." if a.smoke else ""))
    print("\n".join(lines) + "\n\n" + foot)
    for (eng, t), err in failed.items():
        print(f"{PROG}: {eng} {t}: {err}", file=sys.stderr)
    if a.out:
        res = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_start)), "argv": sys.argv[1:],
               "cpu": cpu, "versions": ver, "llamacpp_settings": settings, "config": os.path.abspath(a.config),
               "gguf": a.gguf, "gguf_files": a.gguf_files, "llamacpp_kept": a.kept, "threads": a.threads,
               "batches": a.batches, "context": a.context,
               "short_context": a.short_context, "long_context": a.long_context, "steps": a.steps, "prefill": a.prefill, "runs": a.runs,
               "smoke": a.smoke, "loadavg_1_5_15": load, "columns": cols, "table": table, "table_markdown": lines,
               "failed": {f"{e} {t}": m for (e, t), m in failed.items()},
               "per_run": {f"{e} {t}": v for (e, t), v in per.items()}}
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
        print(f"{PROG}: wrote {a.out}", file=sys.stderr)
    if a.record:
        record(a, table, cols, ver, settings, load, t_start, cpu)
    return 1 if failed else 0


def llama_settings(per):
    """What llama.cpp ran with, from llama-bench's own JSON (the first record seen)."""
    for (eng, _), runs in per.items():
        for res in runs if eng == "llama.cpp" else []:
            for recs in res["raw"].values():
                if recs and "build_commit" in recs[0]:
                    r = recs[0]
                    keys = ("build_commit", "build_number", "cpu_info", "backends", "n_threads", "n_batch", "n_ubatch",
                            "type_k", "type_v", "flash_attn", "use_mmap", "repack", "embeddings")
                    s = {k: r[k] for k in keys if k in r}
                    s["build"] = f"{r.get('build_commit', '?')} (build {r.get('build_number', '?')})"
                    fa = {-1: "auto", 0: "off", 1: "on"}.get(r.get("flash_attn"), r.get("flash_attn"))
                    s["summary"] = ", ".join([f"backends {r.get('backends')}", f"flash attention {fa}",
                                              f"KV {r.get('type_k')}", f"repack {r.get('repack')}",
                                              f"ubatch {r.get('n_ubatch')}"])
                    return s
    return {}


def record(a, table, cols, ver, settings, load, t_start, cpu):
    """The table as docs/bench/ records: ms per cell; a tpgen cell's ratio is its speed against
    its llama.cpp peer (TPGEN_TYPES) of the same run."""
    rows = {(r["engine"], r["type"]): r for r in table}
    cells = []
    for r in table:
        ref = rows.get(("llama.cpp", TPGEN_TYPES[r["type"]][2])) if r["engine"] == "tpgen" else None
        for i, (col, v) in enumerate(zip(cols, r["values"])):
            num = isinstance(v, (int, float))
            c = {"row": r["row"], "metric": col, "value": v if num else None, "unit": "ms"}
            if not num:
                c["text"] = fmt(v)
            rv = ref["values"][i] if ref else None
            if num and v and isinstance(rv, (int, float)):
                c["ratio"], c["reference"] = round(rv / v, 2), {"row": ref["row"], "value": rv}
            cells.append(c)
    notes = (f"{os.path.basename(a.config)} with random weights; ms per decode step at context {a.context} "
             f"(batch 1 also at {' and '.join(map(str, b1_contexts(a))) or 'no other'}) and per {a.prefill}-token prefill at batch 1, medians of {a.runs} "
             f"alternating runs, {a.threads} threads each"
             + (f"; llama.cpp {settings.get('build', '?')} ({settings.get('summary', '')}), GGUF by "
                f"tools/bench/llamacpp_model.py (llama-quantize's default mix)." if a.llama_types else ".")
             + "".join(f" llama.cpp {t} keeps {n}." for t, n in a.kept.items())
             + (" SMOKE settings." if a.smoke else ""))
    # tpgen alone (--llama-types ""): a table of its own per shape, beside the comparison's
    table = "decode-prefill" if a.llama_types else "tpgen-" + os.path.splitext(os.path.basename(a.config))[0]
    perf_record.record(a.record, "cpu-llamacpp", table, cells,
                       "python3 tools/bench/bench_vs_llamacpp.py " + shlex.join(sys.argv[1:]), notes=notes,
                       date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_start)),
                       cpu=cpu,
                       load=f"{load[0][0]:.1f}-{load[-1][0]:.1f}")


if __name__ == "__main__":
    sys.exit(main())
