#!/usr/bin/env python3
"""tpgen bench: the bytes a decode step reads, the kernels each JSON row names, defaults that fit.

usage: bench_names.py TPGEN MPIEXEC FIXTURE MODE [ARGS]
  bytes DTYPE NP   f32 | bf16 | int8 at TP NP: weight_bytes of every decode row equal the bytes of
                   this rank's GEMM matrices computed here from config.json (qkv, out_proj, fc_in,
                   fc_out per layer, the padded lm_head slice) in the stored dtype -- 4 bytes an
                   element (f32), 2 (bf16), or 1 plus a 4-byte f32 scale per row (int8) -- and
                   kv_bytes = B (context + 1) 2 n_layer Hl D in the KV dtype (f32 under int8).
  names            kernels of every row at TP 1 against the paths the dispatch takes: f32 by T
                   (sgemv at 1, our rows kernel at 2..16 in the build this CPU runs, sgemm above),
                   decode attention "dot", prefill "tile", a shorter last prefill chunk named
                   apart; then each env override that forces a path (TPGEN_CPU_ISA=c,
                   TPGEN_CPU_GEMM=blas, TPGEN_BF16_GEMV_MAX_T, TPGEN_CPU_ISA=c for int8,
                   TPGEN_INT8_GEMM=gemv|blas) changes exactly the names it should, and --verbose
                   reports the same int8 / bf16 path.
  defaults         no --context / --steps on a model with a small n_positions: the rows run at
                   steps = min(32, n_positions - 4), context = min(512, n_positions - steps - 4),
                   and the largest --context that fits is accepted.
Exit 77 (SKIP) when this build has no oneDNN (no --dtype bf16 on the CPU).
"""
import json
import math
import os
import subprocess
import sys

tpgen, mpiexec, fixture, mode = sys.argv[1:5]
cfg = json.load(open(os.path.join(fixture, "config.json")))
E, H, L, V = cfg["n_embd"], cfg["n_head"], cfg["n_layer"], cfg["vocab_size"]
I = cfg["n_inner"] or 4 * E
D = E // H
WARMUP = 3


def bench(np_, *flags, env=None, verbose=False):
    """JSON rows (and stderr) of one tpgen bench run; exits 77 when bf16 is not built."""
    cmd = [mpiexec, "--oversubscribe", "--allow-run-as-root", "-np", str(np_), tpgen, "bench", "--model", fixture,
           "--backend", "cpu", "--threads", "1", "--json", "--prefill-runs", "1", *flags]
    if verbose:
        cmd.append("--verbose")
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=e)
    if p.returncode != 0 and "built without it" in p.stderr:
        print("SKIP: this tpgen has no oneDNN (--dtype bf16 on the CPU)")
        sys.exit(77)
    assert p.returncode == 0, (cmd, p.returncode, p.stderr[-2000:])
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    assert rows, (cmd, p.stdout)
    return rows, p.stderr


def shard(tp):
    """Rank 0's heads, MLP rows and (padded) vocab rows."""
    return H // tp, I // tp, math.ceil(V / tp)


if mode == "bytes":
    dtype, tp = sys.argv[5], int(sys.argv[6])
    flags = {"f32": [], "bf16": ["--dtype", "bf16"], "int8": ["--weights", "int8"]}[dtype]
    rows, _ = bench(tp, "--batch", "1,3", "--context", "20", "--steps", "2", "--prefill", "0", *flags)
    Hl, Il, Vl = shard(tp)
    mats = [(3 * Hl * D, E), (E, Hl * D), (Il, E), (E, Il)] * L + [(Vl, E)]  # [rows, cols] each
    if dtype == "int8":
        want_w = sum(r * c + 4 * r for r, c in mats)
    else:
        want_w = sum(r * c for r, c in mats) * (4 if dtype == "f32" else 2)
    kv_es = 2 if dtype == "bf16" else 4
    dec = [r for r in rows if r["kind"] == "decode"]
    assert [r["batch"] for r in dec] == [1, 3], rows
    for r in dec:
        B = r["batch"]
        want_kv = B * (20 + 1) * 2 * L * Hl * D * kv_es
        assert r["weight_bytes"] == want_w, ("weight_bytes", r["weight_bytes"], "expected", want_w, dtype, tp)
        assert r["kv_bytes"] == want_kv, ("kv_bytes", r["kv_bytes"], "expected", want_kv, dtype, tp)
        assert r["weight_bytes_per_token"] == round(want_w / B), r
    print("bench %s TP %d: %d weight bytes and the KV bytes per step, as computed from config.json: ok"
          % (dtype, tp, want_w))

