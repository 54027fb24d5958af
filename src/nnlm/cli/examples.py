"""Examples for the commands whose parsers do not write their own: every command's
``--help`` ends with examples a user can copy (tests/test_cli.py checks that each has)."""

from __future__ import annotations

import argparse

EXAMPLES = {
    "index count": ['nnlm index count runs/brown.idx "of the" "the jury said"',
                    "cat phrases.txt | nnlm index count runs/brown.idx --json"],
    "index next": ['nnlm index next runs/brown.idx "the jury" -k 5',
                   'nnlm index next big.idx "in the middle of" --json'],
    "index infgram": ['nnlm index infgram runs/brown.idx "he said that the jury"',
                      'nnlm index infgram ig_pile_index "1234 5678" --json   # infini-gram\'s'],
    "index docs": ['nnlm index docs runs/brown.idx "grand jury" --limit 3',
                   'nnlm index docs runs/brown.idx "the jury said" --json'],
    "doctor": ["nnlm doctor                           # compiled parts, extras, slow paths",
               "nnlm doctor --json                    # the same, for a script or a bug report"],
    "completion": ['eval "$(nnlm completion bash)"      # in ~/.bashrc',
                   'eval "$(nnlm completion zsh)"       # in ~/.zshrc'],
    "prepare brown": ["nnlm prepare brown data/brown            # the paper's split of Brown",
                      "nnlm prepare brown data/brown --paper-cut"],
    "prepare toy": ["nnlm prepare toy data/toy", "nnlm prepare toy data/toy --train-sentences "
                    "20000 --seed 3"],
    "prepare text": ["nnlm prepare text corpus.txt data/mine   # 80/10/10 by tokens",
                     "nnlm prepare text corpus.txt.xz data/mine --valid-fraction 0.05 "
                     "--test-fraction 0.05"],
    "ngram cluster": ["nnlm ngram cluster data/brown/train.txt --classes 500 -o classes.tsv",
                      "nnlm ngram train data/brown/train.txt --method class --clustering "
                      "classes.tsv -o runs/class"],
    "ngram export-arpa": ["nnlm ngram export-arpa runs/kn5 kn5.arpa",
                          "nnlm ngram export-arpa runs/kn5 kn5.arpa.gz   # compressed"],
    "score": ["nnlm score runs/kn5 data/brown/test.txt",
              "echo 'the jury said' | nnlm score runs/mlp1 --per-token",
              "nnlm score runs/mlp1 sentences.txt --json --bf16"],
    "eval": ["nnlm eval runs/kn5 data/brown/test.txt",
             "nnlm eval runs/mlp1 data/brown/test.txt --json --bf16",
             "zcat test.txt.gz | nnlm eval runs/mix -",
             "nnlm eval runs/awd data/brown/test.txt --cache --dynamic --valid "
             "data/brown/valid.txt"],
    "generate": ["nnlm generate runs/mlp1 -n 3", "nnlm generate runs/kn5 --prompt 'the jury' "
                 "--temperature 0.8 --top-k 20 --seed 1"],
    "neighbors": ["nnlm neighbors runs/mlp1 dog", "nnlm neighbors runs/modern said -k 20"],
    "plot-embeddings": ["nnlm plot-embeddings runs/mlp1 -o words.png",
                        "nnlm plot-embeddings runs/mlp1 dog cat man woman -o some.png "
                        "--method tsne"],
    "similar": ['nnlm similar runs/modern "the jury said" data/brown/test.txt -k 5',
                'nnlm similar runs/mlp1 "a dog" notes.txt --json'],
    "reproduce": ["nnlm reproduce brown                 # the paper's Table 1 (an hour)",
                  "nnlm reproduce brown --quick         # a reduced run, minutes",
                  "nnlm reproduce brown --extended      # with modern, deep, lstm, awd"],
    "demo": ["nnlm demo", "nnlm demo --workdir /tmp/nnlm-demo --epochs 3"],
}


class HelpFormatter(argparse.HelpFormatter):
    """argparse's wrapping for descriptions, but an ``examples:`` block kept line by line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def add_examples(path: str, parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` (the command ``path``, e.g. "ngram cluster") its examples, unless it
    has its own."""
    if "example" in (parser.epilog or "") or path not in EXAMPLES:
        return
    parser.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[path])
    if parser.formatter_class is argparse.HelpFormatter:
        parser.formatter_class = HelpFormatter
