"""One harness for the drivers that start `tpgen serve` (tests and tools/ benchmarks); the standard
library only. From tools/ or another tests/ folder:

    sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
    import serve_harness as sh

    srv = sh.Server(TPGEN, ["--model", MODEL, "--backend", "cpu"], np=2, mpiexec="mpirun")
    srv.base, srv.host, srv.port, srv.name     # from the exact ready line
    srv.rank_pids()                            # {rank: pid}, found below the launcher's pid
    srv.metrics()["tpgen_requests_running"]    # GET /metrics as {name{labels}: float}
    srv.wait_for_metric("tpgen_requests_running", lambda v: v >= 4, timeout=20)
    srv.complete({"prompt": [1, 2], "max_tokens": 4})  # (status, JSON or None, text)
    srv.stream({"prompt": [1, 2], "max_tokens": 4})    # (status, [event dicts], saw [DONE])
    srv.stop()                                 # SIGTERM to rank 0, wait: Stopped(rc, ranks, left)

How the server is started (command()): `tpgen serve ...` directly (TP 1, mpiexec None), under an
mpiexec (its flags split as a shell would, then MPI_FLAGS, `-np N`), or under
launcher/tpgen-mpirun (an mpiexec whose name ends in tpgen-mpirun: TPGEN_BIN names the binary).

Rank pids come from walking the process tree down from the launcher's pid (the children lists
of /proc/PID/task/*/children where the kernel has them, else the parent pids of one pass over
/proc/*/stat), keeping the processes whose executable is the tpgen binary; the rank is their
OMPI_COMM_WORLD_RANK (or PMIX_RANK), 0 without one. Nothing is matched by name or command line.
"""
import http.client
import json
import os
import re
import shlex
import signal
import shutil
import socket
import subprocess
import sys
import threading
import time

READY = re.compile(r"^tpgen: serving (\S+) on http://([^:/\s]+):(\d+)$")
MPI_FLAGS = ["--oversubscribe", "--allow-run-as-root"]  # what every driver has given mpirun here


class ServerError(Exception):
    """The server did not start (no ready line in time, or it exited first); the message carries
    its stderr."""


class ConnectionLost(Exception):
    """The connection was refused or closed before any answer (e.g. at --max-connections)."""


# ---------------------------------------------------------------- checks

FAILS = []  # what failed, in order (every driver's exit status comes from it)
_LOCK = threading.Lock()


def check(cond, what, say_ok=False):
    """One check of a driver: records and prints "FAIL: what" when cond is false (and prints
    "ok: what" when it holds and say_ok); returns cond. Safe from several threads."""
    if not cond:
        with _LOCK:
            FAILS.append(what)
    if not cond or say_ok:
        print(("ok: " if cond else "FAIL: ") + what, flush=True)
    return cond


def check_ok(cond, what):
    """check() that says "ok: what" too."""
    return check(cond, what, say_ok=True)


def ok(what):
    print("ok:", what, flush=True)


def exit_with_checks():
    """A driver's end: exit 1 with the count when a check failed, else 0."""
    if FAILS:
        print("%d checks failed" % len(FAILS))
        sys.exit(1)
    print("all checks passed")
    sys.exit(0)


# ---------------------------------------------------------------- processes

TOKENIZER_FILES = ["vocab.json", "merges.txt", "added_tokens.json", "special_tokens_map.json"]


def with_tokenizer(src, tokdir, dst, only_present=False):
    """dst (made if missing): src's config.json and model.safetensors with tokdir's CodeGen tokenizer
    files (only_present: those of them tokdir has)."""
    os.makedirs(dst, exist_ok=True)
    for f in ["config.json", "model.safetensors"]:
        shutil.copy(os.path.join(src, f), dst)
    for f in TOKENIZER_FILES:
        if not only_present or os.path.exists(os.path.join(tokdir, f)):
            shutil.copy(os.path.join(tokdir, f), dst)
    return dst


def copy_files(dst, *dirs):
    """dst: the plain files of each of dirs copied into it, in order (a later dir's file wins)."""
    for d in dirs:
        for f in os.listdir(d):
            if os.path.isfile(os.path.join(d, f)):
                shutil.copy(os.path.join(d, f), dst)
    return dst


def await_close(s, drain=False):
    """(closed, seconds): whether the peer closed socket s (EOF or reset) before s's timeout, and
    how long that took; drain: what it sends before is read and dropped (else a byte is "open")."""
    t0 = time.time()
    try:
        while True:
            data = s.recv(4096)
            if not data or not drain:
                closed = not data
                break
    except ConnectionResetError:
        closed = True
    except socket.timeout:
        closed = False
    return closed, time.time() - t0


def is_wrapper(mpiexec):
    return bool(mpiexec) and os.path.basename(shlex.split(mpiexec)[0]).endswith("tpgen-mpirun")


