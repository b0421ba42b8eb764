#!/usr/bin/env python3
"""Train models/codegen-tiny-py: a small CodeGenForCausalLM on the Python standard library.

    python3 tools/train_tiny.py --steps N [--out models/codegen-tiny-py]   # train, save, eval
    python3 tools/train_tiny.py --bench 4 --n-embd 128 --n-layer 4          # time a few steps

Data: every .py file of the running interpreter's standard library (sysconfig "stdlib"), minus
site-packages and test suites (test/, tests/, idle_test/), tokenized with the real CodeGen
tokenizer (tests/data/tokenizer/codegen, 51200-row vocabulary). Files are split, not windows:
a seeded shuffle of the sorted relative paths puts HELDOUT_FRAC of the files in the held-out set.
Each split is one stream of ids, files joined by <|endoftext|>. Training batches are windows of
--seq + 1 ids at seeded random offsets of the training stream; the held-out loss is the mean
next-token loss over fixed, evenly spaced --seq windows of the held-out stream (full softmax
over all 51200 ids).

Deterministic: torch.manual_seed, numpy Generator(seed), torch.use_deterministic_algorithms,
a fixed thread count (--threads, default 2). The same interpreter version gives the same data.

Writes to --out: model.safetensors (--dtype f16 by default), config.json, the tokenizer files,
train_log.json (loss curve, held-out losses, steps, tokens, wall time, data description) and
heldout.txt (the first held-out files' text, for tools/eval_tiny.py). A checkpoint
(--ckpt, fp32 weights + optimizer) is written every --ckpt-every steps and resumed from if present.
"""

import argparse
import glob
import hashlib
import json
import math
import os
import platform
import shutil
import sys
import sysconfig
import time

import numpy as np
import torch
import transformers
from transformers import AutoTokenizer, CodeGenConfig, CodeGenForCausalLM

import tool_args  # tools/

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TOKENIZER_DIR = os.path.join(ROOT, "tests", "data", "tokenizer", "codegen")
TOKENIZER_FILES = ["vocab.json", "merges.txt", "added_tokens.json", "special_tokens_map.json",
                   "tokenizer_config.json"]
EOT = 50256                      # <|endoftext|>
VOCAB = 51200                    # CodeGen's embedding rows (the tokenizer has 50295 ids)
HELDOUT_FRAC = 0.05
SKIP_DIRS = {"site-packages", "test", "tests", "idle_test"}
UNSEEN_BIAS_MARGIN = 2.0         # lm_head bias of never-seen ids: this far below the lowest seen


def die(msg):
    sys.exit(f"train_tiny.py: error: {msg}")


def stdlib_files():
    root = sysconfig.get_paths()["stdlib"]
    out = []
    for p in glob.glob(os.path.join(root, "**", "*.py"), recursive=True):
        rel = os.path.relpath(p, root)
        if SKIP_DIRS & set(rel.split(os.sep)[:-1]):
            continue
        out.append(rel)
    if not out:
        die(f"no .py files under {root}")
    return root, sorted(out)


def split_files(files, seed):
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(files))
    n_held = max(1, int(round(len(files) * HELDOUT_FRAC)))
    held = sorted(files[i] for i in order[:n_held])
    train = sorted(files[i] for i in order[n_held:])
    return train, held


