#!/usr/bin/env bash
# HF parity at reduced precision: every fixture tests/data/*/ against `tpgen score` and
# `tpgen generate` on the CUDA backend (F16 or BF16) or the CPU backend (f32, or --dtype bf16),
# compared with HF transformers' reference: expected.json (tools/fixtures/make.py codegen, HF in f32) or,
# with --ref hf-bf16, expected-hf-bf16.json (tools/fixtures/make.py codegen --bf16-only, HF run in bf16).
# tests/gpu/parity.sh (the GPU check) and the CPU bf16 parity tests (tests/cpu_bf16.cmake) run it.
#
# usage: tests/parity/hf_parity.sh [--backend cuda|cpu] [--np N] [--dtype bf16|f16|f32]
#                                  [--comm mpi|nccl] [--ref hf-f32|hf-bf16] [--build DIR]
#                                  [--timeout SECONDS] [--tol T] [--mean-tol M] [--threads N]
#                                  [--weights int8] [--extra 'FLAGS'] [--fixtures DIR...]
#                                  (default fixtures: every tests/data/*/ with the reference)
#   defaults: --backend cuda --np 1 --dtype bf16 (cpu: f32) --comm mpi --ref hf-f32 --build build
#             --timeout 120; T the dtype's tolerance (bf16 0.08, f16 0.015, f32 2e-4); with
#             --weights int8 (GPU: int8 weights, f16/bf16 activations) sqrt(0.15^2 + T^2):
#             the int8 bound of tests/cpu_int8/parity_int8.sh and the dtype's, independent
#             errors adding in quadrature (bf16 0.17, f16 0.15)
# With --comm mpi several ranks may share one GPU: that is how TP = 2 runs on a one-GPU machine.
#
# Checks, with T = the log-probability tolerance (docs/CUDA.md "Parity tolerances" says why):
#   score:    every position's log-probability within T of HF; every id of HF's top 5 that leads
#             the 5th by more than 2T is in tpgen's top 5, within T.
#   generate: greedy ids equal to HF's, log-probabilities within T. One exception, reported as
#             such: where HF's own top-2 gap at a step is below 2T, the reduced precision may
#             pick the runner-up; that step must pick HF's 2nd id with a log-probability
#             within T of HF's value for it, and the comparison of that prompt stops there
#             (later tokens follow a different prefix).
#   --mean-tol M: also the mean |d| over every compared log-probability within M (one rounding
#             per op: errors of both signs average out).
# Prints one line per fixture and the largest and mean differences; exits 1 on any failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python3 - "$@" <<'PY'
import argparse, glob, json, os, subprocess, sys

ap = argparse.ArgumentParser(prog="tests/parity/hf_parity.sh")
ap.add_argument("--np", type=int, default=1)
ap.add_argument("--dtype", choices=["bf16", "f16", "f32"], default=None)
ap.add_argument("--comm", choices=["mpi", "nccl"], default="mpi")
ap.add_argument("--build", default="build")
ap.add_argument("--timeout", type=float, default=120)
ap.add_argument("--tol", type=float, default=None)
ap.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
ap.add_argument("--ref", choices=["hf-f32", "hf-bf16"], default="hf-f32")
ap.add_argument("--mean-tol", type=float, default=None)
ap.add_argument("--threads", type=int, default=None)
ap.add_argument("--fixtures", nargs="*", default=None)
ap.add_argument("--weights", choices=["int8"], default=None)
ap.add_argument("--extra", default="", help="more tpgen flags, space-separated (e.g. '--no-cuda-graphs')")
a = ap.parse_args()
if a.dtype is None:
    a.dtype = "bf16" if a.backend == "cuda" else "f32"
if a.backend == "cpu" and a.dtype == "f16":
    sys.exit("hf_parity.sh: the CPU backend computes in f32 or bf16, not f16")
