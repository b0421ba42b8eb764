#!/usr/bin/env python3
"""The same bad value of a request knob gets the same answer from `tpgen serve` and `tpgen generate`.

usage: params_test.py TPGEN TEST_REQUEST_PARAMS FIXTURE
The knobs come from the table itself (`test_request_params --list`: key, flag, type, range), so a
knob added to engine/sched/request_params.c is covered here without a change. For each, the values just
outside its range, a fraction for an integer, and 1e-300 for a float (0 once narrowed): the
server's 400 names the field (`param`), and its message with 'key' written as --flag is exactly
the message `tpgen generate` dies with. TP 1, one server, the CLI fails before loading anything.
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
    key, flag, kind, lo, hi, lo_open = line.split()
    knobs.append((key, flag, kind, float(lo), float(hi), lo_open == "1"))
sh.check(len(knobs) >= 8, "the table lists its knobs: %s" % knobs)


def text(x):
    return ("%d" % x) if x == int(x) and abs(x) < 1e15 else repr(x)


cases = []
for key, flag, kind, lo, hi, lo_open in knobs:
    if kind == "bool":
        continue
    below = lo if lo_open else (lo - 1 if kind == "int" else lo - 0.5)
    above = hi + 1 if kind == "int" else hi + 0.5
    cases += [(key, flag, text(below)), (key, flag, text(above))]
    if kind == "int":
        cases.append((key, flag, text(lo + 1.5)))
    else:
        cases.append((key, flag, "1e-300"))

srv = sh.Server(TPGEN, ["--model", FIXTURE, "--backend", "cpu", "--threads", "1"], 1, None)
for key, flag, value in cases:
    body = '{"prompt": [1, 2], "max_tokens": 1, "%s": %s}' % (key, value)
    if key == "max_tokens":
        body = '{"prompt": [1, 2], "max_tokens": %s}' % value
    status, resp, _ = srv.request("POST", "/v1/completions", raw=body)
    err = json.loads(resp).get("error", {}) if resp.startswith("{") else {}
    cli = subprocess.run([TPGEN, "generate", "--model", FIXTURE, "--prompt-ids", "1,2", "--backend", "cpu",
                          "--threads", "1", flag, value], capture_output=True, text=True, timeout=60)
    lines = [l for l in cli.stderr.splitlines() if l.startswith("tpgen: error: ")]
    cli_msg = lines[0][len("tpgen: error: "):] if lines else cli.stderr.strip()
    srv_msg = err.get("message", "").replace("'%s'" % key, flag)
    sh.check(status == 400 and err.get("param") == key, "%s %s: server %d %s" % (key, value, status, resp[:200]))
    sh.check(cli.returncode != 0 and srv_msg == cli_msg,
             "%s = %s: the same answer\n  server: %s\n  CLI:    %s" % (key, value, srv_msg, cli_msg))
    print("%s = %s: %s" % (key, value, cli_msg), flush=True)
sh.ok("%d bad values of %d knobs: the same message from the server and the CLI" % (len(cases), len(knobs)))
end = srv.stop()
sh.check(end.rc == 0, "the server exits 0: %s" % end)
sh.exit_with_checks()
