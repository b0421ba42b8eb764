"""Makes CodeGen2.5's tokenizer data and its test references from tiktoken 0.4.0 (the version the
CodeGen2.5 model card pins). Needs /work/fxenv-style Python with tiktoken==0.4.0 (and `regex`);
nothing is downloaded: tiktoken's gpt2 encoding is rebuilt from the GPT-2 files given with --src.

    python tools/make_codegen25_fixtures.py [--src tests/data/tokenizer/codegen]
                                            [--cases ../shared/data/codegen-tokenizer-cases.jsonl]

CodeGen2.5's published tokenization_codegen25.py (XGen-7B's tokenization_xgen.py is the same code)
builds a tiktoken Encoding from tiktoken's "gpt2" (GPT-2's 50,256 mergeable ranks and pattern,
<|endoftext|> = 50256) in two parts:
  - whitespace runs as MERGEABLE RANKS, numbered on from gpt2's n_vocab (50257): runs of 31..2
    spaces (50257..50286), then runs of 9..2 tabs (50287..50294), each `bpe_ranks[bytes(run)] = idx`
    into gpt2's `_mergeable_ranks` (none of them is a GPT-2 token, so nothing is overwritten). They
    are ordinary BPE tokens: "   " is one piece of the pattern and so one token, a longer run is
    merged by rank like any piece ("a" + 40 spaces + "b" is a, 31 spaces, 8 spaces, " b");
  - special tokens from 50295: StarCoder's 18 FIM and metadata tokens (50295..50312), <dummy_0..3>,
    <sep> (50317), <eom> (50318), <mask_881>..<mask_1> (50319..51199);
and its tokenizer encodes with allowed_special="all". That file was written after tiktoken issue
#102, where tiktoken's maintainer told its Salesforce author to add whitespace runs as normal
(mergeable) tokens rather than special ones; XGen's copy still names the dict `bpe_ranks`. The
publisher's own example ids (its model card's infill prompt) agree, and so do the ids below.
With the runs as mergeable ranks the tiktoken version does not matter for them: the order in which
tiktoken >= 0.12 matches overlapping special tokens concerns special tokens only, and CodeGen2.5's
remaining special tokens never overlap (each begins with "<", ends with ">" and has no ">" inside).
This script writes:
  tokenizer/data/gpt2.tiktoken          GPT-2's mergeable ranks (base64 token, rank; tiktoken's file
                                        format), from GPT-2's vocab.json + merges.txt by tiktoken's own
                                        data_gym_to_mergeable_bpe_ranks (the same ranks as OpenAI's
                                        r50k_base.tiktoken)
  tokenizer/tokenizer_tiktoken_tables.c the code points whose pre-tokenizer class tiktoken 0.4.0's
                                        regex engine sees otherwise than HF's, as ranges over HF's
                                        table (tokenizer_unicode_table.c, read back: make it first)
  tests/data/tokenizer/codegen25/       a checkpoint directory without weights: config.json and
                                        tokenizer_config.json, no vocabulary file
  tests/data/tokenizer/codegen25_cases.jsonl   {"text", "ids"}: allowed_special="all" (HF's encode)
  tests/data/tokenizer/codegen25_plain.jsonl   {"text", "ids", "plain": true}: no special token
                                        allowed, every token name encoded as text (encode_ordinary)
  tests/data/tokenizer/codegen25_decode.jsonl  {"ids", "skip_special", "text"}: tiktoken's decode
It also checks the encoding against ids measured with tiktoken 0.4.0 by hand (EXAMPLES).
"""
import argparse
import base64
import json
import os
import random
import re
import sys

import tiktoken
import tiktoken.load

import class_table as ctab  # tools/class_table.py

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DATA = os.path.join(ROOT, "tests", "data", "tokenizer")
PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""  # tiktoken's gpt2