def command(tpgen, args, np=1, mpiexec=None, mpi_flags=MPI_FLAGS):
    """argv of `tpgen ARGS` at TP np: tpgen itself when mpiexec is None (np must be 1), else under
    the wrapper (launcher/tpgen-mpirun -np N ARGS; the caller's environment gives TPGEN_BIN, as
    Server does) or under mpiexec (its words, mpi_flags, -np N, tpgen, ARGS)."""
    args = list(args)
    if mpiexec is None:
        if np != 1:
            raise ValueError("np %d needs an mpiexec" % np)
        return [tpgen] + args
    if is_wrapper(mpiexec):
        return shlex.split(mpiexec) + ["-np", str(np)] + args
    return shlex.split(mpiexec) + list(mpi_flags) + ["-np", str(np), tpgen] + args


def _stat(pid):
    """(state, ppid) from /proc/PID/stat; None when the process is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return rest[0], int(rest[1])


def alive(pid):
    """A zombie waiting to be reaped counts as gone."""
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def descendants(root, via=None):
    """pids below root (children, their children, ...), live ones only, root excluded. via:
    "children" walks the kernel's children lists (CONFIG_PROC_CHILDREN) down from root, "stat"
    reads every process's parent pid once (kernels without those lists); None: the first the
    kernel has."""
    if via is None:
        via = "children" if os.path.exists("/proc/%d/task/%d/children" % (root, root)) else "stat"
    children = {}
    if via == "stat":
        for d in os.listdir("/proc"):
            if d.isdigit():
                st = _stat(int(d))
                if st and st[0] not in ("Z", "X"):
                    children.setdefault(st[1], []).append(int(d))

    def kids_of(pid):
        if via == "stat":
            return children.get(pid, [])
        out = []
        try:
            tasks = os.listdir("/proc/%d/task" % pid)
        except OSError:
            return out
        for t in tasks:
            try:
                with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                    out += [int(x) for x in f.read().split()]
            except OSError:
                pass
        return out
    out, todo = [], [root]
    while todo:
        kids = kids_of(todo.pop())
        out += kids
        todo += kids
    return [p for p in out if alive(p)]


def exe_of(pid):
    try:
        return os.path.realpath("/proc/%d/exe" % pid)
    except OSError:
        return None


def env_of(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    except OSError:
        return {}


def tpgen_pids(root, tpgen):
    """{pid: rank} of the processes at or below root whose executable is the tpgen binary."""
    want = os.path.realpath(tpgen)
    out = {}
    for pid in [root] + descendants(root):
        if alive(pid) and exe_of(pid) == want:
            env = env_of(pid)
            out[pid] = int(env.get(b"OMPI_COMM_WORLD_RANK", env.get(b"PMIX_RANK", b"0")))
    return out


def become_subreaper():
    """Makes this process the reaper of its orphaned descendants (prctl PR_SET_CHILD_SUBREAPER),
    so that ranks whose launcher died stay below it and descendants() still finds them."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def cpu_seconds(pid):
    """User + system CPU seconds of pid (all its threads)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def wait_until(pred, timeout, every=0.1):
    """Polls pred() until it holds or timeout s pass -> its last value."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(every)
    return pred()


def free_port():
    """A port the kernel reports free now (for servers that cannot report the one they picked)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---------------------------------------------------------------- HTTP

def http_request(host, port, method, path, body=None, headers=None, raw=None, timeout=60):
    """-> (status, body text, response). body is sent as JSON, raw (str or bytes) as it is."""
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        c.request(method, path, body=data, headers=headers or {"Content-Type": "application/json"})
        r = c.getresponse()
        text = r.read().decode()
    finally:
        c.close()
    return r.status, text, r


def parse_metrics(text):
    """Prometheus text -> {"name{labels}": float}, comments skipped."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def sse_data(resp):
    """The payload of each `data:` line of an SSE response, as it arrives (str; "[DONE]" last
    when the server sent it). Other lines (blank separators) are skipped."""
    for raw in resp:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("data:"):
            yield line[5:].lstrip(" ")


