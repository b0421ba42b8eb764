#!/usr/bin/env python3
"""Random-weights GGUF models of a LLaMA (CodeGen2.5) shape for llama.cpp, and the check of a
llama.cpp build (tools/bench/build_llamacpp.sh), for tools/bench/bench_vs_llamacpp.py.

    python3 tools/bench/llamacpp_model.py write --config configs/codegen25-350M-shape.json --out M-F16.gguf
        [--dtype f16|bf16|f32] [--seed 0] [--llamacpp DIR]
    python3 tools/bench/llamacpp_model.py make --config configs/codegen25-7B.json --dir DIR
        [--types F16,Q8_0,Q4_0,BF16] [--seed 0] [--llamacpp DIR] [--threads N]
    python3 tools/bench/llamacpp_model.py check [--llamacpp DIR] [--work DIR] [--threads N]

write: one GGUF, written with the `gguf` package of the llama.cpp build (DIR/gguf-py; numpy and
pyyaml only, no torch), in llama.cpp's LLaMA names (token_embd, blk.N.attn_norm / attn_q / attn_k /
attn_v / attn_output / ffn_norm / ffn_gate / ffn_up / ffn_down, output_norm, output) and the
config's shape (hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
intermediate_size, vocab_size, max_position_embeddings, rms_norm_eps, rope_theta; an untied
lm_head). Weights as tpgen's --random-weights draws them (engine/model/weights.c random_item):
Gaussian, matrices and the embedding mean 0 std 0.02, RMSNorm weights mean 1 std 0.01 (kept f32,
as llama.cpp's converter keeps 1-D tensors), numpy's PCG64 seeded by (--seed, tensor index); not
tpgen's values, the same statistics. The tokenizer is a minimal SentencePiece ("llama") vocabulary
of vocab_size tokens: <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF> (so any text tokenizes,
byte by byte) and filler tokens; llama-bench draws random ids and needs only the size.

make: DIR/<config stem>-<TYPE>.gguf for each --type: F16 (or F32/BF16 when asked alone as the
source) written by `write`, the others by `llama-quantize` from the F16 file with llama.cpp's
default tensor mix for that type (Q4_0: the output matrix Q6_K, as llama.cpp users get it; the
quantize log's per-type tensor counts go to DIR/<stem>.json). Files whose config, seed and
llama.cpp build match DIR/<stem>.json are kept (a 7B model takes minutes to write and quantize).

check: whether the build runs and its AMX path computes right (docs/BENCHMARKING.md, "llama.cpp"):
a tiny model of this shape quantized to Q4_0, llama-perplexity over 256 tokens of generated text
twice, with weight repacking (the AMX buffer, where the CPU has amx_int8) and with --no-repack.
On a CPU with amx_int8 it fails unless the system info says AMX_INT8 = 1, the repacked run loads
weights into an AMX buffer and the other does not, and the two perplexities agree within 1%
(they differ only in the order of the sums; a miscompiled tile setup crashes or gives garbage).
Elsewhere both runs must succeed and agree. Prints one line per finding (build_llamacpp.sh appends
them to BUILD_INFO). Exit: 0 passed, 1 failed, 2 bad usage or a missing tool.
"""
import argparse
import hashlib
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROG = "llamacpp_model.py"
DEFAULT_DIR = os.environ.get("TPGEN_LLAMACPP_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "tpgen", "llamacpp")
SOURCE_TYPES = ("F16", "BF16", "F32")  # written here; the rest come from llama-quantize
QUANT_TYPES = ("Q4_0", "Q8_0", "Q4_K_M", "Q6_K", "BF16", "F16")  # llama-quantize's names we accept
MATRIX_STD, NORM_MEAN, NORM_STD = 0.02, 1.0, 0.01  # as tpgen's --random-weights
TINY = {"hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
        "intermediate_size": 512, "vocab_size": 512, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "model_type": "llama"}  # check's model: every matrix AMX-eligible (N % 32, K % 256)


class Error(Exception):
    """A bad input or a failed tool: the message names it; exit 1 (exit 2 for usage)."""

    def __init__(self, msg, rc=1):
        super().__init__(msg)
        self.rc = rc


def import_gguf(llamacpp):
    """The gguf package of the llama.cpp build in llamacpp (its gguf-py, the version its tools read),
    else an installed one."""
    p = os.path.join(llamacpp, "gguf-py")
    if os.path.isdir(os.path.join(p, "gguf")):
        sys.path.insert(0, p)
    try:
        import gguf
    except ImportError as e:
        raise Error(f"cannot import gguf ({e}): build llama.cpp with tools/bench/build_llamacpp.sh (it copies its "
                    f"gguf-py to {p}), or pip install gguf numpy pyyaml", 2)
    return gguf


def read_config(path):
    """The LLaMA shape of an HF config.json: a dict of ints and floats, each checked."""
    try:
        with open(path) as f:
            c = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise Error(f"--config {path}: cannot read it as JSON: {e}", 2)
    return check_shape(c, path)


def check_shape(c, where):
    if c.get("model_type") != "llama":
        raise Error(f"{where}: model_type {c.get('model_type')!r}: only LLaMA (CodeGen2.5) shapes have a llama.cpp "
                    f"architecture here (CodeGen 1 and 2 have none)", 2)
    if c.get("tie_word_embeddings"):
        raise Error(f"{where}: tie_word_embeddings is true; CodeGen2.5 has an untied lm_head", 2)
    s = {}
    for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
              "max_position_embeddings"):
        v = c.get(k)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise Error(f"{where}: {k} must be a positive integer, got {v!r}", 2)
        s[k] = v
    s["num_key_value_heads"] = c.get("num_key_value_heads") or s["num_attention_heads"]
    for k, d in (("rms_norm_eps", 1e-6), ("rope_theta", 10000.0)):
        v = c.get(k, d)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
            raise Error(f"{where}: {k} must be a positive number, got {v!r}", 2)
        s[k] = float(v)
    E, H, Hk = s["hidden_size"], s["num_attention_heads"], s["num_key_value_heads"]
    if E % H or H % Hk:
        raise Error(f"{where}: hidden_size {E} / num_attention_heads {H} / num_key_value_heads {Hk}: heads must "
                    f"divide the width and key-value heads the heads", 2)
    if s["vocab_size"] < 259:
        raise Error(f"{where}: vocab_size {s['vocab_size']} < 259 (the tokenizer's 3 specials and 256 bytes)", 2)
    if c.get("rope_scaling"):
        raise Error(f"{where}: rope_scaling {c['rope_scaling']!r} is not written here", 2)
    return s


