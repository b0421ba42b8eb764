#!/usr/bin/env python3
"""A CodeGen2.5-shaped tiny checkpoint, drawn with numpy from a fixed seed (no torch needed).

    python3 tools/make_codegen25_model.py OUTDIR [--check] [--bin BINDIR]   # the test fixture step (numpy only)
    /work/fxenv/bin/python tools/make_codegen25_model.py OUTDIR --reference   # writes the HF references

The checkpoint is a directory as Salesforce publishes CodeGen2.5 (config.json of LlamaForCausalLM with
vocab_size 51200, tokenizer_config.json naming CodeGen25Tokenizer, model.safetensors) but tiny: hidden 64,
2 layers, 4 heads, intermediate 172. Its 51,200-row embedding and lm_head make the weights 26 MB, too
large to commit, so only the config files and the references are committed (tests/data/codegen25-tiny/)
and the weights are redrawn here at test time: numpy's PCG64 `default_rng(SEED)`, every tensor in HF's
state_dict order, f32 safetensors written by hand (the writer of tools/make_random_model.py, one file).

--check: the sha256 of model.safetensors must equal "weights_sha256" of tests/data/codegen25-tiny/
hf_expected.json (so a numpy whose stream changed fails here, naming it, rather than in parity), and
hf_expected.json is copied to OUTDIR/expected.json, where tests/parity/check_parity.c reads it.
--bin BINDIR: the same weights also as BINDIR/pytorch_model.bin in torch.save's zip format (written with
the stdlib; torch.load reads it back equal to the safetensors file), with the config files.
--reference: runs HF transformers' LlamaForCausalLM (f32, eager attention) on exactly the weights written,
and writes hf_expected.json: check_parity's schema ("generate": greedy ids and log-probs of text prompts
tokenized by the reference tiktoken 0.4.0 encoding (tools/make_codegen25_fixtures.py), each with its
"text" and HF's decode of the ids, "completion"; "score", with its "text"), "speculate" (ids of a
prompt whose greedy continuation prompt lookup drafts and partly accepts, and HF's greedy ids), "fim"
(CodeGen2.5's infill prompt prefix <mask_1> suffix <|endoftext|> <sep>
<mask_1>, its ids and HF's greedy ids) and "weights_sha256". A prompt with a near-tie (top-2 logits
closer than 1e-3, or neighbours among the 6 best log-probs closer than 1e-4) is refused: pick another.

Scales (docs/FIXTURES.md): every matrix, lm_head included, ~ N(0, 1.2/sqrt(E)) as in the LLaMA fixtures,
the embedding ~ N(0, 1), RMSNorm weights ~ 1 + N(0, 0.1). Greedy is not degenerate (no token repeats in a
prompt's 12-16 steps). A larger lm_head (2.5/sqrt(E)) widened the logit gaps but let tpgen's bf16 move
a log-probability by 0.098 from HF's f32 (mean 0.026), over the bf16 bounds (0.08, mean 0.02); with 1.2
the measures are 0.051 / 0.013 for bf16 and 0.041 / 0.015 for int8 (its bounds 0.15 / 0.05).
"""
import argparse
import hashlib
import json
import os
import shutil
import struct
import sys

try:
    import numpy as np
except ImportError:
    sys.exit("make_codegen25_model.py: numpy is required: pip install numpy")

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
FIXTURE = os.path.join(ROOT, "tests", "data", "codegen25-tiny")
SEED = 2525
LM_HEAD_STD = 1.2

# text prompts (greedy through `tpgen generate --prompt`) and the infill prompt (prefix, suffix)
TEXTS = [("def fibonacci(n):\n    ", 16), ("import numpy as np\n\nclass Model:\n", 14),
         ("# sort a list\n\tfor i in range(10):\n        x = [", 12)]
FIM = ("def add(a, b):\n    ", "\n    return c\n", 12)
SCORE_TEXT = "def hello():\n    print('hello, world')\n    return 0\n"


