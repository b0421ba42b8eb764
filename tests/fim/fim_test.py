"""`suffix` end to end (tests/fim.cmake): fill-in-the-middle on the CodeGen2-shaped fixture, and
CodeGen 1's refusal and --ignore-suffix.

    fim_test.py TPGEN MPIEXEC NP fim CODEGEN2_FIXTURE
    fim_test.py TPGEN MPIEXEC NP codegen1 TINY_MODEL_DIR TOKENIZER_DIR

fim: the fixture's expected.json "fim" entry (tools/fixtures/make_codegen2_fixtures.py) holds the FIM prompt's
ids as HF `tokenizers` encodes prefix + "<mask_1>" + suffix + "<|endoftext|>" + "<sep>" + "<mask_1>"
and the float64 reference's greedy infill up to <eom>. Checked: the prompt ids the server built
equal those; the infill ids, text (without <eom>) and finish_reason "stop"; logprobs within the
parity bound; through the openai client (plain and streaming), curl with streaming on
/v1/engines/{e}/completions, a stop string, n = 2 and an array of text prompts; a FIM request sent
twice gives the same infill, the second with cached_tokens > 0 (the prefix cache); token-id
prompts with suffix are refused naming `suffix`. Token names typed in the prefix or suffix stay text
and an empty suffix is an infill at the end: the exact prompt ids of tests/data/tokenizer/fim_cases.jsonl
(HF `tokenizers` with split_special_tokens, tools/fixtures/make_fim_fixtures.py). A 7 MB suffix with 64
prompts that cannot fit the context is a 400 naming `suffix` before it is encoded (by its length in
bytes), and rank 0's peak memory grows by far less than 64 encodings of it took; a short suffix of
too many tokens is a 400 naming `suffix` with its token count (encoded once, before any prompt).
The fixture directory may lack fim.json: CodeGen2's format is then recognized from its tokenizer.
codegen1: tiny-f32 with the CodeGen tokenizer has no FIM format: `suffix` is a 400 naming it;
under --ignore-suffix the answer is the plain completion of the prompt.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import serve_harness as sh  # noqa: E402

CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "tokenizer", "fim_cases.jsonl")
TOL = 2e-4  # tests/parity/check_parity.c's logprob bound (fp32 engine vs the float64 reference)
tpgen, mpiexec, np_, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
mpi = mpiexec if np_ > 1 else None


def close(a, b):
    return len(a) == len(b) and all(abs(x - y) <= TOL for x, y in zip(a, b))


def peak_kb(pid):
    """VmHWM: the most resident memory pid has had."""
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1))


def plain_text_checks(srv):
    """Token names in the user's code stay text, an empty suffix infills at the end: exact ids."""
    cases = [c for c in (json.loads(l) for l in open(CASES)) if c["tokenizer"] == "codegen2"]
    for c in cases:
        st, js, raw = srv.complete({"prompt": c["prefix"], "suffix": c["suffix"], "max_tokens": 1, "temperature": 0,
                                    "return_token_ids": True})
        got = js["choices"][0].get("prompt_token_ids") if st == 200 else raw[:300]
        sh.check(got == c["ids"], "prefix %r, suffix %r: the FIM prompt ids %s (got %s)"
                 % (c["prefix"], c["suffix"], c["ids"], got))


def long_suffix_check(srv):
    """A suffix that cannot fit the context, with 64 prompts: a 400 naming suffix, and rank 0's
    peak memory grows by less than 300 MB (64 encodings of it took over 1 GB)."""
    pid0 = srv.rank_pids()[0]
    before = peak_kb(pid0)
    st, js, raw = srv.complete({"prompt": ["a"] * 64, "suffix": "x = 1\n" * 1000000, "max_tokens": 1}, timeout=300)
    grew = (peak_kb(pid0) - before) / 1024
    err = (js or {}).get("error", {})
    sh.check(st == 400 and err.get("param") == "suffix" and "at least" in err.get("message", ""),
             "a 7 MB suffix beyond the context: 400 naming suffix (got %s %s)" % (st, raw[:300]))
    sh.check(grew < 300, "rank 0's peak memory grew by %.0f MB for it (the suffix encoded once; limit 300)" % grew)
    # short enough in bytes to be encoded, too many tokens once it is: refused with its exact count
    st, js, raw = srv.complete({"prompt": ["a"] * 64, "suffix": "x = 1\n" * 170, "max_tokens": 1})
    msg = (js or {}).get("error", {}).get("message", "")
    sh.check(st == 400 and (js or {}).get("error", {}).get("param") == "suffix" and "the suffix alone is" in msg
             and "at least" not in msg, "a 1 KB suffix of more tokens than the context: 400 naming suffix with its "
             "token count (got %s %s)" % (st, raw[:300]))


