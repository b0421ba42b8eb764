"""tpgen as a decoupled Triton Python-backend model (docs/TRITON.md).

initialize: starts `mpirun -np TP tpgen serve --port 0` (or attaches to `tpgen_url`) and waits for
  tpgen's ready line; a tpgen that exits or never gets ready fails the model load with its stderr.
execute:    each request runs on its own thread as one `POST /v1/completions` to tpgen (streamed
  with SSE when `stream` is true: one Triton response per tpgen chunk, the last one FINAL).
finalize:   SIGTERM to tpgen's rank 0 (it drains, then every rank exits), SIGKILL after the drain
  timeout. Only the standard library talks to tpgen: the stub's Python needs nothing installed.

The KV cache and the generation loop stay on tpgen's ranks; only text crosses the boundary.
"""
import ctypes
import http.client
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

# The stub's embedded Python may start without PYTHONPATH on sys.path (the Python backend's
# utilities import numpy): add its entries, e.g. the site-packages of tools/dev/install-triton.sh's venv.
for _p in reversed(os.environ.get("PYTHONPATH", "").split(os.pathsep)):
    if _p and _p not in sys.path:
        sys.path.insert(0, _p)
import triton_python_backend_utils as pb_utils  # noqa: E402

READY = re.compile(r"^tpgen: serving (\S+) on (http://\S+)$")
# Requests are checked for Triton-side cancellation this often; a cancelled request's connection
# to tpgen is shut down, which tpgen sees as the client gone: it cancels and frees the KV blocks.
CANCEL_POLL_S = 0.05


def log(msg):
    print("tpgen-triton: " + msg, file=sys.stderr, flush=True)


