"""Load test of ``nnlm serve`` on loopback: throughput and latency, batching on and off.

    python bench/serve/serve.py --kn runs/kn5 --nplm runs/mlp1 --text data/brown/test.txt \\
        --out bench/results/serve.json
    python bench/serve/serve.py --kn runs/kn5 --nplm runs/mlp1 --screenshot docs/serve.png

For each model, each request size (sentences per ``/v1/score`` request), each number of
concurrent clients (1, 8, 64) and each server (dynamic batching with the default 2 ms
window, ``--batch-wait 0``, and batching in ``--workers 2`` processes), clients send
requests for ``--seconds`` (or ``--requests``, whichever ends first) and the run records
requests/s, sentences/s, tokens/s and the p50/p99 latency. The server is the real
command in its own process; the clients are asyncio aiohttp in this one, so both share
this machine's cores (on 2 cores the clients take a share the server would otherwise
have).

The in-process reference is the library on the same requests, one after another, in
this process: ``score_sentences`` per request, the work the server does for one
(measured before and after the servers, as this machine's speed drifts; the ratios use
the mean). The goal is the server at 8 clients at half that rate or more for the KN 5-gram.
Never run by the tests (it binds a port and takes minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server(specs: list[str], batch_wait: float, workers: int = 1, threads: int | None = None):
    import httpx

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "nnlm", "serve", *specs, "--port", str(port),
                             "--batch-wait", str(batch_wait), "--workers", str(workers),
                             *(["--threads", str(threads)] if threads else []),
                             "--log-level", "warning"],
                            stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server stopped: {proc.stderr.read()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                break
        time.sleep(0.2)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


async def load(url: str, model: str, requests: list[list[str]], clients: int, seconds: float,
               limit: int) -> dict:
    """``clients`` concurrent clients (aiohttp: a lighter client than httpx, so that less of
    the shared cores goes to the load generator) sending requests until time or count."""
    import aiohttp

    try:
        from orjson import loads
    except ImportError:
        loads = json.loads
    latencies: list[float] = []
    sent = 0
    stop = time.perf_counter() + seconds
    tokens = sentences = 0

    async def client(session):
        nonlocal sent, tokens, sentences
        while time.perf_counter() < stop and sent < limit:
            texts = requests[sent % len(requests)]
            sent += 1
            t = time.perf_counter()
            async with session.post(url + "/v1/score",
                                    json={"model": model, "texts": texts}) as r:
                body = await r.read()
                if r.status != 200:
                    raise SystemExit(f"{r.status}: {body[:200]!r}")
            loads(body)  # a client reads what it asked for
            latencies.append(time.perf_counter() - t)
            sentences += len(texts)
            tokens += sum(len(s.split()) + 1 for s in texts)

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=120)) as session:
        async with session.post(url + "/v1/score", json={"model": model,
                                                         "texts": requests[0]}) as r:
            await r.read()  # warm
        t0 = time.perf_counter()
        await asyncio.gather(*[client(session) for _ in range(clients)])
        wall = time.perf_counter() - t0
    lat = np.array(latencies) * 1000
    return {"clients": clients, "requests": len(latencies), "seconds": round(wall, 3),
            "requests_per_s": len(latencies) / wall, "sentences_per_s": sentences / wall,
            "tokens_per_s": tokens / wall, "p50_ms": float(np.percentile(lat, 50)),
            "p99_ms": float(np.percentile(lat, 99))}


def in_process(path: str, requests: list[list[str]], seconds: float) -> dict:
    """The library on the same requests, one after another (what the server does per
    request, without HTTP)."""
    from nnlm.models import load_model
    from nnlm.scoring import score_sentences

    lm = load_model(path)
    list(score_sentences(lm, requests[0]))  # warm
    done = sentences = tokens = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        texts = requests[done % len(requests)]
        for s in score_sentences(lm, texts):
            tokens += len(s.log10_probs)
        sentences += len(texts)
        done += 1
    wall = time.perf_counter() - t0
    return {"requests_per_s": done / wall, "sentences_per_s": sentences / wall,
            "tokens_per_s": tokens / wall}


def screenshot(specs: list[str], path: Path, context: str, sentence: str, word: str) -> None:
    """The page with the models, driven in headless Chromium (Debian's), saved as PNG."""
    import shutil

    from playwright.sync_api import sync_playwright

    browser_path = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser_path is None:
        raise SystemExit("no Chromium on the PATH (apt install chromium)")
    with server(specs, 0.002) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.goto(url + "/")
        page.fill("#context", context)
        page.wait_for_function(f"document.querySelectorAll('#next-out .card').length == "
                               f"{len(specs)} && !!document.querySelector('#next-out li')")
        page.fill("#sentence", sentence)
        page.keyboard.press("Enter")
        page.wait_for_selector("#score-out .tok")
        page.fill("#word", word)
        page.keyboard.press("Enter")
        page.wait_for_timeout(1500)
        page.screenshot(path=str(path), full_page=True)
        browser.close()
    print(f"{path}: the page with {', '.join(specs)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kn", required=True, help="the n-gram model (e.g. runs/kn5)")
    ap.add_argument("--nplm", help="a neural model (e.g. runs/mlp1)")
    ap.add_argument("--text", type=Path, help="sentences, one a line (the load test)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 32],
                    help="sentences per request (default: 1 32)")
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 8, 64])
    ap.add_argument("--seconds", type=float, default=5.0, help="per cell (default: 5)")
    ap.add_argument("--requests", type=int, default=20000, help="per cell, at most")
    ap.add_argument("--out", type=Path, default=Path("bench/results/serve.json"))
    ap.add_argument("--screenshot", type=Path, metavar="PNG",
                    help="instead of the load test, save the page with the models as PNG "
                    "(docs/serve.png)")
    args = ap.parse_args()
    if args.screenshot:
        specs = [f"kn5={args.kn}"] + ([f"mlp1={args.nplm}"] if args.nplm else [])
        return screenshot(specs, args.screenshot, "the jury said that the",
                          "the jury praised the city for its handling of the election",
                          "money")
    if args.text is None:
        ap.error("--text is needed for the load test")

    lines = [x for x in args.text.read_text().splitlines() if x.strip()][:4096]
    models = {"kn": args.kn, **({"nplm": args.nplm} if args.nplm else {})}
    specs = [f"{name}={path}" for name, path in models.items()]
    rows = []

    def reference(when: str) -> None:
        for size in args.sizes:
            requests = [lines[i:i + size] for i in range(0, len(lines) - size + 1, size)]
            for name, path in models.items():
                ref = in_process(path, requests, args.seconds)
                print(f"{name} x{size}: in process ({when}) {ref['sentences_per_s']:,.0f} "
                      "sentences/s", flush=True)
                rows.append({"model": name, "path": path, "texts_per_request": size,
                             "server": f"in process (library, no HTTP), {when}", **ref})

    reference("before")  # and after: this machine's speed drifts; the ratio uses the mean
    configs = [(0.002, 1, None, "batching (2 ms)"), (0.0, 1, None, "no batching"),
               (0.002, 2, 1, "batching, 2 workers of 1 thread")]
    for wait, workers, threads, label in configs:
        with server(specs, wait, workers, threads) as url:
            for size in args.sizes:
                requests = [lines[i:i + size] for i in range(0, len(lines) - size + 1, size)]
                for name, path in models.items():
                    for clients in args.clients:
                        r = asyncio.run(load(url, name, requests, clients, args.seconds,
                                             args.requests))
                        rows.append({"model": name, "path": path, "texts_per_request": size,
                                     "server": label, **r})
                        print(f"{label}: {name} x{size}, {clients} clients: "
                              f"{r['sentences_per_s']:,.0f} sentences/s, p50 {r['p50_ms']:.1f}"
                              f" ms, p99 {r['p99_ms']:.1f} ms", flush=True)
    reference("after")
    ratios = {}
    for row in rows:
        if row["server"].startswith("in process"):
            continue
        refs = [r["sentences_per_s"] for r in rows if r["server"].startswith("in process")
                and r["model"] == row["model"]
                and r["texts_per_request"] == row["texts_per_request"]]
        row["x_in_process"] = row["sentences_per_s"] / (sum(refs) / len(refs))
        ratios[f"{row['model']} x{row['texts_per_request']}, {row['clients']} clients, "
               f"{row['server']}"] = round(row["x_in_process"], 3)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, {"rows": rows, "x_in_process": ratios})
    print(f"{args.out}: {len(rows)} rows")


if __name__ == "__main__":
    main()
