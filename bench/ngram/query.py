"""Back-off models from Python against the kenlm module: ARPA load time and scoring speed.

    python bench/query.py --data data/brown --out bench/results/query.json

Estimates the KN 5-gram on Brown's training text, writes it as ARPA, then in one run
(ratios are what to compare on a noisy machine; best of --repeats):

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
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from nnlm import Stream, read_stream
from nnlm.ngram import KneserNey, read_arpa, write_arpa
from nnlm.text.corpus import read_corpus


def best_of(repeats: int, fn) -> tuple[object, float]:
    out, best = None, math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return out, best


def fresh_process(code: str, repeats: int) -> float:
    """Best wall time of ``python -c code`` (interpreter start and imports included)."""
    return best_of(repeats, lambda: subprocess.run([sys.executable, "-c", code], check=True,
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
    """nnlm.kenlm against the kenlm module a call: BaseScore and BaseFullScore word by
    word through the test sentences (with </s>), score() a sentence; and nnlm.kenlm's
    Python path (what networks use, and back-off models without the C extension)."""
    import nnlm.kenlm as nk

    sentences = [[*s.split(), "</s>"] for s in lines]
    ours = nk.Model(loaded)
    out = {"compiled": ours._fast is not None}
    sides = [("nnlm", ours, nk.State)] + ([("kenlm", k_model, kenlm.State)] if k_model else [])
    for name, model, state_cls in sides:
        calls, t = best_of(r, lambda m=model, c=state_cls: _walk(m, c, sentences, False))
        out[f"{name}_base_score_us"] = t / calls * 1e6
        calls, t = best_of(r, lambda m=model, c=state_cls: _walk(m, c, sentences, True))
        out[f"{name}_base_full_score_us"] = t / calls * 1e6
        _, t = best_of(r, lambda m=model: [m.score(s) for s in lines])
        out[f"{name}_score_us_per_sentence"] = t / len(lines) * 1e6
    saved = nk._query
    nk._query = lambda lm, serial: None
    try:
        slow = nk.Model(loaded)
        few = sentences[: max(1, len(sentences) // 30)]
        calls, t = best_of(1, lambda: _walk(slow, nk.State, few, False))
        out["nnlm_python_path_base_score_us"] = t / calls * 1e6
    finally:
        nk._query = saved
    if k_model:
        for key in ("base_score_us", "base_full_score_us", "score_us_per_sentence"):
            out[f"{key}_nnlm_over_kenlm"] = out[f"nnlm_{key}"] / out[f"kenlm_{key}"]
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
    for name, m, state_cls in sides:
        calls, t = best_of(r, lambda m=m, c=state_cls: _walk(m, c, sentences, False))
        result[f"{name}_base_score_us"] = t / calls * 1e6
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
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    r = args.repeats

    vocab, train = read_corpus(args.data / "train.txt")
    model = KneserNey(vocab, 5).fit(train, keep_counts=True)  # (the coded one-file model)
    lines = [s for s in (args.data / "test.txt").read_text().splitlines() if s.split()] * 6
    results: dict = {"python": platform.python_version(), "machine": platform.machine(),
                     "model": "KN5 on Brown train", "ngrams": model.num_ngrams()}
    try:
        import kenlm
    except ImportError:
        kenlm = None
        results["kenlm"] = "not installed: nnlm timed alone"

    with tempfile.TemporaryDirectory() as tmp:
        arpa = write_arpa(model, Path(tmp) / "kn5.arpa")
        results["arpa_bytes"] = arpa.stat().st_size
        read_arpa(arpa)  # compiles the scanner once (then cached on disk)
        loaded, t = best_of(r, lambda: read_arpa(arpa))
        load = {"nnlm_seconds": t, "nnlm_fresh_process_seconds": fresh_process(
            f"from nnlm.ngram import read_arpa; read_arpa({str(arpa)!r})", r)}
        if kenlm:
            k_model, t = best_of(r, lambda: kenlm.Model(str(arpa)))
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
    loaded.logprobs(stream)  # builds the lazy hash indexes
    lp, t_stream = best_of(r, lambda: loaded.logprobs(stream))
    contexts = stream.contexts(loaded.order)
    _, t_rows = best_of(r, lambda: loaded.target_logprobs(contexts, stream.ids))
    score = {"tokens": tokens, "nnlm_logprobs_tokens_per_second": tokens / t_stream,
             "nnlm_target_logprobs_tokens_per_second": tokens / t_rows}
    if kenlm:
        _, t_k = best_of(r, lambda: [k_model.score(s) for s in lines])
        full, t_full = best_of(r, lambda: [list(k_model.full_scores(s)) for s in lines])
        score["kenlm_score_tokens_per_second"] = tokens / t_k
        score["kenlm_full_scores_tokens_per_second"] = tokens / t_full
        score["nnlm_logprobs_over_kenlm_score"] = t_k / t_stream
        theirs = np.array([x[0] for sentence in full for x in sentence])
        score["max_token_difference_log10"] = float(np.abs(lp / math.log(10) - theirs).max())
        assert score["max_token_difference_log10"] < 1e-4
    results["score"] = score
    print("score", json.dumps(score), flush=True)
    results["per_call"] = per_call(loaded, k_model if kenlm else None, kenlm, lines, r)
    print("per_call", json.dumps(results["per_call"]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
