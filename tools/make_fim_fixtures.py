"""Makes tests/data/tokenizer/fim_cases.jsonl: the fill-in-the-middle prompt ids of CodeGen2's
format (prefix <mask_1> suffix <|endoftext|> <sep> <mask_1>) as the reference libraries build them,
with the prefix and suffix encoded as plain text (token names typed in the user's code stay text):

  codegen2   tests/data/codegen2-f32/tokenizer.json through HF `tokenizers` with
             encode_special_tokens = True (transformers' split_special_tokens)
  codegen25  CodeGen2.5's tiktoken 0.4.0 encoding (tools/make_codegen25_fixtures.py) with no special
             token allowed (allowed_special=set(), disallowed_special=(): encode_ordinary); its space
             and tab runs are mergeable ranks, so they stay tokens

    /work/fxenv/bin/python tools/make_fim_fixtures.py
"""
import json
import os
import sys

from tokenizers import Tokenizer

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import make_codegen25_fixtures as cg25  # noqa: E402

CASES = [("def add(a, b):\n    ", "\n    return c\n"),
         ("a<eom>b<sep>c<mask_1>", "d<|endoftext|>e<mask_1>"),  # issue 34: 4 control ids, not 9
         ("x = 1\n", ""),  # the client is at the end of the file: still an infill
         ("", "y = 2\n"),
         ("<|endoftext|>", "<sep><eom>"),
         ("if x:\n\t\tpass\n        ", "    <fim_prefix>\n")]


def main():
    rows = []
    tok = Tokenizer.from_file(os.path.join(ROOT, "tests", "data", "codegen2-f32", "tokenizer.json"))
    ids = {n: tok.token_to_id(n) for n in ["<mask_1>", "<|endoftext|>", "<sep>", "<eom>"]}
    tok.encode_special_tokens = True
    plain = lambda s: tok.encode(s, add_special_tokens=False).ids if s else []
    for pre, suf in CASES:
        rows.append({"tokenizer": "codegen2", "prefix": pre, "suffix": suf, "stop": ids["<eom>"],
                     "ids": plain(pre) + [ids["<mask_1>"]] + plain(suf) +
                     [ids["<|endoftext|>"], ids["<sep>"], ids["<mask_1>"]]})
    enc = cg25.codegen25(cg25.gpt2_ranks(os.path.join(ROOT, "tests", "data", "tokenizer", "codegen")))
    plain = lambda s: enc.encode(s, allowed_special=set(), disallowed_special=())
    sp = lambda s: enc.encode_single_token(s)
    for pre, suf in CASES:
        rows.append({"tokenizer": "codegen25", "prefix": pre, "suffix": suf, "stop": sp("<eom>"),
                     "ids": plain(pre) + [sp("<mask_1>")] + plain(suf) + [sp("<|endoftext|>"), sp("<sep>"),
                                                                          sp("<mask_1>")]})
    path = os.path.join(ROOT, "tests", "data", "tokenizer", "fim_cases.jsonl")
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"wrote {len(rows)} rows to {path}")


if __name__ == "__main__":
    main()
