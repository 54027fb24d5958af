"""``nnlm demo``: the paper's argument on the built-in toy world, in about a minute.

Prepares the toy-world corpus, trains a Kneser-Ney trigram and a small NPLM, prints
their test perplexities, the log-probability each gives to sentences whose (subject,
activity) pair never occurs in train, the nearest neighbours of a few words in the
learned feature space, a few generated sentences, and where everything was written.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..lm import evaluate
from ..models import load_model, save_model
from ..ngram.estimate.kneser_ney import KneserNey
from ..text.corpus import brown_available, read_corpus, read_stream, write_splits
from ..text.toyworld import HELD_OUT_EXAMPLES, SEEN_EXAMPLE, toy_world
from .workdir import claim_workdir


def run_demo(workdir: Path, out=print, epochs: int = 6, threads: int | None = None) -> dict:
    from ..neural.training.run import train_from_files

    workdir = claim_workdir(workdir, "demo")
    data = workdir / "data"
    stats = write_splits(data, toy_world(seed=0))
    out(f"toy world corpus in {data}/: " + ", ".join(
        f"{name} {s.lines:,} sentences" for name, s in stats.items()))
    out("  some (subject, activity) pairs, e.g. dog + running, occur only in test\n")

    vocab, train = read_corpus(data / "train.txt")
    test = read_stream(data / "test.txt", vocab)
    kn = KneserNey(vocab, 3, discount_fallback=True).fit(train)
    kn_dir = save_model(kn, workdir / "kn3")
    out(f"Kneser-Ney trigram: {kn_dir}/")

    nplm_dir = workdir / "nplm"
    if nplm_dir.exists():
        shutil.rmtree(nplm_dir)
    out("training a small NPLM (n=3, m=8, h=16) ...")
    train_from_files(data / "train.txt", data / "valid.txt", nplm_dir, preset="tiny",
                     train={"epochs": epochs}, threads=threads, log=lambda s: out("  " + s))
    nplm = load_model(nplm_dir)
    models = {"KN trigram": kn, "NPLM": nplm}

    out(f"\n{'':40}" + "".join(f"{name:>12}" for name in models))
    ppl = {name: evaluate(m, test).perplexity for name, m in models.items()}
    out(f"{'test perplexity':40}" + "".join(f"{p:>12.3f}" for p in ppl.values()))
    out("log-probability (nats) of a sentence seen in train, then of held-out ones:")
    for sentence in [SEEN_EXAMPLE, *HELD_OUT_EXAMPLES]:
        out(f"  {sentence:38}" + "".join(f"{m.sentence_logprob(sentence):>12.3f}"
                                         for m in models.values()))
    out("\nnearest neighbours in the NPLM's feature space (rows of C):")
    for word in ("cat", "man", "kitchen", "running"):
        out(f"  {word:8} " + ", ".join(w for w, _ in nplm.neighbors(word, 5)))
    out("\nsampled from the NPLM:")
    for sentence in nplm.generate(4, seed=1, top_k=10):
        out(f"  {sentence}")
    out(f"\ncheckpoint: {nplm_dir}/ (learning curve: {nplm_dir / 'learning_curve.png'})")
    out(f"try: nnlm eval {nplm_dir} {data / 'test.txt'}   |   nnlm neighbors {nplm_dir} dog")
    if brown_available():
        out("\nBrown is available. The real thing, the paper's Table 1 side by side with "
            "ours:\n  nnlm reproduce brown          (about an hour on 2 cores; --quick: "
            "a few minutes)")
    out("\nthe nnlm command lives in the environment make built: source .venv/bin/activate "
        "(or run .venv/bin/nnlm)")
    return {"perplexity": ppl}