def tensors(s):
    """[(name, numpy shape (rows, cols) or (n,), mean, std)] in the GGUF's order."""
    E, I, V, D = s["hidden_size"], s["intermediate_size"], s["vocab_size"], s["hidden_size"] // s["num_attention_heads"]
    kv = s["num_key_value_heads"] * D
    out = [("token_embd.weight", (V, E), 0.0, MATRIX_STD)]
    for i in range(s["num_hidden_layers"]):
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", (E,), NORM_MEAN, NORM_STD), (b + "attn_q.weight", (E, E), 0.0, MATRIX_STD),
                (b + "attn_k.weight", (kv, E), 0.0, MATRIX_STD), (b + "attn_v.weight", (kv, E), 0.0, MATRIX_STD),
                (b + "attn_output.weight", (E, E), 0.0, MATRIX_STD), (b + "ffn_norm.weight", (E,), NORM_MEAN, NORM_STD),
                (b + "ffn_gate.weight", (I, E), 0.0, MATRIX_STD), (b + "ffn_up.weight", (I, E), 0.0, MATRIX_STD),
                (b + "ffn_down.weight", (E, I), 0.0, MATRIX_STD)]
    out += [("output_norm.weight", (E,), NORM_MEAN, NORM_STD), ("output.weight", (V, E), 0.0, MATRIX_STD)]
    return out


def vocab(V):
    """(tokens, scores, types) of the minimal SentencePiece vocabulary (the module doc)."""
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256  # UNKNOWN, CONTROL, BYTE (gguf.TokenType)
    toks += [f"[t{i}]" for i in range(len(toks), V)]
    types += [1] * (V - len(types))  # NORMAL
    scores = [0.0] * 259 + [-float(i) for i in range(V - 259)]
    return toks, scores, types


