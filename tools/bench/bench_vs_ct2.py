#!/usr/bin/env python3
"""tpgen vs CTranslate2 on the CPU, in one run, on the same random checkpoint and prompt ids (issue 21's table).

    python3 tools/bench/bench_vs_ct2.py --model DIR [--config configs/codegen-350M.json] [--threads N]
        [--batch 1,8,32] [--prompt-len 64] [--new-tokens 64] [--prefill 512] [--runs 3]
        [--types f32,int8,bf16] [--check-prompts 4] [--out FILE.json] [--ct2-dir DIR]
        [--record docs/bench/cpu-ct2.jsonl]

Needs ctranslate2 (PyPI), and torch + transformers to convert the checkpoint (its converter loads
the HF model; tools/fixtures/requirements-fixtures.txt). Writes the checkpoint (f32 safetensors, the codegen
tokenizer) with tools/fixtures/make.py random when DIR has none, and CTranslate2's copy of it with
ctranslate2.converters.TransformersConverter (weights kept in the checkpoint's dtype; the compute
type is chosen at load) in --ct2-dir (default DIR-ct2) when that has none.

Versions: CTranslate2 4.6.3 and later pass from_pretrained(dtype=), which transformers takes only
since 4.56 (before, "CodeGenForCausalLM.__init__() got an unexpected keyword argument 'dtype'").
Rather than refuse older transformers, the script converts through the converter's own load_model
hook with the keyword the installed transformers takes (tools/bench/ct2_compat.py, which says what was
read where), and logs which keyword it passed. Tested: CTranslate2 4.8.5 with transformers 4.40.2
and 5.25.0 (the same model.bin). Any other failure of the converter exits 2 naming both versions
and the pip command for the tested pair.

Per type, CTranslate2 compute type / tpgen flags: f32 = float32 / (none); int8 = int8_float32 /
--weights int8; bf16 = bfloat16 / --dtype bf16. CTranslate2 runs its default backend (oneDNN on
this wheel); a compute type it refuses is recorded as "refused" (4.8.5 refuses bfloat16 on the CPU
even with avx512_bf16 and AMX: get_supported_compute_types("cpu") lists int16, int8, int8_float32
and float32 on a Xeon with amx_bf16; --out records that list).

Method, the same for both engines where they allow it (every figure a median over --runs):
 - decode ms/step at batch B, CTranslate2: (t(N tokens) - t(1 token)) / (N - 1), greedy
   generate_batch of B prompts of --prompt-len ids, N = --new-tokens (min_length = max_length, so
   EOS does not end it); the N - 1 steps run at positions P .. P + N - 2.
 - decode ms/step, tpgen: `tpgen bench --batch ... --context C --steps S`, the median of S timed
   steps; C is chosen so the timed steps centre on CTranslate2's mean position P + (N - 2) / 2.
 - prefill of --prefill tokens at batch 1: CTranslate2 t(1 token) from an L-id prompt; tpgen
   bench's prefill row (chunks of --max-batch-tokens as generate runs it, the last token's logits).
The engines alternate (CTranslate2 first on even runs, tpgen first on odd ones), so drifts in the
machine's load hit both alike. Before timing, the f32 greedy ids of --check-prompts prompts
(--new-tokens each) from CTranslate2 and from `tpgen generate` are compared: any difference is
reported and makes the exit status 1 (after the table). Prints the Markdown table of
docs/PERFORMANCE.md, under it the kernels tpgen chose per type and column (matmul / logits /
attention, as `tpgen bench --json` names them), then its CPU flags, date and versions; --out writes
every run as JSON (the kernels in "tpgen_kernels": {type: {column: {"matmul", ...}}});
--record appends the table to docs/bench/ (tools/bench/perf_record.py: section cpu-ct2, table
decode-prefill; each tpgen cell with its speed against CTranslate2 of the same type, bf16 against
tpgen f32; the kernels line in its notes), from which tools/bench/perf_tables.py renders
docs/PERFORMANCE.md.
"""
import argparse
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
import bench_vs_hf  # noqa: E402  (tpgen generate through launcher/tpgen-mpirun)
import ct2_compat  # noqa: E402  (the converter's dtype keyword against the installed transformers)
import perf_record  # noqa: E402  (--record)