def _set_pdeathsig():
    # In the child before exec: if the stub dies without finalize (tritonserver killed), mpirun gets
    # SIGTERM and takes the ranks down with it instead of leaving them behind.
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _descendants(root):
    """pids of every process below `root` (from /proc)."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [root]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def _rank0(root):
    """pid of MPI rank 0 below mpirun `root`, or None."""
    for pid in _descendants(root):
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                if b"OMPI_COMM_WORLD_RANK=0" in f.read().split(b"\0"):
                    return pid
        except OSError:
            pass
    return None


class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        # $VARIABLES expand from tritonserver's environment; one that is not set counts as empty
        p = {k: os.path.expandvars(v["string_value"]) for k, v in cfg.get("parameters", {}).items()}
        p = {k: "" if re.fullmatch(r"\$\{?\w+\}?", v) else v for k, v in p.items()}
        self.name = args.get("model_name", "tpgen")
        self.proc = None
        self.lines = []  # tpgen's stderr, kept for load errors
        self.active = {}  # id -> (response_sender, connection), watched for cancellation
        self.lock = threading.Lock()
        self.stopping = False
        self.drain_s = float(p.get("drain_timeout_s") or 30)
        key = p.get("api_key") or ""
        self.headers = {"Content-Type": "application/json"}
        if key:
            self.headers["Authorization"] = "Bearer " + key
        if p.get("tpgen_url"):
            url = p["tpgen_url"]
        else:
            url = self._start(p)
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http" or not u.hostname:
            raise pb_utils.TritonModelException("tpgen_url must be http://HOST:PORT, got %r" % url)
        self.host, self.port = u.hostname, u.port or 80
        st, body = self._get("/health")
        if st != 200:
            self._stop()
            raise pb_utils.TritonModelException("tpgen at %s is not ready: /health answered %d %s" % (url, st, body))
        self.url = url
        log("model %s forwards to tpgen at %s" % (self.name, url))
        threading.Thread(target=self._watch, daemon=True).start()

    def _start(self, p):
        model = p.get("model") or ""
        if not model:
            raise pb_utils.TritonModelException(
                "parameter `model` (a tpgen model directory or hub name) is empty: set it in config.pbtxt "
                "(or $TPGEN_MODEL in tritonserver's environment), or set `tpgen_url` ($TPGEN_URL)")
        try:
            tp = int(p.get("tp_size") or 1)
            load_s = float(p.get("load_timeout_s") or 900)
            assert tp >= 1 and load_s > 0
        except (ValueError, AssertionError):
            raise pb_utils.TritonModelException("parameters tp_size (an integer >= 1) and load_timeout_s "
                                                "(seconds > 0) are wrong: %r, %r" % (p.get("tp_size"), p.get("load_timeout_s")))
        cmd = [p.get("tpgen_bin") or "tpgen", "serve", "--model", model, "--host", "127.0.0.1", "--port", "0",
               "--drain-timeout", "%g" % self.drain_s] + shlex.split(p.get("tpgen_flags") or "")
        if tp > 1:
            cmd = [p.get("mpirun") or "mpirun"] + shlex.split(p.get("mpirun_flags") or "") + ["-np", str(tp)] + cmd
        log("starting: " + " ".join(shlex.quote(c) for c in cmd))
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, text=True, errors="replace",
                                         start_new_session=True, preexec_fn=_set_pdeathsig)
        except OSError as e:
            raise pb_utils.TritonModelException("cannot start %s: %s" % (cmd[0], e))
        self.tp = tp
        ready = threading.Event()
        found = []

        def reader():
            # Every line tpgen writes goes to Triton's log, for as long as tpgen runs.
            for line in self.proc.stderr:
                line = line.rstrip("\n")
                print(line, file=sys.stderr, flush=True)
                self.lines.append(line)
                del self.lines[:-200]
                m = READY.match(line)
                if m and not found:
                    found.append(m.group(2))
                    ready.set()
            ready.set()  # EOF: tpgen is gone
            if found and not self.stopping:
                try:
                    rc = self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    rc = "unknown"
                log("tpgen exited (status %s) while the model was loaded: requests fail until the model "
                    "is loaded again (repository API) or tritonserver restarts" % rc)

        threading.Thread(target=reader, daemon=True).start()
        deadline = time.monotonic() + load_s
        while not ready.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                break
        if not found:
            try:  # stderr at EOF: tpgen is exiting; let it finish to report its status
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
            timed_out = self.proc.poll() is None
            self._stop(kill=True)
            tail = "\n".join(self.lines[-20:])
            if timed_out:
                raise pb_utils.TritonModelException("tpgen was not ready after load_timeout_s=%g s; its stderr:\n%s"
                                                    % (load_s, tail))
            raise pb_utils.TritonModelException("tpgen serve exited with status %s before it was ready; its stderr:\n%s"
                                                % (self.proc.returncode, tail))
        return found[0]

    def _get(self, path):
        c = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            c.request("GET", path, headers=self.headers)
            r = c.getresponse()
            return r.status, r.read().decode(errors="replace")
        except OSError as e:
            return 0, str(e)
        finally:
            c.close()

    # ---- requests -------------------------------------------------------------------------

    def execute(self, requests):
        for req in requests:
            sender = req.get_response_sender()
            threading.Thread(target=self._serve_one, args=(req, sender), daemon=True).start()
        return None

    def _serve_one(self, req, sender):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        c = http.client.HTTPConnection(self.host, self.port, timeout=None)
        key = id(c)
        state = {"done": False}

        def send_final(resp=None):
            # Out of the watcher's set first: once the final flag is sent, Triton frees the
            # request's response factory and is_cancelled() on it would crash tritonserver.
            with self.lock:
                self.active.pop(key, None)
            if not state["done"]:
                state["done"] = True
                if resp is None:
                    sender.send(flags=final)
                else:
                    sender.send(resp, flags=final)

        def error(msg):
            send_final(pb_utils.InferenceResponse(error=pb_utils.TritonError(msg)))

        try:
            body, stream, want_lp = self._body(req)
        except ValueError as e:
            error(str(e))
            return
        with self.lock:
            self.active[key] = (sender, c)
        try:
            c.request("POST", "/v1/completions", body=json.dumps(body), headers=self.headers)
            r = c.getresponse()
            if r.status != 200 or not stream:
                obj = self._json(r.read())
                if r.status != 200:
                    raise _TpgenError(r.status, obj)
                ch = obj["choices"][0]
                send_final(self._response(ch["text"], ch.get("finish_reason"), ch.get("logprobs"), want_lp))
                return
            # SSE: `data: {chunk}` events, then `data: [DONE]`. One Triton response per chunk; the
            # chunk with the finish_reason is the last (n is 1) and carries the FINAL flag.
            for raw in r:
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    break
                obj = self._json(data.encode())
                if "error" in obj:
                    raise _TpgenError(obj["error"].get("code") or 500, obj)
                for ch in obj.get("choices", []):
                    fin = ch.get("finish_reason")
                    resp = self._response(ch.get("text", ""), fin, ch.get("logprobs"), want_lp)
                    if fin:
                        send_final(resp)
                        return
                    sender.send(resp)
        except _TpgenError as e:
            error(str(e))
        except Exception as e:  # connection shut for a cancel, tpgen gone, or a malformed answer
            with self.lock:
                cancelled = key in self.active and sender.is_cancelled()
            if not cancelled:
                error("tpgen at %s: %s: %s" % (self.url, type(e).__name__, e))
        finally:
            c.close()
            try:  # a cancelled request, or a stream that ended without a finish_reason
                send_final()
            except Exception:
                pass

    def _body(self, req):
        """The tpgen completion request for a Triton request: (body, stream, logprobs asked)."""
        def scalar(name, default):
            t = pb_utils.get_input_tensor_by_name(req, name)
            if t is None:
                return default
            a = t.as_numpy().reshape(-1)
            if a.size != 1:
                raise ValueError("input %s must hold one value, got %d" % (name, a.size))
            v = a[0]
            return v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v.item() if hasattr(v, "item") else v

        prompt = scalar("text_input", None)
        if prompt is None:
            raise ValueError("input text_input is required")
        sp = scalar("sampling_parameters", "")
        params = {}
        if sp:
            try:
                params = json.loads(sp)
            except json.JSONDecodeError as e:
                raise ValueError("sampling_parameters is not JSON (%s): %r" % (e, sp[:200]))
            if not isinstance(params, dict):
                raise ValueError("sampling_parameters must be a JSON object, got %r" % sp[:200])
        for k in ("prompt", "stream", "echo", "stream_options"):
            if k in params:
                raise ValueError("sampling_parameters may not set %r: use the Triton inputs" % k)
        if params.get("n", 1) != 1 or params.get("best_of", 1) != 1:
            raise ValueError("sampling_parameters: n and best_of must be 1 through Triton (send n requests)")
        # vLLM's backend names it max_tokens too; the input wins over sampling_parameters
        mt = scalar("max_tokens", None)
        if mt is not None:
            params["max_tokens"] = int(mt)
        stream = bool(scalar("stream", False))
        exclude = bool(scalar("exclude_input_in_output", False))
        body = dict(params, prompt=prompt, stream=stream, echo=not exclude)
        return body, stream, params.get("logprobs") is not None

    def _response(self, text, finish, logprobs, want_lp):
        import numpy as np
        out = [pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_))]
        if finish:
            out.append(pb_utils.Tensor("finish_reason", np.array([finish.encode()], dtype=np.object_)))
        if want_lp:
            lps = (logprobs or {}).get("token_logprobs") or []
            out.append(pb_utils.Tensor("output_log_probs",
                                       np.array([float("nan") if x is None else x for x in lps], dtype=np.float32)))
        return pb_utils.InferenceResponse(output_tensors=out)

    @staticmethod
    def _json(raw):
        try:
            return json.loads(raw)
        except ValueError:
            return {"error": {"message": raw.decode(errors="replace")[:500]}}

    def _watch(self):
        """Shuts the tpgen connection of every request Triton has cancelled."""
        while not self.stopping:
            time.sleep(CANCEL_POLL_S)
            with self.lock:  # held: a request leaves `active` before its final response
                for sender, c in list(self.active.values()):
                    try:
                        if sender.is_cancelled() and c.sock is not None:
                            c.sock.shutdown(2)  # SHUT_RDWR: tpgen sees the client gone
                    except Exception:
                        pass

    # ---- shutdown -------------------------------------------------------------------------

    def finalize(self):
        self.stopping = True  # before the SIGTERM: tpgen's exit is expected from here on
        self._stop()

    def _stop(self, kill=False):
        """SIGTERM to rank 0 (tpgen drains, then every rank exits); SIGKILL to the whole job after
        the drain timeout (+ 10 s to exit). Nothing to do when attached to a server we did not start."""
        p = self.proc
        if p is None or p.poll() is not None:
            return
        if not kill:
            r0 = p.pid if self.tp == 1 else _rank0(p.pid)
            if r0 is not None:
                log("stopping tpgen (SIGTERM to rank 0, pid %d; drain timeout %g s)" % (r0, self.drain_s))
                try:
                    os.kill(r0, signal.SIGTERM)
                    p.wait(self.drain_s + 10)
                except (OSError, subprocess.TimeoutExpired):
                    log("tpgen did not exit after the drain timeout: killing it")
        if p.poll() is None:
            left = _descendants(p.pid)
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            for pid in left:  # ranks that left the process group
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            p.wait(10)
        log("tpgen stopped (exit status %s)" % p.returncode)


class _TpgenError(Exception):
    """tpgen answered an error: its status and message become the Triton error."""

    def __init__(self, status, obj):
        err = obj.get("error") if isinstance(obj, dict) else None
        msg = err.get("message") if isinstance(err, dict) else str(obj)
        super().__init__("tpgen: %s (HTTP %s)" % (msg, status))
