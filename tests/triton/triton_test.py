#!/usr/bin/env python3
"""tpgen behind a real NVIDIA Triton server (the `nvidia-pytriton` wheel's tritonserver, Python
backend) with launcher/triton/model_repository/tpgen, tpgen at TP = NP on the tiny fixture with
the CodeGen tokenizer. Run with the venv of tools/dev/install-triton.sh (tritonclient).

usage: triton_test.py TPGEN MPIEXEC NP FIXTURE TOKENIZER_DIR WORKDIR VENV [codegen25]
Checks: a bad `model` fails the load (repository API) with tpgen's error in Triton's log, no hang;
HTTP generate and generate_stream greedy text == `tpgen generate` (streamed deltas concatenated,
and with the prompt when exclude_input_in_output is false); logprobs; 16 concurrent gRPC streams
(tritonclient start_stream / async_stream_infer) == each alone; a gRPC stream cancelled by the
client => tpgen cancels it and tpgen_kv_blocks_free returns to the total; bad sampling_parameters
(not JSON, temperature < 0, unknown model) => a Triton error with tpgen's message, then a good
request works; unload (explicit model control) and SIGTERM to tritonserver each leave no tpgen rank.
codegen25 (FIXTURE = TOKENIZER_DIR = the CodeGen2.5 checkpoint directory of tests/codegen25.cmake, with
its expected.json): the directory as it is (tokenizer_config.json naming CodeGen25Tokenizer), its text
prompts, `tpgen generate` first held to HF's ids, then parts 2, 3 and the logprobs of the above,
and an unload that leaves no tpgen rank; the rest is the same code on either model.
"""
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import tritonclient.grpc as grpcclient

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import serve_harness as sh  # noqa: E402

TPGEN, MPIEXEC, NP, FIXTURE, TOKDIR, WORK, VENV = sys.argv[1:8]
CG25 = sys.argv[8:9] == ["codegen25"]
NP = int(NP)
SCALE = int(os.environ.get("TPGEN_TIMEOUT_SCALE", "1"))  # x4 in a sanitizer build (tests/sanitize.cmake)
# the backend of every tpgen this test starts (tests/gpu_emu_product.cmake: --backend cuda on the emulated device)
BACKEND = os.environ.get("TPGEN_TEST_BACKEND_FLAGS", "--backend cpu --threads 1")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
check, ok, FAILS = sh.check, sh.ok, sh.FAILS
EVENTS = []  # responses per stream: tpgen sends a chunk per token unless tokens come faster than read
PROMPTS = ["a b c d e", "d e f", "x y", "h e l l o"]
if CG25:  # HF's greedy texts of 20 tokens are not in expected.json: held to HF over its max_new_tokens
    HF = json.load(open(os.path.join(FIXTURE, "expected.json")))["generate"]
    PROMPTS = [g["text"] for g in HF]


def tpgen_ranks():
    """pids of the tpgen processes below this test (tritonserver -> its Python stub -> mpirun ->
    the ranks; this process is their subreaper, so ranks whose launcher died stay below it)."""
    return list(sh.tpgen_pids(os.getpid(), TPGEN))


free_port = sh.free_port  # tritonserver cannot report a port it picked itself


def wait_for(pred, secs):
    return sh.wait_until(pred, secs * SCALE)


def http_req(port, method, path, body=None, timeout=60):
    return sh.http_request("127.0.0.1", port, method, path, body, timeout=timeout * SCALE)[:2]


def sse_events(port, path, body):
    st, events, _ = sh.post_sse("127.0.0.1", port, path, body, timeout=60 * SCALE)
    return st, events


