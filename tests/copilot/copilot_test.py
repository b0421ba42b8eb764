#!/usr/bin/env python3
"""The Copilot / FauxPilot drop-in of `tpgen serve` (docs/SERVING.md "From FauxPilot").
usage: copilot_test.py TPGEN MODEL WORKDIR PART   (MODEL: models/codegen-tiny-py, a real tokenizer)
PART "token": GET /copilot_internal/v2/token without an API key: 200, application/json, exactly
  FauxPilot's fields (token: a string, expires_at: unix seconds after now + refresh_in, refresh_in:
  seconds); POST is 405. With --api-key: 401 without or with a wrong key, 200 with it, and the
  token it returns, sent back as 'Authorization: Bearer TOKEN' (as the plugin does), completes on
  /v1/engines/copilot-codex/completions.
PART "engines": /v1/engines/codegen/completions and /v1/engines/copilot-codex/completions, through
  the openai client (base_url .../v1/engines/ENGINE) and curl, greedy ids == `tpgen generate`;
  the request body the Copilot plugin sends (suffix "", nwo, extra: {...}, stream) streamed on
  copilot-codex == the same request not streamed; FauxPilot's own request model with its
  defaults (OpenAIinput: model 'codegen' with --served-model-name codegen, best_of 1, logit_bias,
  stream, echo, logprobs, user null) accepted; what tpgen refuses on purpose (a non-empty suffix on
  a CodeGen 1 model, best_of != n, a non-empty logit_bias) answered 400 naming the field.
"""
import json
import os
import subprocess
import sys
import time

import openai

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import serve_harness as sh  # noqa: E402

check, check_ok, ok = sh.check, sh.check_ok, sh.ok
TPGEN, MODEL, WORK, PART = sys.argv[1:5]
ENGINES = ["codegen", "copilot-codex"]
PROMPT = "def hello"


def server(model, extra=()):
    return sh.Server(TPGEN, ["--model", model, "--backend", "cpu", "--threads", "1"] + list(extra))


def token_shape(srv, headers=None, what="token"):
    """GET the token route -> its token, after checking status, type and the fields' shapes."""
    st, text, r = srv.request("GET", "/copilot_internal/v2/token", headers=headers or {})
    if not check(st == 200, "%s: GET /copilot_internal/v2/token -> %d %s" % (what, st, text)):
        return None
    ctype = r.getheader("Content-Type", "")
    check(ctype.split(";")[0].strip() == "application/json", "%s: Content-Type %r" % (what, ctype))
    body = json.loads(text)
    check(sorted(body) == ["expires_at", "refresh_in", "token"], "%s: fields %s" % (what, sorted(body)))
    tok, exp, ref = body.get("token"), body.get("expires_at"), body.get("refresh_in")
    check(isinstance(tok, str) and tok != "", "%s: token %r is a non-empty string" % (what, tok))
    check(type(ref) is int and ref > 0, "%s: refresh_in %r is a positive integer" % (what, ref))
    now = time.time()
    check(type(exp) is int and type(ref) is int and exp > now + ref,
          "%s: expires_at %r is unix seconds after now (%d) + refresh_in" % (what, exp, now))
    ok("%s: %s" % (what, text))
    return tok


def part_token():
    model = MODEL
    srv = server(model)
    try:
        token_shape(srv, what="no API key")
        st, text, r = srv.request("POST", "/copilot_internal/v2/token", {})
        check(st == 405 and r.getheader("Allow") is not None, "POST token route -> %d %s" % (st, text))
    finally:
        check(srv.stop().rc == 0, "server (no key) exits 0")
    key = "sk-copilot-test"
    srv = server(model, ["--api-key", key])
    try:
        for hdr, what in [({}, "no Authorization"), ({"Authorization": "Bearer wrong"}, "a wrong key"),
                          ({"Authorization": "token gho_github_oauth"}, "a GitHub OAuth token")]:
            st, text, r = srv.request("GET", "/copilot_internal/v2/token", headers=hdr)
            check(st == 401 and json.loads(text)["error"]["code"] == "invalid_api_key",
                  "token route with %s -> %d %s" % (what, st, text))
        tok = token_shape(srv, {"Authorization": "Bearer " + key}, "with the API key")
        check(tok == key, "with a key the token is the key (the plugin sends it back): %r" % tok)
        body = {"prompt": PROMPT, "max_tokens": 4, "temperature": 0}
        st, js, text = srv.complete(body, headers={"Authorization": "Bearer %s" % tok,
                                                   "Content-Type": "application/json"},
                                    path="/v1/engines/copilot-codex/completions")
        check_ok(st == 200 and js["choices"][0]["text"] is not None,
                 "the token as Bearer completes on copilot-codex: %d %s" % (st, text[:200]))
        st, js, text = srv.complete(body, path="/v1/engines/copilot-codex/completions")
        check(st == 401, "copilot-codex without the token -> %d" % st)
    finally:
        check(srv.stop().rc == 0, "server (API key) exits 0")


