"""``nnlm reproduce brown``: Table 1 of Bengio et al. (2003), side by side with the paper.

Trains the paper's baselines (deleted-interpolation trigram; Kneser-Ney back-off n = 3,
4, 5; class-based back-off with c classes) and the neural presets mlp1 ... mlp10 (the
even ones: the odd network before them mixed 0.5 / 0.5 with the trigram), evaluates
train / valid / test perplexity, and writes into WORKDIR:

- ``report.md``: the table in the paper's layout with the paper's numbers beside ours and
  each model's test perplexity over KN5's, in both;
- ``results.json``: every number, the settings, versions and timings;
- ``valid_vs_time.png``: validation perplexity against training time, neural models.

``--extended`` adds, beside the paper's table, the networks of the family that go
further: ``modern`` (one hidden layer, tied, dropout), ``deep`` (Sun & Iyyer 2021: a long
context and residual blocks), ``lstm`` (g as a recurrent network, the one the paper names
beside the feed-forward g), ``awd`` (that LSTM with AWD-LSTM's regularizers, Merity et
al. 2018), and their mixtures with KN5 and with each other, weights by EM per
context-frequency bucket on the validation text. Apart from them, test-time adaptation
rows: ``awd`` with the neural cache and with dynamic evaluation, settings chosen on the
validation text.

Every trained model is kept in WORKDIR/models and every evaluation in WORKDIR/evals, so an
interrupted reproduction picks up where it stopped (neural training resumes mid-run).
The paper's numbers are transcribed from its Table 1 (Brown; its corpus split, |V| =
16,383); ours use protocol v1 (|V| = 14,116 + <s>, </s>), so compare ratios to KN5.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..base.errors import NnlmError
from ..lm import evaluate
from ..models import load_model, save_model
from ..neural.presets import PRESETS
from ..text.corpus import prepare_brown, read_stream, write_splits
from ..text.fileio import atomic_write_text
from ..text.jsonfiles import Float, Map, read_json
from .workdir import claim_workdir


@dataclass(frozen=True)
class Row:
    name: str
    kind: str  # "delint", "kn", "class", "nplm", "mix"; extended: "net", "em"
    n: int
    c: int | None = None
    h: int | None = None
    m: int | None = None
    direct: bool | None = None
    mix: bool = False
    paper: tuple = (None, None, None)  # train, valid, test perplexity in the paper
    parts: tuple = ()  # an "em" row's models, mixed with weights by EM per bucket
    adapt: tuple = ()  # an "adapt" row's test-time adaptation of its one part: cache, dynamic


def _mlp(i: int, paper) -> Row:
    p = PRESETS[f"mlp{i}"]
    a = p["model"]
    return Row(f"mlp{i}", "mix" if p["mix"] else "nplm", a["order"], None, a["h"], a["m"],
               a["direct"], p["mix"], paper)


ROWS = [
    _mlp(1, (182, 284, 268)), _mlp(2, (None, 275, 257)), _mlp(3, (201, 327, 310)),
    _mlp(4, (None, 286, 272)), _mlp(5, (209, 296, 279)), _mlp(6, (None, 273, 259)),
    _mlp(7, (210, 309, 293)), _mlp(8, (None, 284, 270)), _mlp(9, (175, 280, 276)),
    _mlp(10, (None, 265, 252)),
    Row("delint3", "delint", 3, paper=(31, 352, 336)),
    Row("kn3", "kn", 3, paper=(None, 334, 323)),
    Row("kn4", "kn", 4, paper=(None, 332, 321)),
    Row("kn5", "kn", 5, paper=(None, 332, 321)),
    Row("class150", "class", 3, 150, paper=(None, 348, 334)),
    Row("class200", "class", 3, 200, paper=(None, 354, 340)),
    Row("class500", "class", 3, 500, paper=(None, 326, 312)),
    Row("class1000", "class", 3, 1000, paper=(None, 335, 319)),
    Row("class2000", "class", 3, 2000, paper=(None, 343, 326)),
    Row("class500_n4", "class", 4, 500, paper=(None, 327, 312)),
    Row("class500_n5", "class", 5, 500, paper=(None, 327, 312)),
]
# beyond the paper (--extended): networks by preset, then mixtures by EM per bucket
EXTENDED_ROWS = [
    Row("modern", "net", 6, h=256, m=256, direct=False),
    Row("deep", "net", 6, h=512, m=256, direct=False),
    Row("modern+kn5", "em", 6, parts=("modern", "kn5")),
    Row("deep+kn5", "em", 6, parts=("deep", "kn5")),
    Row("deep+modern+kn5", "em", 6, parts=("deep", "modern", "kn5")),
    Row("lstm", "net", 1025, h=512, m=256, direct=False),
    Row("lstm+kn5", "em", 1025, parts=("lstm", "kn5")),
    Row("deep+lstm+kn5", "em", 1025, parts=("deep", "lstm", "kn5")),
    Row("awd", "net", 1025, h=1024, m=256, direct=False),
    Row("awd+kn5", "em", 1025, parts=("awd", "kn5")),
    Row("deep+awd+kn5", "em", 1025, parts=("deep", "awd", "kn5")),
    # test-time adaptation, settings chosen on the validation text: test numbers only
    Row("awd_cache", "adapt", 1025, parts=("awd",), adapt=("cache",)),
    Row("awd_dynamic", "adapt", 1025, parts=("awd",), adapt=("dynamic",)),
    Row("awd_dynamic_cache", "adapt", 1025, parts=("awd",), adapt=("dynamic", "cache")),
    Row("awd+kn5_dynamic_cache", "adapt", 1025, parts=("awd+kn5",),
        adapt=("dynamic", "cache")),
]
BY_NAME = {r.name: r for r in [*ROWS, *EXTENDED_ROWS]}
QUICK_ROWS = ["delint3", "kn3", "kn5", "class150", "mlp7", "mlp8"]
QUICK_EPOCHS = 2


def dependencies(names: list[str]) -> list[str]:
    """The rows needed to produce ``names``: mixtures need their network and the trigram;
    every ratio needs kn5."""
    need = list(dict.fromkeys(["kn5", *names]))
    for name in list(need):
        row = BY_NAME[name]
        if row.kind in ("em", "adapt"):
            need[need.index(name):need.index(name)] = [p for p in row.parts if p not in need]
            for part in row.parts:  # an adapted mixture's own parts
                if BY_NAME[part].kind == "em":
                    at = need.index(part)
                    need[at:at] = [p for p in BY_NAME[part].parts if p not in need]
        if row.kind == "mix":
            base = f"mlp{int(name[3:]) - 1}"
            need[need.index(name):need.index(name)] = [base, "delint3"]
    return [r.name for r in BY_NAME.values() if r.name in need]


def reproduce(workdir, only: list[str] | None = None, quick: bool = False,
              paper_cut: bool = False, threads: int | None = None, log=print,
              extended: bool = False) -> dict:
    workdir = claim_workdir(workdir, "reproduce", may_hold=("data",))
    names = only or (QUICK_ROWS if quick else [r.name for r in ROWS])
    if extended and not only:
        names = [*names, *(r.name for r in EXTENDED_ROWS)]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise NnlmError(f"unknown rows {unknown}; choose from {', '.join(BY_NAME)}")
    names = dependencies(names)
    data = workdir / "data"
    if not (data / "test.txt").exists():
        log(f"preparing Brown (protocol v1{', paper cut' if paper_cut else ''}) in {data}")
        write_splits(data, prepare_brown(paper_cut=paper_cut))
    started = time.time()
    results = {"rows": {}, "settings": {"quick": quick, "paper_cut": paper_cut,
                                        "extended": extended, "rows": names},
               "versions": _versions()}
    done = {}
    # mixtures last: they are made from models trained in this loop
    stage = {"mix": 1, "em": 1, "adapt": 2}
    for name in sorted(names, key=lambda n: stage.get(BY_NAME[n].kind, 0)):
        t0 = time.time()
        model_dir = _train_row(BY_NAME[name], workdir, quick, threads, log)
        if BY_NAME[name].kind == "adapt":
            ev = _evaluate_adapted(BY_NAME[name], model_dir, workdir, log)
            done[name] = {**asdict(BY_NAME[name]), **ev, "seconds": time.time() - t0}
            continue
        ev = _evaluate_row(name, model_dir, workdir, log, parts=(
            ("valid", "test") if BY_NAME[name].kind == "em" else ("train", "valid", "test")))
        if BY_NAME[name].kind == "mix":
            ev["bucketed"] = _evaluate_row(f"{name}_bucketed", model_dir.with_name(
                f"{name}_bucketed"), workdir, log, parts=("valid", "test"))
        done[name] = {**asdict(BY_NAME[name]), **ev, "seconds": time.time() - t0}
    results["rows"] = {name: done[name] for name in names}  # the table's order
    results["seconds"] = time.time() - started
    _write_outputs(workdir, results, quick)
    log(f"wrote {workdir / 'report.md'}, {workdir / 'results.json'}, "
        f"{workdir / 'valid_vs_time.png'}")
    return results


def _train_row(row: Row, workdir: Path, quick: bool, threads, log) -> Path:
    from ..fit import cluster_words, train_ngram

    data, model_dir = workdir / "data", workdir / "models" / row.name
    if row.kind in ("delint", "kn", "class"):
        if (model_dir / "config.json").exists():
            return model_dir
        log(f"training {row.name}")
        clustering = None
        if row.kind == "class":
            clustering = workdir / "models" / f"classes{row.c}.tsv"
            if not clustering.exists():
                from ..ngram.estimate.classes import save_classes
                from ..text.corpus import count_words
                from ..text.vocab import Vocabulary

                vocab = Vocabulary.from_counts(count_words(data / "train.txt"))
                c = min(row.c, len(vocab) - 3)  # a small corpus (the toy world) has few words
                if c < row.c:
                    log(f"  {row.c} classes for {len(vocab) - 3} words: using {c}")
                vocab, word_class = cluster_words(data / "train.txt", c, vocab)
                save_classes(word_class, vocab, clustering)
        model = train_ngram(data / "train.txt", {"delint": "interpolated"}.get(row.kind, row.kind),
                            row.n, valid_path=data / "valid.txt", n_classes=row.c or 500,
                            clustering_path=clustering,
                            # used only by orders whose discounts are undefined (never on
                            # Brown); lets the same pipeline run on small corpora
                            discount_fallback=True if row.kind in ("kn", "class") else None)
        save_model(model, model_dir)
        return model_dir
    if row.kind in ("nplm", "net"):
        from ..neural.training.run import train_from_files

        result_file = model_dir / "state" / "result.json"
        done = training_done(result_file, log)
        if not done:
            resume = (model_dir / "state" / "trainer.json").exists()
            log(f"{'resuming' if resume else 'training'} {row.name}")
            train = {"epochs": QUICK_EPOCHS} if quick else {}
            train_from_files(data / "train.txt", data / "valid.txt", model_dir,
                             preset=None if resume else row.name, train={} if resume else train,
                             resume=resume, threads=threads, log=lambda s: log("  " + s))
        return model_dir
    if row.kind == "adapt":
        return workdir / "models" / row.parts[0]
    if row.kind == "em":
        if not (model_dir / "config.json").exists():
            paths = [workdir / "models" / p for p in row.parts]
            log(f"mixing {' + '.join(row.parts)} (weights by EM per bucket)")
            _save_em_mixture([load_model(p) for p in paths], paths, data, model_dir)
        return model_dir
    # an even row: its network mixed 0.5 / 0.5 with the deleted-interpolation trigram
    from ..mixture import Mixture

    base = workdir / "models" / f"mlp{int(row.name[3:]) - 1}"
    trigram = workdir / "models" / "delint3"
    # the paper's 0.5 / 0.5, and beside it weights by EM per context-frequency bucket
    bucketed = workdir / "models" / f"{row.name}_bucketed"
    missing = [d for d in (model_dir, bucketed) if not (d / "config.json").exists()]
    models = [load_model(base), load_model(trigram)] if missing else []
    if model_dir in missing:
        Mixture(models, weights=[0.5, 0.5]).save(model_dir, [base, trigram])
    if bucketed in missing:
        _save_em_mixture(models, [base, trigram], data, bucketed)
    return model_dir


def _save_em_mixture(models: list, paths: list[Path], data: Path, out: Path) -> None:
    """``models`` (saved at ``paths``) mixed with weights by EM per context-frequency
    bucket (buckets from the training text, weights fitted on the validation text)."""
    from ..mixture import ContextBuckets, Mixture

    buckets = ContextBuckets.from_stream(read_stream(data / "train.txt", models[0].vocab),
                                         len(models[0].vocab))
    mixture = Mixture(models, buckets=buckets)
    mixture.fit_weights(read_stream(data / "valid.txt", mixture.vocab))
    mixture.save(out, paths)


def training_done(result_file: Path, log) -> bool:
    """Whether a run's state/result.json says it finished (a damaged one: not finished, so
    the run is resumed, which rewrites it)."""
    if not result_file.exists():
        return False
    return not _cached(result_file, {"interrupted": bool}, {"interrupted": True},
                       log)["interrupted"]


def _cached(path: Path, shape: dict, missing: dict, log) -> dict:
    """A cache file of this command's, checked; a damaged one is said and counts as
    ``missing`` (its work is done again)."""
    try:
        return read_json(path, shape)
    except NnlmError as e:
        log(f"  {e}; doing that work again")
        return missing


def _evaluation_cache(name: str, model_dir: Path, workdir: Path, log
                      ) -> tuple[Path, float, dict]:
    """(the row's evaluation file, the model's modification time, what the file holds
    for that time: {} where it is missing, damaged or older than the model)."""
    cache = workdir / "evals" / f"{name}.json"
    stamp = max(p.stat().st_mtime for p in model_dir.rglob("*") if p.is_file())
    cached = {}
    if cache.exists():
        cached = _cached(cache, {"stamp": float, "perplexity": Map(Float(min=1))}, {}, log)
    return cache, stamp, cached if cached.get("stamp") == stamp else {}


def _evaluate_row(name: str, model_dir: Path, workdir: Path, log,
                  parts=("train", "valid", "test")) -> dict:
    """Perplexities on train/valid/test, cached next to the model's modification time."""
    cache, stamp, cached = _evaluation_cache(name, model_dir, workdir, log)
    if set(parts) <= set(cached.get("perplexity", {})):
        return cached["perplexity"]
    model = load_model(model_dir)
    out = {}
    for part in parts:
        stream = read_stream(workdir / "data" / f"{part}.txt", model.vocab)
        out[part] = evaluate(model, stream).perplexity
    log(f"  {name}: " + ", ".join(f"{p} {out[p]:.1f}" for p in parts))
    cache.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(cache, json.dumps({"stamp": stamp, "perplexity": out}) + "\n")
    return out