PROG = "bench_vs_ct2.py"
# type: (CTranslate2 compute type, tpgen flags, table row names)
TYPES = {"f32": ("float32", [], "CTranslate2 float32", "tpgen f32"),
         "int8": ("int8_float32", ["--weights", "int8"], "CTranslate2 int8 (int8_float32)", "tpgen `--weights int8`"),
         "bf16": ("bfloat16", ["--dtype", "bf16"], "CTranslate2 bfloat16", "tpgen `--dtype bf16`")}
CPU_FLAGS = perf_record.CPU_FLAGS
TPGEN_STEPS = 32


def die(msg, rc=2):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(rc)


def int_list(flag, s):
    try:
        v = [int(x) for x in s.split(",")]
    except ValueError:
        die(f"{flag}: {s!r} is not a comma-separated list of integers")
    if not v or min(v) < 1:
        die(f"{flag}: every value must be >= 1, got {s!r}")
    return v


def versions(tpgen):
    import ctranslate2
    v = {"ctranslate2": ctranslate2.__version__, "python": sys.version.split()[0]}
    for mod in ("transformers", "torch"):
        try:
            v[mod] = __import__(mod).__version__
        except ImportError:
            v[mod] = None
    g = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True)
    v["tpgen_git"] = g.stdout.strip() or None
    p = subprocess.run([tpgen, "info"], capture_output=True, text=True)  # its threading line (util/threads.h)
    v["tpgen_threads"] = next((l for l in p.stdout.splitlines() if l.startswith("cpu threads:")), None)
    return v


def ensure_models(a):
    if not os.path.exists(os.path.join(a.model, "config.json")):
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fixtures", "make.py"), "random", a.config, a.model,
                        "--dtype", "f32", "--tokenizer", os.path.join(ROOT, "tests", "data", "tokenizer", "codegen")],
                       check=True, stdout=sys.stderr)  # stdout: the table only
    if not os.path.exists(os.path.join(a.ct2_dir, "model.bin")):
        convert(a.model, a.ct2_dir)
    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(a.ct2_dir, "vocabulary.json")) as f:
        vocab = json.load(f)  # id -> token string: generate_batch takes strings, returns ids
    if len(vocab) < cfg["vocab_size"]:
        die(f"{a.ct2_dir}/vocabulary.json has {len(vocab)} tokens, the model {cfg['vocab_size']}")
    return cfg, vocab


def convert(model, ct2_dir):
    """CTranslate2's copy of model in ct2_dir, through ct2_compat.bridged_converter: the converter
    with the dtype keyword from_pretrained takes in the installed transformers (the module doc)."""
    import ctranslate2
    try:
        import torch  # noqa: F401  (the converter's own import of both fails silently)
        import transformers
    except ImportError as e:
        die(f"converting {model} for CTranslate2 needs torch and transformers ({e}): {ct2_compat.FIX} torch")
    from ctranslate2.converters import TransformersConverter
    ct2_v, tf_v = ctranslate2.__version__, transformers.__version__
    try:
        note = ct2_compat.plan(ct2_v, tf_v)[2]
        conv = ct2_compat.bridged_converter(TransformersConverter, tf_v)
    except ValueError as e:
        die(f"cannot convert with ctranslate2 {ct2_v} and transformers {tf_v}: {e}; tested: {ct2_compat.TESTED}: "
            f"{ct2_compat.FIX}")
    print(f"{PROG}: converter: {note}", file=sys.stderr)
    t0 = time.time()
    try:
        conv(model).convert(ct2_dir, force=True)
    except Exception as e:  # any failure of the converter: say which versions, and which are known to work
        traceback.print_exc()
        die(f"CTranslate2 {ct2_v}'s converter failed with transformers {tf_v} on {model}: {type(e).__name__}: {e}\n"
            f"tested: {ct2_compat.TESTED}; to get those: {ct2_compat.FIX}")
    print(f"{PROG}: converted {model} -> {ct2_dir} ({time.time() - t0:.0f} s)", file=sys.stderr)


