"""The batched whole-vocabulary step and the beam search on it, against the per-call path.

    python bench/decoding/advance.py --model runs/kn5 --data data/brown [--device cuda] [--network]

On Brown KN5 (|V| = 14,118), for contexts taken from the test text as a decoder meets
them:
- per call: ``BaseScore`` of the compiled ``nnlm.kenlm`` path (the fastest per-call path
  nnlm has; the kenlm module too where it is installed), microseconds an entry of B x V;
- batched: ``nnlm.Decoder.advance(states)`` (numpy rows), and ``nnlm.decoding.dense`` (torch,
  float32) on the CPU and, with ``--device cuda``, on the GPU: nanoseconds an entry and
  the speed-up over the per-call path at B = 1 ... 1024;
- with ``--network``: the same step for a ``modern``-shaped network (n = 6, m = h = 256,
  two updates on Brown train: its speed, not its quality);
- the CTC beam search of ``nnlm.decoding.ctc`` over word-level emissions made from test
  sentences (seeded noise), with and without KN5, the LM weight and word bonus tuned on
  valid sentences: word error rate and time a sentence.

Rounds alternate the forms, in one process; JSON to ``--out``. Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import torch
from decoders import errors  # bench/decoding/decoders.py, beside this script

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path


def seconds_a_call(fn, seconds: float = 1.0, sync=None) -> float:
    """Seconds a call, the best of 3 rounds of at least ``seconds`` / 3; ``sync`` (a GPU's
    synchronize) after every call, as a decoder reads each step's scores."""
    call = fn if sync is None else (lambda: (fn(), sync()))
    call()
    return min(1 / harness.rate(call, seconds / 3) for _ in range(3))


def decoder_contexts(lm, path: Path, n: int) -> np.ndarray:
    """The first ``n`` contexts a left-to-right decoder meets in the text at ``path``."""
    from nnlm.text.corpus import read_stream

    stream = read_stream(path, lm.vocab)
    for contexts, _ in stream.batches(lm.order, n):
        return np.ascontiguousarray(contexts[:n])
    raise SystemExit(f"{path}: empty")