class Triton:
    def __init__(self, repo, log_path):
        self.repo = repo
        self.http, self.grpc, self.metrics = free_port(), free_port(), free_port()
        tdir = subprocess.run([os.path.join(VENV, "bin", "python"), "-c",
                               "import os, pytriton; print(os.path.join(os.path.dirname(pytriton.__file__), 'tritonserver'))"],
                              capture_output=True, text=True, check=True).stdout.strip()
        site = subprocess.run([os.path.join(VENV, "bin", "python"), "-c", "import site; print(site.getsitepackages()[0])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        env = dict(os.environ)
        
        env["PYTHONPATH"] = site  # numpy for the Python backend's stub
        cmd = [tdir + "/bin/tritonserver", "--model-repository", repo, "--backend-directory", tdir + "/backends",
               "--model-control-mode", "explicit", "--http-address", "127.0.0.1", "--grpc-address", "127.0.0.1",
               "--http-port", str(self.http), "--grpc-port", str(self.grpc), "--metrics-port", str(self.metrics),
               "--allow-metrics", "false", "--log-verbose", "0"]
        self.log_path = log_path
        self.logf = open(log_path, "w")
        self.p = subprocess.Popen(cmd, env=env, stdout=self.logf, stderr=subprocess.STDOUT)
        if not wait_for(lambda: self.p.poll() is not None or self.get("/v2/health/live")[0] == 200, 60):
            self.p.kill()
            sys.exit("FAIL: tritonserver not live in 60 s; log:\n" + self.log())
        if self.p.poll() is not None:
            sys.exit("FAIL: tritonserver exited %d; log:\n%s" % (self.p.returncode, self.log()))

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def get(self, path):
        try:
            return http_req(self.http, "GET", path, timeout=5)
        except OSError as e:
            return 0, str(e)

    def post(self, path, body, timeout=120):
        return http_req(self.http, "POST", path, body, timeout)


def generate(model, prompts, flags):
    path = os.path.join(WORK, "prompts.txt")
    with open(path, "w") as f:
        for p in prompts:
            f.write(json.dumps(p) + "\n")
    cmd = sh.command(TPGEN, ["generate", "--model", model, "--prompts-file", path, "--json"] + BACKEND.split() + flags,
                     NP, MPIEXEC if NP > 1 else None)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120 * SCALE)
    if out.returncode != 0:
        sys.exit("FAIL: tpgen generate: " + out.stderr)
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]


VALUES = {"tp_size": str(NP), "tpgen_bin": TPGEN, "mpirun": MPIEXEC, "mpirun_flags": "--oversubscribe --allow-run-as-root",
          "tpgen_flags": BACKEND, "drain_timeout_s": str(5 * SCALE), "load_timeout_s": str(60 * SCALE), "tpgen_url": ""}


def make_repo(model):
    """The shipped repository, with its parameters set for this test."""
    repo = os.path.join(WORK, "model_repository")
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(os.path.join(ROOT, "launcher", "triton", "model_repository"), repo)
    cfg_path = os.path.join(repo, "tpgen", "config.pbtxt")
    with open(cfg_path) as f:
        cfg = f.read()
    values = dict(VALUES, model=model)
    for k, v in values.items():
        cfg, n = re.subn(r'(key: "%s" value: \{ string_value: )"[^"]*"' % k, r'\1%s' % json.dumps(v).replace("\\", "\\\\"), cfg)
        check(n == 1, "config.pbtxt has parameter %s" % k)
    with open(cfg_path, "w") as f:
        f.write(cfg)
    # a second model that attaches to the first one's tpgen (tpgen_url, given when it is loaded)
    shutil.copytree(os.path.join(repo, "tpgen"), os.path.join(repo, "tpgen_attach"))
    return repo, cfg


def main():
    os.makedirs(WORK, exist_ok=True)
    sh.become_subreaper()  # see tpgen_ranks()
    if CG25:  # CodeGen2.5's tokenizer is its tokenizer_config.json alone
        model = os.path.join(WORK, "tiny-with-tokenizer")
        os.makedirs(model, exist_ok=True)
        for f in ["config.json", "model.safetensors", "tokenizer_config.json"]:
            shutil.copy(os.path.join(FIXTURE if f != "tokenizer_config.json" else TOKDIR, f), model)
    else:
        model = sh.with_tokenizer(FIXTURE, TOKDIR, os.path.join(WORK, "tiny-with-tokenizer"))
    check(not tpgen_ranks(), "no tpgen rank of this test runs before it")
    greedy = generate(model, PROMPTS, ["--max-new-tokens", "20", "--ignore-eos", "--logprobs", "1"])
    if CG25:
        for g, h in zip(greedy, HF):
            n = h["max_new_tokens"]
            check(g["ids"][:n] == h["ids"], "tpgen generate %r: HF's greedy ids %s (got %s)"
                  % (h["text"], h["ids"], g["ids"]))
    repo, cfg = make_repo(model)
    t0 = time.time()
    tr = Triton(repo, os.path.join(WORK, "tritonserver.log"))
    try:
        run(tr, model, greedy, cfg)
    finally:
        if tr.p.poll() is None:
            tr.p.kill()
        for pid in tpgen_ranks():
            os.kill(pid, signal.SIGKILL)
    print("total %.1f s" % (time.time() - t0))
    if FAILS:
        print("tritonserver log:\n" + tr.log()[-6000:])
        sys.exit("FAILED: %d checks" % len(FAILS))
    print("PASSED")


