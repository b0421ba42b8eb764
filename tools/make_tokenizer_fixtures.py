#!/usr/bin/env python3
"""Makes the tokenizer's committed test data, and its Unicode class table, from HF.

Run once, from the repository root, with `transformers` and `tokenizers` installed:

    python3 tools/make_tokenizer_fixtures.py [--src ../shared/data/codegen-tokenizer]
                                             [--cases ../shared/data/codegen-tokenizer-cases.jsonl]

Two HF references are built and must agree on every text: transformers' CodeGen tokenizer loaded
from the directory, and a `tokenizers.Tokenizer` assembled by hand from vocab.json + merges.txt +
added_tokens.json + <|endoftext|>. Both must also reproduce the shared cases file. Then it writes:

  tests/data/tokenizer/codegen/         the tokenizer files (a model directory without weights)
  tests/data/tokenizer/cases.jsonl      the shared cases, as given
  tests/data/tokenizer/hf_corpus.jsonl  {"kind", "text", "ids"}: source chunks, edge cases, random text
  tests/data/tokenizer/hf_decode.jsonl  {"ids", "skip_special", "text"}: HF decode of id sequences
  tests/data/tokenizer/hf_truncate.jsonl {"text", "patterns", "keep"}: CodeGen truncate; keep in bytes
  tests/data/tokenizer/small/tokenizer.json  a small byte-level BPE trained by HF, saved by HF
  tests/data/tokenizer/small_corpus.jsonl, small_decode.jsonl  its encodings and decodings
  tokenizer/tokenizer_unicode_table.c      the pre-tokenizer's class of every code point, probed from
                                        HF's own regex engine (so the Unicode version is HF's)
"""
import argparse
import glob
import json
import os
import random
import re
import shutil
import sys

import class_table as ctab  # tools/class_table.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "tokenizer")
TABLE = os.path.join(ROOT, "tokenizer", "tokenizer_unicode_table.c")
SEED = 20261130


def build_refs(src):
    import transformers
    from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE

    hf = transformers.AutoTokenizer.from_pretrained(src)
    raw = Tokenizer(BPE.from_file(os.path.join(src, "vocab.json"), os.path.join(src, "merges.txt")))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    added = json.load(open(os.path.join(src, "added_tokens.json"), encoding="utf-8"))
    raw.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
    for content, tid in sorted(added.items(), key=lambda kv: kv[1]):
        raw.add_tokens([AddedToken(content, normalized=True, special=False)])
        assert raw.token_to_id(content) == tid, (content, tid, raw.token_to_id(content))
    print(f"references: {type(hf).__name__} (transformers {transformers.__version__}, {len(hf)} ids) "
          f"and tokenizers.Tokenizer ({raw.get_vocab_size(True)} ids)")

    def encode(text):
        a = hf(text, add_special_tokens=False)["input_ids"]
        b = raw.encode(text, add_special_tokens=False).ids
        if a != b:
            sys.exit(f"the two HF references disagree on {text[:80]!r}: {a[:20]} vs {b[:20]}")
        return a

    return hf, raw, encode


# ---------------------------------------------------------------- corpus

def source_files():
    """Real source files installed on this machine, by language."""
    import sysconfig
    stdlib = sysconfig.get_paths()["stdlib"]
    site = sysconfig.get_paths()["purelib"]
    langs = {
        "python": sorted(glob.glob(os.path.join(stdlib, "*.py"))),
        "c": sorted(glob.glob("/usr/include/*.h")),
        "javascript": sorted(p for p in glob.glob(os.path.join(site, "**", "*.js"), recursive=True) +
                             glob.glob("/usr/share/javascript/**/*.js", recursive=True)
                             if not p.endswith(".min.js")),
        "shell": sorted(p for p in glob.glob("/usr/bin/*") if os.path.isfile(p) and is_shell(p)),
    }
    return langs