def fim_mode(fixture):
    import openai
    ref = json.load(open(os.path.join(fixture, "expected.json")))["fim"]
    eom = ref["ids"][-1]
    srv = sh.Server(tpgen, ["--model", fixture, "--backend", "cpu", "--threads", "1"], np=np_, mpiexec=mpi)
    try:
        body = {"model": srv.name, "prompt": ref["prefix"], "suffix": ref["suffix"], "max_tokens": 20,
                "temperature": 0, "logprobs": 2, "return_token_ids": True}
        client = openai.OpenAI(base_url=srv.base + "/v1", api_key="none")
        r = client.completions.create(model=srv.name, prompt=ref["prefix"], suffix=ref["suffix"], max_tokens=20,
                                      temperature=0, logprobs=2, extra_body={"return_token_ids": True})
        c = r.choices[0]
        extra = c.model_extra or {}
        sh.check(extra.get("prompt_token_ids") == ref["prompt_ids"],
                 "openai: the FIM prompt ids are the tokenizer's ids of the FIM string %s (got %s)"
                 % (ref["prompt_ids"], extra.get("prompt_token_ids")))
        sh.check(extra.get("token_ids") == ref["ids"] and ref["ids"][-1] == eom,
                 "openai: the infill ids end at <eom> as the reference's %s (got %s)" % (ref["ids"], extra.get("token_ids")))
        sh.check(c.text == ref["text"] and c.finish_reason == "stop",
                 "openai: text %r without <eom>, finish_reason stop (got %r, %s)" % (ref["text"], c.text, c.finish_reason))
        lps = c.logprobs.token_logprobs if c.logprobs else []
        sh.check(close(lps, ref["logprobs"]), "openai: logprobs within %g of the reference %s (got %s)"
                 % (TOL, ref["logprobs"], lps))
        sh.check(r.usage.prompt_tokens == len(ref["prompt_ids"]), "usage counts the FIM prompt")

        parts = list(client.completions.create(model=srv.name, prompt=ref["prefix"], suffix=ref["suffix"],
                                               max_tokens=20, temperature=0, stream=True))
        text = "".join(p.choices[0].text for p in parts if p.choices)
        fins = [p.choices[0].finish_reason for p in parts if p.choices and p.choices[0].finish_reason]
        sh.check(text == ref["text"] and fins == ["stop"], "openai stream: %r, finish stop (got %r, %s)"
                 % (ref["text"], text, fins))

        out = subprocess.run(["curl", "-sS", "-N", "-H", "Content-Type: application/json", "-d",
                              json.dumps(dict(body, stream=True)), srv.base + "/v1/engines/codegen/completions"],
                             capture_output=True, text=True, timeout=120)
        events = [json.loads(l[6:]) for l in out.stdout.splitlines() if l.startswith("data: {")]
        text = "".join(ch.get("text", "") for e in events for ch in e.get("choices", []))
        ids = [i for e in events for ch in e.get("choices", []) for i in ch.get("token_ids") or []]
        fins = [ch.get("finish_reason") for e in events for ch in e.get("choices", []) if ch.get("finish_reason")]
        sh.check(out.returncode == 0 and "data: [DONE]" in out.stdout and text == ref["text"] and ids == ref["ids"]
                 and fins == ["stop"], "curl stream on /v1/engines/codegen/completions: %r, ids %s, stop (got %r, %s, "
                 "%s)" % (ref["text"], ref["ids"], text, ids, fins))

        if len(ref["text"]) >= 3:
            stop = ref["text"][1:3]
            st, js, raw = srv.complete(dict(body, stop=[stop]))
            c = js["choices"][0] if st == 200 else {}
            sh.check(c.get("text") == ref["text"][:1] and c.get("finish_reason") == "stop",
                     "stop string %r cuts the infill to %r (got %s %r)" % (stop, ref["text"][:1], st, c.get("text")))
        st, js, raw = srv.complete(dict(body, n=2, prompt=[ref["prefix"], ref["prefix"]]))
        texts = [c["text"] for c in js["choices"]] if st == 200 else raw
        sh.check(st == 200 and texts == [ref["text"]] * 4, "n = 2 of two text prompts: the infill 4 times (got %r)"
                 % (texts,))
        # the prefix cache (on unless --no-prefix-cache): a FIM request new to the server, its FIM
        # prompt over two KV blocks (16 tokens each), sent twice: the same infill (ids and text),
        # and the second has the first's full blocks cached (usage.prompt_tokens_details)
        twice = {k: v for k, v in body.items() if k != "logprobs"}
        twice["prompt"] = "import os\nimport sys\n\n\ndef add(a, b):\n    "
        got = [srv.complete(twice) for _ in range(2)]
        use = [js.get("usage", {}) if st == 200 else {} for st, js, _ in got]
        cached = [u.get("prompt_tokens_details", {}).get("cached_tokens") for u in use]
        outs = [(js["choices"][0]["token_ids"], js["choices"][0]["text"]) if st == 200 else raw for st, js, raw in got]
        sh.check(all(st == 200 for st, _, _ in got) and use[0]["prompt_tokens"] > 32 and outs[0] == outs[1]
                 and outs[0][0] and cached[0] == 0 and cached[1] > 0,
                 "a FIM request sent twice: the same infill, the second with its prefix cached (ids and texts %r, "
                 "prompt tokens %s, cached_tokens %s)" % (outs, [u.get("prompt_tokens") for u in use], cached))
        st, js, raw = srv.complete(dict(body, prompt=ref["prompt_ids"][:3]))
        sh.check(st == 400 and "suffix" in raw and "text prompts" in raw, "token-id prompt with suffix: 400 (got %s %s)"
                 % (st, raw[:200]))
        plain_text_checks(srv)
        long_suffix_check(srv)
    finally:
        stopped = srv.stop()
        sh.check(stopped.clean, "the server stops cleanly: %r" % (stopped,))


