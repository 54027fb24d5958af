"""Start uvicorn on the models: in this process, or in ``workers`` processes.

Models are loaded here first, so that one that cannot load stops the server at start-up
with one line (NnlmError) before any port is opened. With ``workers`` > 1, uvicorn
starts fresh processes that each load the models again (the mapped n-gram files are
shared through the page cache); they find their settings in ``NNLM_SERVE``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..base.errors import NnlmError
from .app import Settings, create_app
from .indexes import is_index, load_index
from .registry import load_models, parse_spec

ENV = "NNLM_SERVE"


def serve(specs: list[str], host: str = "127.0.0.1", port: int = 8000, workers: int = 1,
          timeout: float = 30.0, batch_wait: float = 0.002, max_batch: int = 16384,
          threads: int | None = None, log_level: str = "info", bf16: bool = False,
          device: str = "cpu") -> None:
    import uvicorn

    config = {"specs": specs, "timeout": timeout, "batch_wait": batch_wait,
              "max_batch": max_batch, "threads": threads, "bf16": bf16, "device": device}
    models, indexes = _load(specs, batch_wait, max_batch, threads, bf16, device)  # fail here
    names = ", ".join([f"{n} ({m.kind}, order {m.lm.order})" for n, m in models.items()]
                      + [f"{n} (index, {x.index.tokens:,} tokens)" for n, x in indexes.items()])
    print(f"nnlm serve: {names} on http://{host}:{port} "
          f"({workers} worker{'s' if workers > 1 else ''})", file=sys.stderr, flush=True)
    if workers == 1:
        uvicorn.run(create_app(models, Settings(timeout=timeout), indexes), host=host,
                    port=port, log_level=log_level)
        return
    del models, indexes
    os.environ[ENV] = json.dumps(config)
    uvicorn.run("nnlm.serve.runner:app_from_environment", factory=True, host=host,
                port=port, workers=workers, log_level=log_level)


def app_from_environment():
    """A worker's app, from the settings its parent left in ``NNLM_SERVE``."""
    config = json.loads(os.environ[ENV])
    models, indexes = _load(config["specs"], config["batch_wait"], config["max_batch"],
                            config["threads"], config["bf16"], config["device"])
    return create_app(models, Settings(timeout=config["timeout"]), indexes)


def _load(specs: list[str], *options):
    """The models and the indexes (folders :func:`is_index` recognizes) of ``specs``."""
    index_specs = [x for x in specs if is_index(Path(parse_spec(x)[1]))]
    models = load_models([x for x in specs if x not in index_specs], *options)
    indexes = {}
    for spec in index_specs:
        name, path = parse_spec(spec)
        if name in models or name in indexes:
            raise NnlmError(f"two models or indexes are named {name!r}; name them: NAME=PATH")
        indexes[name] = load_index(name, path)
    return models, indexes
