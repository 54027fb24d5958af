"""Back-off models from Python against the kenlm module: ARPA load time and scoring speed.

    python bench/ngram/query.py --data data/brown --out bench/results/query.json

Estimates the KN 5-gram on Brown's training text, writes it as ARPA, then in one run
(ratios are what to compare on a noisy machine: the cases compared run in alternating
rounds, bench/harness.py, and each ratio is the median of the rounds' ratios):

* load: ``nnlm.ngram.read_arpa`` against ``kenlm.Model`` on the same file, in this
  process and in a fresh one (start and imports included);
* per call: ``nnlm.kenlm`` against the kenlm module, ``BaseScore`` and
  ``BaseFullScore`` word by word through the test sentences and ``score`` a sentence;
  and ``BaseScore`` on the binary files decoders load: nnlm's one-file model (float32,
  and its values coded as counts: ``--compress``) against build_binary's trie and
  probing files (with build_binary on the PATH);
* scoring the test text repeated 6 times (~1M tokens): nnlm's ``logprobs`` on the
  encoded stream (one call), ``target_logprobs`` on explicit (context, word) rows (what
  a decoder's batched states use), against kenlm's ``score`` called per sentence, the
  way its documentation shows, and ``full_scores``.

Both give the same numbers (checked here to 1e-4 in log10 per token; KenLM sums a
sentence in float32, so sentence totals differ by more). Without the
kenlm module only nnlm's side is timed. Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from nnlm import Stream, read_stream
from nnlm.ngram import KneserNey, read_arpa, write_arpa
from nnlm.text.corpus import read_corpus

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path


def fresh_process(code: str, repeats: int) -> float:
    """Best wall time of ``python -c code`` (interpreter start and imports included)."""
    return harness.best_of(repeats, lambda: subprocess.run([sys.executable, "-c", code], check=True,
                                                   capture_output=True))[1]


def _walk(model, state_cls, sentences, full: bool) -> int:
    """Every word of ``sentences`` through BaseScore (or BaseFullScore), state to state,
    as a decoder calls it; returns the number of calls."""
    call = model.BaseFullScore if full else model.BaseScore
    a, b = state_cls(), state_cls()
    calls = 0
    for words in sentences:
        model.BeginSentenceWrite(a)
        for w in words:
            call(a, w, b)
            a, b = b, a
        calls += len(words)
    return calls


def per_call(loaded, k_model, kenlm, lines, r) -> dict:
    """nnlm.kenlm against the kenlm module a call, in alternating rounds: BaseScore and
    BaseFullScore word by word through the test sentences (with </s>), score() a
    sentence; and nnlm.kenlm's Python path (what networks use, and back-off models
    without the C extension)."""
    import nnlm.kenlm as nk

    sentences = [[*s.split(), "</s>"] for s in lines]
    calls = sum(len(s) for s in sentences)
    ours = nk.Model(loaded)
    out = {"compiled": ours._fast is not None}
    sides = [("nnlm", ours, nk.State)] + ([("kenlm", k_model, kenlm.State)] if k_model else [])
    cases = {}
    for name, model, state_cls in sides:
        cases[f"{name}_base_score"] = lambda m=model, c=state_cls: _walk(m, c, sentences, False)
        cases[f"{name}_base_full_score"] = \
            lambda m=model, c=state_cls: _walk(m, c, sentences, True)
        cases[f"{name}_score"] = lambda m=model: [m.score(s) for s in lines]
    times = harness.rounds(cases, r)
    for name, _, _ in sides:
        for kind in ("base_score", "base_full_score"):
            out[f"{name}_{kind}_us"] = times[f"{name}_{kind}"].median / calls * 1e6
            out[f"{name}_{kind}_spread"] = times[f"{name}_{kind}"].spread
        out[f"{name}_score_us_per_sentence"] = times[f"{name}_score"].median / len(lines) * 1e6
    hook = "_model_query" if hasattr(nk, "_model_query") else "_query"  # (before 0.13)
    saved = getattr(nk, hook)
    setattr(nk, hook, lambda lm, serial: None)
    try:
        slow = nk.Model(loaded)
        few = sentences[: max(1, len(sentences) // 30)]
        calls, t = harness.best_of(1, lambda: _walk(slow, nk.State, few, False))
        out["nnlm_python_path_base_score_us"] = t / calls * 1e6
    finally:
        setattr(nk, hook, saved)
    if k_model:  # the median of the rounds' ratios, each pair measured side by side
        for key, kind in (("base_score_us", "base_score"),
                          ("base_full_score_us", "base_full_score"),
                          ("score_us_per_sentence", "score")):
            ratio = harness.ratio(times, f"nnlm_{kind}", f"kenlm_{kind}")
            out[f"{key}_nnlm_over_kenlm"] = ratio["median"]
            out[f"{key}_nnlm_over_kenlm_range"] = [ratio["min"], ratio["max"]]
    return out


def per_call_binaries(model, arpa: Path, kenlm, lines, r) -> dict:
    """BaseScore a call on the files decoders load (pyctcdecode copies one): nnlm.kenlm on
    nnlm's one-file model, the kenlm module on build_binary's trie and probing files (when
    build_binary is on the PATH)."""
    import shutil
    import subprocess

    import nnlm.kenlm as nk
    from nnlm.ngram.store.trie_write import write_trie

    sentences = [[*s.split(), "</s>"] for s in lines]
    one_file = arpa.with_suffix(".nnlm")
    write_trie(model, one_file, "", standalone=True)
    coded_file = arpa.with_suffix(".coded.nnlm")  # the values as counts (--compress)
    write_trie(model, coded_file, "", standalone=True, compress=True)
    result = {}

    def opened(name, module, path):
        t0 = time.perf_counter()
        m = module.Model(str(path))
        result[f"{name}_open_seconds"] = time.perf_counter() - t0
        return m

    sides = [("nnlm_one_file", opened("nnlm_one_file", nk, one_file), nk.State),
             ("nnlm_one_file_compressed", opened("nnlm_one_file_compressed", nk, coded_file),
              nk.State)]
    build_binary = shutil.which("build_binary")
    if kenlm and build_binary:
        for kind in ("trie", "probing"):  # each file through both modules
            out = arpa.with_suffix(f".{kind}.bin")
            subprocess.run([build_binary, kind, str(arpa), str(out)], check=True,
                           capture_output=True)
            sides.append((f"kenlm_{kind}", opened(f"kenlm_{kind}", kenlm, out), kenlm.State))
            sides.append((f"nnlm_on_kenlm_{kind}", opened(f"nnlm_on_kenlm_{kind}", nk, out),
                          nk.State))
    calls = sum(len(s) for s in sentences)
    times = harness.rounds({name: (lambda m=m, c=state_cls: _walk(m, c, sentences, False))
                            for name, m, state_cls in sides}, r)
    for name, _, _ in sides:
        result[f"{name}_base_score_us"] = times[name].median / calls * 1e6
    result["compressed_over_one_file"] = (result["nnlm_one_file_compressed_base_score_us"]
                                          / result["nnlm_one_file_base_score_us"])
    for kind in ("trie", "probing"):
        if f"kenlm_{kind}_base_score_us" in result:
            result[f"nnlm_over_kenlm_on_{kind}"] = (result[f"nnlm_on_kenlm_{kind}_base_score_us"]
                                                    / result[f"kenlm_{kind}_base_score_us"])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("data/brown"))
    parser.add_argument("--out", type=Path, default=Path("bench/results/query.json"))
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds; the "
                        "median counts (a load or a fresh process: the fastest)")
    args = parser.parse_args()
    r = args.rounds

    vocab, train = read_corpus(args.data / "train.txt")
    model = KneserNey(vocab, 5).fit(train, keep_counts=True)  # (the coded one-file model)
    lines = [s for s in (args.data / "test.txt").read_text().splitlines() if s.split()] * 6
    results: dict = {"model": "KN5 on Brown train", "ngrams": model.num_ngrams(),
                     "rounds": r}
    try:
        import kenlm
    except ImportError:
        kenlm = None
        results["kenlm"] = "not installed: nnlm timed alone"

    with tempfile.TemporaryDirectory() as tmp:
        arpa = write_arpa(model, Path(tmp) / "kn5.arpa")
        results["arpa_bytes"] = arpa.stat().st_size
        read_arpa(arpa)  # compiles the scanner once (then cached on disk)
        loaded, t = harness.best_of(r, lambda: read_arpa(arpa))
        load = {"nnlm_seconds": t, "nnlm_fresh_process_seconds": fresh_process(
            f"from nnlm.ngram import read_arpa; read_arpa({str(arpa)!r})", r)}
        if kenlm:
            k_model, t = harness.best_of(r, lambda: kenlm.Model(str(arpa)))
            load["kenlm_seconds"] = t
            load["kenlm_fresh_process_seconds"] = fresh_process(
                f"import kenlm; kenlm.Model({str(arpa)!r})", r)
            load["nnlm_over_kenlm"] = load["nnlm_seconds"] / load["kenlm_seconds"]
            load["fresh_nnlm_over_kenlm"] = (load["nnlm_fresh_process_seconds"]
                                             / load["kenlm_fresh_process_seconds"])
        results["load"] = load
        print("load", json.dumps(load), flush=True)
        results["per_call_binaries"] = per_call_binaries(model, arpa, kenlm, lines, r)
        print("per_call_binaries", json.dumps(results["per_call_binaries"]), flush=True)

    test = read_stream(args.data / "test.txt", loaded.vocab)
    stream = Stream.concatenate([test] * 6)
    tokens = len(stream)
    contexts = stream.contexts(loaded.order)
    cases = {"nnlm_logprobs": lambda: loaded.logprobs(stream),
             "nnlm_target_logprobs": lambda: loaded.target_logprobs(contexts, stream.ids)}
    if kenlm:
        cases["kenlm_score"] = lambda: [k_model.score(s) for s in lines]
        cases["kenlm_full_scores"] = lambda: [list(k_model.full_scores(s)) for s in lines]
    times = harness.rounds(cases, r)  # the warm-up round builds the lazy hash indexes
    score = {"tokens": tokens,
             "nnlm_logprobs_tokens_per_second": tokens / times["nnlm_logprobs"].median,
             "nnlm_target_logprobs_tokens_per_second":
                 tokens / times["nnlm_target_logprobs"].median,
             "spread": {name: t.spread for name, t in times.items()}}
    if kenlm:
        score["kenlm_score_tokens_per_second"] = tokens / times["kenlm_score"].median
        score["kenlm_full_scores_tokens_per_second"] = \
            tokens / times["kenlm_full_scores"].median
        ratio = harness.ratio(times, "kenlm_score", "nnlm_logprobs")
        score["nnlm_logprobs_over_kenlm_score"] = ratio["median"]  # a speed-up: theirs/ours
        score["nnlm_logprobs_over_kenlm_score_range"] = [ratio["min"], ratio["max"]]
        lp = loaded.logprobs(stream)
        full = [list(k_model.full_scores(s)) for s in lines]
        theirs = np.array([x[0] for sentence in full for x in sentence])
        score["max_token_difference_log10"] = float(np.abs(lp / math.log(10) - theirs).max())
        assert score["max_token_difference_log10"] < 1e-4
    results["score"] = score
    print("score", json.dumps(score), flush=True)
    results["per_call"] = per_call(loaded, k_model if kenlm else None, kenlm, lines, r)
    print("per_call", json.dumps(results["per_call"]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, results, indent=2)


if __name__ == "__main__":
    main()