def run_bad_loads(tr, model):
    # 1. a load that fails: tpgen's own error in Triton's answer and log; the load returns (bounded)
    params = dict(VALUES, model=os.path.join(WORK, "no-such-model"))
    bad = {"backend": "python", "model_transaction_policy": {"decoupled": True},
           "parameters": {k: {"string_value": v} for k, v in params.items()}}
    t = time.time()
    st, text = tr.post("/v2/repository/models/tpgen/load", {"parameters": {"config": json.dumps(bad)}})
    dt = time.time() - t
    check(st == 400, "load with a bad model answers 400, got %d %s" % (st, text))
    check("no-such-model" in text and "tpgen serve exited" in text, "the load error carries tpgen's message: %s" % text)
    check("no-such-model" in tr.log(), "tpgen's error is in Triton's log")
    check(wait_for(lambda: not tpgen_ranks(), 10), "no tpgen rank left after the failed load")
    ok("a bad model fails the load with tpgen's error (%.1f s)" % dt)
    # a tpgen that is not ready within load_timeout_s: the load fails (bounded), nothing left running
    slow = dict(bad, parameters={k: {"string_value": v} for k, v in dict(VALUES, model=model, load_timeout_s="0.05").items()})
    st, text = tr.post("/v2/repository/models/tpgen/load", {"parameters": {"config": json.dumps(slow)}})
    check(st == 400 and "not ready after load_timeout_s=0.05" in text, "load timeout: %d %s" % (st, text))
    check(wait_for(lambda: not tpgen_ranks(), 10), "no tpgen rank left after the load timed out")
    ok("load_timeout_s: the load fails in time, no rank left")


