#!/usr/bin/env python3
"""Reference f32 -> bf16 conversions from torch (round to nearest, ties to even; NaN stays NaN,
inf stays inf), for tests/reliability/test_bf16_round.c. Writes bf16_cases.txt: one case a line,
"F32_BITS BF16_BITS" in hex. Needs torch (fixture tool; CI reads the committed output).

usage: make_bf16_cases.py OUT.txt
"""
import random
import struct
import sys

import torch


def main():
    bits = []
    # exact ties between two bf16 values: the low 16 bits are 0x8000 (even and odd upper halves)
    for hi in (0x3F80, 0x3F81, 0x3F82, 0x3F83, 0xBF80, 0xBF81, 0x4049, 0x404A, 0x7F7E, 0x7F7F, 0x0000, 0x0001,
               0x8001, 0x0080, 0x0081):
        bits += [(hi << 16) | 0x8000, (hi << 16) | 0x7FFF, (hi << 16) | 0x8001]
    # specials: zeros, infinities, the largest finite, denormals, NaNs with payloads and signs
    bits += [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x807FFFFF,
             0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFF800001, 0x7FFFFFFF, 0x7F808000]
    rng = random.Random(7)
    bits += [rng.getrandbits(32) for _ in range(300)]
    x = torch.tensor([struct.unpack("<f", struct.pack("<I", b))[0] for b in bits], dtype=torch.float32)
    # the float conversion above keeps NaN payloads only loosely: take the f32 bits torch holds
    f32 = x.view(torch.int32).tolist()
    bf = x.to(torch.bfloat16).view(torch.int16).tolist()
    with open(sys.argv[1], "w") as f:
        f.write("# f32_bits bf16_bits (torch %s)\n" % torch.__version__)
        for a, b in zip(f32, bf):
            f.write("%08x %04x\n" % (a & 0xFFFFFFFF, b & 0xFFFF))


if __name__ == "__main__":
    main()
