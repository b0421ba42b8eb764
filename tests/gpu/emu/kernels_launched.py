#!/usr/bin/env python3
"""Every __global__ function of the CUDA module is launched by the emulated-device tests.

usage: kernels_launched.py KERNELS_DIR REPORT...
  KERNELS_DIR: kernels/cuda (its *.cu are read for the __global__ functions they define);
  REPORT: files written by TPGEN_EMU_REPORT (one "NAME COUNT" line per kernel run; a run appends).
Prints each kernel with its launches; exits 1 naming every kernel no report launched (with its
file and line), a report that is missing or malformed, or a __global__ this script cannot parse."""
import glob
import os
import re
import sys

GLOBAL = re.compile(r"\b__global__\b")
# after __global__: optional void / __launch_bounds__(...) in either order, then the name and "("
NAME = re.compile(r"__global__\s+(?:void\s+)?(?:__launch_bounds__\s*\([^()]*\)\s*)?(?:void\s+)?([A-Za-z_]\w*)\s*\(")


def strip_comments(src):
    """Comments blanked to spaces (newlines kept, so offsets give the right line)."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"/\*.*?\*/|//[^\n]*", blank, src, flags=re.S)


def kernels(kdir):
    found, errors = {}, []
    files = sorted(glob.glob(os.path.join(kdir, "*.cu")))
    root = os.path.dirname(os.path.dirname(os.path.abspath(kdir)))  # paths as from the repository root
    if not files:
        errors.append("%s: no .cu files" % kdir)
    for path in files:
        src = strip_comments(open(path).read())
        for g in GLOBAL.finditer(src):
            line = src.count("\n", 0, g.start()) + 1
            m = NAME.match(src, g.start())
            if not m:
                errors.append("%s:%d: a __global__ whose name this script cannot read" % (path, line))
                continue
            found.setdefault(m.group(1), "%s:%d" % (os.path.relpath(os.path.abspath(path), root), line))
    return found, errors


def launches(reports):
    count, errors = {}, []
    for path in reports:
        if not os.path.exists(path):
            errors.append("%s: no launch report (did its test run on the emulated device?)" % path)
            continue
        for i, line in enumerate(open(path), 1):
            f = line.split()
            if len(f) != 2 or not f[1].isdigit():
                errors.append("%s:%d: not a NAME COUNT line: %r" % (path, i, line.rstrip("\n")))
                continue
            count[f[0]] = count.get(f[0], 0) + int(f[1])
    return count, errors


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    defined, errors = kernels(sys.argv[1])
    count, rep_errors = launches(sys.argv[2:])
    errors += rep_errors
    missing = []
    for name in sorted(defined):
        n = count.get(name, 0)
        print("%-28s %8d  %s" % (name, n, defined[name]))
        if n == 0:
            missing.append(name)
    for name in missing:
        errors.append("%s (%s) is never launched by the emulated-device tests" % (name, defined[name]))
    print("%d __global__ functions in %s, %d launched" % (len(defined), sys.argv[1], len(defined) - len(missing)))
    for e in errors:
        print("FAIL: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