def die(msg):
    sys.exit(f"make_codegen25_model.py: error: {msg}")


class NearTie(Exception):
    pass


def read_config():
    with open(os.path.join(FIXTURE, "config.json")) as f:
        return json.load(f)


def tensors(cfg):
    """(name, shape, kind) in HF LlamaForCausalLM's state_dict order."""
    E, L, V, I = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"], cfg["intermediate_size"]
    specs = [("model.embed_tokens.weight", (V, E), "emb")]
    for i in range(L):
        p = f"model.layers.{i}."
        specs += [(p + "self_attn.q_proj.weight", (E, E), "w"), (p + "self_attn.k_proj.weight", (E, E), "w"),
                  (p + "self_attn.v_proj.weight", (E, E), "w"), (p + "self_attn.o_proj.weight", (E, E), "w"),
                  (p + "mlp.gate_proj.weight", (I, E), "w"), (p + "mlp.up_proj.weight", (I, E), "w"),
                  (p + "mlp.down_proj.weight", (E, I), "w"), (p + "input_layernorm.weight", (E,), "norm"),
                  (p + "post_attention_layernorm.weight", (E,), "norm")]
    return specs + [("model.norm.weight", (E,), "norm"), ("lm_head.weight", (V, E), "head")]


def draw(cfg):
    rng = np.random.default_rng(SEED)
    E = cfg["hidden_size"]
    std = {"emb": 1.0, "w": 1.2 / np.sqrt(E), "norm": 0.1, "head": LM_HEAD_STD / np.sqrt(E)}
    out = []
    for name, shape, kind in tensors(cfg):
        x = rng.standard_normal(shape, dtype=np.float32) * np.float32(std[kind])
        if kind == "norm":
            x += np.float32(1.0)
        out.append((name, x.astype("<f4")))
    return out


def write_safetensors(path, arrays):
    """One f32 safetensors file: u64 header length, JSON header padded to 8 bytes, the data."""
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, x in arrays:
        header[name] = {"dtype": "F32", "shape": list(x.shape), "data_offsets": [off, off + x.nbytes]}
        off += x.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    h = hashlib.sha256()
    with open(path, "wb") as f:
        for chunk in [struct.pack("<Q", len(text)), text] + [x.tobytes() for _, x in arrays]:
            f.write(chunk)
            h.update(chunk)
    return h.hexdigest()


def write_torch_bin(path, arrays):
    """pytorch_model.bin as torch.save writes it (zip, uncompressed, records 64-byte aligned; data.pkl
    pickles {name: torch._utils._rebuild_tensor_v2(storage, 0, shape, stride, False, OrderedDict())}
    with each storage a persistent id ('storage', torch.FloatStorage, key, 'cpu', numel)), made with
    the stdlib: the pickle's two torch globals come from stand-in modules, as names only."""
    import collections
    import io
    import pickle
    import types
    import zipfile
    fake = {"torch": types.ModuleType("torch"), "torch._utils": types.ModuleType("torch._utils")}

    class FloatStorage:
        pass

    def _rebuild_tensor_v2(*args):
        raise RuntimeError("a name for the pickle only")
    FloatStorage.__module__, _rebuild_tensor_v2.__module__ = "torch", "torch._utils"
    FloatStorage.__qualname__, _rebuild_tensor_v2.__qualname__ = "FloatStorage", "_rebuild_tensor_v2"
    fake["torch"].FloatStorage, fake["torch._utils"]._rebuild_tensor_v2 = FloatStorage, _rebuild_tensor_v2
    fake["torch"]._utils = fake["torch._utils"]

    class Storage:
        def __init__(self, key, numel):
            self.key, self.numel = key, numel

    class Tensor:
        def __init__(self, storage, shape):
            self.args = (storage, 0, tuple(shape), tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape))),
                         False, collections.OrderedDict())

        def __reduce__(self):
            return _rebuild_tensor_v2, self.args

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, Storage):
                return ("storage", FloatStorage, obj.key, "cpu", obj.numel)
            return None

    saved = {k: sys.modules.get(k) for k in fake}
    sys.modules.update(fake)
    try:
        buf = io.BytesIO()
        Pickler(buf, protocol=2).dump({name: Tensor(Storage(str(i), x.size), x.shape)
                                       for i, (name, x) in enumerate(arrays)})
    finally:
        for k, v in saved.items():
            if v is None:
                del sys.modules[k]
            else:
                sys.modules[k] = v
    records = [("data.pkl", buf.getvalue()), (".format_version", b"1"), (".storage_alignment", b"64"),
               ("byteorder", b"little")] + [(f"data/{i}", x.tobytes()) for i, (_, x) in enumerate(arrays)] + \
              [("version", b"3\n")]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in records:
            info = zipfile.ZipInfo("pytorch_model/" + name, date_time=(1980, 1, 1, 0, 0, 0))
            start = z.fp.tell() + 30 + len(info.filename)  # where the data begins without padding
            pad = -(start + 4) % 64
            info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad  # torch's alignment record
            z.writestr(info, data)


