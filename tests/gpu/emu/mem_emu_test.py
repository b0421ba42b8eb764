#!/usr/bin/env python3
"""The CUDA backend's memory plan on a small emulated device (tests/gpu_emu_product.cmake; docs/CUDA.md,
"The emulated device"): TPGEN_EMU_DEVICE_MB sets the device's size, TPGEN_EMU_MEM_REPORT=FILE makes the
emulator write what it saw allocated (tests/gpu/emu/emu_rt.cpp).

usage: mem_emu_test.py TPGEN MPIEXEC MODE ARGS...
  too-small CONFIG: `tpgen bench --config CONFIG --random-weights --backend cuda` (CodeGen-350M: 680
      MiB of F16 weights per rank at TP 1, 390 at TP 2) on a 512 (TP 2: 256) MiB device is refused
      before any weight is drawn or uploaded (no "loading ... weights" line with --verbose), in
      under 30 s, with the figures: it needs N MiB, 448.0 (192.0) MiB are free (the device less
      the backend's 64 MiB of fixed buffers), and the plan naming the weights; on a 40 MiB device, below those fixed buffers, the backend itself is
      refused naming the device's 40.0 MiB and the 64.0 MiB it needs; at TP 2 every rank exits
      non-zero; on a 1 GiB device, where the weights fit, `bench --batch 8 --context 1900`, whose
      KV cache does not, is refused the same way before loading.
  kv FIXTURE NP: `tpgen generate --verbose` at TP NP with a KV pool of 2 blocks of 16 tokens and
      a request that feeds exactly 32 tokens (20 prompt ids, 13 new: the last is not fed): the
      plan's KV cache bytes (blocks x 16 x bytes per token) are one cudaMalloc of exactly that
      size on every rank, every byte of it written by the end (no F16 word left at the emulator's
      0xff fill: the KV cache filled the planned bytes; a write past them faults at the guard
      page), and each rank's peak device memory equals the plan's "allocated at start" + "held"
      (within the table's 0.1 MiB rounding): nothing was allocated outside the plan.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import serve_harness as sh  # noqa: E402

TPGEN, MPIEXEC, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
check = sh.check
MiB = 1048576.0


def run(args, np_, env, timeout=120):
    cmd = sh.command(TPGEN, args, np_, MPIEXEC if np_ > 1 else None)
    t0 = time.time()
    p = subprocess.run(cmd, env=dict(os.environ, **env), capture_output=True, text=True, timeout=timeout)
    return p, time.time() - t0


def too_small(config):
    for np_, mb in ((1, 512), (2, 256)):  # the weights per rank (680 MiB at TP 1, 390 at TP 2) do not fit
        free = mb - 64.0
        p, secs = run(["bench", "--config", config, "--random-weights", "--backend", "cuda", "--dtype", "f16",
                       "--verbose", "--comm", "nccl"], np_, {"TPGEN_EMU_DEVICE_MB": str(mb)})
        m = re.search(r"the job does not fit in device memory on rank 0: it needs ([0-9.]+) MiB, ([0-9.]+) MiB are free",
                      p.stderr)
        w = re.search(r"^  weights\s+([0-9.]+)\s+device", p.stderr, re.M)
        check(p.returncode != 0 and m and float(m.group(2)) == free and float(m.group(1)) > free and w
              and float(w.group(1)) > free and not re.search(r"loading \w+ weights", p.stderr) and secs < 30,
              "TP %d, a %d MiB device: refused in %.1f s before loading, needing %s MiB with %.1f free, the weights "
              "(%s MiB per rank) in the plan (exit %d; stderr:\n%s)"
              % (np_, mb, secs, m and m.group(1), free, w and w.group(1), p.returncode, p.stderr[-1500:]), say_ok=True)
        p, secs = run(["bench", "--config", config, "--random-weights", "--backend", "cuda", "--dtype", "f16",
                       "--comm", "nccl"], np_, {"TPGEN_EMU_DEVICE_MB": "40"})
        # every rank refuses; at TP 2 the first to end the job may be either (its abort can beat the other's line)
        check(p.returncode != 0 and re.search(r"rank ([0-9]): GPU \1 \(.*\) has 40\.0 MiB free of 40\.0 MiB; the CUDA "
                                              r"backend needs 64\.0 MiB before any model memory", p.stderr)
              and "CUDA error at" not in p.stderr,
              "TP %d, a 40 MiB device: the backend refused with the figures, not a failed cudaMalloc (exit %d; "
              "stderr:\n%s)" % (np_, p.returncode, p.stderr[-1500:]), say_ok=True)


def too_small_for_kv(config):
    """the weights fit (680 + 64 of 1024 MiB), the run's KV cache does not (8 x ~1,920 tokens x 80 KiB):
    refused before loading, as the weights would be (bench sizes its cache before any weight)"""
    p, secs = run(["bench", "--config", config, "--random-weights", "--backend", "cuda", "--dtype", "f16", "--verbose",
                   "--batch", "8", "--context", "1900", "--steps", "1", "--prefill", "0"], 1,
                  {"TPGEN_EMU_DEVICE_MB": "1024"})
    check(p.returncode != 0 and re.search(r"does not fit in device memory on rank 0: it needs [0-9.]+ MiB", p.stderr)
          and re.search(r"KV cache", p.stderr) and not re.search(r"loading \w+ weights", p.stderr) and secs < 30,
          "a 1 GiB device, the weights fit, bench's KV cache does not: refused in %.1f s before loading, naming the "
          "KV cache (exit %d; stderr:\n%s)" % (secs, p.returncode, p.stderr[-1500:]), say_ok=True)


def kv(fixture, np_):
    report = tempfile.mktemp(prefix="tpgen-emu-mem-")
    try:
        p, _ = run(["generate", "--model", fixture, "--backend", "cuda", "--dtype", "f16", "--verbose",
                    "--block-size", "16", "--kv-cache-tokens", "32", "--prompt-ids", ",".join(str(i) for i in range(1, 21)),
                    "--max-new-tokens", "13", "--ignore-eos"] + (["--comm", "nccl"] if np_ > 1 else []), np_,
                   {"TPGEN_EMU_MEM_REPORT": report})
        if not check(p.returncode == 0, "generate: exit %d\n%s" % (p.returncode, p.stderr[-2000:])):
            return
        kvm = re.search(r"^  KV cache .* (\d+) blocks of (\d+) tokens, (\d+) bytes per token", p.stderr, re.M)
        tot = re.search(r"allocated at start: ([0-9.]+), held since the backend started: ([0-9.]+)", p.stderr)
        check(kvm and tot, "the plan's KV cache and totals lines:\n" + p.stderr[-2000:])
        planned = int(kvm.group(1)) * int(kvm.group(2)) * int(kvm.group(3))
        check(int(kvm.group(1)) * int(kvm.group(2)) == 32, "the plan's KV cache: 2 blocks of 16 tokens (%s)"
              % kvm.group(0))
        plan_mib = float(tot.group(1)) + float(tot.group(2))
        lines = open(report).read().split("\n")
        by_pid = {}
        for ln in lines:
            f = ln.split()
            if len(f) >= 4 and f[0] == "pid":
                r = by_pid.setdefault(f[1], {"peak": None, "allocs": []})
                if f[2] == "peak":
                    r["peak"] = int(f[3])
                elif f[2] == "alloc":
                    r["allocs"].append((int(f[4]), None if f[6] == "-" else int(f[6])))
        check(len(by_pid) == np_, "a memory report from each of the %d ranks (%d)" % (np_, len(by_pid)))
        for pid, r in sorted(by_pid.items()):
            kv_allocs = [a for a in r["allocs"] if a[0] == planned]
            check(len(kv_allocs) == 1 and kv_allocs[0][1] == 0,
                  "pid %s: one cudaMalloc of the planned KV bytes (%d), every byte written (found %s)"
                  % (pid, planned, kv_allocs), say_ok=True)
            check(r["peak"] is not None and abs(r["peak"] / MiB - plan_mib) <= 0.1,
                  "pid %s: peak device memory %.2f MiB == the plan's allocated at start + held, %.1f MiB"
                  % (pid, (r["peak"] or 0) / MiB, plan_mib), say_ok=True)
    finally:
        if os.path.exists(report):
            os.unlink(report)


if MODE == "too-small":
    too_small(sys.argv[4])
    too_small_for_kv(sys.argv[4])
elif MODE == "kv":
    kv(sys.argv[4], int(sys.argv[5]))
else:
    sys.exit("mode: too-small or kv")
sh.exit_with_checks()