def read_text(root, rel):
    with open(os.path.join(root, rel), "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def load_tokenizer():
    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    if tok.convert_tokens_to_ids("<|endoftext|>") != EOT:
        die(f"{TOKENIZER_DIR}: <|endoftext|> is not id {EOT}")
    return tok


def encode_stream(tok, root, files, cache):
    """All files' ids joined by <|endoftext|>, cached by the file list and contents."""
    h = hashlib.sha256()
    texts = []
    for rel in files:
        t = read_text(root, rel)
        texts.append(t)
        h.update(rel.encode() + b"\0" + t.encode() + b"\0")
    digest = h.hexdigest()[:16]
    path = os.path.join(cache, f"stream-{digest}.npy")
    if os.path.exists(path):
        return np.load(path), digest
    ids = []
    for t in texts:
        ids.extend(tok(t)["input_ids"])
        ids.append(EOT)
    arr = np.array(ids, dtype=np.int32)
    os.makedirs(cache, exist_ok=True)
    np.save(path, arr)
    return arr, digest


def make_config(a):
    return CodeGenConfig(
        vocab_size=VOCAB, n_positions=a.n_positions, n_ctx=a.n_positions, n_embd=a.n_embd,
        n_layer=a.n_layer, n_head=a.n_head, rotary_dim=a.rotary_dim, n_inner=None,
        activation_function="gelu_new", layer_norm_epsilon=1e-5, initializer_range=0.02,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=False,
        bos_token_id=EOT, eos_token_id=EOT, architectures=["CodeGenForCausalLM"])


def batch_loss(model, x, y):
    """Mean next-token cross entropy over all 51200 logits; x, y: [B, T]."""
    logits = model(input_ids=x).logits                   # [B, T, V]
    return torch.nn.functional.cross_entropy(logits.float().reshape(-1, VOCAB), y.reshape(-1))


class SeenVocab:
    """Training softmax over the ids that occur in the training stream only (about 18k of 51200:
    the lm_head matmul and the softmax dominate the step time, so this roughly halves it).
    Ids that never occur in training get no gradient either way; fix_unseen() gives them zero
    lm_head rows and a bias below every trained one, so the saved model's full 51200-way softmax
    (which the held-out loss, HF and tpgen use) puts little mass on them."""

    def __init__(self, train):
        seen = np.unique(train)
        self.seen = torch.from_numpy(seen.astype(np.int64))                   # [S]
        mask = np.ones(VOCAB, dtype=bool)
        mask[seen] = False
        self.unseen = torch.from_numpy(np.nonzero(mask)[0].astype(np.int64))   # [V - S]
        remap = np.full(VOCAB, -1, dtype=np.int64)
        remap[seen] = np.arange(len(seen))
        self.remap = torch.from_numpy(remap)                                   # [V]

    def loss(self, model, x, y):
        h = model.transformer(input_ids=x)[0]                                 # [B, T, E]
        w = model.lm_head.weight[self.seen]                                   # [S, E]
        b = model.lm_head.bias[self.seen]                                     # [S]
        logits = h @ w.t() + b                                                # [B, T, S]
        return torch.nn.functional.cross_entropy(logits.reshape(-1, len(self.seen)),
                                                 self.remap[y].reshape(-1))

    @torch.no_grad()
    def fix_unseen(self, model, margin=UNSEEN_BIAS_MARGIN):
        model.lm_head.weight[self.unseen] = 0.0
        model.lm_head.bias[self.unseen] = model.lm_head.bias[self.seen].min() - margin


def heldout_windows(held, seq, n):
    """n evenly spaced, non-overlapping windows of seq + 1 ids of the held-out stream."""
    usable = (len(held) - 1) // seq
    if usable < n:
        die(f"held-out stream has {len(held)} ids, fewer than {n} windows of {seq}")
    starts = [int(i * usable / n) * seq for i in range(n)]
    return np.stack([held[s:s + seq + 1] for s in starts]).astype(np.int64)


@torch.no_grad()
def evaluate(model, windows, batch):
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(windows), batch):
        w = torch.from_numpy(windows[i:i + batch])
        n = w[:, 1:].numel()
        total += float(batch_loss(model, w[:, :-1], w[:, 1:])) * n
        count += n
    model.train()
    return total / count


def lr_at(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    p = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))


