#!/usr/bin/env python3
"""tools/bench/llamacpp_model.py without llama.cpp or gguf (stdlib only: it runs in CI): the tensor
plan of configs/codegen25-7B.json holds transformers' own parameter count (LlamaForCausalLM(config)
.num_parameters() = 6895702016, as tests/bin/info.sh), the vocabulary's layout, and each bad config
a clear error with exit status 2."""
import json
import math
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
import llamacpp_model as m  # noqa: E402

fails = 0


def check(cond, msg):
    global fails
    print(("ok: " if cond else "FAIL: ") + msg)
    fails += not cond


s = m.read_config(os.path.join(ROOT, "configs", "codegen25-7B.json"))
plan = m.tensors(s)
check(sum(math.prod(sh) for _, sh, _, _ in plan) == 6895702016, "codegen25-7B: 6895702016 parameters")
check(len(plan) == 3 + 9 * 32 and plan[0][:2] == ("token_embd.weight", (51200, 4096))
      and ("blk.31.ffn_down.weight", (4096, 11008), 0.0, 0.02) in plan
      and ("blk.0.attn_norm.weight", (4096,), 1.0, 0.01) in plan, "codegen25-7B: names, shapes, statistics")
toks, scores, types = m.vocab(512)
check(len(toks) == len(scores) == len(types) == 512 and len(set(toks)) == 512 and toks[:3] == ["<unk>", "<s>", "</s>"]
      and toks[3] == "<0x00>" and toks[258] == "<0xFF>" and types[3:259] == [6] * 256 and types[259] == 1,
      "vocabulary: 3 specials, 256 byte tokens, unique fillers")

base = json.load(open(os.path.join(ROOT, "configs", "codegen25-350M-shape.json")))
bad = [({"model_type": "codegen"}, "model_type 'codegen': only LLaMA"),
       ({"tie_word_embeddings": True}, "tie_word_embeddings is true"),
       ({"num_attention_heads": 24}, "heads must divide the width"),
       ({"num_key_value_heads": 3}, "heads must divide the width and key-value heads the heads"),
       ({"vocab_size": 100}, "vocab_size 100 < 259"),
       ({"hidden_size": "1024"}, "hidden_size must be a positive integer, got '1024'"),
       ({"rms_norm_eps": -1}, "rms_norm_eps must be a positive number"),
       ({"rope_scaling": {"type": "linear", "factor": 2}}, "rope_scaling")]
with tempfile.TemporaryDirectory() as d:
    for change, want in bad:
        c = dict(base, **change)
        p = os.path.join(d, "config.json")
        json.dump(c, open(p, "w"))
        try:
            m.read_config(p)
            check(False, f"{change}: accepted")
        except m.Error as e:
            check(e.rc == 2 and want in str(e) and p in str(e), f"{change}: {e}")
    p = os.path.join(d, "broken.json")
    open(p, "w").write("{")
    try:
        m.read_config(p)
        check(False, "a broken JSON file: accepted")
    except m.Error as e:
        check(e.rc == 2 and "cannot read it as JSON" in str(e), f"broken JSON: {e}")
print(f"{fails} failed")
sys.exit(1 if fails else 0)