FIM = ["<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>", "<filename>", "<gh_stars>", "<issue_start>",
       "<issue_comment>", "<issue_closed>", "<jupyter_start>", "<jupyter_text>", "<jupyter_code>",
       "<jupyter_output>", "<empty_output>", "<commit_before>", "<commit_msg>", "<commit_after>", "<reponame>"]
SPACES = [" " * n for n in reversed(range(2, 32))]
TABS = ["\t" * n for n in reversed(range(2, 10))]
EXTRA = [f"<dummy_{i}>" for i in range(4)] + ["<sep>", "<eom>"] + [f"<mask_{i}>" for i in reversed(range(1, 882))]


def gpt2_ranks(src):
    tiktoken.load.read_file_cached = lambda p: open(p, "rb").read()  # local files, no download
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(os.path.join(src, "merges.txt"),
                                                          os.path.join(src, "vocab.json"))
    assert len(ranks) == 50256 and sorted(ranks.values()) == list(range(50256))
    return ranks


# ids measured by hand with tiktoken 0.4.0 on the published construction (also a C test)
EXAMPLES = [("def f():\n    return 1\n", [4299, 277, 33529, 198, 50285, 1441, 352, 198]),
            (" " * 31, [50257]),
            ("        x", [50281, 2124]),
            ("a" + " " * 40 + "b", [64, 50257, 50280, 275])]


def codegen25(ranks):
    """The Encoding tokenization_codegen25.py builds, step by step as it builds it."""
    gpt2 = tiktoken.Encoding(name="gpt2", pat_str=PAT, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256})  # tiktoken's "gpt2"
    idx = gpt2.n_vocab
    bpe_ranks = dict(gpt2._mergeable_ranks)  # the published code adds to gpt2's own dict
    for wsp in SPACES:
        assert bytes(wsp, "ascii") not in bpe_ranks
        bpe_ranks[bytes(wsp, "ascii")] = idx
        idx += 1
    for t in TABS:
        assert bytes(t, "ascii") not in bpe_ranks
        bpe_ranks[bytes(t, "ascii")] = idx
        idx += 1
    special = {}
    for sp in FIM + EXTRA:
        special[sp] = idx
        idx += 1
    assert special["<sep>"] == 50317 and special["<eom>"] == 50318 and special["<mask_1>"] == 51199
    assert bpe_ranks[b" " * 31] == 50257 and bpe_ranks[b"\t" * 2] == 50294
    return tiktoken.Encoding(name="gpt2_im", pat_str=gpt2._pat_str, mergeable_ranks=bpe_ranks,
                             special_tokens={**gpt2._special_tokens, **special})


def class_table():
    """The class of every code point (0 other, 1 letter, 2 number, 3 space) under tiktoken's regex:
    a probe string is one piece when an Encoding whose ranks hold it whole encodes it as one token."""
    OTHER, LETTER, NUMBER, SPACE = 0, 1, 2, 3
    probes = ((LETTER, "x"), (NUMBER, "1"), (OTHER, "!"), (SPACE, "\t"))
    cls = bytearray(0x110000)
    step = 1 << 15
    for lo in range(0, 0x110000, step):
        cps = [cp for cp in range(lo, min(lo + step, 0x110000)) if not 0xD800 <= cp <= 0xDFFF]
        ranks = {bytes([b]): b for b in range(256)}
        for cp in cps:
            for _, p in probes:
                ranks.setdefault((p + chr(cp)).encode(), len(ranks))
        enc = tiktoken.Encoding(name="probe", pat_str=PAT, mergeable_ranks=ranks, special_tokens={})
        for cp in cps:
            hits = [k for k, p in probes if len(enc.encode_ordinary(p + chr(cp))) == 1]
            if len(hits) != 1:
                sys.exit(f"U+{cp:04X}: the class probes give {hits}")
            cls[cp] = hits[0]
    return cls


