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

from .app import Settings, create_app
from .registry import load_models

ENV = "NNLM_SERVE"


def serve(specs: list[str], host: str = "127.0.0.1", port: int = 8000, workers: int = 1,
          timeout: float = 30.0, batch_wait: float = 0.002, max_batch: int = 16384,
          threads: int | None = None, log_level: str = "info", bf16: bool = False,
          device: str = "cpu") -> None:
    import uvicorn

    config = {"specs": specs, "timeout": timeout, "batch_wait": batch_wait,
              "max_batch": max_batch, "threads": threads, "bf16": bf16, "device": device}
    models = load_models(specs, batch_wait, max_batch, threads, bf16, device)  # fail here
    names = ", ".join(f"{n} ({m.kind}, order {m.lm.order})" for n, m in models.items())
    print(f"nnlm serve: {names} on http://{host}:{port} "
          f"({workers} worker{'s' if workers > 1 else ''})", file=sys.stderr, flush=True)
    if workers == 1:
        uvicorn.run(create_app(models, Settings(timeout=timeout)), host=host, port=port,
                    log_level=log_level)
        return
    del models
    os.environ[ENV] = json.dumps(config)
    uvicorn.run("nnlm.serve.runner:app_from_environment", factory=True, host=host,
                port=port, workers=workers, log_level=log_level)


def app_from_environment():
    """A worker's app, from the settings its parent left in ``NNLM_SERVE``."""
    config = json.loads(os.environ[ENV])
    models = load_models(config["specs"], config["batch_wait"], config["max_batch"],
                         config["threads"], config["bf16"], config["device"])
    return create_app(models, Settings(timeout=config["timeout"]))
