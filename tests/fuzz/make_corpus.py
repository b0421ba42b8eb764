#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets into tests/fuzz/corpus/<target>/ (committed; small).

Seeds are valid inputs that reach deep into each parser plus a few near misses; the fuzzer
mutates from there. Rerun after changing a harness's input layout:  python3 tests/fuzz/make_corpus.py
"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def st_file(tensors, meta=None, pad_header=0):
    """A safetensors file: tensors = [(name, dtype, shape, data bytes)]."""
    header, blob = {}, b""
    if meta is not None:
        header["__metadata__"] = meta
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    h = json.dumps(header, separators=(",", ":")).encode() + b" " * pad_header
    return struct.pack("<Q", len(h)) + h + blob


def json_seeds():
    with open(os.path.join(ROOT, "tests/data/tiny-f32/config.json"), "rb") as f:
        put("json", "config", f.read())
    put("json", "numbers", "[0, -0, 1.5e300, -2E-5, 9223372036854775807, -9223372036854775807, 1e999, 0.1, 123456789012345678901]")
    put("json", "strings", r'{"a\u00e9\ud83d\ude00": "x\n\t\"\\\/\b\f\r", "": "", "lone": "\ud800", "nul": "a\u0000b"}')
    put("json", "nested", "[[[[[{\"k\": [true, false, null, {}]}]]]]]")
    put("json", "dup_keys", '{"a": 1, "a": 2, "b": {"a": 3}}')
    put("json", "bad_trailing", '{"a": 1},')
    put("json", "bad_escape", '"\\x41"')
    put("json", "deep", "[" * 300 + "]" * 300)


def safetensors_seeds():
    f32 = struct.pack("<4f", 1, 2, 3, 4)
    put("safetensors", "two", st_file([("w", "F32", [2, 2], f32), ("b", "BF16", [2], b"\x80\x3f\x00\x40")]))
    put("safetensors", "meta_scalar", st_file([("s", "F16", [], b"\x00\x3c")], meta={"format": "pt"}))
    put("safetensors", "empty_tensor", st_file([("e", "F32", [0, 3], b""), ("x", "F32", [1], b"\0\0\0\0")]))
    put("safetensors", "padded_header", st_file([("w", "F32", [1], b"\0\0\x80\x3f")], pad_header=7))
    put("safetensors", "empty_header", st_file([]))
    put("safetensors", "unsupported_dtype", st_file([("i", "I64", [1], b"\0" * 8)]))
    bad = st_file([("w", "F32", [2], b"\0" * 8)])
    put("safetensors", "truncated", bad[:-3])
    with open(os.path.join(ROOT, "tests/safetensors/reference.safetensors"), "rb") as f:
        put("safetensors", "reference", f.read())


def index_seeds():
    # shard files made by fuzz_safetensors_index.c: a (x, y), b (z), bad
    def idx(wm, **extra):
        d = dict(extra)
        d["weight_map"] = wm
        return json.dumps(d, indent=1)
    put("safetensors_index", "two_shards",
        idx({"x": "a.safetensors", "y": "a.safetensors", "z": "b.safetensors"}, metadata={"total_size": 18}))
    put("safetensors_index", "one_shard", idx({"z": "b.safetensors"}))
    put("safetensors_index", "missing_tensor", idx({"q": "a.safetensors"}))
    put("safetensors_index", "bad_shard", idx({"x": "a.safetensors", "w": "bad.safetensors"}))
    put("safetensors_index", "no_file", idx({"x": "nothere.safetensors"}))
    put("safetensors_index", "wrong_file", idx({"x": "b.safetensors"}))


def tokenizer_seeds():
    # first byte: bit 0 tokenizer (codegen / small), bit 1 decode, bit 2 skip special, bit 3 ids mod vocab
    texts = {
        "code": "def hello(x):\n    return x  + 1  # ok\n\n\tif  y:\r\n        pass\n",
        "unicode": "caf\u00e9 \u4e2d\u6587 \U0001f600 \u00a0\u2028x's 'll<|endoftext|>",
        "spaces": " " * 40 + "\t" * 9 + "a",
    }
    for i, (name, text) in enumerate(texts.items()):
        put("tokenizer", "enc_" + name, bytes([i & 1]) + text.encode())
    put("tokenizer", "enc_invalid", b"\x00ab\xe2\x82 \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80")
    ids = [31373, 995, 50256, 50260, 50300, 220, 197, 128, 200, 33]
    put("tokenizer", "dec_codegen", b"\x02" + struct.pack("<%di" % len(ids), *ids))
    put("tokenizer", "dec_codegen_skip", b"\x06" + struct.pack("<%di" % len(ids), *ids))
    put("tokenizer", "dec_small_mod", b"\x0b" + bytes(range(0, 64)))
    put("tokenizer", "dec_out_of_range", b"\x02" + struct.pack("<3i", 5, -1, 1 << 30))