def emissions(words: list[int], V: int, rng, noise: float) -> torch.Tensor:
    """Word-level CTC frames for a sentence: each word held 1-2 frames, a blank between,
    and Gaussian noise of scale ``noise`` on the logits (the word's own logit +5, the
    blank's +1): an acoustic model unsure enough that the LM matters."""
    frames = []
    for w in words:
        for _ in range(int(rng.integers(1, 3))):
            frames.append(w)
        frames.append(V)  # blank
    logits = rng.normal(scale=noise, size=(len(frames), V + 1))
    logits[np.arange(len(frames)), frames] += 5.0
    logits[:, V] += 1.0
    return torch.log_softmax(torch.from_numpy(logits), 1).float()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, default=Path("runs/kn5"))
    p.add_argument("--data", type=Path, default=Path("data/brown"))
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--network", action="store_true", help="also a modern-shaped network")
    p.add_argument("--sentences", type=int, default=40, help="for the beam search")
    p.add_argument("--beam", type=int, default=8)
    p.add_argument("--noise", type=float, default=1.0)
    p.add_argument("--lm", action="append", default=[], metavar="NAME=PATH",
                   help="another model to decode with (a network, a mixture), beside KN5")
    p.add_argument("--out", type=Path, default=Path("bench/results/advance.json"))
    args = p.parse_args()

    import nnlm
    import nnlm.kenlm as nk
    from nnlm.decoding.ctc import beam_search
    from nnlm.decoding.dense import TensorBackoff, tensor_lm
    from nnlm.models import load_model

    lm = load_model(args.model)
    V = len(lm.vocab)
    model = nnlm.Decoder(lm)
    out: dict = {"python": platform.python_version(), "machine": platform.machine(),
                 "torch": torch.__version__, "threads": torch.get_num_threads(),
                 "model": str(args.model), "vocab": V, "order": lm.order}
    if args.device == "cuda":
        out["gpu"] = torch.cuda.get_device_name()

    # per call: nnlm.kenlm's compiled BaseScore over every word after a few states
    per_call = {}
    kmodel = nk.Model(str(args.model))
    words = lm.vocab.words[2:]  # every word but <unk> and <s>

    def sweep(m, state_type):
        s, o = state_type(), state_type()
        m.BeginSentenceWrite(s)
        for w in words:
            m.BaseScore(s, w, o)

    per_call["nnlm_kenlm_us"] = seconds_a_call(lambda: sweep(kmodel, nk.State)) / len(words) * 1e6
    try:
        import kenlm  # the oracle's speed where it is installed

        arpa = args.model.with_suffix(".arpa")
        if arpa.exists():
            km = kenlm.Model(str(arpa))
            per_call["kenlm_us"] = seconds_a_call(lambda: sweep(km, kenlm.State)) / len(words) * 1e6
    except ImportError:
        pass
    out["per_call"] = per_call
    base_ns = per_call["nnlm_kenlm_us"] * 1000

    rows = []
    contexts = decoder_contexts(lm, args.data / "test.txt", 1024)
    cpu_step = TensorBackoff(lm)
    gpu_step = TensorBackoff(lm, "cuda") if args.device == "cuda" else None
    for B in (1, 8, 64, 256, 1024):
        ctx = contexts[:B]
        states = []
        for c in ctx:
            s = nnlm.DecoderState(tuple(int(x) for x in c))
            states.append(s)
        row = {"B": B}
        row["numpy_ns"] = seconds_a_call(lambda s=states: model.advance(s)) / (B * V) * 1e9
        tctx = torch.from_numpy(ctx)
        row["torch_cpu_ns"] = seconds_a_call(lambda c=tctx: cpu_step.advance(c)) / (B * V) * 1e9
        if gpu_step is not None:
            gctx = tctx.cuda()
            row["torch_cuda_ns"] = seconds_a_call(lambda c=gctx: gpu_step.advance(c),
                                         sync=torch.cuda.synchronize) / (B * V) * 1e9
        for key in [k for k in row if k.endswith("_ns")]:
            row[key.replace("_ns", "_speedup")] = base_ns / row[key]
        rows.append(row)
        print(json.dumps(row), flush=True)
    out["backoff_step"] = rows

    if args.network:
        import tempfile

        small_valid = Path(tempfile.mkdtemp()) / "valid.txt"  # validation is not the point
        small_valid.write_text("\n".join((args.data / "valid.txt").read_text()
                                         .splitlines()[:20]) + "\n")
        net = nnlm.train(args.data / "train.txt", small_valid, preset="modern",
                         max_steps=2, threads=torch.get_num_threads())
        step = tensor_lm(net, args.device)
        net_contexts = decoder_contexts(net, args.data / "test.txt", 256)
        nrows = []
        for B in (1, 8, 64, 256):
            tctx = torch.from_numpy(net_contexts[:B]).to(args.device)
            sync = torch.cuda.synchronize if args.device == "cuda" else None
            ns = seconds_a_call(lambda c=tctx: step.advance(c), sync=sync) / (B * V) * 1e9
            nrows.append({"B": B, "device": args.device, "ns": ns})
            print(json.dumps(nrows[-1]), flush=True)
        out["network_step"] = {"preset": "modern", "rows": nrows}

    # the beam search on word-level emissions: the LM weight and word bonus tuned on
    # valid sentences (a small grid, on the CPU), then test sentences decoded with them
    def sentences(path, n):
        lines = path.read_text().splitlines()
        return [ln for ln in lines if 5 <= len(ln.split()) <= 25][:n]

    index = lm.vocab.index

    def decode_all(picked, weight, bonus, device, step):
        edits = total = 0
        t0 = time.perf_counter()
        for ln in picked:
            ref = [index.get(w, 0) for w in ln.split()]
            seed = zlib.crc32(ln.encode("utf-8"))
            lp = emissions(ref, V, np.random.default_rng(seed), args.noise)
            hyp = beam_search(lp.to(device), step, beam=args.beam, lm_weight=weight,
                              word_bonus=bonus)[0].words
            e, n = errors(ref, hyp), len(ref)
            edits, total = edits + e, total + n
        return edits / total, (time.perf_counter() - t0) / len(picked)

    dev = sentences(args.data / "valid.txt", max(10, args.sentences // 2))
    test = sentences(args.data / "test.txt", args.sentences)
    lms = {"no LM": lm, "KN5": lm}
    for spec in args.lm:
        name, _, path = spec.partition("=")
        lms[name] = load_model(path)
    fused = [(w, b) for w in (0.3, 0.6, 1.0, 1.5) for b in (0.0, 1.0, 2.0, 3.0)]
    decode = {}
    for name, model_ in lms.items():
        grid = [(0.0, b) for b in (-1.0, 0.0, 1.0)] if name == "no LM" else fused
        cpu = tensor_lm(model_, "cpu")
        tuned = min(grid, key=lambda wb, c=cpu: decode_all(dev, *wb, "cpu", c)[0])
        for device in ["cpu"] + (["cuda"] if args.device == "cuda" else []):
            step = cpu if device == "cpu" else tensor_lm(model_, device)
            err, seconds = decode_all(test, *tuned, device, step)
            decode[f"{name}, {device}"] = {"wer": err, "seconds_a_sentence": seconds,
                                           "lm_weight": tuned[0], "word_bonus": tuned[1]}
            print(name, device, decode[f"{name}, {device}"], flush=True)
    out["beam_search"] = {"sentences": len(test), "tuned_on": len(dev), "beam": args.beam,
                          "noise": args.noise, "results": decode}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, out)


if __name__ == "__main__":
    main()
