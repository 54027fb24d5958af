"""The cache's and dynamic evaluation's settings chosen on a validation text, and the
adapted log-probabilities of a text under them.

Each setting a caller fixes is kept; the others are searched on VALID by perplexity:

- dynamic evaluation: eta and the decay over the rule's grid (DYNAMIC_GRIDS), each a run
  over VALID (or its first ``tune_tokens`` tokens); the RMS rule's MS is taken over the
  same tokens first;
- the cache: theta over THETAS (multiples of 1 / mean |z|^2, so the grid follows the
  network's scale), L over SIZES and lambda over LAMBDAS, on VALID's hidden vectors as
  the chosen dynamic evaluation (or the static network) gives them. Lambda costs nothing
  to search: one cache pass per (theta, L) gives every lambda's perplexity.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from ...text.stream import Stream
from .cache import CacheSettings, cache_logprobs, with_cache
from .dynamic import DEFAULT_RULE, DynamicSettings, dynamic_logprobs, gradient_rms
from .hidden import stream_hidden

THETAS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # times 1 / mean |z|^2
SIZES = (200, 500, 1000, 2000)
LAMBDAS = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3)
DYNAMIC_GRIDS = {  # rule: (etas, decays)
    "sgd": ((0.01, 0.03, 0.1, 0.3, 1.0), (0.0, 0.01)),
    "rms": ((0.001, 0.002, 0.004), (0.0, 0.01)),
}
# all of VALID: on Brown, its first 50,000 tokens chose an RMS rate and decay that adapt
# fast and forget (0.003 / 0.01: test 85.8); all 203,000 of them choose a slower rate
# whose learning lasts (0.002 / 0), as a long evaluated text needs
TUNE_TOKENS = None


def _ppl(logprobs: np.ndarray) -> float:
    """exp(mean NLL); inf where that overflows (a diverging run in a search)."""
    nll = -float(np.mean(logprobs))
    return math.exp(nll) if nll < 700 else math.inf


def choose_dynamic(lm, valid: Stream, fixed: dict, segment: int,
                   log: Callable[[str], None], rule: str = DEFAULT_RULE,
                   rms: list | None = None
                   ) -> tuple[DynamicSettings, list[dict]]:
    """The (lr, decay) with the lowest perplexity on ``valid``; ``fixed`` holds the ones
    the caller gave. A run whose perplexity is not finite is never chosen."""
    lrs_grid, decays_grid = DYNAMIC_GRIDS[rule]
    lrs = [fixed["lr"]] if fixed.get("lr") is not None else lrs_grid
    decays = [fixed["decay"]] if fixed.get("decay") is not None else decays_grid
    table = []
    for lr in lrs:
        for decay in decays:
            s = DynamicSettings(lr, decay, segment, rule, rms)
            ppl = _ppl(dynamic_logprobs(lm, valid, s, label=f"tuning lr {lr:g} decay "
                                        f"{decay:g}")[0])
            # a diverged run: null in the report (JSON has no infinity), never chosen
            table.append({**s.to_dict(), "valid_ppl": ppl if math.isfinite(ppl) else None})
            log(f"dynamic evaluation ({rule}) on VALID: lr {lr:g}, decay {decay:g}: "
                f"ppl {ppl:.2f}")
    best = min(table, key=lambda r: math.inf if r["valid_ppl"] is None else r["valid_ppl"])
    return DynamicSettings(best["lr"], best["decay"], segment, rule, rms), table


def choose_cache(model_logprobs: np.ndarray, z: torch.Tensor, targets: np.ndarray,
                 fixed: dict, log: Callable[[str], None]) -> tuple[CacheSettings, list[dict]]:
    """The (theta, lambda, L) with the lowest perplexity on VALID's log-probabilities and
    hidden vectors; ``fixed`` holds the ones the caller gave."""
    scale = 1.0 / max(float(z.float().square().sum(1).mean()), 1e-12)
    thetas = [fixed["theta"]] if fixed.get("theta") is not None else \
        [round(t * scale, 6) for t in THETAS]
    sizes = [fixed["size"]] if fixed.get("size") is not None else SIZES
    lams = [fixed["lam"]] if fixed.get("lam") is not None else LAMBDAS
    table = []
    for theta in thetas:
        for size in sizes:
            cache = cache_logprobs(z, targets, theta, size)
            for lam in lams:
                ppl = _ppl(with_cache(model_logprobs, cache, lam))
                table.append({"theta": theta, "lambda": lam, "size": size, "valid_ppl": ppl})
            best_here = min((r for r in table if r["theta"] == theta and r["size"] == size),
                            key=lambda r: r["valid_ppl"])
            log(f"cache on VALID: theta {theta:g}, L {size}: best ppl "
                f"{best_here['valid_ppl']:.2f} at lambda {best_here['lambda']:g}")
    best = min(table, key=lambda r: r["valid_ppl"])
    return CacheSettings(best["theta"], best["lambda"], best["size"]), table


def choose_settings(lm, *, cache: dict | None = None, dynamic: dict | None = None,
                    valid: Stream | None = None, tune_tokens: int | None = TUNE_TOKENS,
                    log: Callable[[str], None] = print
                    ) -> tuple[DynamicSettings | None, CacheSettings | None, dict]:
    """The settings to adapt ``lm`` with, and a report of what was chosen and how
    (``{"dynamic": {...}, "cache": {...}}`` with each search's table). ``cache`` and
    ``dynamic``: None (off) or a dict of the settings fixed; missing or None ones are
    chosen on ``valid``."""
    report: dict = {}
    dyn = chosen = None
    rms = None
    if dynamic is not None:
        segment = dynamic.get("segment") or 100
        rule = dynamic.get("rule") or DEFAULT_RULE
        head = valid if valid is None or tune_tokens is None else \
            valid.first_lines(tune_tokens)
        if rule == "rms":
            if head is None:
                raise ValueError("the rms rule takes its gradient statistics on a "
                                 "validation text: give one")
            rms = gradient_rms(lm, head, segment)
        if dynamic.get("lr") is not None and dynamic.get("decay") is not None:
            dyn = DynamicSettings(dynamic["lr"], dynamic["decay"], segment, rule, rms)
        else:
            dyn, table = choose_dynamic(lm, head, dynamic, segment, log, rule, rms)
            report["dynamic_search"] = {"valid_tokens": len(head), "table": table}
        if rms is not None:
            report["dynamic_statistics"] = {"valid_tokens": len(head)}
        report["dynamic"] = dyn.to_dict()
    if cache is not None:
        fixed = {"theta": cache.get("theta"), "lam": cache.get("lam"), "size": cache.get("size")}
        if None in fixed.values():
            lp_v, z_v = _scored(lm, valid, dyn)
            chosen, table = choose_cache(lp_v, z_v, valid.ids, fixed, log)
            report["cache_search"] = {"valid_tokens": len(valid), "table": table}
        else:
            chosen = CacheSettings(fixed["theta"], fixed["lam"], fixed["size"])
        report["cache"] = chosen.to_dict()
    return dyn, chosen, report


def adapt(lm, stream: Stream, dynamic: DynamicSettings | None,
          cache: CacheSettings | None, static: np.ndarray | None = None) -> np.ndarray:
    """log p of every slot of ``stream`` (float64) under dynamic evaluation and/or the
    cache with these settings (the static network's where both are None). ``static``:
    the static network's log p of ``stream``, where the caller has them already."""
    lp, z = _scored(lm, stream, dynamic, hidden=cache is not None, static=static)
    if cache is None:
        return lp
    return with_cache(lp, cache_logprobs(z, stream.ids, cache.theta, cache.size), cache.lam)


def adapted_logprobs(lm, stream: Stream, *, cache: dict | None = None,
                     dynamic: dict | None = None, valid: Stream | None = None,
                     tune_tokens: int | None = TUNE_TOKENS, log: Callable[[str], None] = print,
                     static: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """:func:`choose_settings`, then :func:`adapt` ``stream``: (log p, the report)."""
    dyn, chosen, report = choose_settings(lm, cache=cache, dynamic=dynamic, valid=valid,
                                          tune_tokens=tune_tokens, log=log)
    return adapt(lm, stream, dyn, chosen, static), report


def _scored(lm, stream: Stream, dyn: DynamicSettings | None, hidden: bool = True,
            static: np.ndarray | None = None) -> tuple[np.ndarray, torch.Tensor | None]:
    """(log p, z) of every slot: the static network's (``static`` where given), or under
    dynamic evaluation."""
    if dyn is not None:
        return dynamic_logprobs(lm, stream, dyn, keep_hidden=hidden)
    lp = lm.logprobs(stream) if static is None else static
    return lp, (stream_hidden(lm, stream) if hidden else None)


__all__ = ["adapt", "adapted_logprobs", "choose_cache", "choose_dynamic", "choose_settings"]
