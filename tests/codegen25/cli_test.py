"""CodeGen2.5 from its checkpoint directory through the CLI (tests/codegen25.cmake), against HF's
references in MODEL/expected.json (tools/fixtures/make_codegen25_model.py: LlamaForCausalLM on the same weights,
prompts tokenized by tiktoken 0.4.0 as tokenization_codegen25.py does).

    cli_test.py TPGEN MPIEXEC NP MODEL text|fim|speculate|tokenize

text:      `tpgen generate --prompt TEXT --json` for each text prompt: the prompt ids tpgen's tokenizer
           made, the greedy ids, log-probs within 2e-4 (check_parity's bound) and the decoded text all
           equal HF's (text in, text out)
fim:       `tpgen generate --prompt PREFIX --suffix SUFFIX`: no fim.json; CodeGen2.5's format is
           recognized from its tokenizer: prompt ids == tiktoken's for prefix <mask_1> suffix
           <|endoftext|> <sep> <mask_1>, the infill ids == HF's greedy ids
speculate: with --speculate ngram:3 and ngram:2:4, the text prompts (where nothing is drafted) and the
           "speculate" prompt (A + x + A whose continuation repeats x: drafted and partly accepted,
           the counts in the JSON line's "speculative" > 0) give HF's greedy ids and log-probs
tokenize:  `tpgen tokenize --json` on the directory: each prompt's and the score text's ids
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import serve_harness as sh  # noqa: E402

TOL = 2e-4
tpgen, mpiexec, np_, model, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
exp = json.load(open(os.path.join(model, "expected.json")))
ENGINE = ["--backend", "cpu", "--threads", "1"]


def run(args, np=np_):
    cmd = sh.command(tpgen, args, np, mpiexec if np > 1 else None)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if p.returncode != 0:
        sh.check(False, "%s: exit %d: %s" % (" ".join(args[:1]), p.returncode, p.stderr[-2000:]))
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def close(a, b):
    return len(a) == len(b) and all(abs(x - y) <= TOL for x, y in zip(a, b))


def generate(extra, ref, what, text=True):
    js = run(["generate", "--model", model, "--max-new-tokens", str(ref["max_new_tokens"]), "--ignore-eos",
              "--json"] + extra + ENGINE)
    if js is None:
        return None
    sh.check(js.get("prompt_ids") == ref["prompt_ids"], "TP %d %s: prompt ids %s (got %s)"
             % (np_, what, ref["prompt_ids"], js.get("prompt_ids")))
    sh.check(js.get("ids") == ref["ids"], "TP %d %s: greedy ids == HF's %s (got %s)"
             % (np_, what, ref["ids"], js.get("ids")))
    sh.check(close(js.get("logprobs", []), ref["logprobs"]), "TP %d %s: log-probs within %g of HF's" % (np_, what, TOL))
    if text:
        sh.check(js.get("text") == ref["completion"], "TP %d %s: text %r == HF's decode %r"
                 % (np_, what, js.get("text"), ref["completion"]))
    return js


if mode == "text":
    for g in exp["generate"]:
        generate(["--prompt", g["text"], "--logprobs", "1"], g, "--prompt %r" % g["text"])
elif mode == "fim":
    f = exp["fim"]
    sh.check(not os.path.exists(os.path.join(model, "fim.json")), "the checkpoint has no fim.json")
    generate(["--prompt", f["prefix"], "--suffix", f["suffix"], "--logprobs", "1"], f, "--suffix (infill)")
elif mode == "speculate":
    for spec in ("ngram:3", "ngram:2:4"):
        for g in exp["generate"]:
            generate(["--prompt", g["text"], "--speculate", spec, "--logprobs", "1"], g,
                     "--speculate %s %r" % (spec, g["text"]))
        r = exp["speculate"]
        js = generate(["--prompt-ids", ",".join(map(str, r["prompt_ids"])), "--speculate", spec, "--logprobs", "1"],
                      r, "--speculate %s, a prompt that repeats" % spec, text=False)
        sp = (js or {}).get("speculative", {})
        sh.check_ok(sp.get("drafted", 0) > 0 and 0 < sp.get("accepted", 0) <= sp["drafted"],
                    "TP %d --speculate %s: drafted %s, accepted %s (both > 0)" % (np_, spec, sp.get("drafted"),
                                                                                  sp.get("accepted")))
elif mode == "tokenize":
    texts = [(g["text"], g["prompt_ids"]) for g in exp["generate"]] + [(exp["score"]["text"], exp["score"]["ids"])]
    for t, ids in texts:
        js = run(["tokenize", "--model", model, "--text", t, "--json"], np=1)
        sh.check(js is not None and js.get("ids") == ids, "tokenize %r: %s (got %s)" % (t, ids, js and js.get("ids")))
else:
    sys.exit("cli_test.py: unknown mode %s" % mode)
sh.exit_with_checks()