def is_shell(path):
    try:
        with open(path, "rb") as f:
            head = f.read(32)
    except OSError:
        return False
    return head.startswith(b"#!/bin/sh") or head.startswith(b"#!/bin/bash") or head.startswith(b"#! /bin/sh")


def read_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def source_chunks(rng, per_lang, max_len):
    chunks = []
    for lang, files in source_files().items():
        texts = [t for t in (read_text(p) for p in files) if t and len(t) > 200]
        if not texts:
            sys.exit(f"no {lang} source files found for the corpus")
        for _ in range(per_lang):
            t = rng.choice(texts)
            n = rng.randint(100, max_len)
            s = rng.randint(0, max(0, len(t) - n))
            chunks.append((lang, t[s:s + n]))
    return chunks


def edge_cases():
    e = ["", " ", "\n", "\t", "\r\n", "a", "hello world", "Hello World", "def f(x):\n    return x + 1\n",
         "\n    return", "if x:\n\tpass\n", "class A:\n  def __init__(self):\n    self.x = 0\n"]
    for n in [1, 2, 3, 4, 8, 9, 16, 30, 31, 32, 33, 34, 62, 63, 64, 100]:
        e += [" " * n, " " * n + "x", "x" + " " * n, "x" + " " * n + "y", "\n" + " " * n + "return x",
              " " * n + "\n", "(" + " " * n + ")"]
    for n in [1, 2, 3, 8, 9, 10, 17, 18, 19, 100]:
        e += ["\t" * n, "\t" * n + "x", "x" + "\t" * n, "\n" + "\t" * n + "return"]
    e += ["\t \t  \t   x", " \t\t  \tx", "\t\t\t     pass", "  \t\n  \n\t\t\n", "\t " * 20, " \t" * 20,
          "x = {\n\t'a':  1,\n    'b':\t2\n}"]
    e += ["it's don't we're I've I'm we'll he'd", "IT'S DON'T WE'RE I'VE I'M WE'LL HE'D", "It'S dOn'T",
          "'s 't 're 've 'm 'll 'd", "''s", "x's", "x'S", "'", "''", "' s", " 's", "rock'n'roll", "O'Neil's",
          "'hello'", "\"it's\"", "print('it''s')", "'ll've'd"]
    e += ["123", "3.14159", "1,000,000", "0x1F", "x1 = 2y3", "٣٤٥ ۱۲ १२३ ０１２ Ⅻ ½ ²³", "１２３abc",
          "1e-10", "v2.0.1", "𝟘𝟙𝟚", "a1b2c3", " 42", "  42"]
    e += ["中文字符测试", "日本語のテキスト、カタカナ", "한국어 텍스트", "print('你好, 世界')", "# 注释\nx = 1",
          "Ελληνικά κείμενο", "Русский текст", "עברית", "العربية", "ไทย", "Tiếng Việt", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𐐷"]
    e += ["👍", "👨\u200d👩\u200d👧\u200d👦 family", "🏳️\u200d🌈", "👍🏽", "a😀b", "❤️", "😀😃😄", " 🎉🎉 done"]
    e += ["e\u0301", "n\u0303", "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǫ̗̻͌ͯ", "क्षि", "a\u0308", "\u0301", " \u0301x", "x\u0301\u0302y"]
    e += ["a\u00a0b", "\u00a0\u00a0x", " \u00a0x", "\u00a0 x", "a\u200bb", "\u200b", "\ufeffBOM", "x\u2028y\u2029z",
          "\u3000全角", "\u2009thin", "\u180e mongol", "\x0b\x0c", "\x1c\x1d\x1e\x1f", "\x85NEL", "x \u00a0 y",
          "\u2003\u2003x", "a \u200b b"]
    e += ["line1\r\nline2\r\n", "\r\n\r\n    x", "\r", "a\r\rb", "x\r\n\ty", " \r\n "]
    e += ["<|endoftext|>", "a<|endoftext|>b", "<|endoftext|><|endoftext|>", " <|endoftext|> ", "<|endoftext|",
          "<|endoftext|>   def", "<|endoftext|>\n\n", "x<|endoftext|", "<|endoftext|>" + " " * 33 + "x",
          "  <|endoftext|>  ", "<<|endoftext|>>", "<|endoftext|>'s"]
    e += ["\x00", "a\x00b", "\x7f", "~!@#$%^&*()_+{}|:\"<>?", "``` python", "#!/usr/bin/env python3",
          "a  b   c    d", "x = [ 1 ,  2 ]", "->", "=>", "!==", "...", "\\n", "/* */", "// x", "a\\b"]
    e += ["a" * 1000, "ab" * 300, "=" * 500, "0123456789" * 50, " " * 1000, "\n" * 100, "é" * 300,
          "😀" * 100, "camelCaseIdentifier" * 20, "\t" * 50 + " " * 50, "x" * 257, "xy" * 130]
    e += ["\ue000", "\U000F0000", "\ufffe", "\U0010FFFF", "\uffff", "\ufffd"]
    # code points assigned after Python 3.11's Unicode 14, classified by HF's newer tables
    e += ["\u1c89\u1c8a", "a\ua7cbb", "\U000105c0\U000105c1", "\U00010d40\U00010d41", "x\U000116d0"]
    return [("edge", t) for t in e]


WHITESPACE = ["\t", "\n", "\x0b", "\x0c", "\r", " ", "\x85", "\xa0", "\u1680", "\u2000", "\u2005", "\u200a",
              "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u180e", "\u200b", "\ufeff", "\x1c", "\x1f"]


def random_char(rng):
    r = rng.random()
    if r < 0.25:
        return chr(rng.randint(0x21, 0x7e))
    if r < 0.35:
        return " "
    if r < 0.42:
        return rng.choice(WHITESPACE)
    if r < 0.47:
        return rng.choice(["'s", "'t", "'re", "'ll", "'S", "'", "<|endoftext|>", "<|endof", "|>"])
    if r < 0.52:
        return rng.choice([" ", "\t"]) * rng.randint(2, 40)
    if r < 0.57:
        return chr(rng.randint(0x300, 0x36f))      # combining marks
    if r < 0.62:
        return chr(rng.randint(0x1f300, 0x1faff)) + rng.choice(["", "\u200d", "\ufe0f", "\U0001f3fd"])
    if r < 0.67:
        return chr(rng.randint(0x4e00, 0x9fff))
    if r < 0.72:
        return chr(rng.randint(0xa0, 0x24f))
    if r < 0.77:
        return rng.choice("0123456789٠١٢३४０１Ⅻ½²")
    if r < 0.90:
        c = rng.randint(0x80, 0xfffd)
        return chr(c) if not 0xd800 <= c <= 0xdfff else "x"
    c = rng.randint(0x10000, 0x10ffff)
    return chr(c)


def random_texts(rng, count, max_items):
    return [("random", "".join(random_char(rng) for _ in range(rng.randint(1, max_items)))) for _ in range(count)]


# ---------------------------------------------------------------- decode and truncate

def decode_cases(rng, raw, hf, n_ids, count):
    byte_tokens = [raw.token_to_id(c) for c in
                   [chr(c) for c in range(0xa1, 0x100) if c != 0xad] + ["Ă", "Ĳ", "ł", "Ń"]]
    byte_tokens = [t for t in byte_tokens if t is not None]
    special = [50256] + list(range(50257, 50295))
    cases = []
    for _ in range(count):
        ids = []
        for _ in range(rng.randint(0, 40)):
            r = rng.random()
            ids.append(rng.choice(byte_tokens) if r < 0.35 else rng.choice(special) if r < 0.5
                       else rng.randrange(n_ids))
        for skip in (False, True):
            a = raw.decode(ids, skip_special_tokens=skip)
            b = hf.decode(ids, skip_special_tokens=skip, clean_up_tokenization_spaces=False)
            if a != b:
                sys.exit(f"the HF references decode {ids} differently: {a!r} vs {b!r}")
            cases.append({"ids": ids, "skip_special": skip, "text": a})
    return cases


def truncate_cases(rng, hf):
    lines = ["def f(x):", "    return x", "print(x)", "print('a')", "# comment", "'''doc'''", "", "", "",
             "if __name__ == '__main__':", "class A:", "    pass", "<|endoftext|>", "x = '中文'  # 注释", "def g():",
             "    # inner", "printf('x')", " print(1)", "#!", "'''", "\t# tab", "deff = 1", "return 0"]
    pattern_sets = [[], ["^#"], ["^'''"], ["\n\n\n"], ["^#", re.escape("<|endoftext|>"), "^'''", "\n\n\n"],
                    ["^if"], ["\n\\s*\n\\s*\n"], ["^class"], ["x$"], ["^$"], ["中文"], ["\\w+\\(1\\)"]]
    cases = []
    for _ in range(150):
        text = "\n".join(rng.choice(lines) for _ in range(rng.randint(1, 14)))
        if rng.random() < 0.3:
            text += "\n"
        for pats in rng.sample(pattern_sets, 3):
            kept = hf.truncate(text, pats) if pats else text
            assert text.startswith(kept)
            cases.append({"text": text, "patterns": pats, "keep": len(kept.encode("utf-8"))})
    return cases


# ---------------------------------------------------------------- small trained tokenizer

def small_tokenizer(rng, chunks, out_dir):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>", "[MASK]"], show_progress=False)
    tok.train_from_iterator([t for _, t in chunks], trainer)
    # normalized (non-special) tokens: runs of spaces, one overlapping the special token, one made
    # only of alphabet characters (decoded through the byte alphabet by HF), one not in the vocab
    tok.add_tokens([AddedToken("    ", normalized=True), AddedToken("\t\t", normalized=True),
                    AddedToken("x<|", normalized=True), AddedToken("é", normalized=True),
                    AddedToken("ĠĠ", normalized=True), AddedToken("→", normalized=True)])
    tok.add_special_tokens([AddedToken("<sep>", special=True, normalized=False)])
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    return Tokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))


