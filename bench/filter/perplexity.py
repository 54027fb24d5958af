"""nnlm filter's perplexity stage against DataTrove's, side by side in one run.

    python bench/filter/perplexity.py --data data/brown --out bench/results/filter.json

Builds a cc_net-style pair on --data's training text (cc_net's normalization, a
SentencePiece unigram model of --vocab pieces, KN 5-gram on the pieces by nnlm, written
as ARPA, as KenLM's probing file ``en.arpa.bin`` and as nnlm's one-file model), cuts the
training text into documents of --lines lines, and times, alternating over --rounds
rounds, the whole stage per document (normalize, SentencePiece, score each line, the
perplexity) in:

- ``datatrove``: DataTrove's ``KenlmModel.get_perplexity`` with the kenlm module over
  ``en.arpa.bin``, the file it downloads (its files set on the object: no download);
- ``nnlm_*``: ``nnlm.filter.DocumentScorer`` with ``normalize="datatrove"`` over the same
  ``en.arpa.bin`` (``probing``), over nnlm's one-file model (``onefile``) and over the
  ARPA file (``arpa``, read into memory).

Reports words and tokens (pieces + lines) a second a core, the ratios of the rounds
measured side by side, where nnlm's time goes (normalization, SentencePiece, scoring),
and whether every perplexity is DataTrove's. Never run by the tests.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path


def build_pair(data: Path, tmp: Path, vocab: int) -> None:
    import sentencepiece as spm

    from nnlm.filter import ccnet

    text = [ccnet(x) for x in (data / "train.txt").read_text(encoding="utf-8").splitlines()]
    (tmp / "norm.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(tmp / "norm.txt"), model_prefix=str(tmp / "en"),
                                   vocab_size=vocab, minloglevel=2)
    (tmp / "en.model").rename(tmp / "en.sp.model")
    for cmd in (["ngram", "train", str(tmp / "norm.txt"), "--order", "5", "--tokenizer",
                 str(tmp / "en.sp.model"), "-o", str(tmp / "kn"), "--arpa",
                 str(tmp / "en.arpa")],
                ["ngram", "convert", str(tmp / "en.arpa"), str(tmp / "en.bin")],
                ["ngram", "convert", str(tmp / "en.arpa"), str(tmp / "en.arpa.bin"), "--kenlm"]):
        subprocess.run([sys.executable, "-m", "nnlm", *cmd], check=True, capture_output=True)


def datatrove_model(tmp: Path):
    import kenlm
    import sentencepiece as spm
    from datatrove.utils.perplexity import KenlmModel, SentencePiece

    model = KenlmModel("unused", "en")
    model._model = kenlm.Model(str(tmp / "en.arpa.bin"))
    tokenizer = SentencePiece("unused", "en")
    tokenizer._model = spm.SentencePieceProcessor(model_file=str(tmp / "en.sp.model"))
    model._tokenizer = tokenizer
    return model


def parts(scorer, docs: list[str]) -> dict:
    """Seconds nnlm spends normalizing, cutting into pieces (SentencePiece's ids) and
    scoring ``docs`` (the ids mapped into the model's and scored in one call)."""
    t0 = time.perf_counter()
    normalized = [scorer.normalize(d) for d in docs]
    t1 = time.perf_counter()
    encoded = scorer.tokenizer.processor.encode(normalized, out_type=int)
    t2 = time.perf_counter()
    scorer.log10_scores(docs[:0])  # the id table, made once a model
    t3 = time.perf_counter()
    scorer._scores_of_ids(scorer.model, normalized, encoded)
    t4 = time.perf_counter()
    return {"normalize": t1 - t0, "sentencepiece": t2 - t1, "score": t4 - t3}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=Path("data/brown"))
    p.add_argument("--vocab", type=int, default=4000, help="SentencePiece pieces")
    p.add_argument("--lines", type=int, default=8, help="lines a document")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=Path("bench/results/filter.json"))
    args = p.parse_args()
    from nnlm.filter import DocumentScorer

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        build_pair(args.data, tmp, args.vocab)
        lines = (args.data / "train.txt").read_text(encoding="utf-8").splitlines()
        docs = ["\n".join(lines[i:i + args.lines]) for i in range(0, len(lines), args.lines)]
        dt = datatrove_model(tmp)
        scorers = {name: DocumentScorer(tmp / f, tmp / "en.sp.model", "datatrove")
                   for name, f in [("nnlm_probing", "en.arpa.bin"), ("nnlm_onefile", "en.bin"),
                                   ("nnlm_arpa", "en.arpa")]}
        want = [dt.get_perplexity(d) for d in docs]
        same = all([round(x, 1) for x in s.perplexities(docs)] == want
                   for s in scorers.values())
        runs = {"datatrove": lambda: [dt.get_perplexity(d) for d in docs]}
        runs.update({name: (lambda s=s: s.perplexities(docs)) for name, s in scorers.items()})
        times = harness.rounds(runs, n=args.rounds)
        pieces = sum(n for _, n in scorers["nnlm_arpa"].log10_scores(docs))
        breakdown = parts(scorers["nnlm_probing"], docs)
    words = sum(len(d.split()) for d in docs)
    out = {"documents": len(docs), "words": words, "tokens": pieces,
           "same_perplexities_as_datatrove": same, "machine": harness.machine(),
           "words_per_second": {k: words / t.median for k, t in times.items()},
           "tokens_per_second": {k: pieces / t.median for k, t in times.items()},
           "speedup_over_datatrove": {k: harness.ratio(times, "datatrove", k)
                                      for k in scorers},
           "nnlm_probing_seconds": breakdown}
    harness.write_record(args.out, out, indent=2)
    print(out["words_per_second"], out["speedup_over_datatrove"], breakdown, same)


if __name__ == "__main__":
    main()