def draw(np, seed, index, shape, mean, std, dtype, gguf):
    """The tensor's values as the GGUF stores them: float16/float32 arrays, or uint8 bf16 bytes;
    drawn in row blocks so a 7B embedding needs no f32 copy of itself."""
    rng = np.random.default_rng([seed, index])
    rows = shape[0] if len(shape) == 2 else 1
    cols = shape[-1]
    if dtype == "bf16" and len(shape) == 2:
        out = np.empty((rows, cols * 2), dtype=np.uint8)
    else:
        out = np.empty((rows, cols), dtype=np.float16 if dtype == "f16" and len(shape) == 2 else np.float32)
    step = max(1, (1 << 24) // cols)
    for r in range(0, rows, step):
        x = rng.standard_normal((min(step, rows - r), cols), dtype=np.float32)
        x *= std
        x += mean
        if out.dtype == np.uint8:
            out[r:r + len(x)] = gguf.quants.quantize(x, gguf.GGMLQuantizationType.BF16)
        else:
            out[r:r + len(x)] = x
    return out.reshape(shape) if out.dtype != np.uint8 else out


def write(s, path, dtype, seed, gguf, name="codegen25-shape"):
    """One GGUF of shape s (check_shape) with random weights in dtype (f16, bf16 or f32 matrices)."""
    import numpy as np
    E, H = s["hidden_size"], s["num_attention_heads"]
    w = gguf.GGUFWriter(path, "llama")
    w.add_name(name)
    w.add_context_length(s["max_position_embeddings"])
    w.add_embedding_length(E)
    w.add_block_count(s["num_hidden_layers"])
    w.add_feed_forward_length(s["intermediate_size"])
    w.add_head_count(H)
    w.add_head_count_kv(s["num_key_value_heads"])
    w.add_rope_dimension_count(E // H)
    w.add_rope_freq_base(s["rope_theta"])
    w.add_layer_norm_rms_eps(s["rms_norm_eps"])
    w.add_vocab_size(s["vocab_size"])
    ft = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16, "bf16": gguf.LlamaFileType.MOSTLY_BF16}
    w.add_file_type(ft[dtype])
    toks, scores, types = vocab(s["vocab_size"])
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    plan = tensors(s)
    for tname, shape, _, _ in plan:
        if len(shape) == 1 or dtype == "f32":
            w.add_tensor_info(tname, shape, np.dtype(np.float32), math.prod(shape) * 4)
        elif dtype == "f16":
            w.add_tensor_info(tname, shape, np.dtype(np.float16), math.prod(shape) * 2)
        else:
            w.add_tensor_info(tname, (shape[0], shape[1] * 2), np.dtype(np.uint8), math.prod(shape) * 2,
                              raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for i, (tname, shape, mean, std) in enumerate(plan):
        w.write_tensor_data(draw(np, seed, i, shape, mean, std, dtype, gguf))
    w.close()
    return sum(math.prod(sh) for _, sh, _, _ in plan)


def quantize(llamacpp, src, dst, qtype, threads):
    """llama-quantize src -> dst (qtype); the per-type tensor counts of its log, {type: n}."""
    exe = tool(llamacpp, "llama-quantize")
    tmp = dst + ".part"
    p = subprocess.run([exe, src, tmp, qtype, str(threads)], capture_output=True, text=True)
    if p.returncode != 0:
        raise Error(f"{exe} {src} {tmp} {qtype} exited {p.returncode}:\n{(p.stderr + p.stdout)[-3000:]}")
    os.replace(tmp, dst)
    counts = {}  # "[  1/ 21] output.weight - [...], type = f16, converting to q6_K .." (or kept: no "converting")
    for m in re.finditer(r"^\[\s*\d+/\s*\d+\]\s+\S+\s+- .*?type =\s*(\w+)(?:, converting to (\w+))?",
                         p.stdout + p.stderr, re.M):
        t = m.group(2) or m.group(1)
        counts[t] = counts.get(t, 0) + 1
    return counts


def tool(llamacpp, name):
    exe = os.path.join(llamacpp, "bin", name)
    if not os.access(exe, os.X_OK):
        raise Error(f"{exe} is not an executable: build llama.cpp first (bash tools/bench/build_llamacpp.sh "
                    f"--out {llamacpp})", 2)
    return exe


def build_id(llamacpp):
    """What identifies the build the files were quantized with: its BUILD_INFO's first lines."""
    try:
        with open(os.path.join(llamacpp, "BUILD_INFO")) as f:
            return "".join(f.readlines()[:3]).strip()
    except OSError:
        return None


def make(a, gguf):
    """make (the module doc): {TYPE: path}; keeps files DIR/<stem>.json says match."""
    s = read_config(a.config)
    types = [t.strip().upper() for t in a.types.split(",") if t.strip()]
    bad = [t for t in types if t not in SOURCE_TYPES + QUANT_TYPES]
    if not types or bad:
        raise Error(f"--types: {','.join(bad) or 'none'} not among {', '.join(dict.fromkeys(SOURCE_TYPES + QUANT_TYPES))}", 2)
    stem = os.path.splitext(os.path.basename(a.config))[0]
    os.makedirs(a.dir, exist_ok=True)
    side = os.path.join(a.dir, stem + ".json")
    with open(a.config, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    ident = {"config_sha256": sha, "seed": a.seed, "llamacpp_build": build_id(a.llamacpp)}
    try:
        with open(side) as f:
            meta = json.load(f)
    except (OSError, json.JSONDecodeError):
        meta = {}
    if any(meta.get(k) != v for k, v in ident.items()):
        meta = dict(ident, config=os.path.abspath(a.config), shape=s, files={})
    files = meta.setdefault("files", {})
    # the source: F16 unless only a source type is asked (then that one)
    src_type = "F16" if any(t not in SOURCE_TYPES for t in types) or "F16" in types else types[0]
    out = {}
    for t in [src_type] + [t for t in types if t != src_type]:
        path = os.path.join(a.dir, f"{stem}-{t}.gguf")
        if t in files and os.path.exists(path) and os.path.getsize(path) == files[t].get("bytes"):
            out[t] = path
            continue
        print(f"{PROG}: writing {path}", file=sys.stderr, flush=True)
        if t == src_type:
            tmp = path + ".part"
            n = write(s, tmp, t.lower(), a.seed, gguf, name=stem)
            os.replace(tmp, path)
            files[t] = {"bytes": os.path.getsize(path), "params": n, "by": "llamacpp_model.py write"}
        else:
            counts = quantize(a.llamacpp, out[src_type], path, t, a.threads)
            files[t] = {"bytes": os.path.getsize(path), "by": f"llama-quantize {t}", "tensor_types": counts}
        out[t] = path
        with open(side + ".part", "w") as f:
            json.dump(meta, f, indent=1)
        os.replace(side + ".part", side)
    if src_type not in types:
        out.pop(src_type)
    return out


def has_amx():
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " amx_int8" in line for line in f)
    except OSError:
        return False


def perplexity(exe, model, text, threads, repack):
    """(final perplexity, log) of llama-perplexity on text; Error on a crash or no figure."""
    cmd = [exe, "-m", model, "-f", text, "-c", "128", "-b", "128", "--chunks", "2", "-t", str(threads), "--seed", "1",
           "-v"]  # -v: the buffers the weights load into and each tensor the AMX buffer repacks
    if not repack:
        cmd.append("--no-repack")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    log = p.stdout + p.stderr
    m = re.search(r"Final estimate: PPL = ([0-9.]+|nan|inf)", log)
    if p.returncode != 0 or not m:
        raise Error(f"{' '.join(cmd)} exited {p.returncode}" + ("" if m else " with no 'Final estimate'")
                    + f" (a miscompiled AMX path dies here: build_llamacpp.sh's header):\n{log[-3000:]}")
    return float(m.group(1)), log


def amx_tensors(log):
    """How many weights llama.cpp's verbose log says went into a non-empty AMX buffer (0: none).
    A first pass (the memory fit) logs an AMX buffer of 0.00 MiB; the load logs its size, then
    "amx repack tensor NAME" for each matrix."""
    sizes = [float(x) for x in re.findall(r"AMX model buffer size =\s*([0-9.]+) MiB", log)]
    if not any(x > 0 for x in sizes):
        return 0
    return len(re.findall(r"amx repack tensor \S+", log))


def check(a, gguf):
    """check (the module doc): prints its findings; Error when one fails."""
    exe = tool(a.llamacpp, "llama-perplexity")
    tool(a.llamacpp, "llama-quantize")
    work = a.work or tempfile.mkdtemp(prefix="llamacpp-check-")
    os.makedirs(work, exist_ok=True)
    s = check_shape(TINY, "the check's tiny shape")
    f16, q4 = os.path.join(work, "tiny-F16.gguf"), os.path.join(work, "tiny-Q4_0.gguf")
    write(s, f16, "f16", 0, gguf, name="tiny")
    quantize(a.llamacpp, f16, q4, "Q4_0", a.threads)
    rng = random.Random(0)
    text = os.path.join(work, "text.txt")
    with open(text, "w") as f:  # 1 token per byte (the byte tokens): 300 tokens, 2 chunks of 128
        f.write("".join(rng.choice("abcdefghij klmnop\n") for _ in range(300)))
    ppl_on, log_on = perplexity(exe, q4, text, a.threads, True)
    ppl_off, log_off = perplexity(exe, q4, text, a.threads, False)
    amx_info = re.search(r"AMX_INT8 = 1", log_on) is not None
    amx_buf_on, amx_buf_off = amx_tensors(log_on), amx_tensors(log_off)
    rel = abs(ppl_on - ppl_off) / max(ppl_off, 1e-9)
    print(f"check: system info AMX_INT8 = {int(amx_info)}; matrices in the AMX buffer: repacked {amx_buf_on}, "
          f"--no-repack {amx_buf_off}")
    print(f"check: Q4_0 tiny model perplexity repacked {ppl_on:.4f}, --no-repack {ppl_off:.4f} (relative difference "
          f"{rel:.1e})")
    fails = []
    if not (math.isfinite(ppl_on) and math.isfinite(ppl_off)) or rel > 0.01:
        fails.append(f"the perplexities differ by {rel:.1e} (> 1%) or are not finite")
    if has_amx():
        if not amx_info:
            fails.append("this CPU has amx_int8 but the build's system info does not say AMX_INT8 = 1 "
                         "(built without -march=native or GGML_AMX_INT8?)")
        if not amx_buf_on:
            fails.append("this CPU has amx_int8 but the repacked run put no weights in an AMX buffer")
        if amx_buf_off:
            fails.append("--no-repack still used the AMX buffer: the comparison checks nothing")
    else:
        print("check: this CPU has no amx_int8: the AMX path is not checked")
    if fails:
        raise Error("check failed: " + "; ".join(fails) + f" (logs: rerun with --work DIR; model {q4})")
    print("check: passed" + (" (AMX path)" if has_amx() else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("write", "make", "check"):
        p = sub.add_parser(name)
        p.add_argument("--llamacpp", default=DEFAULT_DIR, help=f"build_llamacpp.sh's --out (default {DEFAULT_DIR})")
        if name != "check":
            p.add_argument("--config", required=True)
            p.add_argument("--seed", type=int, default=0)
        p.add_argument("--threads", type=int, default=os.cpu_count())
    sub.choices["write"].add_argument("--out", required=True)
    sub.choices["write"].add_argument("--dtype", default="f16", choices=("f16", "bf16", "f32"))
    sub.choices["make"].add_argument("--dir", required=True)
    sub.choices["make"].add_argument("--types", default="F16,Q8_0,Q4_0")
    sub.choices["check"].add_argument("--work")
    a = ap.parse_args()
    if a.threads < 1:
        ap.error(f"--threads must be >= 1, got {a.threads}")
    try:
        gguf = import_gguf(a.llamacpp)
        if a.cmd == "write":
            s = read_config(a.config)
            n = write(s, a.out, a.dtype, a.seed, gguf, name=os.path.splitext(os.path.basename(a.config))[0])
            print(f"{PROG}: wrote {a.out}: {n} parameters, {a.dtype} matrices", file=sys.stderr)
        elif a.cmd == "make":
            for t, path in make(a, gguf).items():
                print(f"{t} {path}")
        else:
            check(a, gguf)
    except Error as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return e.rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