def _evaluate_adapted(row: Row, model_dir: Path, workdir: Path, log) -> dict:
    """Test perplexity of the model at ``model_dir`` adapted as the row says (the cache,
    dynamic evaluation; a mixture's network adapted and its weights refitted), every
    setting chosen on the validation text; cached next to the model's modification
    time."""
    import math

    from ..mixture import Mixture
    from ..neural.adaptation import adapted_logprobs, adapted_mixture_logprobs

    cache, stamp, cached = _evaluation_cache(row.name, model_dir, workdir, log)
    if "test" in cached.get("perplexity", {}):
        return {**cached["perplexity"], "settings": cached.get("settings", {})}
    log(f"adapting {row.parts[0]} ({' and '.join(row.adapt)}; settings chosen on valid)")
    model = load_model(model_dir)
    valid, test = (read_stream(workdir / "data" / f"{p}.txt", model.vocab)
                   for p in ("valid", "test"))
    adapted = adapted_mixture_logprobs if isinstance(model, Mixture) else adapted_logprobs
    lp, used = adapted(model, test, valid=valid, log=lambda s: log("  " + s),
                       **{k: {} if k in row.adapt else None for k in ("cache", "dynamic")})
    out = {"test": math.exp(-float(lp.mean()))}
    settings = {k: v for k, v in used.items() if k in ("cache", "dynamic", "mixture_weights")}
    log(f"  {row.name}: test {out['test']:.1f}")
    cache.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(cache, json.dumps({"stamp": stamp, "perplexity": out,
                                         "settings": settings}) + "\n")
    return {**out, "settings": settings}


