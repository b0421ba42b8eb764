#!/usr/bin/env python3
"""Make the torch.save test files of tests/bin (committed; torch is needed only to remake them).

    python3 tests/bin/make_cases.py

Writes, next to this script:
  dtypes.bin      a state dict of F32, F16, BF16 tensors, a 0-dim tensor, views into a shared
                  storage (storage offset, a row of a bigger matrix), and Bool / Int64 tensors
                  tpgen must set aside; reference.txt lists every loadable tensor's values as
                  torch reads them back
  proto4.bin      the same state dict pickled with protocol 4 (FRAME, MEMOIZE, STACK_GLOBAL...)
  params.bin      the state dict as nn.Parameters (state_dict(keep_vars=True) writes these:
                  _rebuild_parameter_with_state around each tensor)
  zip64.bin       the same archive rewritten by Python's zipfile with ZIP64 records everywhere
                  (local and central extra fields, ZIP64 end record and locator)
  noncontig.bin   a transposed (non-contiguous) view, saved as such
  legacy.bin      the pre-1.6 format (_use_new_zipfile_serialization=False)
  evil.bin        data.pkl calls os.system("touch tpgen_pwned_marker") (checked here: Python's
                  pickle does create the marker; tpgen must refuse it)
  badop.bin       data.pkl uses INST, an opcode that calls os.system too
  nostorage.bin   dtypes.bin without the record of one storage
"""
import io
import os
import pickle
import struct
import tempfile
import zipfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
MARKER = "tpgen_pwned_marker"


def state_dict():
    big = torch.arange(20, dtype=torch.float32).reshape(4, 5) * 0.25 - 1.0
    return {
        "f32": torch.tensor([[1.5, -2.25, 3.0], [4.0, 5.0, -6.5]], dtype=torch.float32),
        "f16": (torch.arange(12, dtype=torch.float32) * 0.5 - 3.0).to(torch.float16).reshape(3, 4),
        "bf16": (torch.arange(8, dtype=torch.float32) * 1.25 - 2.0).to(torch.bfloat16).reshape(2, 2, 2),
        "scalar": torch.tensor(7.0),
        "big": big,
        "view_row": big[2],          # storage offset 10 into big's storage
        "view_tail": big[1:],        # offset 5, 15 of 20 elements
        "mask": torch.tril(torch.ones(3, 3, dtype=torch.bool)),
        "count": torch.tensor([1, 2, 3], dtype=torch.int64),
    }


def rezip(src, dst, drop=None, zip64=False):
    """Copies the archive src to dst with stored entries, optionally without one record, with
    ZIP64 records forced everywhere."""
    old_limit = zipfile.ZIP64_LIMIT
    if zip64:
        zipfile.ZIP64_LIMIT = 1      # every size and offset "needs" ZIP64: central extras + end record
    try:
        with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
            for info in zin.infolist():
                if drop and info.filename == drop:
                    continue
                zi = zipfile.ZipInfo(info.filename, date_time=(2026, 12, 1, 0, 0, 0))
                with zout.open(zi, "w", force_zip64=zip64) as f:
                    f.write(zin.read(info.filename))
    finally:
        zipfile.ZIP64_LIMIT = old_limit


def raw_archive(path, pkl):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(zipfile.ZipInfo("archive/data.pkl", date_time=(2026, 12, 1, 0, 0, 0)), pkl)
        z.writestr(zipfile.ZipInfo("archive/byteorder", date_time=(2026, 12, 1, 0, 0, 0)), b"little")


def check_live(pkl):
    """Python's own unpickler really runs the payload: it creates the marker."""
    with tempfile.TemporaryDirectory() as d:
        cwd = os.getcwd()
        os.chdir(d)
        try:
            pickle.loads(pkl)
            assert os.path.exists(MARKER), "payload did not run"
        finally:
            os.chdir(cwd)


def main():
    sd = state_dict()
    p = lambda n: os.path.join(HERE, n)
    torch.save(sd, p("dtypes.bin"))
    with open(p("reference.txt"), "w") as f:
        f.write("# name dtype ndim shape... numel values... (torch.load of dtypes.bin, as float)\n")
        back = torch.load(p("dtypes.bin"), weights_only=True)
        for name, t in back.items():
            if t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
                continue
            dt = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}[t.dtype]
            vals = t.float().flatten().tolist()
            f.write(" ".join([name, dt, str(t.dim())] + [str(s) for s in t.shape] + [str(len(vals))] +
                             [repr(v) for v in vals]) + "\n")

    torch.save(sd, p("proto4.bin"), pickle_protocol=4)
    params = {k: torch.nn.Parameter(v, requires_grad=False) if v.is_floating_point() else v for k, v in sd.items()}
    params["f16"]._is_hf_initialized = True   # a Parameter with a __dict__: _rebuild_parameter_with_state
    torch.save(params, p("params.bin"))
    rezip(p("dtypes.bin"), p("zip64.bin"), zip64=True)
    data = open(p("zip64.bin"), "rb").read()
    assert b"PK\x06\x06" in data and b"PK\x06\x07" in data, "no ZIP64 end record"
    z64 = torch.load(p("zip64.bin"), weights_only=True)
    assert all(torch.equal(z64[k], sd[k]) for k in sd)

    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    torch.save({"transposed": x.t()}, p("noncontig.bin"))
    torch.save({"f32": sd["f32"]}, p("legacy.bin"), _use_new_zipfile_serialization=False)

    cmd = ("touch " + MARKER).encode()
    evil = b"\x80\x02cos\nsystem\nX" + struct.pack("<I", len(cmd)) + cmd + b"\x85R."
    check_live(evil)
    raw_archive(p("evil.bin"), evil)
    badop = b"\x80\x02(X" + struct.pack("<I", len(cmd)) + cmd + b"ios\nsystem\n."
    check_live(badop)
    raw_archive(p("badop.bin"), badop)

    with zipfile.ZipFile(p("dtypes.bin")) as z:
        rec = [n for n in z.namelist() if n.endswith("/data/1")][0]
    rezip(p("dtypes.bin"), p("nostorage.bin"), drop=rec)
    for n in sorted(os.listdir(HERE)):
        if n.endswith(".bin"):
            print(f"{n}: {os.path.getsize(p(n))} bytes")


if __name__ == "__main__":
    main()