# ---------------------------------------------------------------- Unicode table

def unicode_table():
    """The pre-tokenizer class of every code point as HF's regex engine sees it: letter if "x"+c
    is one piece, number if "1"+c is, other if "!"+c is, whitespace if "\\t"+c is."""
    import unicodedata
    from tokenizers import pre_tokenizers
    pt = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True).pre_tokenize_str
    OTHER, LETTER, NUMBER, SPACE = 0, 1, 2, 3
    cls = bytearray(0x110000)
    for cp in range(0x110000):
        if 0xd800 <= cp <= 0xdfff:
            continue  # surrogates are never in valid UTF-8
        c = chr(cp)
        hits = [k for k, probe in ((LETTER, "x"), (NUMBER, "1"), (OTHER, "!"), (SPACE, "\t"))
                if len(pt(probe + c)) == 1]
        if len(hits) != 1:
            sys.exit(f"U+{cp:04X}: the class probes give {hits}")
        cls[cp] = hits[0]
    diff = sum(1 for cp in range(0x110000) if not 0xd800 <= cp <= 0xdfff and cls[cp] != (
        LETTER if unicodedata.category(chr(cp))[0] == "L" else NUMBER if unicodedata.category(chr(cp))[0] == "N"
        else SPACE if chr(cp).isspace() else OTHER))
    print(f"unicode table: {diff} code points classified differently by Python's Unicode "
          f"{unicodedata.unidata_version} (HF's tables are newer; HF's are used)")
    ctab.write_block_table(
        TABLE, "/* Generated by tools/make_tokenizer_fixtures.py from HF tokenizers' own regex engine: the\n"
        " * GPT-2 pre-tokenizer class (0 other, 1 \\p{L}, 2 \\p{N}, 3 \\s) of every code point. Do not edit. */\n",
        "tpk_class", cls)