def codegen1_mode(model, tok):
    work = tempfile.mkdtemp(prefix="tpgen-fim-cg1-")
    try:
        sh.copy_files(work, model, tok)
        body = {"prompt": "a b c", "suffix": "d e", "max_tokens": 8, "temperature": 0,
                "return_token_ids": True}
        for flags in ([], ["--ignore-suffix"]):
            srv = sh.Server(tpgen, ["--model", work, "--backend", "cpu", "--threads", "1"] + flags, np=np_, mpiexec=mpi)
            try:
                st, js, raw = srv.complete(body)
                if not flags:
                    err = (js or {}).get("error", {})
                    sh.check(st == 400 and err.get("param") == "suffix" and "--ignore-suffix" in err.get("message", ""),
                             "CodeGen 1: suffix is a 400 naming it and --ignore-suffix (got %s %s)" % (st, raw[:300]))
                else:
                    plain = dict(body)
                    del plain["suffix"]
                    st2, js2, raw2 = srv.complete(plain)
                    sh.check(st == 200 and st2 == 200 and js["choices"][0]["token_ids"] == js2["choices"][0]["token_ids"]
                             and js["choices"][0]["prompt_token_ids"] == js2["choices"][0]["prompt_token_ids"],
                             "--ignore-suffix: the plain completion of the prompt (got %s %s / %s)"
                             % (st, raw[:200], raw2[:200]))
            finally:
                stopped = srv.stop()
                sh.check(stopped.clean, "the server stops cleanly: %r" % (stopped,))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if mode == "fim":
    fim_mode(sys.argv[5])
else:
    codegen1_mode(sys.argv[5], sys.argv[6])
sh.exit_with_checks()
