#!/usr/bin/env bash
# End to end of --weights int8 (CPU backend): every fixture tests/data/*/ and the trained tiny
# model models/codegen-tiny-py against HF transformers in full precision (expected.json, the f32
# references the f32 parity tests hold to 1e-3), at each TP size given.
#
# Reported per fixture and TP: mean and max |logprob difference| of `score` over the reference's
# ids (teacher forcing, so every position is compared), and greedy agreement of `generate`: the
# tokens equal to HF's before the first divergence, of all generated.
# Held:
#   mean |d| of score <= MEAN_TOL: 0.02 nats on the trained tiny model (measured 0.0073), 0.05 on
#   the random-weight fixtures (measured 0.018-0.027: their near-uniform rows of std 0.02 leave
#   more of each row's range to its largest element, so the steps absmax/127 are coarser);
#   max |d| of score <= MAX_TOL (0.15) (measured <= 0.075);
#   greedy: the trained tiny model agrees with HF on at least GREEDY_MIN (70%) of its generated
#   tokens (measured 100%); the random-weight fixtures, whose top-2 gaps are often below the
#   int8 error, are reported, not held;
#   across TP: the int8 score log-probabilities at TP 2 (and 4) equal those at TP 1 within
#   TP_TOL (3e-3; measured <= 9e-4): every rank quantizes its rows with the scales of the full
#   row (row-parallel out_proj/fc_out columns included), so q and the scales are the same bits
#   at any TP. What differs: the f32 summation order (as in the f32 backend, ~1e-5), and the
#   CPU GEMV's int16 grid for x (kernels/cpu/cpu_int8.c), whose step is set by each rank's own
#   slice of x for the row-parallel matrices (~1e-3). Scales from each rank's column slice
#   would move the results by the int8 error itself (~2e-2 here).
# usage: tests/cpu_int8/parity_int8.sh [--np 1,2] [--build DIR] [--fixtures DIR...]
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python3 - "$@" <<'PY'
import argparse, glob, json, os, subprocess, sys

MEAN_TOL, MEAN_TOL_TRAINED, MAX_TOL, GREEDY_MIN, TP_TOL = 0.05, 0.02, 0.15, 0.70, 3e-3
ap = argparse.ArgumentParser(prog="tests/cpu_int8/parity_int8.sh")
ap.add_argument("--np", default="1,2")
ap.add_argument("--build", default="build")
ap.add_argument("--timeout", type=float, default=120)
ap.add_argument("--fixtures", nargs="*", default=None)
a = ap.parse_args()
nps = [int(x) for x in a.np.split(",")]
tpgen = os.path.join(a.build, "bin", "tpgen")
if not os.access(tpgen, os.X_OK):
    sys.exit("parity_int8.sh: %s not found; build first (cmake --build %s)" % (tpgen, a.build))
ver = subprocess.run(["mpirun", "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
ompi = "Open MPI" in ver or "OpenRTE" in ver
fixtures = a.fixtures or sorted(os.path.dirname(p) for p in glob.glob("tests/data/*/expected.json")) + \
    ["models/codegen-tiny-py"]
trained = {"codegen-tiny-py"}

def run(np_, args):
    cmd = ["mpirun"] + (["--oversubscribe", "--allow-run-as-root"] if ompi else []) + ["-np", str(np_), tpgen] + \
        args + ["--backend", "cpu", "--threads", "1", "--weights", "int8"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=a.timeout, text=True)
    if p.returncode != 0:
        sys.exit("FAIL: exit %d: %s\n%s" % (p.returncode, " ".join(cmd), p.stderr[-2000:]))
    objs = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    objs = [o for o in objs if "ids" in o]
    if not objs:
        sys.exit("FAIL: no JSON result from: %s\n%s" % (" ".join(cmd), p.stdout[-1000:]))
    return objs[-1]

ids_arg = lambda xs: ",".join(str(int(x)) for x in xs)
fails, n_runs = 0, 0
for fx in fixtures:
    exp = json.load(open(os.path.join(fx, "expected.json")))
    name = os.path.basename(fx.rstrip("/"))
    tp1 = None
    for np_ in nps:
        if np_ not in exp.get("valid_tp", [1]):
            print("%-22s tp=%d: SKIPPED (valid TP sizes %s)" % (name, np_, exp.get("valid_tp")))
            continue
        n_runs += 1
        sc = exp["score"]
        got = run(np_, ["score", "--model", fx, "--ids", ids_arg(sc["ids"]), "--json"])
        d = [abs(g - e) for e, g in zip(sc["logprobs"], got["logprobs"]) if e is not None and g is not None]
        mean_d, max_d = sum(d) / max(len(d), 1), max(d or [0])
        agree = total = 0
        for ge in exp["generate"]:
            g = run(np_, ["generate", "--model", fx, "--prompt-ids", ids_arg(ge["prompt_ids"]), "--max-new-tokens",
                          str(ge["max_new_tokens"]), "--ignore-eos", "--json"])
            total += len(ge["ids"])
            for e, x in zip(ge["ids"], g["ids"]):
                if e != x:
                    break
                agree += 1
        errs = []
        if len(d) != sum(e is not None for e in sc["logprobs"]):
            errs.append("score: %d of the reference's log-probabilities compared" % len(d))
        mean_tol = MEAN_TOL_TRAINED if name in trained else MEAN_TOL
        if mean_d > mean_tol:
            errs.append("score mean |d| %.4g > %.3g" % (mean_d, mean_tol))
        if max_d > MAX_TOL:
            errs.append("score max |d| %.4g > %.3g" % (max_d, MAX_TOL))
        if name in trained and agree < GREEDY_MIN * total:
            errs.append("greedy agreement %d/%d < %.0f%%" % (agree, total, 100 * GREEDY_MIN))
        cross = ""
        if tp1 is None:
            tp1 = (np_, got["logprobs"])
        else:
            dt = max(abs(x - y) for x, y in zip(tp1[1], got["logprobs"]) if x is not None and y is not None)
            cross = ", vs int8 at tp=%d: max |d| %.2g" % (tp1[0], dt)
            if dt > TP_TOL:
                errs.append("int8 at tp=%d and tp=%d differ by %.3g > %.3g" % (tp1[0], np_, dt, TP_TOL))
        print("%-22s tp=%d int8 vs HF f32: score mean |d| %.4f, max |d| %.4f over %d; greedy agreement %d/%d (%.0f%%)%s %s"
              % (name, np_, mean_d, max_d, len(d), agree, total, 100.0 * agree / max(total, 1), cross,
                 "ok" if not errs else "FAIL"))
        for e in errs:
            print("    " + e)
        fails += bool(errs)
print("parity int8: %d run(s), %d failed (bounds: mean |d| %.3g (trained model %.3g), max |d| %.3g, greedy >= %.0f%% "
      "on the trained model, across TP %.2g)" % (n_runs, fails, MEAN_TOL, MEAN_TOL_TRAINED, MAX_TOL, 100 * GREEDY_MIN,
                                                TP_TOL))
sys.exit(1 if fails or n_runs == 0 else 0)
PY