def size_bytes(cfg, dtype_bytes):
    E, L, inner = cfg.n_embd, cfg.n_layer, 4 * cfg.n_embd
    per_layer = 2 * E + 3 * E * E + E * E + E * inner + inner + inner * E + E
    return (VOCAB * E * 2 + VOCAB + 2 * E + L * per_layer) * dtype_bytes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "codegen-tiny-py"))
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "train-tiny-cache"))
    ap.add_argument("--ckpt", default=None, help="checkpoint file (default: CACHE/ckpt.pt)")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--bench", type=int, default=0, help="only time this many steps, save nothing")
    tool_args.add_numbers(ap, n_embd=128, n_layer=4, n_head=4, rotary_dim=16, n_positions=512, seq=512, batch=4,
                          lr=3e-3, warmup=30, weight_decay=0.01, eval_every=100)
    ap.add_argument("--eval-windows", type=int, default=8, help="during training")
    ap.add_argument("--final-eval-windows", type=int, default=48)
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--dtype", choices=["f16", "bf16"], default="f16")
    ap.add_argument("--max-bytes", type=int, default=32 * 1024 * 1024)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--allow-steps-change", action="store_true",
                    help="resume a checkpoint with another --steps (recorded in train_log.json)")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if a.seq > a.n_positions:
        die(f"--seq {a.seq} exceeds --n-positions {a.n_positions}")

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    cfg = make_config(a)
    est = size_bytes(cfg, 2)
    tok_bytes = sum(os.path.getsize(os.path.join(TOKENIZER_DIR, f)) for f in TOKENIZER_FILES)
    if est + tok_bytes > a.max_bytes:
        die(f"n_embd {a.n_embd}, {a.n_layer} layers: {est + tok_bytes} bytes at 16 bits with the "
            f"tokenizer, over --max-bytes {a.max_bytes}")

    t0 = time.time()
    tok = load_tokenizer()
    root, files = stdlib_files()
    train_files, held_files = split_files(files, a.seed)
    train, train_digest = encode_stream(tok, root, train_files, a.cache)
    held, held_digest = encode_stream(tok, root, held_files, a.cache)
    print(f"data: {len(train_files)} train files ({len(train)} ids), {len(held_files)} held-out "
          f"({len(held)} ids) from {root}; {time.time() - t0:.0f}s", flush=True)

    model = CodeGenForCausalLM(cfg)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: n_embd {a.n_embd}, n_layer {a.n_layer}, n_head {a.n_head}, rotary_dim "
          f"{a.rotary_dim}, {n_params / 1e6:.2f}M params, ~{est / 2**20:.1f} MiB at 16 bits",
          flush=True)

    sv = SeenVocab(train)
    print(f"training softmax over the {len(sv.seen)} ids seen in training", flush=True)
    rng = np.random.default_rng(a.seed + 1)
    hw_small = heldout_windows(held, a.seq, a.eval_windows)

    if a.bench:
        times = []
        for s in range(a.bench):
            starts = rng.integers(0, len(train) - a.seq - 1, a.batch)
            xb = torch.from_numpy(np.stack([train[i:i + a.seq + 1] for i in starts]).astype(np.int64))
            t = time.time()
            loss = sv.loss(model, xb[:, :-1], xb[:, 1:])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            times.append(time.time() - t)
            print(f"bench step {s}: {times[-1]:.2f}s loss {loss.item():.3f}", flush=True)
        med = sorted(times[1:] or times)[len(times[1:] or times) // 2]
        print(f"BENCH n_embd {a.n_embd} n_layer {a.n_layer} batch {a.batch} seq {a.seq}: "
              f"median {med:.2f}s/step, {a.batch * a.seq / med:.0f} tokens/s", flush=True)
        return

    ckpt = a.ckpt or os.path.join(a.cache, "ckpt.pt")
    log = {"curve": [], "heldout": []}
    step, wall_before = 0, 0.0
    if os.path.exists(ckpt):
        st = torch.load(ckpt, weights_only=False)
        ignore = ("ckpt", "allow_steps_change", "out")     # where it writes does not matter
        now = {k: v for k, v in vars(a).items() if k not in ignore}
        old = {k: v for k, v in st["args"].items() if k not in ignore}
        if a.allow_steps_change and old["steps"] != a.steps:
            # A shorter (or longer) run than planned, continuing from the checkpoint: the lr
            # schedule follows the new --steps from here on; the log records where it changed.
            st["log"].setdefault("steps_changes", []).append([st["step"], old["steps"], a.steps])
            old["steps"] = a.steps
        if old != now:
            die(f"{ckpt} was written with other arguments; remove it to start over")
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        rng.bit_generator.state = st["rng"]
        step, log, wall_before = st["step"], st["log"], st["wall"]
        print(f"resumed from {ckpt} at step {step}", flush=True)

    t_start = time.time()
    while step < a.steps:
        starts = rng.integers(0, len(train) - a.seq - 1, a.batch)
        xb = torch.from_numpy(np.stack([train[i:i + a.seq + 1] for i in starts]).astype(np.int64))
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        loss = sv.loss(model, xb[:, :-1], xb[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        wall = wall_before + time.time() - t_start
        log["curve"].append([step, round(loss.item(), 4)])
        if step % 10 == 0:
            print(f"step {step}/{a.steps} loss {loss.item():.3f} lr {lr_at(step - 1, a):.2e} "
                  f"wall {wall:.0f}s", flush=True)
        if step % a.eval_every == 0 or step == a.steps:
            sv.fix_unseen(model)
            hl = evaluate(model, hw_small, a.batch)
            log["heldout"].append([step, round(hl, 4)])
            print(f"step {step}: held-out loss ({a.eval_windows} windows) {hl:.3f}", flush=True)
        if step % a.ckpt_every == 0 or step == a.steps:
            tmp = ckpt + ".tmp"
            torch.save({"args": {k: v for k, v in vars(a).items()
                                 if k not in ("ckpt", "allow_steps_change")},
                        "model": model.state_dict(), "opt": opt.state_dict(),
                        "rng": rng.bit_generator.state, "step": step, "log": log,
                        "wall": wall}, tmp)
            os.replace(tmp, ckpt)
    train_wall = wall_before + time.time() - t_start

    # Save in 16 bits, then measure the held-out loss of the saved weights as HF loads them.
    os.makedirs(a.out, exist_ok=True)
    for f in os.listdir(a.out):
        if f.endswith(".safetensors") or f in ("config.json", "generation_config.json"):
            os.remove(os.path.join(a.out, f))
    sv.fix_unseen(model)
    dt = torch.float16 if a.dtype == "f16" else torch.bfloat16
    model.to(dt).save_pretrained(a.out)
    gen_cfg = os.path.join(a.out, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)
    for f in TOKENIZER_FILES:
        shutil.copy(os.path.join(TOKENIZER_DIR, f), os.path.join(a.out, f))
    ref = CodeGenForCausalLM.from_pretrained(a.out, dtype=torch.float32).eval()
    hw = heldout_windows(held, a.seq, a.final_eval_windows)
    final = evaluate(ref, hw, a.batch)

    # Held-out text for tools/eval_tiny.py: whole held-out files, first ones in sorted order,
    # up to ~64 KiB.
    text, used = "", []
    for rel in held_files:
        t = read_text(root, rel)
        if len(text) + len(t) > 65536 and used:
            continue
        text += t + "\n"
        used.append(rel)
        if len(text) > 32768:
            break
    with open(os.path.join(a.out, "heldout.txt"), "w") as f:
        f.write(text)

    summary = {
        "command": "python3 " + " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
        "python": platform.python_version(), "torch": torch.__version__,
        "transformers": transformers.__version__, "stdlib": root,
        "train_files": len(train_files), "train_ids": int(len(train)),
        "train_digest": train_digest,
        "heldout_files": held_files, "heldout_ids": int(len(held)), "heldout_digest": held_digest,
        "heldout_txt_files": used,
        "shape": {k: getattr(cfg, k) for k in ("vocab_size", "n_embd", "n_layer", "n_head",
                                                "rotary_dim", "n_positions")},
        "params": n_params, "dtype": a.dtype, "seed": a.seed, "threads": a.threads,
        "steps": a.steps, "batch": a.batch, "seq": a.seq, "lr": a.lr,
        "tokens_seen": a.steps * a.batch * a.seq, "train_wall_s": round(train_wall, 1),
        "final_train_loss_avg_last_20": round(float(np.mean([c[1] for c in log["curve"][-20:]])), 4),
        "heldout_loss": round(final, 4), "heldout_ppl": round(math.exp(final), 3),
        "heldout_eval_tokens": int(hw[:, 1:].size),
        "steps_changes": log.get("steps_changes", []),
        "curve": log["curve"], "heldout_curve": log["heldout"],
    }
    with open(os.path.join(a.out, "train_log.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"done: {a.steps} steps, {summary['tokens_seen']} tokens, {train_wall:.0f}s; held-out "
          f"loss {final:.4f} (ppl {math.exp(final):.2f}) over {summary['heldout_eval_tokens']} "
          f"tokens of the saved {a.dtype} weights", flush=True)


if __name__ == "__main__":
    main()