elif mode == "names":
    flags = lambda b: ["--batch", b, "--context", "20", "--steps", "2"]
    cpu_flags = set()
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            cpu_flags = set(line.split(":")[1].split())
            break
    v3 = {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"} <= cpu_flags
    isa = "avx2" if v3 else "c"  # the build CPU_SIMD_CLONES resolves to (x86-64-v3 or baseline)
    # attention's build by CPUID (kernels/cpu/cpu_attn.h): AVX-512F, AVX2 + FMA, or plain C
    att = "avx512" if {"avx2", "fma", "avx512f"} <= cpu_flags else "avx2" if {"avx2", "fma"} <= cpu_flags else "c"
    # int8's highest tier (kernels/cpu/cpu_isa.h): the tiny model's matrices are below the size
    # measured at load (cpu_tune.h), so they run it
    avx2 = {"avx2", "fma"} <= cpu_flags
    # the f32 rows kernel's highest tier (kernels/cpu/cpu_matmul.c; the tiny model: unmeasured)
    f32t = "avx512" if avx2 and {"avx512f", "avx512bw", "avx512vl"} <= cpu_flags else "avx2" if avx2 else "c"
    i8 = ("avx512vnni" if avx2 and {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"} <= cpu_flags
          else "avxvnni" if avx2 and "avx_vnni" in cpu_flags else "avx2" if avx2 else "c")
    # int8's GEMM (T > 16) has one tier more: amx (AMX-TILE + AMX-INT8 with AVX-512)
    i8g = "amx" if i8 == "avx512vnni" and {"amx_tile", "amx_int8"} <= cpu_flags else i8

    def kernels(rows, kind, key, value):
        return [r["kernels"] for r in rows if r["kind"] == kind and r[key] == value][0]

    # f32: 48-token chunks, so the 100-token prompt ends in a 4-token chunk (the rows kernel)
    rows, _ = bench(1, *flags("1,3,20"), "--prefill", "96,100", "--max-batch-tokens", "48")
    assert kernels(rows, "decode", "batch", 1) == {"matmul": "openblas-sgemv-f32", "logits": "openblas-sgemv-f32",
                                                   "attention": "dot-f32-" + att}, rows
    assert kernels(rows, "decode", "batch", 3) == {"matmul": "rows-f32-" + f32t, "logits": "rows-f32-" + f32t,
                                                   "attention": "dot-f32-" + att}, rows
    assert kernels(rows, "decode", "batch", 20) == {"matmul": "openblas-sgemm-f32", "logits": "openblas-sgemm-f32",
                                                    "attention": "dot-f32-" + att}, rows
    assert kernels(rows, "prefill", "prefill_tokens", 96) == {
        "matmul": "openblas-sgemm-f32", "logits": "openblas-sgemv-f32", "attention": "tile-f32-" + att}, rows
    assert kernels(rows, "prefill", "prefill_tokens", 100) == {
        "matmul": "openblas-sgemm-f32", "logits": "openblas-sgemv-f32", "attention": "tile-f32-" + att,
        "matmul_last_chunk": "rows-f32-" + f32t}, rows
    # the GEMM probe runs at the largest prefill chunk (48 tokens): sgemm
    assert all(r["gemm_kernel"] == "openblas-sgemm-f32" for r in rows if r["kind"] == "prefill"), rows
    print("f32 names by T (rows kernel tier %s): ok" % f32t)

    # int8: the GEMV up to 16 tokens by default (4 on the plain-C path); each override moves every
    # GEMM, attention stays f32 (TPGEN_CPU_ISA=c caps it at its plain-C build too)
    rows, err = bench(1, *flags("1,5"), "--prefill", "100", "--weights", "int8", env={"TPGEN_CPU_ISA": "c"},
                      verbose=True)
    assert kernels(rows, "decode", "batch", 1) == {"matmul": "gemv-int8-c", "logits": "gemv-int8-c",
                                                   "attention": "dot-f32-c"}, rows
    assert "cpu attention: c: capped by TPGEN_CPU_ISA" in err, err
    assert kernels(rows, "decode", "batch", 5)["matmul"] == "openblas-sgemm-int8-panels", rows
    assert kernels(rows, "prefill", "prefill_tokens", 100)["matmul"] == "openblas-sgemm-int8-panels", rows
    assert "matmul -> GEMV c (" in err and "matmul -> OpenBLAS sgemm on f32 panels" in err, err
    rows, err = bench(1, *flags("1"), "--prefill", "100", "--weights", "int8", env={"TPGEN_INT8_GEMM": "blas"},
                      verbose=True)
    assert kernels(rows, "decode", "batch", 1)["matmul"] == "openblas-sgemm-int8-panels", rows
    assert kernels(rows, "decode", "batch", 1)["logits"] == "openblas-sgemm-int8-panels", rows
    assert "GEMV" not in err.replace("GEMV (T <=", ""), err
    rows, _ = bench(1, *flags("1"), "--prefill", "100", "--weights", "int8", env={"TPGEN_INT8_GEMM": "gemv"})
    assert kernels(rows, "prefill", "prefill_tokens", 100)["matmul"] == "gemv-int8-" + i8, rows
    if avx2:  # the int8 GEMM above 16 tokens by default, or for every T when forced
        rows, err = bench(1, *flags("1"), "--prefill", "100", "--weights", "int8", verbose=True)
        assert kernels(rows, "decode", "batch", 1)["matmul"] == "gemv-int8-" + i8, rows
        assert kernels(rows, "prefill", "prefill_tokens", 100)["matmul"] == "gemm-int8-" + i8g, rows
        assert "matmul -> GEMM " + i8g + " (" in err, err
        rows, _ = bench(1, *flags("1"), "--prefill", "100", "--weights", "int8", env={"TPGEN_INT8_GEMM": "gemm"})
        assert kernels(rows, "decode", "batch", 1) == {"matmul": "gemm-int8-" + i8g, "logits": "gemm-int8-" + i8g,
                                                       "attention": "dot-f32-" + att}, rows
        # TPGEN_CPU_ISA=avx2 caps int8 at its AVX2 kernels
        rows, _ = bench(1, *flags("1"), "--prefill", "100", "--weights", "int8", env={"TPGEN_CPU_ISA": "avx2"})
        assert kernels(rows, "decode", "batch", 1)["matmul"] == "gemv-int8-avx2", rows
        assert kernels(rows, "decode", "batch", 1)["attention"] == "dot-f32-avx2", rows
        assert kernels(rows, "prefill", "prefill_tokens", 100)["matmul"] == "gemm-int8-avx2", rows
    print("int8 names under TPGEN_CPU_ISA / TPGEN_INT8_GEMM: ok")

    # bf16: the plain-C GEMV, batched GEMMs on OpenBLAS panels, the crossover moved
    env = {"TPGEN_CPU_ISA": "c", "TPGEN_CPU_GEMM": "blas", "TPGEN_CPU_ATTN": "c"}
    rows, err = bench(1, *flags("1,20"), "--prefill", "100", "--dtype", "bf16", env=env, verbose=True)
    assert kernels(rows, "decode", "batch", 1) == {"matmul": "gemv-bf16-c", "logits": "gemv-bf16-c",
                                                   "attention": "dot-bf16-c"}, rows
    assert kernels(rows, "prefill", "prefill_tokens", 100)["attention"] == "tile-bf16-c", rows
    assert "attention -> dot-bf16-c (" in err and "attention -> tile-bf16-c (" in err, err
    assert kernels(rows, "decode", "batch", 20)["matmul"] == "openblas-sgemm-bf16-panels", rows
    assert kernels(rows, "prefill", "prefill_tokens", 100)["logits"] == "gemv-bf16-c", rows
    assert "GEMV c (portable fallback)" in err and "OpenBLAS sgemm on widened bf16 panels" in err, err
    rows, _ = bench(1, *flags("20"), "--prefill", "0", "--dtype", "bf16",
                    env=dict(env, TPGEN_BF16_GEMV_MAX_T="32"))
    assert kernels(rows, "decode", "batch", 20)["matmul"] == "gemv-bf16-c", rows
    print("bf16 names under TPGEN_CPU_ISA=c / TPGEN_CPU_GEMM=blas / TPGEN_BF16_GEMV_MAX_T: ok")
    if isa == "avx2":  # the FMA GEMM on the bf16 weight panels (the default without native bf16)
        rows, err = bench(1, *flags("20"), "--prefill", "0", "--dtype", "bf16",
                          env={"TPGEN_CPU_GEMM": "fma", "TPGEN_CPU_ISA": "avx2"},  # fma reads the avx2 panels
                          verbose=True)
        assert kernels(rows, "decode", "batch", 20)["matmul"] == "gemm-bf16w-fma-avx2", rows
        assert "matmul -> FMA GEMM on the bf16 weight panels" in err, err
        print("bf16 FMA GEMM name: ok")
    # oneDNN's batched path where this CPU runs bf16 matmul natively (the name carries its kernel)
    cmd = [mpiexec, "--oversubscribe", "--allow-run-as-root", "-np", "1", tpgen, "bench", "--model", fixture,
           "--backend", "cpu", "--threads", "1", "--json", "--dtype", "bf16", "--verbose", *flags("20"),
           "--prefill", "0"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=dict(os.environ, TPGEN_CPU_GEMM="dnnl"))
    if p.returncode != 0 and "oneDNN has no bf16 matmul on this CPU" in p.stderr:
        print("bf16 oneDNN name: not checked (oneDNN has no bf16 matmul on this CPU)")
    else:
        assert p.returncode == 0, (cmd, p.stderr[-2000:])
        row = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")][0]
        impl = row["kernels"]["matmul"]
        assert impl.startswith("onednn-bf16 (") and impl.endswith(")"), row
        assert "matmul -> oneDNN matmul " + impl[len("onednn-bf16 ("):-1] in p.stderr, (impl, p.stderr)
        print("bf16 oneDNN name %s: ok" % impl)

elif mode == "defaults":
    n_pos = cfg["n_positions"]
    rows, _ = bench(2, "--batch", "1,2", "--prefill", "0")
    steps = min(32, n_pos - WARMUP - 1)
    ctx = min(512, n_pos - WARMUP - 1 - steps)
    assert [(r["context"], r["steps"]) for r in rows] == [(ctx, steps)] * 2, (rows, ctx, steps)
    rows, _ = bench(1, "--batch", "1", "--prefill", "0", "--steps", "4", "--context", str(n_pos - WARMUP - 1 - 4))
    assert [(r["context"], r["steps"]) for r in rows] == [(n_pos - 8, 4)], rows
    print("defaults on n_positions %d: --context %d --steps %d; the largest --context accepted: ok"
          % (n_pos, ctx, steps))
else:
    sys.exit("unknown mode " + mode)
