"""A choice that ends on EOS keeps all its text when it has stop strings (found by the invariant of
tests/fuzz/fuzz_request.c: a choice's text is its ids decoded, cut before the first stop string).

The stop matcher holds back text that could begin a stop string; on EOS the server must release it,
as it does at max_tokens. Before the fix, a request with stop ["<its last char>\\u0001never"] lost
its last character when it ended on EOS. And EOS sampled as the max_tokens-th token says
finish_reason "stop", not "length" (issue 41). The tiny model (tests/data/tiny-f32, vocab 1001, EOS 1000)
with the CodeGen tokenizer, TP 1; sampled at temperature 1.5 so that some seed ends on EOS.

    eos_stop_test.py TPGEN TINY_MODEL_DIR TOKENIZER_DIR
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import serve_harness as sh  # noqa: E402

tpgen, model, tok = sys.argv[1:4]
work = tempfile.mkdtemp(prefix="tpgen-eos-stop-")
try:
    sh.copy_files(work, model, tok)
    srv = sh.Server(tpgen, ["--model", work, "--backend", "cpu", "--threads", "1"])
    try:
        base = None
        for seed in range(1, 200):  # the first seed whose choice ends on EOS with some text
            body = {"prompt": [5, 6], "max_tokens": 100, "temperature": 1.5, "seed": seed, "return_token_ids": True}
            st, js, _ = srv.complete(body)
            sh.check(st == 200, "seed %d: status %s" % (seed, st))
            c = js["choices"][0]
            if c["finish_reason"] == "stop" and c["text"] and c["token_ids"][-1] == 1000:
                base = (body, c)
                break
        sh.check_ok(base is not None, "some seed in 1..199 ends on EOS (id 1000)")
        body, c = base
        text = c["text"]
        stop = text[-1] + "\u0001never"  # never in the text, but its first char ends it
        st, js, _ = srv.complete(dict(body, stop=[stop]))
        c2 = js["choices"][0] if st == 200 else {}
        sh.check(st == 200 and c2.get("finish_reason") == "stop" and c2.get("token_ids") == c["token_ids"],
                 "seed %d with stop %r: the same ids, finish stop (EOS)" % (body["seed"], stop))
        sh.check(c2.get("text") == text, "seed %d: the text with a stop string that never matched is the text "
                 "without (%d chars, got %d: %r)" % (body["seed"], len(text), len(c2.get("text", "")),
                                                     c2.get("text", "")[-8:]))
        st, events, done = srv.stream(dict(body, stop=[stop]))
        streamed = "".join(ch.get("text", "") for e in events for ch in e.get("choices", []))
        sh.check(st == 200 and done and streamed == text, "streamed: the same text (%d chars, got %d)" %
                 (len(text), len(streamed)))
        # EOS as the last allowed token says "stop" (issue 41): greedy, prompt [799] ends on EOS after
        # K tokens (tests/sampling/eos_at_length.sh does the same through `tpgen generate`)
        st, js, _ = srv.complete({"prompt": [799], "max_tokens": 64, "temperature": 0, "return_token_ids": True})
        ids = js["choices"][0]["token_ids"] if st == 200 else []
        sh.check_ok(st == 200 and js["choices"][0]["finish_reason"] == "stop" and ids and ids[-1] == 1000,
                    "greedy [799] ends on EOS within 64 tokens (the case for max_tokens = its length)")
        K = len(ids)
        for stream in (False, True):
            body = {"prompt": [799], "max_tokens": K, "temperature": 0, "return_token_ids": True}
            if stream:
                st, events, done = srv.stream(body)
                fin = [ch["finish_reason"] for e in events for ch in e.get("choices", []) if ch.get("finish_reason")]
            else:
                st, js, _ = srv.complete(body)
                fin = [js["choices"][0]["finish_reason"]] if st == 200 else []
            sh.check(st == 200 and fin == ["stop"], "greedy [799], max_tokens %d (EOS its last token)%s: finish %s, "
                     "want ['stop']" % (K, ", streamed" if stream else "", fin))
    finally:
        stopped = srv.stop()
        sh.check(stopped.clean, "the server stops cleanly: %r" % (stopped,))
finally:
    shutil.rmtree(work, ignore_errors=True)
if sh.FAILS:
    sys.exit(1)
print("ok: EOS with stop strings keeps the held-back text; EOS as the last allowed token says stop")