# ---------------------------------------------------------------- main

def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"wrote {path} ({len(rows)} rows, {os.path.getsize(path) // 1024} KiB)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=os.path.join(ROOT, "..", "shared", "data", "codegen-tokenizer"))
    ap.add_argument("--cases", default=os.path.join(ROOT, "..", "shared", "data", "codegen-tokenizer-cases.jsonl"))
    ap.add_argument("--skip-table", action="store_true", help="do not regenerate the Unicode table (slow)")
    args = ap.parse_args()
    rng = random.Random(SEED)

    hf, raw, encode = build_refs(args.src)
    cases = [json.loads(line) for line in open(args.cases, encoding="utf-8")]
    for c in cases:
        if encode(c["text"]) != c["ids"]:
            sys.exit(f"the HF references do not reproduce {args.cases} on {c['text'][:80]!r}")
    print(f"the HF references reproduce all {len(cases)} shared cases")

    os.makedirs(os.path.join(OUT, "codegen"), exist_ok=True)
    for name in ["vocab.json", "merges.txt", "added_tokens.json", "special_tokens_map.json", "tokenizer_config.json"]:
        shutil.copyfile(os.path.join(args.src, name), os.path.join(OUT, "codegen", name))
    shutil.copyfile(args.cases, os.path.join(OUT, "cases.jsonl"))

    chunks = source_chunks(rng, per_lang=40, max_len=2500)
    corpus = chunks + edge_cases() + random_texts(rng, 400, 60)
    rows = [{"kind": k, "text": t, "ids": encode(t)} for k, t in corpus]
    for r in rows:  # the property the C test checks: HF decodes CodeGen's ids back to the text
        if raw.decode(r["ids"], skip_special_tokens=False) != r["text"]:
            sys.exit(f"HF does not round-trip {r['text'][:80]!r}")
    write_jsonl(os.path.join(OUT, "hf_corpus.jsonl"), rows)
    write_jsonl(os.path.join(OUT, "hf_decode.jsonl"), decode_cases(rng, raw, hf, len(hf), 150))
    write_jsonl(os.path.join(OUT, "hf_truncate.jsonl"), truncate_cases(rng, hf))

    small = small_tokenizer(rng, source_chunks(rng, per_lang=60, max_len=3000), os.path.join(OUT, "small"))
    small_texts = source_chunks(rng, per_lang=5, max_len=1500) + edge_cases() + random_texts(rng, 100, 40)
    small_texts += [("edge", t) for t in ["x<|endoftext|>", "ax<|b", "é→é", "ĠĠ  ĠĠ", "<sep>x<sep>", "[MASK]"]]
    rows = []
    for k, t in small_texts:
        r = {"kind": k, "text": t, "ids": small.encode(t, add_special_tokens=False).ids}
        decoded = small.decode(r["ids"], skip_special_tokens=False)
        if decoded != t:  # the quirky added tokens ("é", "ĠĠ") do not round-trip in HF either
            r["decoded"] = decoded
        rows.append(r)
    write_jsonl(os.path.join(OUT, "small_corpus.jsonl"), rows)
    n_small = small.get_vocab_size(with_added_tokens=True)
    small_dec = []
    for _ in range(100):
        ids = [rng.randrange(n_small) for _ in range(rng.randint(0, 30))]
        for skip in (False, True):
            small_dec.append({"ids": ids, "skip_special": skip, "text": small.decode(ids, skip_special_tokens=skip)})
    write_jsonl(os.path.join(OUT, "small_decode.jsonl"), small_dec)

    if not args.skip_table:
        unicode_table()


if __name__ == "__main__":
    main()
