#!/usr/bin/env python3
"""The field tables of docs/SERVING.md and docs/USAGE.md against the table of request fields.

usage: request_fields_docs.py (--check | --write) TPGEN DOC...
Each <!-- request_fields FRONT --> ... <!-- /request_fields --> block of a DOC must be what
`TPGEN help-params --markdown FRONT` prints (FRONT: server or generate). --check exits 1 naming
the doc and the first line that differs (ctest request_fields_docs: a field added to
engine/sched/request_params.c without its docs row fails); --write rewrites the blocks.
"""
import re
import subprocess
import sys

BLOCK = re.compile(r"(<!-- request_fields (\w+) -->\n)(.*?)(<!-- /request_fields -->)", re.S)


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in ("--check", "--write"):
        sys.exit(__doc__)
    mode, tpgen, docs = sys.argv[1], sys.argv[2], sys.argv[3:]
    bad = 0
    for doc in docs:
        with open(doc) as f:
            text = f.read()
        blocks = list(BLOCK.finditer(text))
        if not blocks:
            print("%s: no <!-- request_fields FRONT --> block" % doc)
            bad += 1
            continue

        def render(m):
            out = subprocess.run([tpgen, "help-params", "--markdown", m.group(2)], capture_output=True, text=True)
            if out.returncode:
                sys.exit("%s help-params --markdown %s: %s" % (tpgen, m.group(2), out.stderr))
            return out.stdout

        new = text
        for m in reversed(blocks):
            want = render(m)
            if m.group(3) != want:
                have, lines = m.group(3).splitlines(), want.splitlines()
                i = next((k for k in range(max(len(have), len(lines)))
                          if k >= len(have) or k >= len(lines) or have[k] != lines[k]), 0)
                print("%s: the %s block differs from `tpgen help-params --markdown %s` at its row %d:\n  doc:   %s\n"
                      "  table: %s" % (doc, m.group(2), m.group(2), i + 1, have[i] if i < len(have) else "(none)",
                                       lines[i] if i < len(lines) else "(none)"))
                bad += 1
            new = new[:m.start(3)] + want + new[m.end(3):]
        if mode == "--write" and new != text:
            with open(doc, "w") as f:
                f.write(new)
    if mode == "--check" and bad:
        print("regenerate with: python3 tools/dev/request_fields_docs.py --write build/bin/tpgen %s" % " ".join(docs))
        sys.exit(1)
    print("ok: %d doc(s) match the table of request fields" % len(docs))


main()
