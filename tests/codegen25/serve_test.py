"""`tpgen serve` on the CodeGen2.5-shaped checkpoint (tests/codegen25.cmake), against HF's references in
MODEL/expected.json (tools/fixtures/make_codegen25_model.py). Stdlib only, through tests/common/serve_harness.py.

    serve_test.py TPGEN MPIEXEC NP MODEL

One server (block size 4, room for every request):
  - each text prompt, greedy with logprobs 1 and return_token_ids: the prompt ids tpgen's CodeGen2.5
    tokenizer made, the completion ids, text and finish_reason "length" equal HF's, log-probs within 2e-4;
  - the same request streamed: the deltas' text and token_ids joined equal the non-streamed answer;
  - the first prompt again: usage cached_tokens > 0 (a multiple of the block size), the same ids;
  - `suffix` (the directory has no fim.json; CodeGen2.5's format is recognized from its tokenizer):
    prompt ids of prefix <mask_1> suffix <|endoftext|> <sep> <mask_1> and the infill ids equal HF's.
A second server with --kv-cache-tokens 32 (8 blocks of 4, one sequence's worth): the three prompts in
one request cannot all hold their KV at once, so blocks are taken on demand and sequences preempted
(tpgen_preemptions_total > 0), and every completion still equals HF's greedy ids.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import serve_harness as sh  # noqa: E402

TOL = 2e-4
BS = 4
tpgen, mpiexec, np_, model = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
exp = json.load(open(os.path.join(model, "expected.json")))
COMMON = ["--model", model, "--backend", "cpu", "--threads", "1", "--block-size", str(BS)]


def close(a, b):
    return len(a) == len(b) and all(abs(x - y) <= TOL for x, y in zip(a, b))


def body(prompt, ref, **kw):
    return dict({"prompt": prompt, "max_tokens": ref["max_new_tokens"], "temperature": 0, "ignore_eos": True,
                 "logprobs": 1, "return_token_ids": True}, **kw)


def check_choice(st, js, raw, ref, what, text=True):
    c = (js or {}).get("choices", [{}])[0] if st == 200 else {}
    sh.check(st == 200, "%s: status 200 (got %s: %s)" % (what, st, raw[:300]))
    sh.check(c.get("prompt_token_ids") == ref["prompt_ids"], "%s: prompt ids %s (got %s)"
             % (what, ref["prompt_ids"], c.get("prompt_token_ids")))
    sh.check(c.get("token_ids") == ref["ids"], "%s: ids == HF's %s (got %s)" % (what, ref["ids"], c.get("token_ids")))
    lps = ((c.get("logprobs") or {}).get("token_logprobs")) or []
    sh.check(close(lps, ref["logprobs"]), "%s: logprobs within %g of HF's" % (what, TOL))
    sh.check(c.get("finish_reason") == "length", "%s: finish_reason length (got %s)" % (what, c.get("finish_reason")))
    if text:
        sh.check(c.get("text") == ref["completion"], "%s: text %r == HF's %r"
                 % (what, c.get("text"), ref["completion"]))
    return c


def main_server():
    srv = sh.Server(tpgen, COMMON, np=np_, mpiexec=mpiexec if np_ > 1 else None)
    try:
        for i, g in enumerate(exp["generate"]):
            what = "serve TP %d, prompt %d" % (np_, i)
            c = check_choice(*srv.complete(body(g["text"], g)), g, what)
            st, events, done = srv.stream(body(g["text"], g))
            chunks = [e["choices"][0] for e in events if e.get("choices")]
            text = "".join(ch.get("text", "") for ch in chunks)
            ids = [t for ch in chunks for t in ch.get("token_ids") or []]
            sh.check(st == 200 and done and text == c.get("text") and ids == g["ids"],
                     "%s streamed: text %r, ids %s == the non-streamed answer's (done %s)" % (what, text, ids, done))
        g = exp["generate"][0]
        st, js, raw = srv.complete(body(g["text"], g))
        check_choice(st, js, raw, g, "serve TP %d, the first prompt again" % np_)
        cached = (js or {}).get("usage", {}).get("prompt_tokens_details", {}).get("cached_tokens", -1)
        sh.check_ok(cached > 0 and cached % BS == 0, "serve TP %d: a repeated prompt of %d tokens: cached_tokens %s"
                    % (np_, len(g["prompt_ids"]), cached))
        f = exp["fim"]
        check_choice(*srv.complete(body(f["prefix"], f, suffix=f["suffix"])), f, "serve TP %d, suffix (FIM)" % np_)
    finally:
        srv.stop()


def kv_on_demand():
    srv = sh.Server(tpgen, COMMON + ["--kv-cache-tokens", "32", "--max-batch", "3"], np=np_,
                    mpiexec=mpiexec if np_ > 1 else None)
    try:
        n = min(g["max_new_tokens"] for g in exp["generate"])
        texts = [g["text"] for g in exp["generate"]]
        st, js, raw = srv.complete({"prompt": texts, "max_tokens": n, "temperature": 0, "ignore_eos": True,
                                    "return_token_ids": True}, timeout=240)
        got = [c.get("token_ids") for c in sorted((js or {}).get("choices", []), key=lambda c: c["index"])]
        want = [g["ids"][:n] for g in exp["generate"]]
        sh.check_ok(st == 200 and got == want, "serve TP %d, 32 KV tokens: 3 prompts == HF's ids (got %s)"
                    % (np_, got if st == 200 else raw[:300]))
        pre = srv.metrics().get("tpgen_preemptions_total", -1)
        sh.check_ok(pre > 0, "serve TP %d, 32 KV tokens: tpgen_preemptions_total %s > 0" % (np_, pre))
    finally:
        srv.stop()


main_server()
kv_on_demand()
sh.exit_with_checks()