def prompts_seeds():
    # first byte: bit 0 set = the rest is a --prompts-file, else the rest is --prompt-ids
    put("prompts", "ids_flag", b"\x00" + b"5, 17,9")
    put("prompts", "ids_flag_json", b"\x00" + b"[1, 2, 3]")
    put("prompts", "ids_flag_big", b"\x00" + b"1,2147483647")
    put("prompts", "ids_flag_bad", b"\x00" + b"1,,2")
    put("prompts", "file_mixed",
        b"\x01" + b'[1, 2, 3]\n4,5 ,6\r\n\n"a \\"quoted\\"\\nprompt"\nplain text line\n  leading space\n[]\n')
    put("prompts", "file_ids", b"\x01" + b"1\n2,3\n[4]\n")
    put("prompts", "file_bad_json", b"\x01" + b'["x"]\n"unterminated\n')


def sampler_seeds():
    # [mode][temperature idx][top_k][top_p][penalty idx][logprobs][seed][n_hist] hist(u16) logits(f32)
    logits = [0.5, 2.0, 2.0, -1.0, 3.5, 0.0, -30.0, 1e-8]
    lb = struct.pack("<%df" % len(logits), *logits)
    hist = struct.pack("<3H", 1, 4, 4)
    put("sampler", "greedy_full", bytes([0, 0, 0, 0, 0, 5, 1, 0]) + lb)
    put("sampler", "topk_cand", bytes([1, 8, 3, 0, 0, 2, 7, 0]) + lb)
    put("sampler", "topp_full", bytes([0, 7, 0, 200, 0, 0, 3, 0]) + lb)
    put("sampler", "penalty_topk_topp", bytes([0, 6, 5, 180, 4, 3, 9, 3]) + hist + lb)
    put("sampler", "ties", bytes([0, 9, 0, 250, 0, 8, 2, 0]) + struct.pack("<6f", *[1.0] * 6))
    put("sampler", "huge", bytes([1, 3, 2, 0, 0, 4, 5, 0]) + struct.pack("<4f", 3e38, -3e38, 3e38, 1e-45))
    put("sampler", "nonfinite", bytes([0, 8, 0, 100, 0, 2, 1, 0]) + struct.pack("<4f", 1.0, float("inf"), float("nan"), 2.0))


def bin_seeds():
    # first byte even: the rest is a whole archive; odd: a bare pickle (the harness also wraps it
    # in an archive with storage records archive/data/0..7 of 64 bytes each)
    import glob
    import zipfile
    for f in sorted(glob.glob(os.path.join(ROOT, "tests/bin/*.bin"))):
        name = os.path.basename(f)[:-4]
        with open(f, "rb") as fh:
            data = fh.read()
        put("bin", "zip_" + name, b"\x00" + data)
        if zipfile.is_zipfile(f):
            with zipfile.ZipFile(f) as z:
                pkl = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
                put("bin", "pkl_" + name, b"\x01" + z.read(pkl))
    # a protocol-2 state dict by hand: {"w": _rebuild_tensor_v2(("storage", FloatStorage, "0",
    # "cpu", 4), 0, (2, 2), (2, 1), False, OrderedDict())}
    pkl = (b"\x80\x02}q\x00X\x01\x00\x00\x00wctorch._utils\n_rebuild_tensor_v2\n"
           b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x04tQ"
           b"K\x00K\x02K\x02\x86K\x02K\x01\x86\x89ccollections\nOrderedDict\n)RtRs.")
    put("bin", "pkl_by_hand", b"\x01" + pkl)
    put("bin", "pkl_global_os_system", b"\x01" + b"\x80\x02\x8c\x02os\x8c\x06system\x93.")


