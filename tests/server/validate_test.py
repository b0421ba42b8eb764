#!/usr/bin/env python3
"""Request validation and the knobs with no functional test before (issue 22), on the server and the CLI.

usage: validate_test.py TPGEN MPIEXEC NP FIXTURE TOKENIZER_DIR WORKDIR PART [TINY_PY_MODEL]
(the arguments of serve_test.py, whose Server, launch, check and ok this reuses)
PART "requests": numbers that change meaning once narrowed to the float the sampler applies
  (top_p 1e-300 is 0 as a float: a hang at TP 1, SIGSEGV on every rank at TP 2) and
  repetition_penalty outside [0.01, 100] are a 400 naming the field, on the server, and a clear
  error naming the flag from `tpgen generate`; the smallest accepted top_p samples the best token;
  a `model` with an embedded \\u0000 is a 404; prompt + max_tokens == n_positions is served in full,
  one more is a 400 (the CLI documents a cap at n_positions instead: checked as documented); the
  server answers after each and exits 0 on SIGTERM.
PART "detokenize": CodeGen pads its vocabulary (51,200) past its tokenizer (50,295). A copy of
  TINY_PY_MODEL whose padded id 50300 takes over one real token's logit makes completions with
  padded ids; their token_ids go back through POST /detokenize and `tpgen detokenize` to the
  completion's text (padded ids decode to nothing, as HF); ids >= vocab_size are refused.
PART "penalties": presence_penalty / frequency_penalty against a Python reimplementation of
  OpenAI's rule (logit -= presence * (count > 0) + frequency * count, over the generated tokens)
  on the raw top-64 log-probabilities `tpgen score` gives: greedy, server and CLI; sampled (top-k,
  top-p, seed): server == CLI and the CLI's reported (adjusted) log-probabilities differ from the
  raw ones by exactly the penalties. min_tokens on a copy of the fixture whose EOS always wins:
  EOS comes exactly after min_tokens tokens (greedy and sampled, server and CLI), and the tokens
  before it are the greedy choice without EOS.
"""
import atexit
import json
import os
import signal
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_test as st  # noqa: E402  (Server, launch, check, ok)
from serve_test import Server, check, launch, ok  # noqa: E402

TPGEN, MPIEXEC, NP, FIXTURE, TOKDIR, WORK, PART = sys.argv[1:8]
NP = int(NP)
st.TPGEN, st.MPIEXEC, st.NP = TPGEN, MPIEXEC, NP  # serve_test reads its argv only when run itself
TINY_PY = sys.argv[8] if len(sys.argv) > 8 else None
COMPLETIONS = "/v1/completions"


# ---- fixtures ----

def with_tokenizer(src, dst):
    """src's config and weights with the CodeGen tokenizer, in dst."""
    return st.sh.with_tokenizer(src, TOKDIR, dst)