def _fmt(x, digits=0) -> str:
    return "" if x is None else f"{x:.{digits}f}"


def _write_outputs(workdir: Path, results: dict, quick: bool) -> None:
    rows = results["rows"]
    kn5 = rows["kn5"]["test"]
    paper_kn5 = BY_NAME["kn5"].paper[2]
    lines = [
        "# Bengio et al. (2003), Table 1 on Brown: the paper and nnlm side by side",
        "",
        (f"Quick run ({QUICK_EPOCHS} epochs per network): not the full result. " if quick
         else "") +
        "Perplexities; `ratio` is test perplexity over the KN5 back-off model's, in each "
        "setting. The paper used its own split of Brown (|V| = 16,383); nnlm uses "
        "protocol v1 (|V| = 14,116), so compare ratios, not raw numbers.",
        "",
        "| model | n | c | h | m | direct | mix | train | valid | test | ratio | paper train "
        "| paper valid | paper test | paper ratio | test, mix weights by EM per bucket |",
        "|---|---|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        row = BY_NAME[name]
        if row.kind in ("net", "em", "adapt"):
            continue
        pt, pv, ptest = row.paper
        direct = "" if row.direct is None else ("yes" if row.direct else "no")
        mix = "yes" if row.mix else ("no" if row.kind in ("nplm", "mix") else "")
        lines.append(
            f"| {name} | {row.n} | {_fmt(row.c)} | {_fmt(row.h)} | {_fmt(row.m)} | {direct} | "
            f"{mix} | {r['train']:.1f} | {r['valid']:.1f} | {r['test']:.1f} | "
            f"{r['test'] / kn5:.3f} | {_fmt(pt)} | {_fmt(pv)} | {_fmt(ptest)} | "
            f"{ptest / paper_kn5:.3f} | "
            f"{_fmt(r.get('bucketed', {}).get('test'), 1)} |")
    extended = [name for name in rows if BY_NAME[name].kind in ("net", "em")]
    if extended:
        lines += ["", "## Beyond the paper", "",
                  "Networks of the same family that go further (`--extended`), and "
                  "mixtures with weights by EM per context-frequency bucket on the "
                  "validation text.", "",
                  "| model | parts | train | valid | test | ratio |",
                  "|---|---|---:|---:|---:|---:|"]
        for name in extended:
            r, row = rows[name], BY_NAME[name]
            lines.append(f"| {name} | {' + '.join(row.parts) or 'preset ' + name} | "
                         f"{_fmt(r.get('train'), 1)} | {r['valid']:.1f} | {r['test']:.1f} | "
                         f"{r['test'] / kn5:.3f} |")
    adapted = [name for name in rows if BY_NAME[name].kind == "adapt"]
    if adapted:
        lines += ["", "## Test-time adaptation", "",
                  "The model learns from the test text as it reads it: the neural cache "
                  "(Grave et al. 2017) and dynamic evaluation (Krause et al. 2018), every "
                  "setting chosen on the validation text. Not comparable with the static "
                  "numbers above; reported apart, as the literature does.", "",
                  "| model | adapted by | settings | test | ratio |",
                  "|---|---|---|---:|---:|"]
        for name in adapted:
            r, row = rows[name], BY_NAME[name]
            settings = "; ".join(
                f"{k} " + ", ".join(f"{a} {b:g}" if isinstance(b, float | int) else f"{a} {b}"
                                    for a, b in v.items())
                for k, v in r.get("settings", {}).items() if k in ("cache", "dynamic"))
            lines.append(f"| {row.parts[0]} | {' + '.join(row.adapt)} | {settings} | "
                         f"{r['test']:.1f} | {r['test'] / kn5:.3f} |")
    lines += ["", f"Total time: {results['seconds'] / 60:.1f} min. Versions: "
              + ", ".join(f"{k} {v}" for k, v in results["versions"].items()) + "."]
    atomic_write_text(workdir / "report.md", "\n".join(lines) + "\n")
    atomic_write_text(workdir / "results.json", json.dumps(results, indent=2) + "\n")
    _plot(workdir, [n for n in rows if BY_NAME[n].kind in ("nplm", "net")])


def _plot(workdir: Path, names: list[str]) -> None:
    import csv

    from ..plots import perplexity_axis, png_figure

    with png_figure(workdir / "valid_vs_time.png", size=(7, 4.5)) as (fig, ax):
        for name in names:
            path = workdir / "models" / name / "metrics.csv"
            if path.exists():
                rows = list(csv.DictReader(path.open()))
                ax.plot([float(r["elapsed_seconds"]) / 60 for r in rows],
                        [float(r["valid_ppl"]) for r in rows], "o-", label=name, ms=3)
        ax.set_xlabel("training time (minutes, 2 cores)")
        perplexity_axis(ax, "validation perplexity")
        if names:
            ax.legend()
        ax.set_title("NPLM on Brown: validation perplexity against training time")


def _versions() -> dict:
    import numpy

    from ..base.version import __version__

    out = {"nnlm": __version__, "python": platform.python_version(), "numpy": numpy.__version__}
    try:
        import torch

        out["torch"] = torch.__version__
    except ImportError:
        pass
    return out


__all__ = ["ROWS", "reproduce"]
