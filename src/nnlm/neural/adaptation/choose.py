"""The cache's and dynamic evaluation's settings chosen on a validation text, and the
adapted log-probabilities of a text under them.

Each setting a caller fixes is kept; the others are searched on VALID by perplexity:

- dynamic evaluation: eta over DYNAMIC_LRS and the decay over DYNAMIC_DECAYS, each a run
  over (the first ``tune_tokens`` tokens of) VALID;
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
from .dynamic import DynamicSettings, dynamic_logprobs
from .hidden import stream_hidden

THETAS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # times 1 / mean |z|^2
SIZES = (200, 500, 1000, 2000)
LAMBDAS = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3)
DYNAMIC_LRS = (0.01, 0.03, 0.1, 0.3, 1.0)
DYNAMIC_DECAYS = (0.0, 0.01)
TUNE_TOKENS = 50_000


def _ppl(logprobs: np.ndarray) -> float:
    return math.exp(-float(np.mean(logprobs)))


def choose_dynamic(lm, valid: Stream, fixed: dict, segment: int,
                   log: Callable[[str], None]) -> tuple[DynamicSettings, list[dict]]:
    """The (lr, decay) with the lowest perplexity on ``valid``; ``fixed`` holds the ones
    the caller gave."""
    lrs = [fixed["lr"]] if fixed.get("lr") is not None else DYNAMIC_LRS
    decays = [fixed["decay"]] if fixed.get("decay") is not None else DYNAMIC_DECAYS
    table = []
    for lr in lrs:
        for decay in decays:
            s = DynamicSettings(lr, decay, segment)
            ppl = _ppl(dynamic_logprobs(lm, valid, s, label=f"tuning lr {lr:g} decay "
                                        f"{decay:g}")[0])
            table.append({**s.to_dict(), "valid_ppl": ppl})
            log(f"dynamic evaluation on VALID: lr {lr:g}, decay {decay:g}: ppl {ppl:.2f}")
    best = min(table, key=lambda r: r["valid_ppl"])
    return DynamicSettings(best["lr"], best["decay"], segment), table


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
                    valid: Stream | None = None, tune_tokens: int = TUNE_TOKENS,
                    log: Callable[[str], None] = print
                    ) -> tuple[DynamicSettings | None, CacheSettings | None, dict]:
    """The settings to adapt ``lm`` with, and a report of what was chosen and how
    (``{"dynamic": {...}, "cache": {...}}`` with each search's table). ``cache`` and
    ``dynamic``: None (off) or a dict of the settings fixed; missing or None ones are
    chosen on ``valid``."""
    report: dict = {}
    dyn = chosen = None
    if dynamic is not None:
        segment = dynamic.get("segment") or 100
        if dynamic.get("lr") is not None and dynamic.get("decay") is not None:
            dyn = DynamicSettings(dynamic["lr"], dynamic["decay"], segment)
        else:
            head = valid.first_lines(tune_tokens)
            dyn, table = choose_dynamic(lm, head, dynamic, segment, log)
            report["dynamic_search"] = {"valid_tokens": len(head), "table": table}
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
                     tune_tokens: int = TUNE_TOKENS, log: Callable[[str], None] = print,
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