def ct2_cpu_types():
    """The compute types CTranslate2 offers on this CPU, sorted (JSON: "ct2_cpu_compute_types")."""
    import ctranslate2
    return sorted(ctranslate2.get_supported_compute_types("cpu"))


class CT2:
    """One ctranslate2.Generator per compute type, loaded once (its load is not timed)."""

    def __init__(self, path, compute_type, threads, vocab):
        import ctranslate2
        self.vocab = vocab
        self.gen = ctranslate2.Generator(path, device="cpu", compute_type=compute_type, inter_threads=1,
                                         intra_threads=threads)
        self.generate([[1, 2, 3, 4]], 2)  # warm-up

    def generate(self, prompts, n):
        """Greedy, exactly n new ids per prompt; (seconds, ids)."""
        toks = [[self.vocab[i] for i in p] for p in prompts]
        t0 = time.perf_counter()
        res = self.gen.generate_batch(toks, max_length=n, min_length=n, sampling_topk=1, beam_size=1,
                                      include_prompt_in_result=False)
        dt = time.perf_counter() - t0
        ids = [r.sequences_ids[0] for r in res]
        if any(len(x) != n for x in ids):
            raise RuntimeError(f"CTranslate2 returned {[len(x) for x in ids]} ids, asked {n} each")
        return dt, ids


def ct2_run(g, a, prompts, long_prompt):
    """One run of every batch size and the prefill: {"decode_ms": {B: ms}, "prefill_ms": ms}."""
    out = {"decode_ms": {}}
    for B in a.batches:
        full = g.generate(prompts[:B], a.new_tokens)[0]
        one = g.generate(prompts[:B], 1)[0]
        out["decode_ms"][B] = (full - one) / (a.new_tokens - 1) * 1e3
    if a.prefill:
        out["prefill_ms"] = g.generate([long_prompt], 1)[0] * 1e3
    return out


def tpgen_context(a):
    """--context whose timed steps (after bench's 3 warm-up steps) centre on CTranslate2's."""
    return max(0, a.prompt_len + (a.new_tokens - 2) // 2 - 3 - (TPGEN_STEPS - 1) // 2)


def tpgen_run(a, flags):
    cmd = [bench_vs_hf.MPIRUN, "-np", "1", "bench", "--model", a.model, "--backend", "cpu", "--threads",
           str(a.threads), "--batch", ",".join(map(str, a.batches)), "--context", str(tpgen_context(a)), "--steps",
           str(TPGEN_STEPS), "--prefill", str(a.prefill), "--prefill-runs", "1", "--json", *flags]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-2000:]}")
    out = {"decode_ms": {}, "kernels": {}}
    for line in p.stdout.splitlines():
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r.get("kind") == "decode":
            out["decode_ms"][r["batch"]] = r["ms_per_step"]
            out["kernels"][f"batch {r['batch']}"] = r.get("kernels")
        elif r.get("kind") == "prefill":
            out["prefill_ms"] = r["ms"]
            out["kernels"][f"prefill {r['prefill_tokens']} tokens"] = r.get("kernels")
    if sorted(out["decode_ms"]) != sorted(a.batches) or (a.prefill and "prefill_ms" not in out):
        raise RuntimeError(f"tpgen bench gave rows for batches {sorted(out['decode_ms'])} "
                           f"(prefill {'prefill_ms' in out}), asked {a.batches} and prefill {a.prefill}:\n{p.stdout}")
    return out