def generate(model, prompt, flags):
    path = os.path.join(WORK, "prompt.txt")
    with open(path, "w") as f:
        f.write(json.dumps(prompt) + "\n")
    out = subprocess.run([TPGEN, "generate", "--model", model, "--prompts-file", path, "--json", "--backend", "cpu",
                          "--threads", "1"] + flags, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        sys.exit("FAIL: tpgen generate: " + out.stderr)
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")][0]


def part_engines():
    model = MODEL
    want = generate(model, PROMPT, ["--max-new-tokens", "12", "--ignore-eos"])
    srv = server(model, ["--served-model-name", "codegen"])
    try:
        X = {"ignore_eos": True, "return_token_ids": True}
        for eng in ENGINES:
            path = "/v1/engines/%s/completions" % eng
            client = openai.OpenAI(base_url=srv.base + "/v1/engines/" + eng, api_key="dummy", max_retries=0,
                                   timeout=60)
            r = client.completions.create(model="codegen", prompt=PROMPT, max_tokens=12, temperature=0, extra_body=X)
            check_ok(r.choices[0].token_ids == want["ids"] and r.choices[0].text == want["text"],
                     "openai client on %s: %r == generate's %r" % (path, r.choices[0].text, want["text"]))
            # FauxPilot's documented curl (documentation/client.md), on this engine
            body = {"prompt": PROMPT, "max_tokens": 12, "temperature": 0, "ignore_eos": True,
                    "return_token_ids": True}
            out = subprocess.run(["curl", "-sS", "-H", "Accept: application/json", "-H", "Content-type: application/json",
                                  "-X", "POST", "-d", json.dumps(body), srv.base + path],
                                 capture_output=True, text=True, timeout=60)
            js = json.loads(out.stdout) if out.returncode == 0 and out.stdout.startswith("{") else {}
            check_ok(js.get("choices", [{}])[0].get("token_ids") == want["ids"],
                     "curl on %s: %s" % (path, out.stdout[:200] or out.stderr))

        # The body the Copilot plugin posts (its fields as recorded from the plugin): suffix ""
        # at the end of a file, nwo and extra (unknown to tpgen: ignored), stream.
        plugin = {"prompt": "# Path: hello.py\n" + PROMPT, "suffix": "", "max_tokens": 12, "temperature": 0,
                  "top_p": 1, "n": 1, "stop": ["\n\n"], "nwo": "octo/hello", "stream": True,
                  "extra": {"language": "python", "next_indent": 0, "trim_by_indentation": True,
                            "prompt_tokens": 8, "suffix_tokens": 0}}
        path = "/v1/engines/copilot-codex/completions"
        st, events, done = srv.stream(plugin, path=path)
        streamed = "".join(e["choices"][0]["text"] for e in events if e.get("choices"))
        check(st == 200 and done, "plugin body streamed on %s: %d %s" % (path, st, events[:1]))
        st, js, text = srv.complete(dict(plugin, stream=False), path=path)
        check_ok(st == 200 and js["choices"][0]["text"] == streamed,
                 "plugin body: streamed %r == not streamed %r" % (streamed, js and js["choices"][0]["text"]))

        # FauxPilot's request model (copilot_proxy/models.py OpenAIinput) as a client fills it:
        # every field, its defaults, nulls where it has no default.
        fauxpilot = {"model": "codegen", "prompt": PROMPT, "suffix": None, "max_tokens": 16, "temperature": 0.6,
                     "top_p": 1.0, "n": 1, "stream": None, "logprobs": None, "echo": None, "stop": None,
                     "presence_penalty": 0, "frequency_penalty": 1, "best_of": 1, "logit_bias": None, "user": None}
        for eng in ENGINES:
            st, js, text = srv.complete(fauxpilot, path="/v1/engines/%s/completions" % eng)
            check_ok(st == 200 and js["model"] == "codegen" and js["object"] == "text_completion",
                     "FauxPilot's OpenAIinput with its defaults on %s: %d %s" % (eng, st, text[:160]))

        # Refused on purpose (docs/SERVING.md says why), each naming its field.
        for extra, param in [({"suffix": "\n    return 1\n"}, "suffix"), ({"best_of": 2}, "best_of"),
                             ({"logit_bias": {"50256": -100}}, "logit_bias")]:
            st, js, text = srv.complete(dict({"prompt": PROMPT, "max_tokens": 4}, **extra), path=path)
            check_ok(st == 400 and js["error"]["param"] == param, "%s -> %d %s" % (extra, st, text[:200]))
    finally:
        check(srv.stop().rc == 0, "server exits 0")


if __name__ == "__main__":
    os.makedirs(WORK, exist_ok=True)
    {"token": part_token, "engines": part_engines}[PART]()
    sh.exit_with_checks()
