"""Why asynchronous training with Adam moments per worker ended its first epoch 2.2%
behind one process: the scheme's two departures from one process, each simulated alone
in one process, without races or parallelism.

With ``--workers 2`` and a worker's own moments, every update differs from one process's
in two ways:

- staleness: a worker's gradient is computed at the parameters it read before the other
  worker's update landed, so it is one update old when it is applied (delay 1 below);
- moments per worker: each worker's Adam moments see every other batch
  (moments 2 below: two optimizers, taking the batches in turn).

(The moments were the cost; ``nnlm.neural.parallel.hogwild`` now shares one set.)

Each scheme here runs the single-process trainer for one epoch of the mlp1 preset with
one, both or neither of them, for each seed, and writes the validation perplexities:

    NLTK_DATA=... python bench/neural/staleness.py --data data/brown [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from nnlm.neural.training import train as train_module
from nnlm.neural.training.run import train_from_files

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

SCHEMES = {"one process": (0, 1), "stale by one update": (1, 1),
           "moments per worker": (0, 2), "both (async without races)": (1, 2)}


def patched_trainer(delay: int, moments: int):
    """A Trainer whose updates apply gradients ``delay`` (0 or 1) updates old, with
    ``moments`` optimizers taking the batches in turn."""

    class Simulated(train_module.Trainer):
        def train_step(self, contexts, targets):
            if not hasattr(self, "_optimizers"):
                self._optimizers = [self.optimizer]
                for _ in range(moments - 1):
                    self._make_optimizer()
                    self._optimizers.append(self.optimizer)
                self._prev = None
                self._turn = 0
            self.optimizer = self._optimizers[self._turn % moments]
            self._turn += 1
            if not delay:
                return super().train_step(contexts, targets)
            params = list(self.model.parameters())
            current = [p.detach().clone() for p in params]
            if self._prev is not None:  # the gradient at the parameters one update old
                with torch.no_grad():
                    for p, old in zip(params, self._prev):
                        p.copy_(old)
            opt = self.optimizer
            step = opt.step

            def step_at_current(*args, **kwargs):
                with torch.no_grad():
                    for p, now in zip(params, current):
                        p.copy_(now)
                return step(*args, **kwargs)

            opt.step = step_at_current
            try:
                return super().train_step(contexts, targets)
            finally:
                del opt.step
                self._prev = current

    return Simulated


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--schemes", nargs="+", choices=list(SCHEMES), default=list(SCHEMES))
    ap.add_argument("--out", type=Path, default=Path("bench/results/staleness.json"))
    args = ap.parse_args()
    rows = []
    original = train_module.Trainer
    run_module = sys.modules["nnlm.neural.training.run"]
    for seed in args.seeds:
        for scheme in args.schemes:
            delay, moments = SCHEMES[scheme]
            run_module.Trainer = patched_trainer(delay, moments)
            t = time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp:
                result = train_from_files(args.data / "train.txt", args.data / "valid.txt",
                                          Path(tmp) / "run", preset="mlp1", arch={},
                                          train={"epochs": 1, "seed": seed}, threads=2,
                                          checkpoint_every=0, log=lambda s: None)
            run_module.Trainer = original
            rows.append({"scheme": scheme, "delay": delay, "moments": moments, "seed": seed,
                         "valid_ppl": result["best_valid"],
                         "seconds": time.perf_counter() - t})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    summary = []
    for scheme in args.schemes:
        ppl = [r["valid_ppl"] for r in rows if r["scheme"] == scheme]
        base = [r["valid_ppl"] for r in rows if r["scheme"] == args.schemes[0]]
        summary.append({"scheme": scheme, "valid_ppl_mean": sum(ppl) / len(ppl),
                        "ratio_to_first": sum(p / b for p, b in zip(ppl, base)) / len(ppl)})
    out = {"preset": "mlp1", "epochs": 1, "seeds": args.seeds, "rows": rows,
           "summary": summary}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, out)
    json.dump(summary, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
