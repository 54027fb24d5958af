"""NPLM throughput on Brown, ours against a straightforward PyTorch version, in one run.

    python bench/neural/nplm.py --data data/brown --out bench/results/nplm.json [--quality-epochs 1]
        [--model runs/mlp1]

Measures, for the mlp1 architecture (n=5, m=60, h=50, direct) at batch 256, 2 threads:
- the machine's matrix-product rate (fp32 and bf16) for the output layer's shape;
- training words/s: a plain version (nn.Embedding, nn.Linear, F.cross_entropy, fp32,
  torch.optim.SGD) and ours (fused output NLL, sparse C rows, fp32 and bf16);
- achieved FLOP/s of each over the measured fp32 matrix-product rate;
- evaluation words/s with full softmax: plain (log_softmax + gather) vs ours, fp32 and bf16
  (with --model, the test perplexity of a trained NPLM scored both ways).
The plain version runs first with the system allocator, as a user would run it (the
``*_plain_system_allocator`` figures); from then on freed memory is kept for reuse
(nnlm.neural.allocator) and the versions run in alternating rounds (bench/harness.py),
each reporting the median of its rounds and each speed-up the median of the rounds'
ratios (a shared machine's slow spells otherwise land on whichever version runs then).
With --quality-epochs E it also trains mlp1 E epochs in fp32 and in bf16 (same seed) and
reports both validation perplexities. Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nnlm import Vocabulary, count_words, load_model, read_stream
from nnlm.neural.allocator import keep_freed_memory
from nnlm.neural.networks.network import NPLMConfig
from nnlm.neural.nplm_lm import NPLM
from nnlm.neural.training.train import TrainConfig, Trainer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path


class PlainNPLM(nn.Module):
    """The textbook version: what a careful user writes first."""

    def __init__(self, V, n, m, h):
        super().__init__()
        self.emb = nn.Embedding(V, m)
        self.hidden = nn.Linear((n - 1) * m, h)
        self.direct = nn.Linear((n - 1) * m, V, bias=False)
        self.out = nn.Linear(h, V)

    def forward(self, ctx):
        x = self.emb(ctx).flatten(1)
        return self.out(torch.tanh(self.hidden(x))) + self.direct(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("data/brown"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/nplm.json"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--quality-epochs", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds; the median counts")
    ap.add_argument("--model", type=Path, help="a trained NPLM: test perplexity, fp32 vs bf16")
    ap.add_argument("--precisions", nargs="+", choices=("fp32", "bf16"), default=None,
                    help="our variants to time (default: both where the CPU has bf16 "
                    "instructions, else fp32 only: emulated bf16 is 10-40x slower)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    vocab = Vocabulary.from_counts(count_words(args.data / "train.txt"))
    train = read_stream(args.data / "train.txt", vocab)
    valid = read_stream(args.data / "valid.txt", vocab)
    V, n, m, h, B = len(vocab), 5, 60, 50, args.batch
    k = (n - 1) * m
    flops_per_word = 6 * V * (k + h) + 6 * h * k  # fwd + 2 bwd products, output and hidden
    rng = np.random.default_rng(0)
    pos = rng.permutation(len(train))
    batches = [(torch.from_numpy(train.contexts(n, p).astype(np.int64)),
                torch.from_numpy(train.ids[p].astype(np.int64)))
               for p in np.array_split(pos[: 40 * B], 40)]
    it = iter(range(10**9))

    def next_batch():
        return batches[next(it) % len(batches)]

    out = {"vocab": V, "batch": B, "threads": args.threads, "torch": torch.__version__,
           "flops_per_word_train": flops_per_word}
    # the machine's matrix-product rate for the output layer's shape (forward product)
    z, w = torch.randn(B, k + h), torch.randn(V, k + h)
    zb, wb = z.bfloat16(), w.bfloat16()
    gemm = 2 * B * V * (k + h)
    out["matmul_gflops_fp32"] = gemm * harness.rate(lambda: z @ w.t()) / 1e9
    out["matmul_gflops_bf16"] = gemm * harness.rate(lambda: zb @ wb.t()) / 1e9
    print(json.dumps(out), flush=True)

    plain = PlainNPLM(V, n, m, h)
    opt = torch.optim.SGD(plain.parameters(), lr=0.1)

    def plain_step():
        ctx, tgt = next_batch()
        loss = F.cross_entropy(plain(ctx), tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()

    ev_ctx = torch.from_numpy(valid.contexts(n)[:40000].astype(np.int64))
    ev_tgt = torch.from_numpy(valid.ids[:40000].astype(np.int64))

    @torch.no_grad()
    def plain_eval():
        plain.eval()
        for i in range(0, len(ev_tgt), 256):
            lp = F.log_softmax(plain(ev_ctx[i : i + 256]), dim=1)
            lp.gather(1, ev_tgt[i : i + 256, None])
        plain.train()

    def eval_rate(fn, repeats=2):  # the faster of two passes over 40,000 words
        best = 0.0
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            best = max(best, len(ev_tgt) / (time.perf_counter() - t))
        return best

    # round 0: the plain version with the system allocator, as a user would run it
    out["train_words_per_second_plain_system_allocator"] = B * harness.rate(plain_step, 5)
    out["eval_words_per_second_plain_system_allocator"] = eval_rate(plain_eval)

    def our_step(trainer):
        trainer.train_step(*next_batch())
        trainer.state.step += 1

    keep_freed_memory()  # from here on, as nnlm's commands run (nnlm.neural.runtime)
    from nnlm.neural.runtime import native_bf16

    precisions = args.precisions or (["fp32", "bf16"] if native_bf16(torch.device("cpu"))
                                     else ["fp32"])
    out["precisions"] = precisions
    trainers = {}
    for key, bf16 in (("fp32", False), ("bf16", True)):
        if key not in precisions:
            continue
        cfg = NPLMConfig(vocab_size=V, order=n, m=m, h=h, direct=True)
        trainers[key] = Trainer.build(vocab, cfg, TrainConfig(batch_size=B, bf16=bf16),
                                Path("/tmp/x"), log=lambda s: None)
        with torch.no_grad():
            trainers[key].model.out_weight.normal_(0, 0.01)
    lm = NPLM(vocab, trainers[precisions[-1]].model)

    def ours_eval(bf16):
        lm.bf16 = bf16
        lm.target_logprobs(ev_ctx.numpy(), ev_tgt.numpy())

    train_fns = {"plain": plain_step, **{f"ours_{key}": (lambda key=key: our_step(
        trainers[key])) for key in precisions}}
    eval_fns = {"plain": plain_eval, **{f"ours_{key}": (lambda key=key: ours_eval(
        key == "bf16")) for key in precisions}}
    rates = {f"{kind}_words_per_second_{key}": [] for kind in ("train", "eval")
             for key in train_fns}
    for _ in range(args.rounds):  # alternate, so that slow spells of the machine hit all
        for key, fn in train_fns.items():
            rates[f"train_words_per_second_{key}"].append(B * harness.rate(fn, 4))
        for key, fn in eval_fns.items():
            rates[f"eval_words_per_second_{key}"].append(eval_rate(fn, 1))
    out.update({k: statistics.median(v) for k, v in rates.items()})
    out["spread"] = {k: (max(v) - min(v)) / statistics.median(v) for k, v in rates.items()}
    out["allocator_keeps_freed_memory"] = keep_freed_memory()
    for key in ("plain", *(f"ours_{p}" for p in precisions)):
        wps = out[f"train_words_per_second_{key}"]
        out[f"train_flops_over_fp32_matmul_{key}"] = wps * flops_per_word / (
            out["matmul_gflops_fp32"] * 1e9)
    for kind in ("train", "eval"):  # the median of the rounds' ratios, side by side
        for key in precisions:
            out[f"{kind}_speedup_{key}_over_plain"] = statistics.median(
                a / b for a, b in zip(rates[f"{kind}_words_per_second_ours_{key}"],
                                      rates[f"{kind}_words_per_second_plain"]))
    print(json.dumps(out), flush=True)

    if args.model:  # how far bf16 scoring moves a trained model's perplexity
        trained = load_model(args.model)
        test = read_stream(args.data / "test.txt", trained.vocab)
        ctx = test.contexts(trained.order)
        for bf16 in (False, True):
            trained.bf16 = bf16
            lp = trained.target_logprobs(ctx, test.ids)
            out[f"eval_test_ppl_{'bf16' if bf16 else 'fp32'}"] = float(np.exp(-lp.mean()))
        out["eval_ppl_bf16_over_fp32"] = out["eval_test_ppl_bf16"] / out["eval_test_ppl_fp32"]
    print(json.dumps(out), flush=True)

    if args.quality_epochs:
        for bf16 in (False, True):
            cfg = NPLMConfig(vocab_size=V, order=n, m=m, h=h, direct=True)
            tc = TrainConfig(batch_size=B, bf16=bf16, epochs=args.quality_epochs, seed=0)
            trainer = Trainer.build(vocab, cfg, tc, Path(f"/tmp/nplm_quality_{bf16}"),
                              log=lambda s: None)
            res = trainer.fit(train, valid)
            out[f"quality_valid_ppl_{'bf16' if bf16 else 'fp32'}"] = res["best_valid"]
        out["quality_bf16_over_fp32"] = (out["quality_valid_ppl_bf16"]
                                         / out["quality_valid_ppl_fp32"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, out, indent=2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
