"""NPLM training and scoring on one GPU, ours against a straightforward PyTorch version.

    python bench/neural/gpu.py --data data/brown --out bench/results/gpu.json \\
        [--presets mlp1 modern]
        [--profile DIR]

For each preset at its recipe's batch size (256), on CUDA:
- the GPU's matrix-product rate for the output layer's shape (fp32 without TF32, and
  bf16), and for an 8192-cube bf16 product (the chip's ceiling);
- training words/s: a plain version (nn.Embedding, nn.Linear, F.cross_entropy, fp32,
  torch.optim.AdamW, the recipe's dropout) and ours (the preset's recipe: fused output
  NLL, bf16 products, fused AdamW), kernel by kernel and as nnlm train runs it (each
  update one CUDA graph, ``nnlm/neural/cuda_graph.py``); all given page-locked batches
  from host memory, as a data loader would;
- scoring words/s on 40,000 validation words in batches of 4,096: plain (log_softmax +
  gather, fp32) and ours (fp32 and bf16);
- with --remedies, training and scoring words/s of NCE (K = 25, 100), self-normalization
  (scored exactly and from raw y_w) and the LBL beside the full softmax;
- with --shapes, the graphed update's words/s and effective TFLOP/s at |V| = 14,118 and
  100,000 and batches of 256 to 8,192 (random ids): the per-GPU rates of the scaling model
  (bench/neural/scaling_model.py, docs/scaling.md);
- with --profile, the 20 busiest operators of 30 of our kernel-by-kernel training steps
  (torch.profiler).
Times follow a synchronize; each figure is the best of --rounds alternating rounds. Writes
JSON; never run by the tests (CI has no GPU).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nnlm import Vocabulary, count_words, read_stream
from nnlm.neural.networks.registry import network_config
from nnlm.neural.nplm_lm import NeuralLM
from nnlm.neural.presets import resolved
from nnlm.neural.training.train import TrainConfig, Trainer, output_counts

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

CUDA = torch.device("cuda")


class PlainNPLM(nn.Module):
    """The textbook version on a GPU: what a careful user writes first."""

    def __init__(self, V, n, m, h, direct, tied, dropout_x, dropout_h):
        super().__init__()
        self.emb = nn.Embedding(V, m)
        self.hidden = nn.Linear((n - 1) * m, h)
        self.direct = nn.Linear((n - 1) * m, V, bias=False) if direct else None
        self.tied = tied
        self.out = nn.Linear(h, V) if not tied else None
        self.bias = nn.Parameter(torch.zeros(V)) if tied else None
        self.drop_x, self.drop_h = nn.Dropout(dropout_x), nn.Dropout(dropout_h)

    def forward(self, ctx):
        x = self.drop_x(self.emb(ctx).flatten(1))
        a = self.drop_h(torch.tanh(self.hidden(x)))
        y = F.linear(a, self.emb.weight, self.bias) if self.tied else self.out(a)
        return y + self.direct(x) if self.direct is not None else y


def gpu_rate(fn, seconds: float) -> float:
    """Calls per second of ``fn`` (GPU work included: synchronized at both ends)."""
    for _ in range(10):
        fn()
    return harness.rate(fn, seconds, sync=torch.cuda.synchronize)


def pinned_batches(train, order: int, B: int, count: int = 64) -> list:
    """``count`` batches of B random training positions as (contexts, targets) in
    page-locked host memory, as nnlm train hands them to a GPU."""
    pos = np.random.default_rng(0).permutation(len(train))[: count * B]
    return [(torch.from_numpy(train.contexts(order, p).astype(np.int64)).pin_memory(),
             torch.from_numpy(train.ids[p].astype(np.int64)).pin_memory())
            for p in np.array_split(pos, count)]


def matmul_tflops(a_shape, b_shape, dtype) -> float:
    a = torch.randn(*a_shape, device=CUDA, dtype=dtype)
    b = torch.randn(*b_shape, device=CUDA, dtype=dtype)
    flops = 2 * a_shape[0] * a_shape[1] * b_shape[1]
    return flops * gpu_rate(lambda: a @ b, 1.0) / 1e12


def bench_preset(preset: str, vocab, train, valid, rounds: int, profile: Path | None) -> dict:
    arch, rec = resolved(preset)
    mc = network_config({"vocab_size": len(vocab), **arch})
    tc = TrainConfig(**rec)
    B, n = tc.batch_size, mc.order
    batches = pinned_batches(train, n, B)
    it = iter(range(10**12))

    def next_batch():
        return batches[next(it) % len(batches)]

    k = (n - 1) * mc.m
    width = mc.h + (k if mc.direct else 0)
    out = {"preset": preset, "batch": B, "vocab": len(vocab),
           "output_matmul_tflops_fp32": matmul_tflops((B, width), (width, len(vocab)),
                                                      torch.float32),
           "output_matmul_tflops_bf16": matmul_tflops((B, width), (width, len(vocab)),
                                                      torch.bfloat16)}

    plain = PlainNPLM(len(vocab), n, mc.m, mc.h, mc.direct, getattr(mc, "tied", False),
                      mc.dropout_x, getattr(mc, "dropout_h", 0.0)).to(CUDA)
    opt = torch.optim.AdamW(plain.parameters(), lr=tc.lr, weight_decay=tc.weight_decay)

    def plain_step():
        ctx, tgt = next_batch()
        ctx, tgt = ctx.to(CUDA, non_blocking=True), tgt.to(CUDA, non_blocking=True)
        loss = F.cross_entropy(plain(ctx), tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()

    trainer = Trainer.build(vocab, mc, tc, Path("/nonexistent"), log=lambda s: None, device=CUDA,
                      train_counts=output_counts(train, mc))

    graphed = trainer._graphed_step()  # the update as one CUDA graph, as nnlm train runs it
    assert graphed is not None, "this preset's update should be captured"

    def our_step_by_kernel():
        trainer.train_step(*next_batch())
        trainer.state.step += 1

    def our_step():
        graphed(*next_batch())
        trainer.state.step += 1
        if trainer.state.step % trainer.LOG_EVERY == 0:
            graphed.flush()

    ev_ctx = valid.contexts(n)[:40000]
    ev_tgt = valid.ids[:40000]
    lm = NeuralLM(vocab, trainer.model)

    @torch.no_grad()
    def plain_eval():
        plain.eval()
        for i in range(0, len(ev_tgt), 4096):
            ctx = torch.from_numpy(ev_ctx[i : i + 4096].astype(np.int64)).to(CUDA)
            tgt = torch.from_numpy(ev_tgt[i : i + 4096].astype(np.int64)).to(CUDA)
            F.log_softmax(plain(ctx), dim=1).gather(1, tgt[:, None]).cpu()
        plain.train()

    def our_eval(bf16):
        lm.bf16 = bf16
        lm.target_logprobs(ev_ctx, ev_tgt)

    trains = {"plain": plain_step, "ours_by_kernel": our_step_by_kernel, "ours": our_step}
    evals = {"plain": plain_eval, "ours_fp32": lambda: our_eval(False),
             "ours_bf16": lambda: our_eval(True)}
    for _ in range(rounds):
        for key, fn in trains.items():
            name = f"train_words_per_second_{key}"
            out[name] = max(out.get(name, 0.0), B * gpu_rate(fn, 3.0))
        for key, fn in evals.items():
            name = f"eval_words_per_second_{key}"
            out[name] = max(out.get(name, 0.0), len(ev_tgt) * gpu_rate(fn, 2.0))
    out["train_speedup_over_plain"] = (out["train_words_per_second_ours"]
                                       / out["train_words_per_second_plain"])
    for key in ("fp32", "bf16"):
        out[f"eval_speedup_{key}_over_plain"] = (out[f"eval_words_per_second_ours_{key}"]
                                                 / out["eval_words_per_second_plain"])
    out["train_speedup_of_cuda_graph"] = (out["train_words_per_second_ours"]
                                          / out["train_words_per_second_ours_by_kernel"])
    out["ms_per_step_ours"] = 1e3 * B / out["train_words_per_second_ours"]
    out["ms_per_step_plain"] = 1e3 * B / out["train_words_per_second_plain"]
    if profile is not None:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile

        with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(30):
                our_step_by_kernel()
            torch.cuda.synchronize()
        profile.mkdir(parents=True, exist_ok=True)
        (profile / f"profile_{preset}.txt").write_text(prof.key_averages().table(
            sort_by="self_cuda_time_total", row_limit=20, max_name_column_width=50) + "\n" +
            prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20,
                                      max_name_column_width=50))
    return out


def bench_shape(preset: str, V: int, B: int, seconds: float = 2.0) -> dict:
    """Words/s of the graphed update for a preset's network over |V| = V words at batch B,
    on uniformly random ids (the speed does not depend on the words): the per-GPU rate
    that docs/scaling.md's model takes for its projections."""
    arch, rec = resolved(preset)
    vocab = Vocabulary.from_counts({f"w{i}": 1 for i in range(V - 3)})  # + <s> </s> <unk>
    mc = network_config({"vocab_size": len(vocab), **arch})
    tc = TrainConfig(**{**rec, "batch_size": B})
    trainer = Trainer.build(vocab, mc, tc, Path("/nonexistent"), log=lambda s: None, device=CUDA)
    graphed = trainer._graphed_step()
    gen = torch.Generator().manual_seed(0)
    batches = [(torch.randint(3, len(vocab), (B, mc.order - 1), generator=gen).pin_memory(),
                torch.randint(3, len(vocab), (B,), generator=gen).pin_memory())
               for _ in range(8)]
    it = iter(range(10**12))

    def step():
        i = next(it)
        graphed(*batches[i % len(batches)])
        if i % 50 == 49:
            graphed.flush()

    wps = B * gpu_rate(step, seconds)
    k = mc.h + ((mc.order - 1) * mc.m if mc.direct else 0)
    flops_per_word = 6 * len(vocab) * k + 6 * mc.h * (mc.order - 1) * mc.m
    return {"preset": preset, "vocab": len(vocab), "batch": B, "words_per_second": wps,
            "ms_per_step": 1e3 * B / wps, "flops_per_word": flops_per_word,
            "effective_tflops": wps * flops_per_word / 1e12}