def server_request_seeds():
    # first byte: bit 0 the CodeGen tokenizer, bit 1 the small model (vocab 1001, 128 positions)
    reqs = {
        "text": (1, {"prompt": "def fib(n):", "max_tokens": 16, "temperature": 0, "stop": ["\ndef ", "#"]}),
        "ids_small": (2, {"prompt": [1, 2, 1000], "max_tokens": 4, "logprobs": 5, "echo": True, "n": 3, "seed": 7}),
        "ids_batch": (0, {"model": "codegen-test", "prompt": [[5, 6], [7]], "n": 16, "top_k": 40, "top_p": 0.9,
                          "repetition_penalty": 1.3, "presence_penalty": -2, "frequency_penalty": 2,
                          "min_tokens": 2, "ignore_eos": True, "return_token_ids": True}),
        "stream": (3, {"prompt": ["a", "b c"], "stream": True, "stream_options": {"include_usage": True},
                       "best_of": 2, "n": 2, "max_tokens": 0, "user": "x", "logit_bias": {}}),
        "kv_too_big": (2, {"prompt": [1] * 90, "max_tokens": 38}),
        "kv_fits": (2, {"prompt": [1] * 90, "max_tokens": 7}),
        "too_long": (0, {"prompt": [1] * 2000, "max_tokens": 49}),
        "bad_id": (0, {"prompt": [1, 51200]}),
        "bad_types": (1, {"prompt": "x", "n": 1.5, "temperature": "hot"}),
        "big_ints": (0, {"prompt": [3000000000, 4294967297], "max_tokens": 9999999999}),
        "wrong_model": (1, {"model": "gpt-4", "prompt": "x"}),
    }
    for name, (cfg, body) in reqs.items():
        put("server_request", name, bytes([cfg]) + json.dumps(body).encode())
    put("server_request", "exp_ids", b"\x00" + b'{"prompt": [1e2, 2.0E1]}')
    put("server_request", "stop_nul", b"\x01" + b'{"prompt": "x", "stop": "\\u0000x"}')
    put("server_request", "not_json", b"\x01" + b'{"prompt": "x",}')


def request_seeds():
    # whole requests on models/codegen-tiny-py (fuzz_request.c); first byte: bit 0 --speculate ngram:4:2
    reqs = {
        "greedy": (0, {"model": "codegen-tiny-py", "prompt": "def add(a, b):", "max_tokens": 8, "temperature": 0}),
        "sampled_n": (0, {"prompt": "import os\n", "max_tokens": 6, "n": 3, "seed": 11, "temperature": 0.8,
                          "top_k": 40, "top_p": 0.9, "logprobs": 2}),
        "stream_usage": (0, {"prompt": ["x = 1", "for i in"], "max_tokens": 5, "stream": True,
                             "stream_options": {"include_usage": True}, "n": 2, "seed": 3}),
        "echo_logprobs": (0, {"prompt": "class A:\n    def", "max_tokens": 3, "echo": True, "logprobs": 3}),
        "echo_only": (0, {"prompt": [5, 6, 7, 8], "max_tokens": 0, "echo": True, "logprobs": 0}),
        "stops_min": (0, {"prompt": "def f():\n", "max_tokens": 12, "stop": ["\n", "return"], "min_tokens": 4,
                          "presence_penalty": 1.5, "frequency_penalty": -1, "repetition_penalty": 1.2}),
        "ids_batch": (0, {"prompt": [[50256], [1, 2, 3]], "max_tokens": 4, "ignore_eos": True,
                          "return_token_ids": True, "top_k": 1}),
        "spec_greedy": (1, {"prompt": "a = 1\nb = 2\na = 1\nb = 2\na = 1\n", "max_tokens": 16, "temperature": 0,
                            "return_token_ids": True}),
        "spec_sampled_stream": (1, {"prompt": "x x x x x x x x", "max_tokens": 10, "temperature": 0.7, "seed": 5,
                                    "stream": True, "logprobs": 1}),
        "too_big": (0, {"prompt": "def", "max_tokens": 500}),
        "timeout_tiny": (0, {"prompt": "def f():", "max_tokens": 8, "timeout": 1e-6, "stream": True}),
        "refused": (0, {"prompt": "x", "top_p": 0}),
        # bit 1: a second request, the first prompt + (bits 4-6) + 1 ids, shares its prefix; bit 2:
        # cancelled before its first token (mid-prefill); two prompts of 62 ids and the sharer
        # overflow the 11-block pool: preemption
        "share_prefix": (2 | 3 << 4, {"prompt": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n"
                                               "    return a - b\n\n\ndef mul(a, b):\n", "max_tokens": 8,
                                     "temperature": 0}),
        "share_preempt": (2 | 7 << 4, {"prompt": [list(range(300, 362)), list(range(900, 962))], "max_tokens": 16,
                                      "temperature": 0, "return_token_ids": True}),
        "cancel_prefill": (4, {"prompt": list(range(1000, 1120)), "max_tokens": 8, "temperature": 0}),
        "cancel_share_stream": (2 | 4, {"prompt": list(range(2000, 2060)), "max_tokens": 8, "n": 2,
                                        "temperature": 0, "stream": True}),
    }
    for name, (cfg, body) in reqs.items():
        put("request", name, bytes([cfg]) + json.dumps(body).encode())


if __name__ == "__main__":
    shutil.rmtree(OUT, ignore_errors=True)
    json_seeds()
    safetensors_seeds()
    index_seeds()
    tokenizer_seeds()
    prompts_seeds()
    sampler_seeds()
    bin_seeds()
    server_request_seeds()
    request_seeds()
    n = sum(len(fs) for _, _, fs in os.walk(OUT))
    print("wrote %d seeds under %s" % (n, OUT))