def run(tr, model, greedy, cfg):
    """Each numbered part depends on the ones before (one tritonserver, loads and unloads)."""
    if not CG25:  # the model-independent part 1 once, on the tiny model
        run_bad_loads(tr, model)

    # 2. load the real one
    t = time.time()
    st, text = tr.post("/v2/repository/models/tpgen/load", {})
    check(st == 200, "load: %d %s" % (st, text))
    check(tr.get("/v2/models/tpgen/ready")[0] == 200, "model ready")
    m = re.findall(r"tpgen: serving \S+ on http://127\.0\.0\.1:(\d+)", tr.log())  # the last load's
    check(bool(m), "tpgen's ready line is in Triton's log")
    if not m:
        return
    tport = int(m[-1])
    ranks = tpgen_ranks()
    check(len(ranks) == NP, "%d tpgen ranks run, found %s" % (NP, ranks))
    ok("loaded in %.1f s: TP %d, tpgen on port %d" % (time.time() - t, NP, tport))

    # 3. greedy == tpgen generate: generate, generate_stream (deltas), prompt echoed by default
    greedy_sp = json.dumps({"temperature": 0, "ignore_eos": True})
    for p, g in zip(PROMPTS, greedy):
        base = {"text_input": p, "max_tokens": 20, "sampling_parameters": greedy_sp}
        st, text = tr.post("/v2/models/tpgen/generate", dict(base, exclude_input_in_output=True))
        r = json.loads(text) if st == 200 else {}
        check(st == 200 and r.get("text_output") == g["text"], "generate %r: %d %s vs %r" % (p, st, text, g["text"]))
        check(r.get("finish_reason") == "length", "finish_reason: %s" % r.get("finish_reason"))
        st, text = tr.post("/v2/models/tpgen/generate", base)
        check(st == 200 and json.loads(text)["text_output"] == p + g["text"],
              "exclude_input_in_output false: the prompt comes first: %s" % text)
        st, ev = sse_events(tr.http, "/v2/models/tpgen/generate_stream", dict(base, stream=True, exclude_input_in_output=True))
        deltas = [e.get("text_output") for e in ev]
        check(st == 200 and "".join(deltas) == g["text"], "generate_stream %r: deltas %s vs %r" % (p, deltas, g["text"]))
        EVENTS.append(len(ev))
        check(len(ev) >= 1 and [e.get("finish_reason") for e in ev][-1] == "length"
              and all("finish_reason" not in e for e in ev[:-1]), "finish_reason only on the last event: %s" % ev)
    ok("HTTP generate / generate_stream greedy == tpgen generate (%d prompts)" % len(PROMPTS))

    # logprobs, when asked: per-token, == generate --logprobs
    sp = json.dumps({"temperature": 0, "ignore_eos": True, "logprobs": 1})
    st, text = tr.post("/v2/models/tpgen/generate", {"text_input": PROMPTS[0], "max_tokens": 20, "sampling_parameters": sp,
                                                     "exclude_input_in_output": True})
    lp = json.loads(text).get("output_log_probs", []) if st == 200 else []
    check(len(lp) == 20 and all(abs(a - b) < 1e-4 for a, b in zip(lp, greedy[0]["logprobs"])),
          "output_log_probs == generate's: %s vs %s" % (lp, greedy[0]["logprobs"]))
    ok("output_log_probs == tpgen generate --logprobs")
    if CG25:
        t = time.time()
        st, text = tr.post("/v2/repository/models/tpgen/unload", {})
        check(st == 200, "unload: %d %s" % (st, text))
        check(wait_for(lambda: not tpgen_ranks(), 30), "tpgen ranks left after unload: %s" % tpgen_ranks())
        ok("unload stops every tpgen rank (%.1f s)" % (time.time() - t))
        return

    # 4. gRPC streaming, 16 concurrent streams == each alone
    def inputs(prompt, max_tokens, sp_json, stream=True):
        ins = []
        for name, arr, dt in [("text_input", np.array([prompt.encode()], dtype=np.object_), "BYTES"),
                              ("max_tokens", np.array([max_tokens], dtype=np.int32), "INT32"),
                              ("stream", np.array([stream], dtype=bool), "BOOL"),
                              ("sampling_parameters", np.array([sp_json.encode()], dtype=np.object_), "BYTES"),
                              ("exclude_input_in_output", np.array([True], dtype=bool), "BOOL")]:
            t = grpcclient.InferInput(name, [1], dt)
            t.set_data_from_numpy(arr)
            ins.append(t)
        return ins

    def stream_run(reqs, cancel_after=None):
        """reqs: [(id, prompt, max_tokens, sp)] on one gRPC stream -> {id: (deltas, finish, error)}"""
        q = queue.Queue()
        cl = grpcclient.InferenceServerClient("127.0.0.1:%d" % tr.grpc)
        cl.start_stream(callback=lambda result, error: q.put((result, error)))
        for rid, p, mt, s in reqs:
            cl.async_stream_infer("tpgen", inputs(p, mt, s), request_id=rid,
                                  enable_empty_final_response=True)
        got = {rid: ([], None, None) for rid, _, _, _ in reqs}
        open_ = set(got)
        deadline = time.time() + 60 * SCALE
        n = 0
        while open_ and time.time() < deadline:
            try:
                result, error = q.get(timeout=1)
            except queue.Empty:
                continue
            if error is not None:
                check(False, "gRPC stream error: %s" % error)
                break
            resp = result.get_response()
            rid = resp.id
            d, fin, err = got[rid]
            out = result.as_numpy("text_output")
            if out is not None:
                d.append(b"".join(out).decode())
            fr = result.as_numpy("finish_reason")
            if fr is not None:
                fin = fr[0].decode()
            got[rid] = (d, fin, err)
            if resp.parameters.get("triton_final_response") and resp.parameters["triton_final_response"].bool_param:
                open_.discard(rid)
            n += 1
            if cancel_after is not None and n >= cancel_after:
                cl.stop_stream(cancel_requests=True)
                cl.close()
                return got
        cl.stop_stream()
        cl.close()
        check(not open_, "streams still open after 60 s: %s" % open_)
        return got

    sp_greedy = json.dumps({"temperature": 0, "ignore_eos": True})
    sp_sampled = json.dumps({"temperature": 0.8, "top_k": 20, "seed": 7, "ignore_eos": True})
    reqs = [("r%d" % i, PROMPTS[i % len(PROMPTS)], 8 + i, sp_greedy if i % 2 == 0 else sp_sampled) for i in range(16)]
    alone = {}
    for r in reqs:
        alone.update(stream_run([r]))
    t = time.time()
    together = stream_run(reqs)
    dt = time.time() - t
    bad_n = 0
    for rid, p, mt, s in reqs:
        a, b = alone[rid], together[rid]
        if not ("".join(a[0]) == "".join(b[0]) and a[1] == b[1] == "length"):
            bad_n += 1
            print("  %s: alone %s together %s" % (rid, a, b))
    EVENTS.extend(len(together[r[0]][0]) for r in reqs)
    check(max(EVENTS) > 1, "streams are made of several responses (token deltas): %s" % EVENTS)
    check(bad_n == 0, "%d of 16 concurrent gRPC streams differ from the same request alone" % bad_n)
    check("".join(alone["r0"][0]) == greedy[0]["text"][:len("".join(alone["r0"][0]))], "gRPC greedy == generate's prefix")
    ok("16 concurrent gRPC streams == each alone (%.2f s)" % dt)

    # 5. a stream the client cancels: tpgen cancels its request; every KV block free again
    def metrics():
        return sh.parse_metrics(http_req(tport, "GET", "/metrics")[1])

    # 16 streams of 120 tokens (n is 1 through Triton), cancelled after the second response. The
    # tiny model can make all 1920 tokens (~40 ms of decode) before the cancel crosses Triton's
    # Python backend and reaches tpgen (it did once in CI, 2026-12-07): a race the client cannot
    # win every time, so up to 3 tries, each of which must free every KV block; one of them must
    # be cancelled in flight.
    for attempt in range(1, 4):
        m0 = metrics()
        stream_run([("c%d" % i, "a b c", 120, sp_greedy) for i in range(16)], cancel_after=2)
        wait_for(lambda: metrics()["tpgen_requests_cancelled_total"] > m0["tpgen_requests_cancelled_total"], 5)
        check(wait_for(lambda: (lambda m: m["tpgen_requests_running"] == m["tpgen_requests_waiting"] == 0
                                and m["tpgen_kv_blocks_free"] + m["tpgen_kv_blocks_cached"] == m["tpgen_kv_blocks_total"] > 0)(metrics()), 10),
              "kv blocks free == total after the cancel: %s" % {k: v for k, v in metrics().items() if "kv_blocks" in k})
        gen = metrics()["tpgen_generation_tokens_total"] - m0["tpgen_generation_tokens_total"]
        nc = metrics()["tpgen_requests_cancelled_total"] - m0["tpgen_requests_cancelled_total"]
        if nc > 0 and gen < 16 * 120:
            break
        print("  try %d: the streams finished before the cancel reached tpgen (%d of %d tokens, %d cancelled)"
              % (attempt, gen, 16 * 120, nc))
    check(nc > 0, "tpgen counted the cancelled requests (3 tries)")
    check(gen < 16 * 120, "cancelled before the end (%d of %d tokens made, 3 tries)" % (gen, 16 * 120))
    ok("client-cancelled gRPC streams: tpgen cancelled %d of 16 after %d of %d tokens (try %d), kv_blocks_free == total"
       % (nc, gen, 16 * 120, attempt))

    # 6. bad sampling_parameters: a Triton error with tpgen's message; the next good request works
    good = {"text_input": PROMPTS[1], "max_tokens": 20, "sampling_parameters": greedy_sp, "exclude_input_in_output": True}
    for name, sp_bad, want in [("not JSON", "{temperature: 0", "sampling_parameters is not JSON"),
                               ("temperature < 0", json.dumps({"temperature": -1}), "temperature"),
                               ("unknown model", json.dumps({"model": "no-such-model"}), "no-such-model"),
                               ("top_p > 1", json.dumps({"top_p": 2}), "top_p")]:
        for path in ["generate", "generate_stream"]:
            body = dict(good, sampling_parameters=sp_bad, stream=path == "generate_stream")
            st, text = tr.post("/v2/models/tpgen/" + path, body)
            check(st >= 400 and want in text, "%s (%s): a Triton error naming %r, got %d %s" % (name, path, want, st, text))
            if name != "not JSON":
                check("tpgen:" in text, "%s (%s): the message is tpgen's: %s" % (name, path, text))
            st, text = tr.post("/v2/models/tpgen/generate", good)
            check(st == 200 and json.loads(text)["text_output"] == greedy[1]["text"], "good request after %s: %s" % (name, text))
    ok("bad sampling_parameters -> Triton errors with tpgen's message; the next request works")

    # attach mode: a model with tpgen_url forwards to a running tpgen, and leaves it running
    st, text = tr.get("/v2/models/tpgen/config")
    att = json.loads(text) if st == 200 else {}
    att.pop("name", None)
    att["parameters"] = {"tpgen_url": {"string_value": "http://127.0.0.1:%d" % tport}}
    st, text = tr.post("/v2/repository/models/tpgen_attach/load", {"parameters": {"config": json.dumps(att)}})
    check(st == 200, "load tpgen_attach: %d %s" % (st, text))
    st, text = tr.post("/v2/models/tpgen_attach/generate", good)
    check(st == 200 and json.loads(text)["text_output"] == greedy[1]["text"], "generate through tpgen_attach: %s" % text)
    st, text = tr.post("/v2/repository/models/tpgen_attach/unload", {})
    check(st == 200 and wait_for(lambda: tr.get("/v2/models/tpgen_attach/ready")[0] != 200, 10), "unload tpgen_attach")
    check(sorted(tpgen_ranks()) == sorted(ranks), "the attached model's unload leaves tpgen running")
    ok("tpgen_url: a second model attached to the running tpgen, its unload leaves tpgen running")

    # 7. unload (explicit model control): every tpgen rank exits; load again; SIGTERM tritonserver
    t = time.time()
    st, text = tr.post("/v2/repository/models/tpgen/unload", {})
    check(st == 200, "unload: %d %s" % (st, text))
    check(wait_for(lambda: not tpgen_ranks(), 30), "tpgen ranks left after unload: %s" % tpgen_ranks())
    ok("unload stops every tpgen rank (%.1f s)" % (time.time() - t))
    st, text = tr.post("/v2/repository/models/tpgen/load", {})
    check(st == 200 and len(tpgen_ranks()) == NP, "load again: %d %s" % (st, text))
    st, text = tr.post("/v2/models/tpgen/generate", good)
    check(st == 200 and json.loads(text)["text_output"] == greedy[1]["text"], "generate after reload: %s" % text)
    t = time.time()
    tr.p.send_signal(signal.SIGTERM)
    try:
        rc = tr.p.wait(60)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc is not None, "tritonserver exits after SIGTERM")
    check(wait_for(lambda: not tpgen_ranks(), 10), "tpgen ranks left after tritonserver stopped: %s" % tpgen_ranks())
    ok("SIGTERM to tritonserver: exit %s, no tpgen rank left (%.1f s)" % (rc, time.time() - t))

    # 8. tritonserver killed (SIGKILL: no finalize): the stub dies, mpirun gets SIGTERM (parent-death
    # signal) and takes the ranks with it
    tr2 = Triton(tr.repo, os.path.join(WORK, "tritonserver-2.log"))
    try:
        st, text = tr2.post("/v2/repository/models/tpgen/load", {})
        check(st == 200 and len(tpgen_ranks()) == NP, "load in a second tritonserver: %d %s" % (st, text))
        t = time.time()
        tr2.p.kill()
        tr2.p.wait(10)
        check(wait_for(lambda: not tpgen_ranks(), 30), "tpgen ranks left after tritonserver was killed: %s" % tpgen_ranks())
        ok("SIGKILL to tritonserver: no tpgen rank left (%.1f s)" % (time.time() - t))
    finally:
        if tr2.p.poll() is None:
            tr2.p.kill()


if __name__ == "__main__":
    main()