def check_ids(a, g, prompts):
    """f32 greedy ids of both engines on the first --check-prompts prompts: (agree, details)."""
    ps = prompts[:a.check_prompts]
    _, ct2_ids = g.generate(ps, a.new_tokens)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("".join(",".join(map(str, p)) + "\n" for p in ps))
        pf = f.name
    try:
        _, results = bench_vs_hf.tpgen_generate(a.model, pf, a.new_tokens, 1, a.threads)
    finally:
        os.unlink(pf)
    by_prompt = {tuple(r["prompt_ids"]): r["ids"] for r in results}
    details = []
    for i, (p, c) in enumerate(zip(ps, ct2_ids)):
        t = by_prompt.get(tuple(p))
        if t is None:
            details.append({"prompt": i, "error": "tpgen returned no result for this prompt"})
            continue
        first = next((j for j, (x, y) in enumerate(zip(c, t)) if x != y), None)
        if first is None and len(c) != len(t):
            first = min(len(c), len(t))
        details.append({"prompt": i, "equal": first is None, "first_difference": first,
                        "ct2": c, "tpgen": t})
    return all(d.get("equal") for d in details), details


def tpgen_kernels(runs, cols):
    """{type: {column: kernels}}: the kernels tpgen bench named for each row ({"matmul", "logits",
    "attention"[, "matmul_last_chunk"]}, launcher/cmd_bench.c), or the list of the distinct ones
    when the runs did not all choose the same."""
    out = {}
    for t, r in runs.items():
        out[t] = {}
        for col in cols:
            seen = []
            for x in r["tpgen"]:
                k = x["kernels"].get(col)
                if k not in seen:
                    seen.append(k)
            out[t][col] = seen[0] if len(seen) == 1 else seen
    return out


def kernels_text(k):
    """One row's kernels as `matmul` / `logits` / `attention` (file doc of launcher/cmd_bench.c)."""
    if isinstance(k, list):
        return " or ".join(kernels_text(x) for x in k) + " (varied across runs)"
    if not k:
        return "not reported"
    text = " / ".join(f"`{k.get(op, '?')}`" for op in ("matmul", "logits", "attention"))
    return text + (f" (last chunk's matmul `{k['matmul_last_chunk']}`)" if "matmul_last_chunk" in k else "")


