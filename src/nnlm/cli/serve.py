"""nnlm serve: models over HTTP (see nnlm.serve)."""

from __future__ import annotations

import argparse

from ..base.argtypes import positive_float, positive_int, ranged
from .common import add_speed_arguments


def add_parsers(sub) -> None:
    sv = sub.add_parser(
        "serve", help="serve models over HTTP: scores, next words, OpenAI completions, a page",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Serve MODELs over HTTP on FastAPI and uvicorn. Open http://HOST:PORT/ "
        "for a page that\ncompares the models' next-word distributions and colours a "
        "sentence by each model's\nprobabilities; /docs lists every endpoint, "
        "/openapi.json is the spec.",
        epilog="""\
examples:
  nnlm serve runs/kn5 runs/mlp1                       # named kn5 and mlp1
  nnlm serve kn=lm.arpa.gz nplm=runs/mlp1 --port 8080
  curl -s localhost:8000/v1/score -d '{"model": "kn5", "texts": ["the jury said"]}'
  curl -s localhost:8000/v1/next -d '{"model": "mlp1", "context": "the jury", "k": 5}'
  nnlm serve runs/kn5 brown=runs/brown.idx            # and a corpus index (nnlm index)
  curl -s localhost:8000/ -d '{"index": "brown", "query_type": "count", "query": "of the"}'

OpenAI's client (completions with echo and logprobs score a prompt, natural logs):
  client = openai.OpenAI(base_url="http://localhost:8000/v1", api_key="none")
  client.completions.create(model="kn5", prompt="the jury said", echo=True,
                            max_tokens=0, logprobs=1)

Limits: bodies over 1 MB get 413, bad fields 422 naming the field, unknown models 404,
requests past --timeout 504. Concurrent requests to one model are merged into one model
call (waiting at most --batch-wait seconds); --workers N runs N processes.""")
    sv.add_argument("models", nargs="+", metavar="MODEL",
                    help="a model directory, ARPA file or binary, or an index folder (nnlm "
                    "index build's or infini-gram's: its queries at /v1/index/... and "
                    "infini-gram's API at /); NAME=PATH names it (default: its directory or "
                    "file stem)")
    sv.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default: 127.0.0.1, this machine only; "
                    "0.0.0.0 for every interface)")
    sv.add_argument("--port", type=ranged(int, 1, 65535, name="port"), default=8000,
                    help="TCP port (default: 8000)")
    sv.add_argument("--workers", type=ranged(int, 1, 64, name="workers"), default=1,
                    help="server processes, each with the models (default: 1)")
    sv.add_argument("--timeout", type=positive_float, default=30.0, metavar="SECONDS",
                    help="a request running longer gets 504 (default: 30)")
    sv.add_argument("--batch-wait", type=ranged(float, 0, 1), default=0.002,
                    metavar="SECONDS", help="how long a model call waits for other "
                    "requests to join it, in [0, 1] (default: 0.002; 0: no batching)")
    sv.add_argument("--max-batch", type=positive_int, default=16384, metavar="TOKENS",
                    help="the most tokens one merged model call scores (default: 16384)")
    add_speed_arguments(sv.add_argument_group("neural models"))
    sv.add_argument("--log-level", choices=("critical", "error", "warning", "info", "debug"),
                    default="info", help="uvicorn's log level (default: info)")


def cmd_serve(args) -> None:
    from ..serve.runner import serve

    serve(args.models, args.host, args.port, args.workers, args.timeout, args.batch_wait,
          args.max_batch, args.threads, args.log_level, args.bf16, args.device)


HANDLERS = {"serve": cmd_serve}
PATHS: dict = {}