def patch_tensors(path, edit):
    """edit({name: numpy array view}) changes tensors of a .safetensors file in place."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    dtypes = {"F32": np.float32, "F16": np.float16}
    views = {}
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] not in dtypes:
            continue
        a, b = t["data_offsets"]
        views[name] = np.frombuffer(memoryview(data)[base + a:base + b], dtype=dtypes[t["dtype"]]).reshape(t["shape"])
    edit(views)
    with open(path, "wb") as f:
        f.write(data)


def run(args, timeout=120):
    return subprocess.run(launch(args), capture_output=True, text=True, timeout=timeout)


def cli_json(args):
    out = run(args)
    if out.returncode != 0:
        sys.exit("FAIL: tpgen %s: %s" % (" ".join(args[:1]), out.stderr))
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]


def cli_error(args, needle, what):
    """`tpgen ARGS` must fail (non-zero, every rank) with a message holding needle."""
    out = run(args, timeout=60)
    check(out.returncode != 0 and needle in out.stderr, "%s: exit %d, stderr %s" % (what, out.returncode,
                                                                                   out.stderr[-400:]))


SERVERS = []  # every server started, killed at exit if a failed check left it running


def serve(model):
    srv = Server(model)
    SERVERS.append(srv)
    return srv


@atexit.register
def _kill_servers():
    for srv in SERVERS:
        if srv.p.poll() is None:
            pids = srv.rank_pids()
            srv.p.terminate()
            try:
                srv.p.wait(40)
            except subprocess.TimeoutExpired:
                srv.p.kill()
            for pid in pids.values():  # a rank stuck in a loop outlives mpiexec's SIGTERM
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def post(srv, body):
    status, text, _ = srv.request("POST", COMPLETIONS, body)
    return status, json.loads(text)


def alive(srv, what):
    status, r = post(srv, {"prompt": [1, 2, 3], "max_tokens": 2, "temperature": 0, "ignore_eos": True})
    check(status == 200 and r["usage"]["completion_tokens"] == 2, "answers after %s: %d %s" % (what, status, r))


def stop(srv):
    os.kill(srv.rank_pids()[0], signal.SIGTERM)
    check(srv.p.wait(60) == 0, "every rank exits 0 after SIGTERM")


# ---- PART requests ----

def part_requests():
    model = with_tokenizer(FIXTURE, os.path.join(WORK, "tiny-with-tokenizer"))
    srv = serve(model)
    base = {"prompt": [5, 17, 9], "max_tokens": 4}
    # (fields, the param the 400 names, a phrase of its message)
    bad = [({"top_p": 1e-300, "temperature": 1}, "top_p", "32-bit float"),
           ({"top_p": 1e-300, "temperature": 1, "top_k": 5}, "top_p", "32-bit float"),  # c[-1] at TP 2
           ({"top_p": 1e-40, "temperature": 1}, "top_p", "32-bit float"),  # a float denormal
           ({"temperature": 1e-300}, "temperature", "32-bit float"),
           ({"temperature": 1e-45}, "temperature", "32-bit float"),
           ({"presence_penalty": 1e-300}, "presence_penalty", "32-bit float"),
           ({"frequency_penalty": -1e-39}, "frequency_penalty", "32-bit float"),
           ({"repetition_penalty": 1e-50}, "repetition_penalty", "[0.01, 100]"),
           ({"repetition_penalty": 0.009}, "repetition_penalty", "[0.01, 100]"),
           ({"repetition_penalty": 100.5}, "repetition_penalty", "[0.01, 100]"),
           ({"repetition_penalty": 0}, "repetition_penalty", "[0.01, 100]")]
    for fields, param, phrase in bad:
        status, r = post(srv, dict(base, **fields))
        err = r.get("error", {})
        check(status == 400 and err.get("param") == param and param in err.get("message", "") and
              phrase in err.get("message", ""), "%s -> 400 naming %s: %d %s" % (fields, param, status, r))
        alive(srv, str(fields))
    ok("values that change meaning as a float, and repetition_penalty outside [0.01, 100]: 400 naming the field")

    # the edges that are accepted: the smallest top_p (a normal float) keeps the best token alone
    status, greedy = post(srv, dict(base, max_tokens=8, temperature=0, ignore_eos=True, return_token_ids=True))
    for fields in ({"top_p": 2e-38, "temperature": 1}, {"top_p": 2e-38, "temperature": 1, "top_k": 5}):
        status, r = post(srv, dict(base, max_tokens=8, ignore_eos=True, return_token_ids=True, seed=3, **fields))
        check(status == 200 and r["choices"][0]["token_ids"] == greedy["choices"][0]["token_ids"],
              "%s: the greedy tokens %s, got %d %s" % (fields, greedy["choices"][0]["token_ids"], status, r))
    for rep in (0.01, 100):
        status, r = post(srv, dict(base, repetition_penalty=rep, temperature=0))
        check(status == 200, "repetition_penalty %g is accepted: %d %s" % (rep, status, r))
    ok("top_p 2e-38 (TP %d, with and without top_k) samples the greedy tokens; repetition_penalty 0.01 and 100 "
       "accepted" % NP)

    # the model name: all its bytes, not up to a NUL
    for name in (srv.name + "\u0000x", srv.name + "\u0000"):
        status, r = post(srv, dict(base, model=name))
        err = r.get("error", {})
        check(status == 404 and err.get("code") == "model_not_found" and err.get("param") == "model",
              "model %r -> 404 model_not_found: %d %s" % (name, status, r))
    status, r = post(srv, dict(base, model=srv.name))
    check(status == 200, "model %r is served: %d" % (srv.name, status))
    ok("a model name with an embedded \\u0000 is a 404")

    # exact fit: prompt + max_tokens == n_positions is served in full, one more is a 400
    with open(os.path.join(model, "config.json")) as f:
        n_pos = json.load(f)["n_positions"]
    prompt = [(7 * i) % 1000 for i in range(20)]
    status, r = post(srv, {"prompt": prompt, "max_tokens": n_pos - len(prompt), "temperature": 0,
                           "ignore_eos": True})
    check(status == 200 and r["usage"]["completion_tokens"] == n_pos - len(prompt) and
          r["choices"][0]["finish_reason"] == "length",
          "prompt %d + max_tokens %d == n_positions %d: served in full, got %d %s" %
          (len(prompt), n_pos - len(prompt), n_pos, status, r.get("usage", r)))
    status, r = post(srv, {"prompt": prompt, "max_tokens": n_pos - len(prompt) + 1})
    err = r.get("error", {})
    check(status == 400 and err.get("param") == "max_tokens" and str(n_pos) in err.get("message", ""),
          "one more than n_positions -> 400 naming max_tokens and %d: %d %s" % (n_pos, status, r))
    alive(srv, "the exact-fit requests")
    ok("prompt + max_tokens == n_positions (%d) served in full; one more: 400" % n_pos)
    stop(srv)

    # the CLI: the same values are refused naming the flag, on every rank
    g = ["generate", "--model", model, "--prompt-ids", "5,17,9", "--max-new-tokens", "4"]
    cli_error(g + ["--temperature", "1", "--top-p", "1e-300"], "--top-p", "--top-p 1e-300")
    cli_error(g + ["--temperature", "1e-45"], "--temperature", "--temperature 1e-45")
    cli_error(g + ["--repetition-penalty", "1e-50"], "--repetition-penalty expects a number in [0.01, 100]",
              "--repetition-penalty 1e-50")
    cli_error(g + ["--repetition-penalty", "101"], "--repetition-penalty", "--repetition-penalty 101")
    cli_error(g + ["--presence-penalty", "1e-300"], "--presence-penalty", "--presence-penalty 1e-300")
    cli_error(g + ["--frequency-penalty", "2.5"], "--frequency-penalty expects a number in [-2, 2]",
              "--frequency-penalty 2.5")
    cli_error(g + ["--min-tokens", "5", "--max-new-tokens", "4"], "--min-tokens 5 exceeds --max-new-tokens 4",
              "--min-tokens over --max-new-tokens")
    # the CLI caps a sequence at n_positions (docs/USAGE.md: --max-new-tokens, "fewer if the
    # sequence reaches n_positions"): the exact fit gives every token, one more the same count
    ids = ",".join(map(str, prompt))
    for extra in (0, 1):
        res = cli_json(["generate", "--model", model, "--prompt-ids", ids, "--max-new-tokens",
                        str(n_pos - len(prompt) + extra), "--ignore-eos", "--json"])
        check(len(res[0]["ids"]) == n_pos - len(prompt) and res[0]["finish_reason"] == "length",
              "CLI prompt %d + --max-new-tokens %d: %d tokens (n_positions %d), got %d" %
              (len(prompt), n_pos - len(prompt) + extra, n_pos - len(prompt), n_pos, len(res[0]["ids"])))
    ok("CLI: the same values refused naming the flag; n_positions caps generation as documented")


# ---- PART detokenize ----

PAD = 50300  # an id CodeGen's vocab_size (51200) has and its tokenizer (50295 tokens) does not


def part_detokenize():
    plain = with_tokenizer(TINY_PY, os.path.join(WORK, "tiny-py"))
    prompt = "def fibonacci(n):\n"
    base = cli_json(["generate", "--model", plain, "--prompt", prompt, "--max-new-tokens", "24", "--ignore-eos",
                     "--json"])[0]["ids"]
    # the padded id takes over the logit of the first generated token that differs from the first
    x = next(i for i in base[1:] if i != base[0])
    padded = with_tokenizer(TINY_PY, os.path.join(WORK, "tiny-py-padded"))

    def edit(t):
        t["lm_head.weight"][PAD] = t["lm_head.weight"][x]
        b = t["lm_head.bias"]
        b[PAD] = np.nextafter(b[x], np.float16(np.inf))  # one f16 step above: wins where x would
    patch_tensors(os.path.join(padded, "model.safetensors"), edit)
    with open(os.path.join(padded, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]

    srv = serve(padded)
    status, r = post(srv, {"prompt": prompt, "max_tokens": 24, "temperature": 0, "ignore_eos": True,
                           "return_token_ids": True})
    ids, text = r["choices"][0]["token_ids"], r["choices"][0]["text"]
    check(PAD in ids and any(i < 50295 for i in ids), "the completion has padded and real ids: %s" % ids)
    status, text2, _ = srv.request("POST", "/detokenize", {"tokens": ids})
    check(status == 200 and json.loads(text2)["prompt"] == text,
          "POST /detokenize of the completion's token_ids == its text %r: %d %s" % (text, status, text2))
    status, text3, _ = srv.request("POST", "/detokenize", {"tokens": [i for i in ids if i != PAD]})
    check(status == 200 and json.loads(text3)["prompt"] == text, "padded ids decode to nothing: %s" % text3)
    for bad in ([vocab], [5, vocab + 7], [-1]):
        status, body, _ = srv.request("POST", "/detokenize", {"tokens": bad})
        err = json.loads(body).get("error", {})
        check(status == 400 and err.get("param") == "tokens" and str(vocab) in err.get("message", ""),
              "/detokenize %s -> 400 naming vocab_size %d: %d %s" % (bad, vocab, status, body))
    ok("server: completion token_ids (padded id %d among them) -> /detokenize == the text; ids >= %d refused"
       % (PAD, vocab))
    stop(srv)

    res = cli_json(["generate", "--model", padded, "--prompt", prompt, "--max-new-tokens", "24", "--ignore-eos",
                    "--json"])[0]
    check(res["ids"] == ids, "CLI generate == server: %s vs %s" % (res["ids"], ids))
    out = subprocess.run([TPGEN, "detokenize", "--model", padded, "--ids", ",".join(map(str, res["ids"])),
                          "--json"], capture_output=True, text=True, timeout=60)
    check(out.returncode == 0 and json.loads(out.stdout)["text"] == res["text"],
          "tpgen detokenize of generate's ids == its text %r: %d %s %s" % (res["text"], out.returncode, out.stdout,
                                                                          out.stderr))
    out = subprocess.run([TPGEN, "detokenize", "--model", padded, "--ids", "5,%d" % vocab], capture_output=True,
                         text=True, timeout=60)
    check(out.returncode == 1 and "out of range [0, %d)" % vocab in out.stderr and "vocab_size" in out.stderr,
          "tpgen detokenize of id %d: exit 1 naming the range: %d %s" % (vocab, out.returncode, out.stderr))
    ok("CLI: generate ids -> tpgen detokenize == the text; id %d refused" % vocab)


# ---- PART penalties ----

def raw_top(model, seq):
    """`tpgen score`'s top-64 raw log-probabilities: [position] -> {id: logprob} (position 0: None)."""
    r = cli_json(["score", "--model", model, "--ids", ",".join(map(str, seq)), "--logprobs", "64", "--json"])[0]
    return [None if t is None else {i: lp for i, lp in t} for t in r["top_logprobs"]]


