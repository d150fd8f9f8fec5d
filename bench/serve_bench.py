"""`ragdesk serve` under load: 200 chat requests from 8 concurrent clients on 127.0.0.1.

The reference is the same work without HTTP: the same requests answered one after another by
an engine loaded in this process (retrieval + citations + answer). ragdesk is ``ragdesk
serve`` started as its own process on a free loopback port, driven by 8 threads of this one,
each with the official ``openai`` client; every other request streams. Both use one torch
thread. Reported: errors (must be 0), latency
percentiles per request (and time to the first streamed token), throughput, and the server's
wall time over the reference's (what HTTP, JSON, SSE and the queue add; the engine answers
one request at a time either way).

Models: the tiny random models of the test suite (``build_tiny_models``), so that the numbers
measure the server and not a language model; or, with ``--starter-models``, the real offline
starter pack. The snapshot is a folder of generated Markdown and text files imported with
``import_folder``, whose import and incremental re-import are timed too.

    python -m bench.serve_bench [--requests 200] [--clients 8] [--docs 60]
    python -m bench.serve_bench --starter-models DATA_DIR/models/starter --requests 48
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench import machine, machine_line, write_results

MAX_TOKENS = 8
TINY, STARTER = "tiny", "starter"
MODELS = {
    TINY: "the test suite's **tiny random models** (DPR question/passage encoders, BART), so "
          "the numbers measure the server, not a language model",
    STARTER: "the **offline starter pack** (all-MiniLM-L6-v2 retriever, Gemma 3 270M "
             "generator in its default precision), the answers a user gets",
}


def percentiles(values: list[float]) -> dict[str, float]:
    xs = sorted(values)

    def q(p: float) -> float:  # nearest rank: an observed latency, never an interpolation
        return xs[min(len(xs) - 1, max(0, math.ceil(p / 100 * len(xs)) - 1))]

    return {"p50": q(50), "p90": q(90), "p99": q(99), "max": xs[-1],
            "mean": statistics.fmean(xs)}


def make_folder(root: Path, corpus: list[tuple[str, str]], n_docs: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n_docs):
        title, text = corpus[i % len(corpus)]
        body = "\n\n".join(text.split(". "))
        if i % 2:
            (root / f"note-{i:03d}.txt").write_text(f"{title}\n\n{body}\n", encoding="utf-8")
        else:
            (root / f"doc-{i:03d}.md").write_text(f"# {title} {i}\n\n## Part one\n\n{body}\n\n"
                                                  f"## Part two\n\n{text}\n", encoding="utf-8")
    return root


def questions(corpus: list[tuple[str, str]], n: int) -> list[str]:
    out = []
    for i in range(n):
        title, text = corpus[i % len(corpus)]
        words = text.split()
        out.append(f"what about {title} and {' '.join(words[i % 7:i % 7 + 6])}")
    return out


def import_times(data_dir: Path, folder: Path, encoder: str | None) -> dict[str, Any]:
    from ragdesk.core.app import AppContext
    from ragdesk.core.documents import import_folder

    app = AppContext(data_dir)
    try:
        t0 = time.perf_counter()
        first = import_folder(app.data, app.catalog, folder, name="bench-docs", encoder=encoder)
        t1 = time.perf_counter()
        edited = sorted(folder.glob("*.md"))[0]
        edited.write_text(edited.read_text(encoding="utf-8") + "\n\nOne more line.\n",
                          encoding="utf-8")
        again = import_folder(app.data, app.catalog, folder, name="bench-docs", encoder=encoder)
        t2 = time.perf_counter()
    finally:
        app.close()
    return {"files": len(first.added), "passages": first.passages, "import_s": t1 - t0,
            "reimport_one_changed_s": t2 - t1, "reimport_encoded": again.encoded,
            "reimport_reused": again.reused}


def reference(engine: Any, qs: list[str]) -> dict[str, Any]:
    from ragdesk.server import ServerConfig
    from ragdesk.server.answering import ask
    from ragdesk.server.shapes import parse_chat

    config = ServerConfig()
    lat = []
    t0 = time.perf_counter()
    for q in qs:
        t = time.perf_counter()
        req = parse_chat({"messages": [{"role": "user", "content": q}],
                          "max_tokens": MAX_TOKENS}, config)
        ask(engine, req)
        lat.append(time.perf_counter() - t)
    return {"wall_s": time.perf_counter() - t0, "latency_s": percentiles(lat)}


def _client_loop(url: str, qs: list[str], start: int, step: int,
                 out: dict[str, list[Any]], lock: threading.Lock) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=url + "/v1", api_key="bench", max_retries=0, timeout=120)
    for i in range(start, len(qs), step):
        t = time.perf_counter()
        try:
            first = None
            if i % 2:
                for c in client.chat.completions.create(
                        model="ragdesk", max_tokens=MAX_TOKENS, stream=True,
                        messages=[{"role": "user", "content": qs[i]}]):
                    if first is None and c.choices[0].delta.content:
                        first = time.perf_counter() - t
            else:
                done = client.chat.completions.create(
                    model="ragdesk", max_tokens=MAX_TOKENS,
                    messages=[{"role": "user", "content": qs[i]}])
                assert done.model_extra is not None
                assert done.model_extra["ragdesk"]["citations"]
            with lock:
                out["latency"].append(time.perf_counter() - t)
                if first is not None:
                    out["first_token"].append(first)
        except Exception as exc:
            with lock:
                out["errors"].append(f"request {i}: {type(exc).__name__}: {exc}")


def load_test(url: str, qs: list[str], clients: int) -> dict[str, Any]:
    out: dict[str, list[Any]] = {"latency": [], "first_token": [], "errors": []}
    lock = threading.Lock()
    threads = [threading.Thread(target=_client_loop, args=(url, qs, c, clients, out, lock))
               for c in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "requests": len(qs), "clients": clients,
            "errors": out["errors"], "ok": len(out["latency"]),
            "requests_per_s": len(out["latency"]) / wall,
            "latency_s": percentiles(out["latency"]),
            "first_token_s": percentiles(out["first_token"]) if out["first_token"] else None}


def markdown(r: dict[str, Any]) -> str:
    s, ref, imp = r["server"], r["reference"], r["import"]
    rows = [["reference: same requests, engine called directly, one by one",
             *(f"{ref['latency_s'][k] * 1000:.0f}" for k in ("p50", "p90", "p99")),
             f"{r['requests'] / ref['wall_s']:.1f}", "0"],
            [f"`ragdesk serve`, {s['clients']} concurrent openai clients",
             *(f"{s['latency_s'][k] * 1000:.0f}" for k in ("p50", "p90", "p99")),
             f"{s['requests_per_s']:.1f}", str(len(s["errors"]))]]
    ft = s["first_token_s"]
    first = (f" Streamed requests got their first token after {ft['p50'] * 1000:.0f} ms "
             f"(p50) / {ft['p90'] * 1000:.0f} ms (p90), queueing included." if ft else "")
    title = "" if r["models"] == TINY else ", starter pack"
    models = MODELS[r["models"]]
    return f"""# Local API server (`ragdesk serve`{title})

