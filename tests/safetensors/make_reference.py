#!/usr/bin/env python3
"""Writes tests/safetensors/reference.safetensors with the reference safetensors writer (the HF
Python library, Rust inside) and reference.txt, one line per tensor:
    name dtype dim0 dim1 ... : value0 value1 ...   (values as exact float32 decimals)
Run once; both files are committed. test_safetensors reads them and must agree."""
import os
import torch
from safetensors.torch import save_file

here = os.path.dirname(os.path.abspath(__file__))
g = torch.Generator().manual_seed(1234)
tensors = {
    "transformer.wte.weight": torch.randn(7, 5, generator=g, dtype=torch.float32),
    "transformer.h.0.attn.qkv_proj.weight": torch.randn(6, 4, generator=g).to(torch.float16),
    "transformer.h.0.ln_1.bias": torch.randn(5, generator=g).to(torch.bfloat16),
    "transformer.h.0.mlp.fc_in.weight": torch.randn(2, 3, 3, generator=g).to(torch.bfloat16),
    "transformer.ln_f.weight": torch.randn(3, generator=g).to(torch.float16),  # odd byte count
    "lm_head.bias": torch.randn(1, generator=g, dtype=torch.float32),
    "empty": torch.zeros(0, 4, dtype=torch.float16),
    "scalar": torch.tensor(2.5, dtype=torch.float32),
}
save_file(tensors, os.path.join(here, "reference.safetensors"), metadata={"format": "pt"})
names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
with open(os.path.join(here, "reference.txt"), "w") as f:
    for name, t in tensors.items():
        vals = " ".join(repr(float(v)) for v in t.float().flatten().tolist())
        dims = " ".join(str(d) for d in t.shape)
        f.write(f"{name} {names[t.dtype]} {dims} : {vals}\n".replace("  ", " "))
