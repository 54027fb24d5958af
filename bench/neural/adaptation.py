"""Test-time adaptation on Brown test: a network static, with the neural cache, with
dynamic evaluation, with both, and mixed with KN5, as JSON.

    python bench/neural/adaptation.py runs/awd --kn runs/kn5 --data data/brown \\
        [--out bench/results/adaptation.json] [--threads 2] [--device cuda] \\
        [--dynamic-rule rms|sgd]

Every setting is chosen on the validation text, as ``nnlm eval --cache --dynamic --valid``
chooses it: dynamic evaluation's step and decay (and the RMS rule's gradient statistics)
on all of it, then the cache's theta, lambda and L over the dynamically evaluated hidden
vectors. The rows with one of the two reuse the settings the row with both chose (the
searches are the same), and the mixture reuses them for its network, its weights fitted
again by EM on valid (``nnlm eval MIX --dynamic --cache --valid``). The static mixture is
``nnlm mix MODEL KN --valid VALID --per-bucket TRAIN``. Each row keeps its seconds and
the command that gives its number. Never run by the tests.
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from pathlib import Path

import torch

from nnlm.lm import evaluate
from nnlm.mixture import ContextBuckets, Mixture
from nnlm.models import load_model
from nnlm.neural.adaptation import adapt, adapted_mixture_logprobs, choose_settings
from nnlm.neural.runtime import configure_for_scoring
from nnlm.text.corpus import read_stream

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path


def ppl(logprobs) -> float:
    return math.exp(-float(logprobs.mean()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path)
    parser.add_argument("--kn", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=Path("data/brown"))
    parser.add_argument("--out", type=Path, default=Path("bench/results/adaptation.json"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="where the network runs (cpu, cuda)")
    parser.add_argument("--dynamic-rule", choices=("rms", "sgd"), default="rms",
                        help="dynamic evaluation's rule (default rms)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    lm, kn = load_model(args.model), load_model(args.kn)
    configure_for_scoring(lm, args.device)
    train, valid, test = (read_stream(args.data / f"{p}.txt", lm.vocab)
                          for p in ("train", "valid", "test"))
    m, t, v = args.model, args.data / "test.txt", args.data / "valid.txt"
    kn5 = evaluate(kn, test).perplexity
    rows: dict = {}
    device_flag = "" if args.device == "cpu" else f" --device {args.device}"

    def row(name: str, value: float, seconds: float, command: str, **extra) -> None:
        rows[name] = {"test_ppl": round(value, 2), "ratio_to_kn5": round(value / kn5, 4),
                      "seconds": round(seconds, 1), "command": command + device_flag, **extra}
        print(f"{name}: test {value:.2f} ({value / kn5:.3f} of KN5), {seconds:.0f} s",
              flush=True)

    started = time.perf_counter()
    row("static", evaluate(lm, test).perplexity, time.perf_counter() - started,
        f"nnlm eval {m} {t}")
    started = time.perf_counter()
    dyn, cache, report = choose_settings(lm, cache={}, dynamic={"rule": args.dynamic_rule},
                                         valid=valid, log=print)
    both = ppl(adapt(lm, test, dyn, cache))
    row("dynamic+cache", both, time.perf_counter() - started,
        f"nnlm eval {m} {t} --dynamic --cache --valid {v}", settings=report)
    given = (f"--dynamic-rule {dyn.rule} --dynamic-lr {dyn.lr:g} --dynamic-decay {dyn.decay:g}",
             f"--cache-theta {cache.theta:g} --cache-lambda {cache.lam:g} "
             f"--cache-size {cache.size}")
    started = time.perf_counter()
    row("dynamic", ppl(adapt(lm, test, dyn, None)), time.perf_counter() - started,
        f"nnlm eval {m} {t} --dynamic {given[0]}"
        + (f" --valid {v}" if dyn.rule == "rms" else ""), settings=dyn.to_dict())
    # the cache over the static network's vectors: a search of its own
    started = time.perf_counter()
    _, alone, report = choose_settings(lm, cache={}, valid=valid, log=print)
    row("cache", ppl(adapt(lm, test, None, alone)), time.perf_counter() - started,
        f"nnlm eval {m} {t} --cache --valid {v}", settings=report)
    started = time.perf_counter()
    buckets = ContextBuckets.from_stream(train, len(lm.vocab))
    mixture = Mixture([lm, kn], buckets=buckets)
    mixture.fit_weights(valid)
    row("mixed with KN5", evaluate(mixture, test).perplexity, time.perf_counter() - started,
        f"nnlm mix {m} {args.kn} --valid {v} --per-bucket {args.data / 'train.txt'} "
        "-o MIX; nnlm eval MIX " + str(t))
    started = time.perf_counter()
    lp, used = adapted_mixture_logprobs(
        mixture, test, valid, cache={"theta": cache.theta, "lam": cache.lam,
                                     "size": cache.size},
        dynamic={"lr": dyn.lr, "decay": dyn.decay, "segment": dyn.segment, "rule": dyn.rule},
        log=print)
    row("mixed with KN5, dynamic+cache", ppl(lp), time.perf_counter() - started,
        f"nnlm eval MIX {t} --dynamic {given[0]} --cache {given[1]} --valid {v}",
        settings={k: used[k] for k in ("dynamic", "cache", "mixture_weights")})
    out = {"model": str(m), "kn5_test_ppl": round(kn5, 2), "rows": rows,
           "threads": args.threads, "machine": platform.processor() or platform.machine(),
           "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
           "torch": torch.__version__}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, out)


if __name__ == "__main__":
    main()