def write_checkpoint(out, bin_dir=None):
    os.makedirs(out, exist_ok=True)
    for n in ("config.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(FIXTURE, n), os.path.join(out, n))
    arrays = draw(read_config())
    if bin_dir:
        os.makedirs(bin_dir, exist_ok=True)
        for n in ("config.json", "tokenizer_config.json"):
            shutil.copyfile(os.path.join(FIXTURE, n), os.path.join(bin_dir, n))
        write_torch_bin(os.path.join(bin_dir, "pytorch_model.bin"), arrays)
    return write_safetensors(os.path.join(out, "model.safetensors"), arrays)


def reference(out, sha):
    import torch
    import transformers
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import make_codegen25_fixtures as mk
    enc = mk.codegen25(mk.gpt2_ranks(os.path.join(ROOT, "tests", "data", "tokenizer", "codegen")))
    model = transformers.LlamaForCausalLM.from_pretrained(out, dtype=torch.float32,
                                                          attn_implementation="eager").eval()

    def logprobs(ids):
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float()
        return torch.log_softmax(logits, -1), logits

    def top(row, what):
        vals, idx = torch.topk(row, 6)
        if min((vals[:-1] - vals[1:]).tolist()) < 1e-4:
            raise NearTie(f"{what}: two of the 6 best log-probs are closer than 1e-4: choose another prompt")
        return [[int(i), float(v)] for i, v in zip(idx[:5].tolist(), vals[:5].tolist())]

    def greedy(prompt, n, what):
        seq, ids, lps, tops = list(prompt), [], [], []
        for _ in range(n):
            lp, logits = logprobs(seq)
            t2 = torch.topk(logits[-1], 2).values
            if float(t2[0] - t2[1]) < 1e-3:
                raise NearTie(f"{what}: greedy near-tie at step {len(ids)}: choose another prompt")
            nxt = int(torch.argmax(logits[-1]))
            tops.append(top(lp[-1], what))
            ids.append(nxt)
            lps.append(float(lp[-1, nxt]))
            seq.append(nxt)
        return {"prompt_ids": list(prompt), "max_new_tokens": n, "ids": ids, "logprobs": lps, "top_logprobs": tops}

    gens = []
    for text, n in TEXTS:
        g = greedy(enc.encode(text, allowed_special="all"), n, repr(text))
        gens.append(dict(g, text=text, completion=enc.decode(g["ids"])))
    pre, suf, n = FIM
    fim_text = pre + "<mask_1>" + suf + "<|endoftext|>" + "<sep>" + "<mask_1>"
    fim = greedy(enc.encode(fim_text, allowed_special="all"), n, "fim")
    fim.update(prefix=pre, suffix=suf, completion=enc.decode(fim["ids"]))
    spec = speculation_prompt(gens, lambda p, n: greedy(p, n, "speculate"))
    ids = enc.encode(SCORE_TEXT, allowed_special="all")
    lp, _ = logprobs(ids)
    score = {"text": SCORE_TEXT, "ids": ids,
             "logprobs": [None] + [float(lp[t - 1, ids[t]]) for t in range(1, len(ids))],
             "top_logprobs": [None] + [top(lp[t - 1], "score") for t in range(1, len(ids))]}
    cfg = read_config()
    exp = {"transformers_version": transformers.__version__, "torch_version": torch.__version__,
           "name": "codegen25-tiny", "dtype": "F32", "valid_tp": [1, 2, 4], "eos_token_id": cfg["eos_token_id"],
           "seed": SEED, "numpy_version": np.__version__, "weights_sha256": sha,
           "generate": gens, "score": score, "fim": fim, "speculate": spec}
    with open(os.path.join(FIXTURE, "hf_expected.json"), "w") as f:
        json.dump(exp, f, indent=1)
        f.write("\n")
    print("wrote", os.path.join(FIXTURE, "hf_expected.json"))


def drafts_accepted(prompt, ids, n_max=3):
    """Steps of ids where prompt lookup (docs/USAGE.md: the last N <= n_max tokens' most recent earlier
    occurrence) proposes the token greedy then picks."""
    hits = 0
    for j in range(len(ids) - 1):
        seq = prompt + ids[:j + 1]
        for n in range(n_max, 0, -1):
            tail = seq[-n:]
            at = [i for i in range(len(seq) - n) if seq[i:i + n] == tail]
            if at:
                hits += seq[at[-1] + n] == ids[j + 1]
                break
    return hits


def speculation_prompt(gens, greedy):
    """A prompt A + x + A whose greedy continuation repeats part of itself, so that --speculate ngram
    drafts tokens and the model accepts some: x is iterated as the continuation of A + x + A."""
    for g in gens:
        a, x = g["prompt_ids"], g["ids"][:4]
        for _ in range(8):
            try:
                r = greedy(a + x + a, 12)
            except NearTie:
                break
            if drafts_accepted(a + x + a, r["ids"]):
                return r
            x = r["ids"][:4]
    die("no prompt A + x + A whose greedy continuation prompt lookup drafts")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--check", action="store_true", help="hold the sha256 of hf_expected.json, copy it in")
    ap.add_argument("--reference", action="store_true", help="run HF (torch) and write hf_expected.json")
    ap.add_argument("--expected", default=os.path.join(FIXTURE, "hf_expected.json"),
                    help="the references --check holds the weights to (default: %(default)s)")
    ap.add_argument("--bin", metavar="DIR", help="also DIR: the same checkpoint as pytorch_model.bin (torch.save's "
                    "format, written with the stdlib; --check copies expected.json there too)")
    a = ap.parse_args()
    sha = write_checkpoint(a.out, a.bin)
    if a.reference:
        try:
            reference(a.out, sha)
        except NearTie as e:
            die(str(e))
    if a.check:
        exp_path = a.expected
        try:
            with open(exp_path) as f:
                exp = json.load(f)
            want, made_by = exp["weights_sha256"], exp["numpy_version"]
        except (OSError, ValueError, KeyError) as e:
            die(f"cannot read weights_sha256 and numpy_version from {exp_path}: {e!r}")
        if sha != want:
            die(f"{a.out}/model.safetensors has sha256 {sha}, {exp_path} was made from {want}: numpy "
                f"{np.__version__} draws other values from default_rng({SEED}) than numpy {made_by} did")
        for d in [a.out] + ([a.bin] if a.bin else []):
            shutil.copyfile(exp_path, os.path.join(d, "expected.json"))
    print(f"{a.out}: CodeGen2.5-shaped checkpoint, model.safetensors sha256 {sha}")


if __name__ == "__main__":
    main()