def post_sse(host, port, path, body, timeout=60, headers=None):
    """POST a JSON body and read its event stream -> (status, [event dicts], saw data: [DONE]).
    A non-200 answer gives ([the error body, parsed when JSON], False)."""
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        c.request("POST", path, body=json.dumps(body), headers=headers or {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            text = r.read().decode(errors="replace")
            try:
                return r.status, [json.loads(text)], False
            except ValueError:
                return r.status, [text], False
        events, done = [], False
        for data in sse_data(r):
            if data == "[DONE]":
                done = True
                break
            events.append(json.loads(data))
        return r.status, events, done
    finally:
        c.close()


def raw_exchange(host, port, data, slow=0.0, timeout=60):
    """Sends raw request bytes (one byte at a time, `slow` s apart, when slow) -> (the begun
    http.client response, the socket; the caller closes it). ConnectionLost when the connection
    is refused or closed before any answer."""
    try:
        s = socket.create_connection((host, port), timeout=timeout)
    except ConnectionRefusedError as e:
        raise ConnectionLost(str(e))
    try:
        if slow:
            for i in range(len(data)):
                s.sendall(data[i:i + 1])
                time.sleep(slow)
        else:
            s.sendall(data)
        r = http.client.HTTPResponse(s)
        r.begin()
    except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected) as e:
        s.close()
        raise ConnectionLost(str(e))
    except Exception:
        s.close()
        raise
    return r, s


def raw_bytes(host, port, data, timeout=30):
    """Sends raw bytes, then reads every byte until the server closes (or the timeout) -> bytes."""
    s = socket.create_connection((host, port), timeout=timeout)
    got = []
    try:
        s.sendall(data)
        while True:
            try:
                b = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not b:
                break
            got.append(b)
    finally:
        s.close()
    return b"".join(got)


# ---------------------------------------------------------------- the server

class Stopped:
    """How a server ended: rc is the launcher's exit status (None: still running at the timeout,
    then killed); ranks {rank: status}: a rank's own status when it was the launched process
    (TP 1 direct), else the launcher's (Open MPI's mpirun exits non-zero when any rank does, with
    the first non-zero status); left: rank pids still alive after the launcher exited."""

    def __init__(self, rc, ranks, left, secs):
        self.rc, self.ranks, self.left, self.secs = rc, ranks, left, secs

    @property
    def clean(self):
        return self.rc == 0 and not self.left and all(v == 0 for v in self.ranks.values())

    def __repr__(self):
        return "Stopped(rc=%s, ranks=%s, left=%s, %.1f s)" % (self.rc, self.ranks, self.left, self.secs)


class Server:
    """`tpgen serve FLAGS` (plus `--port 0` unless FLAGS gives --port) at TP np, started and
    waited for: the exact ready line `tpgen: serving NAME on http://HOST:PORT` on stderr within
    `timeout` s, else ServerError with its stderr (at once when it exits first). stdout goes to
    /dev/null unless `stdout` says where; stderr lines are kept in .lines. new_session starts the
    launcher in a session (and process group) of its own, as a terminal's job is."""

    def __init__(self, tpgen, flags, np=1, mpiexec=None, mpi_flags=MPI_FLAGS, env=None, timeout=60,
                 new_session=False, stdout=subprocess.DEVNULL):
        flags = list(flags)
        if "--port" not in flags:
            flags += ["--port", "0"]
        self.tpgen, self.np = tpgen, np
        self.cmd = command(tpgen, ["serve"] + flags, np, mpiexec, mpi_flags)
        e = dict(os.environ)
        if is_wrapper(mpiexec):
            e["TPGEN_BIN"] = tpgen
        e.update(env or {})
        self.p = subprocess.Popen(self.cmd, env=e, stdout=stdout, stderr=subprocess.PIPE, text=True,
                                  start_new_session=new_session)
        self.new_session = new_session
        self.lines = []
        self.name = self.host = self.port = self.base = None
        self._ranks = {}
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        t0 = time.time()
        while not self._ready.wait(0.1):
            if time.time() - t0 > timeout:
                self.kill()
                raise ServerError("no ready line in %g s from %s; stderr:\n%s"
                                  % (timeout, " ".join(self.cmd), self.stderr()))
        if self.base is None:
            rc = self.p.wait()
            self._reader.join(5)
            raise ServerError("the server exited (status %s) before its ready line; stderr:\n%s"
                              % (rc, self.stderr()))

    def _read(self):
        for line in self.p.stderr:
            self.lines.append(line)
            m = READY.match(line.rstrip("\n"))
            if m and self.base is None:
                self.name, self.host, self.port = m.group(1), m.group(2), int(m.group(3))
                self.base = "http://%s:%d" % (self.host, self.port)
                self._ready.set()
        self._ready.set()  # EOF: the server is gone

    def stderr(self, last=None):
        return "".join(self.lines[-last:] if last else self.lines)

    # ---- processes

    def rank_pids(self, timeout=10):
        """{rank: pid} of the tpgen processes below the launcher; waits up to timeout s for all np
        (the ranks start before the ready line, so this is at once in practice); raises
        ServerError naming what was found when they are not all there."""
        deadline = time.time() + timeout
        while True:
            found = {r: pid for pid, r in tpgen_pids(self.p.pid, self.tpgen).items()}
            if sorted(found) == list(range(self.np)):
                self._ranks = found
                return dict(found)
            if time.time() > deadline or self.p.poll() is not None:
                raise ServerError("found ranks %s below pid %d, want 0..%d" % (found, self.p.pid, self.np - 1))
            time.sleep(0.05)

    def ranks_alive(self):
        """Ranks seen by rank_pids() that are still running (not reaped, not zombies)."""
        return [pid for pid in self._ranks.values() if alive(pid)]

    def send_signal(self, sig, to="rank0"):
        """sig to rank 0 ("rank0"), to the launcher ("launcher"), or to the launcher's whole
        process group ("group": needs new_session, as a terminal's Ctrl-C)."""
        if to == "rank0":
            os.kill(self.rank_pids()[0], sig)
        elif to == "launcher":
            self.p.send_signal(sig)
        elif to == "group":
            if not self.new_session:
                raise ValueError("to='group' needs a server started with new_session=True")
            os.killpg(self.p.pid, sig)
        else:
            raise ValueError("to: rank0, launcher or group, not %r" % to)

    def wait(self, timeout=60):
        """Waits for the launcher to exit -> Stopped; kills everything at the timeout (rc None)."""
        if not self._ranks and self.p.poll() is None:
            try:
                self.rank_pids(timeout=1)
            except ServerError:
                pass
        t0 = time.time()
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = None
        self._reader.join(5)
        deadline = time.time() + 5  # ranks the launcher has reaped are gone; allow their last exit
        while self.ranks_alive() and time.time() < deadline:
            time.sleep(0.05)
        left = self.ranks_alive()
        direct = self.np == 1 and self._ranks.get(0) == self.p.pid
        ranks = {r: rc for r in (self._ranks or {0: None})} if not direct else {0: rc}
        return Stopped(rc, ranks, left, time.time() - t0)

    def stop(self, sig=signal.SIGTERM, to="rank0", timeout=60):
        """The clean stop: sig (SIGTERM: drain) to rank 0 or the launcher, then wait() -> Stopped."""
        if self.p.poll() is None:
            try:
                self.send_signal(sig, to)
            except (OSError, ServerError):
                self.p.send_signal(sig)  # rank 0 already gone: the launcher
        return self.wait(timeout)

    def kill(self):
        """SIGKILL to the launcher (its process group when it has its own session) and every rank."""
        pids = set(self._ranks.values())
        if self.p.poll() is None:
            pids |= set(tpgen_pids(self.p.pid, self.tpgen))
        try:
            if self.new_session:
                os.killpg(self.p.pid, signal.SIGKILL)
            else:
                self.p.kill()
        except OSError:
            pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.p.poll() is None:
            self.kill()

    # ---- HTTP

    def request(self, method, path, body=None, headers=None, raw=None, timeout=60):
        """-> (status, body text, response)"""
        return http_request(self.host, self.port, method, path, body, headers, raw, timeout)

    def complete(self, body, timeout=120, headers=None, path="/v1/completions"):
        """POST a completion -> (status, the JSON answer or None when it is not JSON, text)."""
        st, text, _ = self.request("POST", path, body, headers=headers, timeout=timeout)
        try:
            return st, json.loads(text), text
        except ValueError:
            return st, None, text

    def stream(self, body, timeout=120, headers=None, path="/v1/completions"):
        """POST a completion with stream: true -> (status, [event dicts], saw data: [DONE])."""
        return post_sse(self.host, self.port, path, dict(body, stream=True), timeout, headers)

    def raw_exchange(self, data, slow=0.0, timeout=60):
        return raw_exchange(self.host, self.port, data, slow, timeout)

    def raw_bytes(self, data, timeout=30):
        return raw_bytes(self.host, self.port, data, timeout)

    def metrics(self, timeout=30):
        st, text, _ = self.request("GET", "/metrics", timeout=timeout)
        if st != 200:
            raise ServerError("GET /metrics: %d %s" % (st, text[:200]))
        return parse_metrics(text)

    def wait_metrics(self, pred, timeout=20, every=0.01):
        """Polls /metrics until pred(metrics) holds -> (held, the last metrics)."""
        deadline = time.time() + timeout
        while True:
            m = self.metrics()
            if pred(m):
                return True, m
            if time.time() > deadline:
                return False, m
            time.sleep(every)

    def wait_for_metric(self, name, pred, timeout=20, every=0.01):
        """Polls /metrics until pred(metrics[name]) holds -> (held, the last metrics)."""
        return self.wait_metrics(lambda m: name in m and pred(m[name]), timeout, every)

    def wait_idle(self, timeout=20):
        """Until nothing runs or waits and every KV block is back (free, or cached for prefix hits) -> (held, the
        last metrics)."""
        return self.wait_metrics(lambda m: m["tpgen_requests_running"] == 0 and m["tpgen_requests_waiting"] == 0
                                 and m["tpgen_kv_blocks_free"] + m["tpgen_kv_blocks_cached"] == m["tpgen_kv_blocks_total"], timeout, 0.1)