def kernels_line(kern):
    """The line under the table: per type, the columns that share kernels, then those kernels."""
    parts = []
    for t, by_col in kern.items():
        groups = []  # [text, [columns]] in column order, neighbours with the same kernels joined
        for col, k in by_col.items():
            text = kernels_text(k)
            if groups and groups[-1][0] == text:
                groups[-1][1].append(col)
            else:
                groups.append([text, [col]])
        parts.append(f"{t}: " + "; ".join(", ".join(cs) + " " + text for text, cs in groups))
    return "tpgen kernels (matmul / logits / attention): " + ". ".join(parts) + "."


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(v):
    return "refused" if v == "refused" else "n/a" if v is None else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--config", default=os.path.join(ROOT, "configs", "codegen-350M.json"))
    ap.add_argument("--ct2-dir")
    ap.add_argument("--tpgen", default=os.path.join(ROOT, "build", "bin", "tpgen"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch", default="1,8,32")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--prefill", type=int, default=512, help="prompt length of the prefill column (0: none)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--types", default="f32,int8,bf16")
    ap.add_argument("--check-prompts", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    ap.add_argument("--record", metavar="FILE.jsonl", help="append the table to docs/bench/ (tools/bench/perf_record.py)")
    a = ap.parse_args()
    a.batches = int_list("--batch", a.batch)
    a.types = a.types.split(",")
    bad = [t for t in a.types if t not in TYPES]
    if bad or "f32" not in a.types:
        die(f"--types expects a list of f32, int8, bf16 including f32 (the ids check), got {','.join(a.types)!r}")
    for flag, v, lo in (("--threads", a.threads, 1), ("--prompt-len", a.prompt_len, 1), ("--runs", a.runs, 1),
                        ("--new-tokens", a.new_tokens, 2), ("--prefill", a.prefill, 0),
                        ("--check-prompts", a.check_prompts, 1)):
        if v < lo:
            die(f"{flag} must be >= {lo}, got {v}")
    if not os.access(a.tpgen, os.X_OK):
        die(f"--tpgen {a.tpgen} is not an executable (build tpgen first)")
    os.environ["TPGEN_BIN"] = a.tpgen  # launcher/tpgen-mpirun runs this binary
    try:
        import ctranslate2  # noqa: F401
    except ImportError as e:
        die(f"cannot import ctranslate2 ({e}): pip install ctranslate2", 77)
    a.ct2_dir = a.ct2_dir or a.model.rstrip("/") + "-ct2"
    cfg, vocab = ensure_models(a)
    npos = cfg["n_positions"]
    ctx = tpgen_context(a)
    if a.prompt_len + a.new_tokens > npos or ctx + TPGEN_STEPS + 4 > npos:
        die(f"--prompt-len {a.prompt_len} + --new-tokens {a.new_tokens} exceed n_positions={npos} (tpgen bench needs "
            f"--context {ctx} + {TPGEN_STEPS + 4} positions too)")
    if a.prefill > npos:
        die(f"--prefill {a.prefill} exceeds n_positions={npos}")

    rng = random.Random(a.seed)
    top = min(cfg["vocab_size"], 50000)  # ids of the tokenizer's own vocabulary
    prompts = [[rng.randrange(top) for _ in range(a.prompt_len)] for _ in range(max(max(a.batches), a.check_prompts))]
    long_prompt = [rng.randrange(top) for _ in range(a.prefill)]
    cpu = perf_record.cpu_info()
    cpu_name, flags = cpu["model"], cpu["flags"]
    t_start = time.time()
    load = [os.getloadavg()]

    gens, refused = {}, {}
    for t in a.types:
        try:
            gens[t] = CT2(a.ct2_dir, TYPES[t][0], a.threads, vocab)
        except ValueError as e:  # "Requested bfloat16 compute type, but the target device ... do not support"
            refused[t] = str(e)
            print(f"{PROG}: CTranslate2 refuses {TYPES[t][0]}: {e}", file=sys.stderr)
    if "f32" in refused:
        die(f"CTranslate2 refused float32: {refused['f32']}", 1)
    agree, details = check_ids(a, gens["f32"], prompts)
    print(f"{PROG}: f32 greedy ids, {a.check_prompts} prompts x {a.new_tokens}: "
          + ("identical" if agree else "DIFFER: " + json.dumps([{k: d.get(k) for k in ("prompt", "first_difference",
                                                                                     "error")} for d in details])),
          file=sys.stderr, flush=True)

    runs = {t: {"ct2": [], "tpgen": []} for t in a.types}
    for r in range(a.runs):
        order = ("ct2", "tpgen") if r % 2 == 0 else ("tpgen", "ct2")
        for t in a.types:
            for eng in order:
                if eng == "ct2" and t in refused:
                    continue
                res = ct2_run(gens[t], a, prompts, long_prompt) if eng == "ct2" else tpgen_run(a, TYPES[t][1])
                runs[t][eng].append(res)
                print(f"{PROG}: run {r + 1}/{a.runs} {t} {eng}: " + ", ".join(
                    f"b{B} {res['decode_ms'][B]:.1f}" for B in a.batches)
                      + (f", prefill {res['prefill_ms']:.0f} ms" if a.prefill else "")
                      + f" (load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
    load.append(os.getloadavg())

    cols = [f"batch {B}" for B in a.batches] + ([f"prefill {a.prefill} tokens"] if a.prefill else [])
    table = []
    for t in a.types:
        for eng in ("ct2", "tpgen"):
            name = TYPES[t][2] if eng == "ct2" else TYPES[t][3]
            if eng == "ct2" and t in refused:
                table.append({"row": name, "type": t, "engine": eng, "values": ["refused"] * len(cols)})
                continue
            rs = runs[t][eng]
            vals = [med([x["decode_ms"][B] for x in rs]) for B in a.batches]
            if a.prefill:
                vals.append(med([x["prefill_ms"] for x in rs]))
            table.append({"row": name, "type": t, "engine": eng, "values": vals})
    lines = ["| | " + " | ".join(cols) + " |", "| --- |" + " ---: |" * len(cols)]
    lines += [f"| {row['row']} | " + " | ".join(fmt(v) for v in row["values"]) + " |" for row in table]
    ver = versions(a.tpgen)
    foot = (f"{time.strftime('%Y-%m-%d', time.gmtime(t_start))}, {cpu_name} ({os.cpu_count()} CPUs online; flags: "
            f"{' '.join(flags) or 'none of ' + ' '.join(CPU_FLAGS)}), {a.threads} threads each, median of {a.runs} "
            f"alternating runs; decode ms/step: CTranslate2 (t({a.new_tokens}) - t(1)) / {a.new_tokens - 1} after "
            f"{a.prompt_len}-id prompts, tpgen bench --context {ctx} --steps {TPGEN_STEPS}; prefill ms at batch 1. "
            f"CTranslate2 {ver['ctranslate2']} (default backend), tpgen {ver['tpgen_git']}. f32 greedy ids "
            f"{'identical' if agree else 'DIFFER'} ({a.check_prompts} prompts x {a.new_tokens}). Load average "
            f"{load[0][0]:.1f} -> {load[-1][0]:.1f}.")
    kern = tpgen_kernels(runs, cols)
    kline = kernels_line(kern)
    print("\n".join(lines) + "\n\n" + kline + "\n\n" + foot)
    if a.out:
        res = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_start)), "argv": sys.argv[1:],
               "cpu": {"model": cpu_name, "flags": flags, "cpus_online": os.cpu_count()}, "versions": ver,
               "model": os.path.abspath(a.model), "ct2_model": os.path.abspath(a.ct2_dir), "threads": a.threads,
               "batches": a.batches, "prompt_len": a.prompt_len, "new_tokens": a.new_tokens, "prefill": a.prefill,
               "tpgen_context": ctx, "tpgen_steps": TPGEN_STEPS, "runs": a.runs, "loadavg_1_5_15": load,
               "ids_check": {"agree": agree, "prompts": details}, "ct2_refused": refused,
               "ct2_cpu_compute_types": ct2_cpu_types(), "columns": cols,
               "table": table, "table_markdown": lines, "tpgen_kernels": kern, "tpgen_kernels_line": kline,
               "per_run": runs}
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
        print(f"{PROG}: wrote {a.out}", file=sys.stderr)
    if a.record:
        record(a, table, cols, ver, ctx, agree, load, t_start, cpu_name, flags, kline=kline)
    return 0 if agree else 1