def penalty(counts, pres, freq):
    return {i: freq * c + pres * (c > 0) for i, c in counts.items()}


def greedy_reference(top, n_prompt, gen, pres, freq, forbid=()):
    """Steps whose penalized argmax over the raw top 64 is determined, and those where it is not the
    token generated. Tokens outside the top 64 are at most its last raw value (+ what a negative
    penalty adds to the generated ones among them)."""
    counts, determined, wrong = {}, 0, []
    for t, tok in enumerate(gen):
        raw = top[n_prompt + t]
        pen = penalty(counts, pres, freq)
        adj = {i: lp - pen.get(i, 0) for i, lp in raw.items() if i not in forbid}
        bound = min(raw.values()) + max([0] + [-p for i, p in pen.items() if i not in raw])
        best = sorted(adj.items(), key=lambda kv: (-kv[1], kv[0]))
        if best[0][1] > bound + 1e-3 and best[0][1] - best[1][1] > 1e-3:
            determined += 1
            if best[0][0] != tok:
                wrong.append((t, tok, best[0][0]))
        counts[tok] = counts.get(tok, 0) + 1
    return determined, wrong


def repeats(ids):
    return len(ids) - len(set(ids))


def part_penalties():
    model = with_tokenizer(FIXTURE, os.path.join(WORK, "tiny-with-tokenizer"))
    prompt = "a b c d e"
    srv = serve(model)
    req = {"prompt": prompt, "max_tokens": 40, "temperature": 0, "ignore_eos": True, "return_token_ids": True}
    status, r = post(srv, req)
    pids, base = r["choices"][0]["prompt_token_ids"], r["choices"][0]["token_ids"]
    check(repeats(base) > 0, "the greedy baseline repeats tokens (what the penalties act on): %s" % base)
    flags = ["generate", "--model", model, "--prompt", prompt, "--max-new-tokens", "40", "--ignore-eos", "--json"]
    rep = {}
    for pres, freq in ((1.5, 0.5), (0, 1.0), (1.0, 0), (-0.5, -0.3)):
        status, r = post(srv, dict(req, presence_penalty=pres, frequency_penalty=freq))
        gen = r["choices"][0]["token_ids"]
        cli = cli_json(flags + ["--presence-penalty", str(pres), "--frequency-penalty", str(freq)])[0]["ids"]
        check(cli == gen, "presence %g frequency %g: CLI == server: %s vs %s" % (pres, freq, cli, gen))
        check(gen != base, "presence %g frequency %g change the greedy output" % (pres, freq))
        determined, wrong = greedy_reference(raw_top(model, pids + gen), len(pids), gen, pres, freq)
        check(determined >= 0.8 * len(gen) and not wrong,
              "presence %g frequency %g: greedy == the Python reference at %d of %d determined steps; wrong (step, "
              "got, expected): %s" % (pres, freq, determined - len(wrong), determined, wrong))
        rep[(pres, freq)] = repeats(gen)
    check(rep[(1.5, 0.5)] < repeats(base) < rep[(-0.5, -0.3)],
          "repeats: positive penalties fewer, negative more than without (%d): %s" % (repeats(base), rep))
    ok("greedy presence/frequency penalties == the reference (server and CLI); repeats %d without, %s with"
       % (repeats(base), rep))

    # sampled (top-k, top-p): server == CLI, and the CLI's reported log-probabilities (of the
    # adjusted logits) differ from the raw ones by the penalties, pair by pair
    pres, freq = 1.5, 0.5
    sreq = dict(req, temperature=0.8, top_k=40, top_p=0.9, seed=5, n=2, presence_penalty=pres,
                frequency_penalty=freq)
    status, r = post(srv, sreq)
    sgen = [c["token_ids"] for c in r["choices"]]
    status, r0 = post(srv, dict(sreq, presence_penalty=0, frequency_penalty=0))
    check([c["token_ids"] for c in r0["choices"]] != sgen, "sampled: the penalties change the output")
    stop(srv)
    pf = os.path.join(WORK, "prompts-pen-%d.txt" % NP)
    with open(pf, "w") as f:
        f.write((json.dumps(prompt) + "\n") * 2)
    cli = cli_json(["generate", "--model", model, "--prompts-file", pf, "--max-new-tokens", "40", "--ignore-eos",
                    "--json", "--temperature", "0.8", "--top-k", "40", "--top-p", "0.9", "--seed", "5",
                    "--presence-penalty", str(pres), "--frequency-penalty", str(freq), "--logprobs", "8"])
    check([c["ids"] for c in cli] == sgen, "sampled: CLI == server: %s vs %s" % ([c["ids"] for c in cli], sgen))
    pairs, bad = 0, []
    for c in cli:
        top = raw_top(model, pids + c["ids"])
        counts = {}
        for t, tok in enumerate(c["ids"]):
            raw, pen = top[len(pids) + t], penalty(counts, pres, freq)
            rep_t = [(i, lp) for i, lp in c["top_logprobs"][t] if i in raw]
            for (a, la), (b, lb) in zip(rep_t, rep_t[1:]):
                want = (raw[a] - pen.get(a, 0)) - (raw[b] - pen.get(b, 0))
                pairs += 1
                if abs((la - lb) - want) > 2e-3:
                    bad.append((t, a, b, la - lb, want))
            counts[tok] = counts.get(tok, 0) + 1
    check(pairs > 100 and not bad, "sampled: reported log-probability gaps == raw gaps - penalties over %d pairs; "
          "off: %s" % (pairs, bad[:5]))
    ok("sampled presence/frequency (top-k 40, top-p 0.9): server == CLI; %d log-probability gaps == the reference"
       % pairs)

    # min_tokens, on a copy whose EOS always wins
    eos_model = with_tokenizer(FIXTURE, os.path.join(WORK, "tiny-eos"))
    with open(os.path.join(eos_model, "config.json")) as f:
        eos = json.load(f)["eos_token_id"]

    def edit(t):
        t["lm_head.bias"][eos] += 40.0
    patch_tensors(os.path.join(eos_model, "model.safetensors"), edit)
    srv = serve(eos_model)
    ereq = {"prompt": prompt, "max_tokens": 30, "temperature": 0, "return_token_ids": True}
    status, r = post(srv, ereq)
    check(r["choices"][0]["token_ids"] == [eos] and r["choices"][0]["finish_reason"] == "stop",
          "without min_tokens EOS ends it at once: %s" % r["choices"][0])
    N = 7
    status, r = post(srv, dict(ereq, min_tokens=N))
    g = r["choices"][0]["token_ids"]
    check(len(g) == N + 1 and g[N] == eos and eos not in g[:N] and r["choices"][0]["finish_reason"] == "stop",
          "min_tokens %d: %d tokens then EOS, finish stop: %s" % (N, N, r["choices"][0]))
    determined, wrong = greedy_reference(raw_top(eos_model, pids + g), len(pids), g[:N], 0, 0, forbid={eos})
    check(determined >= N - 1 and not wrong, "min_tokens: the tokens before EOS are the greedy choice without EOS "
          "(%d determined, wrong %s)" % (determined, wrong))
    # text a stop string could still begin, held back when EOS ends the sequence: released, as the
    # CLI releases it (a stop string that never matched cuts nothing)
    text = r["choices"][0]["text"]
    held_stop = text[-1:] + "\u2603 never generated"
    status, r2 = post(srv, dict(ereq, min_tokens=N, stop=[held_stop]))
    check(status == 200 and r2["choices"][0]["text"] == text and len(text) > 0,
          "EOS after text a stop string could begin: the held-back text is released: %r vs %r"
          % (r2["choices"][0]["text"] if status == 200 else r2, text))
    cli_held = cli_json(["generate", "--model", eos_model, "--prompt", prompt, "--max-new-tokens", "30", "--json",
                         "--min-tokens", str(N), "--stop", held_stop])[0]
    check(cli_held["text"] == text, "CLI: the same text with that stop string: %r vs %r" % (cli_held["text"], text))
    sreq = dict(ereq, temperature=1, top_k=20, top_p=0.9, seed=3, n=4, min_tokens=5)
    status, r = post(srv, sreq)
    sg = [c["token_ids"] for c in r["choices"]]
    check(all(len(x) == 6 and x[5] == eos and eos not in x[:5] for x in sg) and len(set(map(tuple, sg))) > 1,
          "sampled min_tokens 5 (top-k, top-p, n 4): 5 tokens then EOS each, not all alike: %s" % sg)
    stop(srv)
    cli = cli_json(["generate", "--model", eos_model, "--prompt", prompt, "--max-new-tokens", "30", "--json",
                    "--min-tokens", str(N)])[0]
    check(cli["ids"] == g and cli["finish_reason"] == "stop", "CLI --min-tokens %d == server: %s vs %s" %
          (N, cli["ids"], g))
    with open(pf, "w") as f:
        f.write((json.dumps(prompt) + "\n") * 4)
    cli = cli_json(["generate", "--model", eos_model, "--prompts-file", pf, "--max-new-tokens", "30", "--json",
                    "--temperature", "1", "--top-k", "20", "--top-p", "0.9", "--seed", "3", "--min-tokens", "5"])
    check([c["ids"] for c in cli] == sg, "CLI sampled --min-tokens 5 == server: %s vs %s" %
          ([c["ids"] for c in cli], sg))
    ok("min_tokens holds EOS back exactly that long (greedy and sampled, server and CLI)")


os.makedirs(WORK, exist_ok=True)
{"requests": part_requests, "detokenize": part_detokenize, "penalties": part_penalties}[PART]()
st.sh.exit_with_checks()
