"""``nnlm demo``: the toy world end to end, on the built-in corpus, in about a minute.

Prepares the toy-world corpus, trains the models available, prints their test
perplexities and the log-probability each gives to sentences whose (subject, activity)
pair never occurs in train: the generalisation the paper is about.
"""

from __future__ import annotations

from pathlib import Path

from .corpus import count_words, read_stream, write_splits
from .lm import evaluate
from .models import save_model
from .ngram import AddK
from .toyworld import HELD_OUT_EXAMPLES, SEEN_EXAMPLE, toy_world
from .vocab import Vocabulary


def run_demo(workdir: Path, out=print) -> dict:
    workdir = Path(workdir)
    data = workdir / "data"
    stats = write_splits(data, toy_world(seed=0))
    out(f"toy world corpus in {data}/: " + ", ".join(
        f"{name} {s.lines:,} sentences / {s.tokens:,} tokens" for name, s in stats.items()))

    vocab = Vocabulary.from_counts(count_words(data / "train.txt"))
    train = read_stream(data / "train.txt", vocab)
    test = read_stream(data / "test.txt", vocab)
    models = {"add-1 bigram": AddK(vocab, order=2, k=1.0).fit(train)}

    results = {}
    out(f"\nvocabulary: {len(vocab)} words (incl. <unk>, <s>, </s>)")
    out(f"{'model':<16} {'test perplexity':>16}")
    for name, model in models.items():
        results[name] = evaluate(model, test)
        out(f"{name:<16} {results[name].perplexity:>16.3f}")

    out("\nlog-probability (nats) of sentences; the last ones pair a subject and an activity "
        "that train never pairs:")
    for sentence in [SEEN_EXAMPLE, *HELD_OUT_EXAMPLES]:
        scores = "  ".join(f"{m.sentence_logprob(sentence):8.3f}" for m in models.values())
        out(f"  {sentence:<36} {scores}")

    model_dir = save_model(models["add-1 bigram"], workdir / "addk-bigram")
    out(f"\nsaved {model_dir}/; try: nnlm eval {model_dir} {data / 'test.txt'}")
    from .corpus import brown_available

    if brown_available():
        out("Brown is available: `nnlm prepare brown data/brown` writes the paper's split.")
    return {"perplexity": {k: v.perplexity for k, v in results.items()}}