def record(a, table, cols, ver, ctx, agree, load, t_start, cpu_name, flags, kline=None):
    """The table as docs/bench/ records: ms per cell; a tpgen cell's ratio is its speed against
    CTranslate2 of the same type (bf16: against tpgen f32, as CTranslate2 refuses bf16 here)."""
    rows = {(r["engine"], r["type"]): r for r in table}
    cells = []
    for r in table:
        ref = None
        if r["engine"] == "tpgen":
            ref = rows.get(("ct2", r["type"])) if r["type"] != "bf16" else rows.get(("tpgen", "f32"))
        for i, (col, v) in enumerate(zip(cols, r["values"])):
            c = {"row": r["row"], "metric": col, "value": v if isinstance(v, (int, float)) else None, "unit": "ms"}
            if c["value"] is None:
                c["text"] = fmt(v)
            rv = ref["values"][i] if ref else None
            if c["value"] and isinstance(rv, (int, float)):
                c["ratio"], c["reference"] = round(rv / c["value"], 2), {"row": ref["row"], "value": rv}
            cells.append(c)
    notes = (f"ms per decode step (context ~{ctx}) and per {a.prefill}-token prefill at batch 1, medians of {a.runs} "
             f"alternating runs; CTranslate2 {ver['ctranslate2']} (default backend); f32 greedy ids of both "
             f"{'identical' if agree else 'DIFFER'} ({a.check_prompts} prompts x {a.new_tokens} tokens)."
             + (f" {kline}" if kline else ""))
    perf_record.record(a.record, "cpu-ct2", "decode-prefill", cells, "python3 tools/bench/bench_vs_ct2.py " + shlex.join(
        sys.argv[1:]), notes=notes, date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_start)),
        cpu=dict(perf_record.cpu_info(), model=cpu_name, flags=flags), load=f"{load[0][0]:.1f}-{load[-1][0]:.1f}")


if __name__ == "__main__":
    sys.exit(main())