{r['requests']} chat completions (max {MAX_TOKENS} tokens, every other one streamed) from
{s['clients']} concurrent clients (threads, each with the official `openai` client) on
127.0.0.1, against `ragdesk serve` in its own process; the engine answers one request at a time
(one worker thread, admission limit 16). Models: {models}; snapshot: a folder of
{imp['files']} generated Markdown/text files ({imp['passages']} passages) imported with
`index import --format docs`.

| run | p50 ms | p90 ms | p99 ms | requests/s | errors |
|---|---|---|---|---|---|
{chr(10).join('| ' + ' | '.join(row) + ' |' for row in rows)}

Latency under load includes waiting for the engine behind up to {s['clients'] - 1} other
requests. Server wall time / reference wall time: **{r['overhead_ratio']:.2f}x** (above 1: what
HTTP, JSON, SSE and the queue add; it can fall below 1 because the server, in its own
process, answers while the clients' threads parse responses).{first}

Folder import: {imp['passages']} passages in {imp['import_s']:.1f} s; re-import after editing
one file: {imp['reimport_one_changed_s']:.1f} s, {imp['reimport_encoded']} passages encoded,
{imp['reimport_reused']} reused.

{machine_line(r['machine'])} Load average at the end: {r['load_average_1min_end']} (other
engineers' work shares the machine; latencies vary with it).
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(data_dir: Path, overrides: list[str], port: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "ragdesk", "--data-dir", str(data_dir), "serve", "--port",
           str(port), *overrides]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(cmd, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ragdesk serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as resp:
                state = json.loads(resp.read())["status"]
            if state == "ready":
                return proc
            if state == "failed":
                raise RuntimeError("the server's engine failed to load")
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the server did not become ready in 300 s")


def setup_models(root: Path, starter: Path | None) -> dict[str, Any]:
    """Models, the corpus to make documents from, and how to load them (engine and CLI)."""
    from ragdesk.core.testing.tiny_models import build_tiny_models, sample_articles

    if starter is not None:
        # The data directory gets the starter pack's models by a link, not a 1.3 GB copy.
        (root / "data" / "models").mkdir(parents=True)
        (root / "data" / "models" / "starter").symlink_to(starter.resolve())
        return {"label": STARTER, "corpus": sample_articles(200), "encoder": None,
                "qenc": None, "gen": None, "cli": []}
    models = build_tiny_models(root / "models")
    return {"label": TINY, "corpus": list(models.corpus), "encoder": str(models.ctx_encoder),
            "qenc": str(models.question_encoder), "gen": str(models.bart),
            "cli": ["--question-encoder", str(models.question_encoder), "--generator",
                    str(models.bart)]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--docs", type=int, default=60)
    ap.add_argument("--starter-models", type=Path, metavar="DIR",
                    help="answer with the real starter pack: its models folder (a data "
                    "directory's models/starter); results go to serve_starter.*")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from ragdesk.cli.serve_cmd import load_checked_engine

    info = machine()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        m = setup_models(root, args.starter_models)
        corpus = m["corpus"]
        imp = import_times(root / "data", make_folder(root / "docs", corpus, args.docs),
                           m["encoder"])
        qs = questions(corpus, args.requests)
        engine = load_checked_engine(root / "data", None, None, m["qenc"], m["gen"])
        try:
            ref = reference(engine, qs)
        finally:
            engine.close()
        port = free_port()
        proc = start_server(root / "data", m["cli"], port)
        try:
            server = load_test(f"http://127.0.0.1:{port}", qs, args.clients)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
    result = {"requests": args.requests, "reference": ref, "server": server, "import": imp,
              "overhead_ratio": server["wall_s"] / ref["wall_s"], "models": m["label"],
              "machine": info, "load_average_1min_end": round(os.getloadavg()[0], 2)}
    print(markdown(result))
    if server["errors"]:
        print("\n".join(server["errors"][:10]))
    if not args.no_write:
        name = "serve" if m["label"] == TINY else "serve_starter"
        write_results(name, result, markdown(result))
    return 1 if server["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