def write_tables(cls):
    """tiktoken's classes as the ranges where they differ from HF's (read back from the table
    tools/make_tokenizer_fixtures.py wrote): tokenizer_pretok.c applies them over HF's table"""
    hf = ctab.read_block_table(os.path.join(ROOT, "tokenizer", "tokenizer_unicode_table.c"), "tpk_class")
    ranges = ctab.diff_ranges(hf, cls)
    assert all(first >= 0x80 for first, _, _ in ranges)  # ASCII is looked up in the table alone
    n = sum(last - first + 1 for first, last, _ in ranges)
    ctab.write_ranges(
        os.path.join(ROOT, "tokenizer", "tokenizer_tiktoken_tables.c"),
        "/* Generated by tools/make_codegen25_fixtures.py from tiktoken 0.4.0. Do not edit.\n"
        " * tpk_tt_class_diff: the code points whose GPT-2 pre-tokenizer class (0 other, 1 \\p{L}, 2 \\p{N},\n"
        " * 3 \\s) tiktoken's regex engine sees otherwise than HF's (tokenizer_unicode_table.c): an older\n"
        f" * Unicode, {n:,} code points. Sorted, disjoint: {{first, last, class}}. */\n",
        "tpk_tt_class_diff", ranges)


def write_ranks(ranks):
    path = os.path.join(ROOT, "tokenizer", "data", "gpt2.tiktoken")
    with open(path, "wb") as f:
        for tok, r in sorted(ranks.items(), key=lambda kv: kv[1]):
            f.write(base64.b64encode(tok) + b" " + str(r).encode() + b"\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


WS = ["\t", "\n", "\x0b", "\x0c", "\r", " ", "\x85", "\xa0", "\u1680", "\u2000", "\u2028", "\u3000", "\u200b"]
NAMES = (["<|endoftext|>", "<sep>", "<eom>", "<mask_1>", "<mask_10>", "<mask_881>", "<mask_882>", "<mask_0>",
          "<mask_", "<mask_1", "<dummy_0>", "<dummy_4>", "<sep", "eom>", "<<sep>>", "<|endoftext|"] + FIM)


def random_char(rng, newer):
    r = rng.random()
    if r < 0.3:
        return chr(rng.randint(0x21, 0x7E))
    if r < 0.4:
        return " "
    if r < 0.5:
        return rng.choice([" ", "\t"]) * rng.randint(2, 70)
    if r < 0.56:
        return rng.choice(WS)
    if r < 0.64:
        return rng.choice(NAMES)
    if r < 0.68:
        return rng.choice(["'s", "'t", "'re", "'ll", "'S", "'"])
    if r < 0.74:
        return rng.choice(newer)
    if r < 0.8:
        return chr(rng.randint(0x4E00, 0x9FFF))
    if r < 0.85:
        return rng.choice("0123456789٠١٢३४０１Ⅻ½²")
    if r < 0.95:
        c = rng.randint(0x80, 0xFFFD)
        return chr(c) if not 0xD800 <= c <= 0xDFFF else "y"
    return chr(rng.randint(0x10000, 0x10FFFF))


def texts(cases, rng, newer):
    out = [c["text"] for c in cases]
    code = "def f(x):\n    if x:\n\t\treturn x\n        else:\n\t    pass\n"
    for n in list(range(1, 36)) + [40, 47, 48, 62, 63, 64, 65, 93, 100, 200]:
        out += [" " * n, " " * n + "x", "x" + " " * n, "\n" + " " * n + "return x", " " * n + "\n",
                "\t" * n, "\t" * n + "x", "\n" + "\t" * n + "pass", "\t" * n + " " * n + "y", " \t" * n]
    out += [code, code * 20, "prefix<mask_1>suffix<|endoftext|><sep><mask_1>", "a<eom>b<sep>c<mask_1>",
            "d<|endoftext|>e<mask_1>", "<fim_prefix>abc<fim_suffix>xyz<fim_middle>",
            "int add(int a, int b) { return a + b; }\nπ", "".join(NAMES), " ".join(NAMES), "  <sep>  <eom>\t\t<mask_2>"]
    out += ["".join(newer[i:i + 8]) for i in range(0, min(len(newer), 400), 8)]
    out += ["".join(random_char(rng, newer) for _ in range(rng.randint(1, 120))) for _ in range(700)]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=os.path.join(DATA, "codegen"), help="GPT-2's vocab.json + merges.txt")
    ap.add_argument("--cases", default=os.path.join(ROOT, "..", "shared", "data", "codegen-tokenizer-cases.jsonl"))
    ap.add_argument("--no-table", action="store_true", help="skip the (slow) class table")
    args = ap.parse_args()
    ranks = gpt2_ranks(args.src)
    enc = codegen25(ranks)
    assert enc.n_vocab == 51200
    for text, ids in EXAMPLES:
        got = enc.encode(text, allowed_special="all")
        assert got == ids, f"{text!r}: {got}, measured {ids}"
    write_ranks(ranks)
    if not args.no_table:
        cls = class_table()
        write_tables(cls)
    else:
        cls = None
    # code points whose class tiktoken and HF see differently: the texts use them
    newer = [chr(c) for c in (0x1C89, 0x1C8A, 0xA7CB, 0xA7CC, 0xA7DC, 0x105C0, 0x105C5, 0x10D40, 0x116D0, 0x1E5D0)]
    rng = random.Random(2025)
    cases = [json.loads(l) for l in open(args.cases)]
    all_texts = texts(cases, rng, newer)
    rows = [{"text": t, "ids": enc.encode(t, allowed_special="all")} for t in all_texts]
    # plain text: the rows where it differs from the default, and every tenth other row
    plain = [{"text": t, "plain": True, "ids": enc.encode(t, allowed_special=set(), disallowed_special=())}
             for t in all_texts]
    plain = [p for i, (p, r) in enumerate(zip(plain, rows)) if p["ids"] != r["ids"] or i % 10 == 0]
    for r in rows + plain:
        assert enc.decode(r["ids"]) == r["text"]
    os.makedirs(os.path.join(DATA, "codegen25"), exist_ok=True)
    with open(os.path.join(DATA, "codegen25", "tokenizer_config.json"), "w") as f:
        # the two fields tpgen reads the class from (the published file has these; its other fields,
        # such as model_max_length, do not change the ids)
        json.dump({"auto_map": {"AutoTokenizer": ["tokenization_codegen25.CodeGen25Tokenizer", None]},
                   "tokenizer_class": "CodeGen25Tokenizer"}, f, indent=2)
        f.write("\n")
    # CodeGen2.5's config.json as published (a LLaMA): the directory is a checkpoint's without weights
    with open(os.path.join(DATA, "codegen25", "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
                   "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008,
                   "max_position_embeddings": 2048, "model_type": "llama", "num_attention_heads": 32,
                   "num_hidden_layers": 32, "pad_token_id": 0, "rms_norm_eps": 1e-06, "tie_word_embeddings": False,
                   "torch_dtype": "float32", "transformers_version": "4.29.2", "use_cache": True,
                   "vocab_size": 51200}, f, indent=2)
        f.write("\n")
    write = lambda name, rs: open(os.path.join(DATA, name), "w").write(
        "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rs))
    write("codegen25_cases.jsonl", rows)
    write("codegen25_plain.jsonl", plain)
    dec = []
    byte_ids = list(range(94, 188))  # single-byte tokens, many of them parts of UTF-8 characters
    for _ in range(300):
        ids = [rng.choice(byte_ids) if rng.random() < 0.3 else rng.randrange(51200) for _ in range(rng.randint(1, 30))]
        if rng.random() < 0.3:
            ids.append(50256)
        for skip in (False, True):
            kept = [i for i in ids if not (skip and i == 50256)]  # HF: all_special_ids = [eos = pad = 50256]
            dec.append({"ids": ids, "skip_special": skip, "text": enc.decode(kept)})
    write("codegen25_decode.jsonl", dec)
    print(f"wrote {len(rows)} + {len(plain)} encode rows, {len(dec)} decode rows under {DATA}")


if __name__ == "__main__":
    main()
