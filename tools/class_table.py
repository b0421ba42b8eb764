"""The GPT-2 pre-tokenizer's class tables in C (0 other, 1 \\p{L}, 2 \\p{N}, 3 \\s of every code point):
HF's as 256-code-point blocks (tokenizer/tokenizer_unicode_table.c, tools/make_tokenizer_fixtures.py),
tiktoken 0.4.0's as the ranges where it differs from HF's (tokenizer/tokenizer_tiktoken_tables.c,
tools/make_codegen25_fixtures.py, which reads HF's back from the C file)."""
import re

N_CP = 0x110000


def write_block_table(path, comment, prefix, cls):
    """cls (N_CP classes) as {prefix}_block[N_CP >> 8] (the block of each 256 code points) and
    {prefix}_data[n][256] (the distinct blocks, U+0000..U+00FF first, one a line)."""
    blocks, index = [], []
    for b in range(N_CP >> 8):
        data = bytes(cls[b << 8:(b + 1) << 8])
        if data not in blocks:
            blocks.append(data)
        index.append(blocks.index(data))
    assert index[0] == 0 and len(blocks) <= 256
    with open(path, "w") as f:
        f.write(comment + "#include \"tokenizer_internal.h\"\n\n")
        f.write(f"const uint8_t {prefix}_block[0x110000 >> 8] = {{\n")
        for i in range(0, len(index), 32):
            f.write("    " + ",".join(str(x) for x in index[i:i + 32]) + ",\n")
        f.write("};\n\n")
        f.write(f"const uint8_t {prefix}_data[{len(blocks)}][256] = {{\n")
        for data in blocks:
            f.write("    {" + ",".join(str(x) for x in data) + "},\n")
        f.write("};\n")
    print(f"wrote {path} ({len(blocks)} distinct blocks)")


def read_block_table(path, prefix):
    """the N_CP classes of a table write_block_table wrote"""
    text = open(path).read()

    def numbers(name):
        m = re.search(re.escape(name) + r"\[[^=]*=\s*\{(.*?)\n\};", text, re.S)
        if not m:
            raise SystemExit(f"{path}: no table {name}")
        return [int(x) for x in re.findall(r"\d+", m.group(1))]
    index, flat = numbers(prefix + "_block"), numbers(prefix + "_data")
    assert len(index) == N_CP >> 8 and len(flat) % 256 == 0, path
    cls = bytearray(N_CP)
    for b, k in enumerate(index):
        cls[b << 8:(b + 1) << 8] = bytes(flat[k * 256:(k + 1) * 256])
    return cls


def diff_ranges(base, cls):
    """[(first, last, class)]: the runs of code points where cls differs from base, one class each"""
    out = []
    for cp in range(N_CP):
        if cls[cp] == base[cp]:
            continue
        if out and out[-1][1] == cp - 1 and out[-1][2] == cls[cp]:
            out[-1][1] = cp
        else:
            out.append([cp, cp, cls[cp]])
    return [tuple(r) for r in out]


def write_ranges(path, comment, name, ranges):
    """ranges as `const tpk_class_range {name}[]` and its count {name}_n, four a line"""
    with open(path, "w") as f:
        f.write(comment + "#include \"tokenizer_internal.h\"\n\n")
        f.write(f"const tpk_class_range {name}[{len(ranges)}] = {{\n")
        for i in range(0, len(ranges), 4):
            f.write("    " + " ".join("{0x%04X, 0x%04X, %d}," % r for r in ranges[i:i + 4]) + "\n")
        f.write("};\n")
        f.write(f"const size_t {name}_n = {len(ranges)};\n")
    print(f"wrote {path} ({len(ranges)} ranges, {sum(r[1] - r[0] + 1 for r in ranges)} code points)")
