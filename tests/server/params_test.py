#!/usr/bin/env python3
"""The same bad value of a request field gets the same answer from `tpgen serve` and `tpgen generate`.

usage: params_test.py TPGEN TEST_REQUEST_PARAMS FIXTURE
The fields come from the table itself (`test_request_params --list`: key, flag, type, the server's
range, the CLI's), so a field added to engine/sched/request_params.c is covered here without a
change. For each, the values just outside its range, a fraction for an integer, and 1e-300 for a
float (0 once narrowed; not for a double, `timeout`): the server's 400 names the field (`param`), and where both front ends take
it with one range, its message with 'key' written as --flag is exactly the message `tpgen
generate` dies with. A field of the server alone, or with a range of each front end's (logprobs),
is refused by each at the edges of its own range, each message naming that range. TP 1, one
server, the CLI fails before loading anything.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import serve_harness as sh  # noqa: E402

TPGEN, TABLE, FIXTURE = sys.argv[1:4]
knobs = []
for line in subprocess.run([TABLE, "--list"], capture_output=True, text=True, check=True).stdout.splitlines():
    key, flag, kind, slo, shi, clo, chi, lo_open = line.split()
    knobs.append((key, None if flag == "-" else flag, kind, (float(slo), float(shi)), (float(clo), float(chi)),
                  lo_open == "1"))
sh.check(len(knobs) >= 12, "the table lists its fields: %s" % knobs)


def text(x):
    return ("%d" % x) if x == int(x) and abs(x) < 1e15 else repr(x)


def bad_values(kind, lo, hi, lo_open):
    below = lo if lo_open else (lo - 1 if kind == "int" else lo - 0.5)
    above = hi + 1 if kind == "int" else hi + 0.5
    third = {"int": [text(lo + 1.5)], "float": ["1e-300"]}.get(kind, [])  # a double's range alone: none
    return [text(below), text(above)] + third


def range_text(kind, lo, hi, lo_open):
    return "%s%s, %s]" % ("(" if lo_open else "[", text(lo), text(hi))


srv = sh.Server(TPGEN, ["--model", FIXTURE, "--backend", "cpu", "--threads", "1", "--scheduling-policy", "priority"],
                1, None)


def server(key, value):
    body = '{"prompt": [1, 2], "max_tokens": 1, "%s": %s}' % (key, value)
    if key == "max_tokens":
        body = '{"prompt": [1, 2], "max_tokens": %s}' % value
    status, resp, _ = srv.request("POST", "/v1/completions", raw=body)
    err = json.loads(resp).get("error", {}) if resp.startswith("{") else {}
    sh.check(status == 400 and err.get("param") == key, "%s %s: server %d %s" % (key, value, status, resp[:200]))
    return err.get("message", "")


def cli(flag, value):
    out = subprocess.run([TPGEN, "generate", "--model", FIXTURE, "--prompt-ids", "1,2", "--backend", "cpu",
                          "--threads", "1", flag, value], capture_output=True, text=True, timeout=60)
    lines = [l for l in out.stderr.splitlines() if l.startswith("tpgen: error: ")]
    sh.check(out.returncode != 0, "%s %s: the CLI refuses it" % (flag, value))
    return lines[0][len("tpgen: error: "):] if lines else out.stderr.strip()


n = 0
for key, flag, kind, srange, crange, lo_open in knobs:
    if flag and srange == crange:
        for value in bad_values(kind, *srange, lo_open):
            srv_msg, cli_msg = server(key, value).replace("'%s'" % key, flag), cli(flag, value)
            sh.check(srv_msg == cli_msg, "%s = %s: the same answer\n  server: %s\n  CLI:    %s" % (key, value, srv_msg,
                                                                                             cli_msg))
            print("%s = %s: %s" % (key, value, cli_msg), flush=True)
            n += 1
        continue
    fronts = [("'%s'" % key, srange, lambda v, k=key: server(k, v))]
    if flag:
        fronts.append((flag, crange, lambda v, f=flag: cli(f, v)))
    for name, (lo, hi), ask in fronts:
        for value in bad_values(kind, lo, hi, lo_open):
            msg = ask(value)
            want = "%s expects %s in %s, got " % (name, "an integer" if kind == "int" else "a number",
                                                  range_text(kind, lo, hi, lo_open))
            sh.check(msg.startswith(want) or (value == "1e-300" and "32-bit float" in msg),
                     "%s = %s: '%s...', got '%s'" % (name, value, want, msg))
            print("%s = %s: %s" % (name, value, msg), flush=True)
            n += 1
sh.ok("%d bad values of %d fields: the table's message from the server and the CLI" % (n, len(knobs)))
end = srv.stop()
sh.check(end.rc == 0, "the server exits 0: %s" % end)
sh.exit_with_checks()
