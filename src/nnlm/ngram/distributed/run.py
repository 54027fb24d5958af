"""``nnlm ngram train SHARDS --cluster``: check the shards, connect, estimate, and turn
the engine's failures into one line."""

from __future__ import annotations

from pathlib import Path

from ...base.errors import NnlmError
from ...text.fileio import open_for_reading
from ...text.vocab import Vocabulary
from .cluster import connect


def is_url(path) -> bool:
    return "://" in str(path)


def shard_list(train_path) -> list[str]:
    """The shards as the workers will open them: local files as absolute paths (checked
    here, before any worker starts), URLs as given."""
    paths = list(train_path) if isinstance(train_path, (list, tuple)) else [train_path]
    out = []
    for p in paths:
        if is_url(p):
            out.append(str(p))
            continue
        if str(p) == "-":
            raise NnlmError("-: standard input cannot be split among workers; give files")
        open_for_reading(p).close()  # the readers' own one-line errors, before any work
        out.append(str(Path(p).resolve()))
    return out


def train_distributed(train_path, order: int, cluster: str, vocab: Vocabulary | None,
                      min_count: int, max_size: int | None, discount_fallback,
                      partitions: int | None, log, arpa=None, save=None):
    from .estimate import estimate_kn, shard_vocabulary

    shards = shard_list(train_path)
    with connect(cluster) as client:
        try:
            if vocab is None:
                log(f"vocabulary of {len(shards)} shard(s)")
                vocab = shard_vocabulary(client, shards, min_count, max_size)
            return estimate_kn(client, shards, order, vocab, discount_fallback, partitions,
                               log, arpa=arpa, save=save)
        except NnlmError:
            raise
        except Exception as e:  # noqa: BLE001 - the engine's failure, in one line
            raise engine_error(cluster, e) from None


def engine_error(cluster: str, e: BaseException) -> NnlmError:
    """One line for a failure inside the engine, naming it (a worker out of disk says so)."""
    chain, seen = [], e
    while seen is not None and len(chain) < 5:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    text = " <- ".join(f"{type(x).__name__}: {_first_line(x)}" for x in chain)
    if any("No space left" in str(x) or getattr(x, "errno", None) == 28 for x in chain):
        return NnlmError(f"cluster={cluster}: a worker ran out of disk ({text[:300]}); free "
                         "space in the workers' local directory or give them another "
                         "(dask worker --local-directory)")
    return NnlmError(f"cluster={cluster}: the job failed in the engine ({text[:300]})")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""