REMEDIES = {  # name: (preset, objective, extra training settings)
    "softmax": ("mlp1", "softmax", {}),
    "selfnorm": ("mlp1", "selfnorm", {}),
    "nce K=25": ("mlp1", "nce", {"noise_samples": 25}),
    "nce K=100": ("mlp1", "nce", {"noise_samples": 100}),
    "lbl": ("lbl", "softmax", {}),
}


def bench_remedies(vocab, train, valid, seconds: float = 3.0) -> list[dict]:
    """The output-layer remedies on the GPU (NCE, self-normalization, LBL): training
    words/s at batch 256 as nnlm train runs them (graphed where the gradients are dense),
    and scoring words/s: exact (fp32, bf16) and self-normalized (raw y_w, no sum)."""
    rows = [_bench_remedy(name, vocab, train, valid, seconds) for name in REMEDIES]
    base = rows[0]["train_words_per_second"]
    for row in rows:
        row["train_x_softmax"] = row["train_words_per_second"] / base
    return rows


def _bench_remedy(name: str, vocab, train, valid, seconds: float) -> dict:
    ev_ctx, ev_tgt = valid.contexts(6)[:40000], valid.ids[:40000]
    preset, objective, extra = REMEDIES[name]
    arch, rec = resolved(preset, objective=objective)
    mc = network_config({"vocab_size": len(vocab), **arch})
    tc = TrainConfig(**{**rec, "objective": objective, **extra})
    trainer = Trainer.build(vocab, mc, tc, Path("/nonexistent"), log=lambda s: None,
                      device=CUDA, train_counts=output_counts(train, mc))
    graphed = trainer._graphed_step()
    B, n = tc.batch_size, mc.order
    batches = pinned_batches(train, n, B)
    it = iter(range(10**12))

    def step():
        i = next(it)
        if graphed is not None:
            graphed(*batches[i % len(batches)])
            if i % 50 == 49:
                graphed.flush()
        else:
            trainer.train_step(*batches[i % len(batches)])
        trainer.state.step += 1

    row = {"name": name, "graphed": graphed is not None,
           "train_words_per_second": B * gpu_rate(step, seconds)}
    lm = NeuralLM(vocab, trainer.model)
    ctx = ev_ctx[:, ev_ctx.shape[1] - (n - 1):]
    for key, bf16, selfnorm in (("exact_fp32", False, False), ("exact_bf16", True, False),
                                ("self_normalized", False, True)):
        lm.bf16, lm.self_normalized = bf16, selfnorm
        row[f"score_words_per_second_{key}"] = len(ev_tgt) * gpu_rate(
            lambda: lm.target_logprobs(ctx, ev_tgt), 1.5)
    print(json.dumps(row), flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("data/brown"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/gpu.json"))
    ap.add_argument("--presets", nargs="+", default=["mlp1", "modern"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--profile", type=Path, default=None, help="write operator tables here")
    ap.add_argument("--remedies", action="store_true",
                    help="also time NCE, self-normalization and the LBL (train and score)")
    ap.add_argument("--shapes", action="store_true",
                    help="also time the update at |V| = 14,118 and 100,000, batch 256 to "
                         "8,192, for the scaling model")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench/neural/gpu.py: torch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as on the CPU
    torch.manual_seed(0)
    vocab = Vocabulary.from_counts(count_words(args.data / "train.txt"))
    train = read_stream(args.data / "train.txt", vocab)
    valid = read_stream(args.data / "valid.txt", vocab)
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cuda": torch.version.cuda,
           "matmul_tflops_bf16_8192": matmul_tflops((8192, 8192), (8192, 8192),
                                                    torch.bfloat16)}
    print(json.dumps(out), flush=True)
    for preset in args.presets:
        out[preset] = bench_preset(preset, vocab, train, valid, args.rounds, args.profile)
        print(json.dumps(out[preset]), flush=True)
    if args.remedies:
        out["remedies"] = bench_remedies(vocab, train, valid)
    if args.shapes:
        out["shapes"] = [bench_shape(p, V, B) for p in args.presets for V in (14118, 100_000)
                         for B in (256, 1024, 8192)]
        for row in out["shapes"]:
            print(json.dumps(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, out, indent=2)


if __name__ == "__main__":
    main()