# log-probability tolerances (nats), see docs/CUDA.md "Parity tolerances"
TOL = {"bf16": 0.08, "f16": 0.015, "f32": 2e-4}
INT8_TOL = 0.15  # tests/cpu_int8/parity_int8.sh's max |d| for int8 weights (f32 activations) against HF f32
tol = TOL[a.dtype] if a.weights is None else round((INT8_TOL ** 2 + TOL[a.dtype] ** 2) ** 0.5, 2)
if a.weights is not None and a.backend == "cpu":
    sys.exit("hf_parity.sh: --weights int8 on the CPU is tests/cpu_int8/parity_int8.sh's (f32 activations)")
tol = a.tol if a.tol is not None else tol
exp_name = "expected-hf-bf16.json" if a.ref == "hf-bf16" else "expected.json"
tpgen = os.path.join(a.build, "bin", "tpgen")
if not os.access(tpgen, os.X_OK):
    sys.exit("hf_parity.sh: %s not found; build first (cmake --build %s)" % (tpgen, a.build))
try:  # Open MPI needs these flags (root in containers, more ranks than cores); MPICH knows neither
    ver = subprocess.run(["mpirun", "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
except OSError:
    sys.exit("hf_parity.sh: mpirun not found")
ompi = "Open MPI" in ver or "OpenRTE" in ver
launch = ["mpirun"] + (["--oversubscribe", "--allow-run-as-root"] if ompi else []) + ["-np", str(a.np), tpgen]
common = ["--backend", a.backend, "--dtype", a.dtype] + (["--comm", a.comm] if a.backend == "cuda" else [])
if a.threads is not None:
    common += ["--threads", str(a.threads)]
common += (["--weights", a.weights] if a.weights else []) + a.extra.split()
if a.backend == "cpu":
    a.comm = "mpi"

def run(args):
    cmd = launch + args + common
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=a.timeout, text=True)
    except subprocess.TimeoutExpired:
        return None, "timed out after %gs: %s" % (a.timeout, " ".join(cmd))
    if p.returncode != 0:
        return None, "exit %d: %s\n%s" % (p.returncode, " ".join(cmd), p.stderr[-2000:])
    objs = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    objs = [o for o in objs if "ids" in o]
    if not objs:
        return None, "no JSON result from: %s\n%s" % (" ".join(cmd), p.stdout[-1000:])
    return objs, None

ids_arg = lambda xs: ",".join(str(int(x)) for x in xs)
fails, worst_score, worst_gen, n_fix, near_ties = 0, 0.0, 0.0, 0, 0
sum_d, n_d = 0.0, 0  # every compared log-probability (score and generate)

def top_check(what, exp_top, got_top):
    """HF's clear top-5 members are in tpgen's top 5 with close log-probabilities."""
    errs, worst = [], 0.0
    got = {int(i): lp for i, lp in got_top}
    fifth = exp_top[-1][1]
    for i, lp in exp_top:
        if int(i) in got and got[int(i)] is not None:
            worst = max(worst, abs(got[int(i)] - lp))
            if abs(got[int(i)] - lp) > tol:
                errs.append("%s: top id %d logprob %.5f, HF %.5f" % (what, i, got[int(i)], lp))
        elif lp > fifth + 2 * tol:
            errs.append("%s: HF top id %d (%.5f) missing from tpgen's top 5" % (what, i, lp))
    return errs, worst

for path in ([os.path.join(d, exp_name) for d in a.fixtures] if a.fixtures
             else sorted(glob.glob("tests/data/*/" + exp_name))):
    fx = os.path.dirname(path)
    name = os.path.basename(fx)
    exp = json.load(open(path))
    if a.np not in exp.get("valid_tp", [1]):
        print("%-24s np=%d: SKIPPED (valid TP sizes %s)" % (name, a.np, exp.get("valid_tp")))
        continue
    n_fix += 1
    errs, ws, wg, notes = [], 0.0, 0.0, []

    sc = exp["score"]
    objs, err = run(["score", "--model", fx, "--ids", ids_arg(sc["ids"]), "--logprobs", "5", "--json"])
    if err:
        errs.append("score " + err)
    else:
        got = objs[-1]
        if got["ids"] != sc["ids"] or len(got["logprobs"]) != len(sc["logprobs"]):
            errs.append("score: ids or length differ")
        else:
            for i, (e, g) in enumerate(zip(sc["logprobs"], got["logprobs"])):
                if e is None:
                    continue
                if g is None:
                    errs.append("score[%d]: null, HF %.5f" % (i, e))
                    continue
                ws = max(ws, abs(g - e))
                sum_d, n_d = sum_d + abs(g - e), n_d + 1
                if abs(g - e) > tol:
                    errs.append("score[%d]: %.5f, HF %.5f (|d| %.4f > %.4f)" % (i, g, e, abs(g - e), tol))
                te, tw = top_check("score[%d]" % i, sc["top_logprobs"][i], got["top_logprobs"][i])
                errs += te
                ws = max(ws, tw)

    for gi, ge in enumerate(exp["generate"]):
        objs, err = run(["generate", "--model", fx, "--prompt-ids", ids_arg(ge["prompt_ids"]), "--max-new-tokens",
                         str(ge["max_new_tokens"]), "--ignore-eos", "--logprobs", "5", "--json"])
        if err:
            errs.append("generate[%d] %s" % (gi, err))
            continue
        got = objs[-1]
        eids, gids = ge["ids"], got["ids"]
        if len(gids) != len(eids):
            errs.append("generate[%d]: %d ids, HF %d" % (gi, len(gids), len(eids)))
            continue
        for j, (e, g) in enumerate(zip(eids, gids)):
            etop = ge["top_logprobs"][j]
            if g != e:
                gap = etop[0][1] - etop[1][1]
                alt = {int(i): lp for i, lp in etop}
                glp = got["logprobs"][j]
                if gap <= 2 * tol and g == int(etop[1][0]) and glp is not None and abs(glp - alt[g]) <= tol:
                    notes.append("generate[%d] step %d: HF near-tie (gap %.4f) resolved to its 2nd id %d" % (gi, j, gap, g))
                else:
                    errs.append("generate[%d] step %d: id %d, HF %d (HF top-2 gap %.4f)" % (gi, j, g, e, gap))
                break
            lp = got["logprobs"][j]
            if lp is None or abs(lp - ge["logprobs"][j]) > tol:
                errs.append("generate[%d] step %d: logprob %s, HF %.5f" % (gi, j, lp, ge["logprobs"][j]))
            else:
                wg = max(wg, abs(lp - ge["logprobs"][j]))
                sum_d, n_d = sum_d + abs(lp - ge["logprobs"][j]), n_d + 1
            te, tw = top_check("generate[%d] step %d" % (gi, j), etop, got["top_logprobs"][j])
            errs += te
            wg = max(wg, tw)

    worst_score, worst_gen = max(worst_score, ws), max(worst_gen, wg)
    near_ties += len(notes)
    status = "ok" if not errs else "FAIL"
    print("%-24s np=%d %s%s %s: score max|d| %.3g, generate max|d| %.3g (tol %.3g) %s" %
          (name, a.np, a.dtype, " int8" if a.weights else "", a.comm, ws, wg, tol, status))
    for n in notes:
        print("    note: " + n)
    for e in errs[:12]:
        print("    " + e)
    if len(errs) > 12:
        print("    ... %d more" % (len(errs) - 12))
    fails += bool(errs)

mean_d = sum_d / max(n_d, 1)
print("parity %s np=%d %s --comm %s vs %s: %d fixture(s), %d failed; largest |d| score %.3g, generate %.3g; "
      "mean |d| %.3g over %d log-probabilities; %d near-tie(s)" % (a.backend, a.np, a.dtype, a.comm, a.ref, n_fix, fails,
                                                               worst_score, worst_gen, mean_d, n_d, near_ties))
if a.mean_tol is not None and mean_d > a.mean_tol:
    print("FAIL: mean |d| %.4g > %.3g" % (mean_d, a.mean_tol))
    fails += 1
sys.exit(1 if fails or n_fix == 0 else 0)
PY
